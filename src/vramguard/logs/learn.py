"""Learning a machine's terms from one startup log: Extracted -> Calibration (pure).

What each log shape gives (GiB as printed, turned into bytes here):

- v0 profiling block (0.6.5–0.10.2) and the v1 DEBUG summary: weights W, activation A,
  non-torch N directly.
- 0.6.4 `Memory profiling results`: A = peak_torch − W, N = non_torch.
- The `--kv-cache-memory` suggestion: up to 0.26 W, A, N, G; from 0.27 C = W + N and a
  "peak activation" that already includes the applied CUDA-graph estimate (so A = A' − G).
- Otherwise (v1 before the suggestion went INFO, e.g. 0.11–0.25 at INFO level) only the
  available KV K is printed: the combined non-KV term A + N = R − K − W (− G from 0.20) is
  derived from the budget R = u·T of the given settings and stored as the activation with
  non-torch 0 — the planner only ever uses their sum there. `derivation` says which.

The CUDA-graph term stored is the one vLLM's budget subtracts: the estimate where one is
logged (0.18+), else the captured size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.calibration import Calibration, CalibrationKey
from ..core.provenance import GIB
from .extracted import Extracted
from .versions import version_tuple


@dataclass(frozen=True)
class Learned:
    """One calibration and how it was derived (for `history` and the report)."""

    calibration: Calibration
    derivation: str                  # "profile" | "profile_v064" | "suggestion" | "combined"
    notes: tuple[str, ...] = ()


# NOTE: more than this per GPU is a corrupt log line, not a measurement (1 PiB)
_MAX_GIB = float(1 << 20)


def _b(gib: float | None) -> int | None:
    if gib is None or not -_MAX_GIB < gib < _MAX_GIB:
        return None
    return int(round(gib * GIB))


def model_family(ex: Extracted, spec=None, override: str | None = None) -> str | None:
    """model_type: the flag, the loaded spec, else a guess from the architecture name."""
    if override:
        return override
    if spec is not None and getattr(spec, "model_type", None):
        return spec.model_type
    if ex.architecture:
        return architecture_to_model_type(ex.architecture)
    return None


def architecture_to_model_type(arch: str) -> str:
    """'Qwen3MoeForCausalLM' -> 'qwen3_moe' (the usual HF naming; a guess, not a lookup)."""
    import re
    base = re.sub(r"For(CausalLM|ConditionalGeneration|SequenceClassification|Embedding|"
                  r"MaskedLM)$|Model$", "", arch)
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", base).lower()
    return snake.strip("_")


def learn(ex: Extracted, key: CalibrationKey, *, total_gib: float | None = None,
          source: str | None = None) -> Learned | None:
    """The Calibration one startup log supports, or None when it has too few numbers.

    `total_gib` is the GPU total the planner will use (the catalog's); the log's own total
    is the fallback. It only matters for the combined derivation (R = u·T).
    """
    s = ex.settings
    version = version_tuple(ex.version) or (0, 0, 0)
    w = ex.weights_gib
    g_est, g_act = ex.cuda_graph_estimate_gib, ex.cuda_graph_gib
    graph = g_est if g_est is not None else g_act
    notes: list[str] = []
    a = n = None
    derivation = None
    sug = ex.suggestion
    if ex.activation_gib is not None and ex.non_torch_gib is not None and \
            ex.peak_torch_gib is None:
        a, n, derivation = ex.activation_gib, ex.non_torch_gib, "profile"
    elif ex.peak_torch_gib is not None and w is not None and ex.non_torch_gib is not None:
        a, n, derivation = ex.peak_torch_gib - w, ex.non_torch_gib, "profile_v064"
    elif sug is not None and sug.activation_gib is not None:
        derivation = "suggestion"
        if sug.weights_gib is not None:
            w = w if w is not None else sug.weights_gib
            a, n = sug.activation_gib, sug.non_torch_gib
        elif sug.consumed_gib is not None and w is not None:
            n = sug.consumed_gib - w
            a = sug.activation_gib
            if g_est is not None:
                a -= g_est
            else:
                graph = 0.0
                notes.append("the CUDA-graph estimate is folded into the activation (0.27+ "
                             "prints them together and the log has no separate estimate)")
        elif sug.consumed_gib is not None:
            a, n = sug.activation_gib, None
            notes.append("weights unknown: non-torch not separated from them")
    if derivation is None:
        combined = _combined(ex, version, total_gib, w, g_est, notes)
        if combined is None:
            return None
        a, n, derivation = combined, 0.0, "combined"
    s_tokens = s.get("max_num_batched_tokens")
    s_seqs = s.get("max_num_seqs")
    cal = Calibration(
        key=key, activation_bytes=_b(a), non_torch_bytes=_b(n),
        cuda_graph_bytes=_b(graph) if not s.get("enforce_eager") else None,
        weights_bytes=_b(w),
        max_num_batched_tokens=s_tokens if isinstance(s_tokens, int) else None,
        max_num_seqs=s_seqs if isinstance(s_seqs, int) else None,
        model=ex.model, source=source)
    return Learned(cal, derivation, tuple(notes))


def _combined(ex: Extracted, version, total_gib, w, g_est, notes: list[str]) -> float | None:
    """A + N = R − K − W (− G where the budget subtracts graphs), R from the settings."""
    k = ex.available_kv_gib
    total = total_gib or ex.total_gpu_gib
    if k is None or w is None or total is None:
        return None
    util = ex.gpu_memory_utilization or ex.settings.get("gpu_memory_utilization")
    if util is None:
        util = 0.92 if version >= (0, 20, 0) else 0.90
        notes.append(f"gpu_memory_utilization not in the log: assumed the default {util}")
    try:
        util = float(util)
    except (TypeError, ValueError):
        return None
    requested = total * util
    if version >= (0, 14, 0):
        requested = math.ceil(requested * GIB) / GIB
    rest = requested - k - w
    eager = bool(ex.settings.get("enforce_eager"))
    if version >= (0, 20, 0) and not eager and g_est is not None:
        rest -= g_est
    notes.append(f"no profiling breakdown in the log: activation + non-torch = R − K − W = "
                 f"{rest:.2f} GiB (R = {util} × {total:.2f} GiB), stored as one term")
    return rest
