"""Plain-text rendering of a Plan: the ledger, KV capacity, verdict, fix, log lines.

Takes results, never computes them: every number shown is a field of the Plan (bytes are
only converted to GiB for display). Standard library only; colour only when asked for
(`use_color()` says when: a tty, NO_COLOR unset, TERM not dumb).
"""

from __future__ import annotations

import os
import sys

from ..core.plan import Ledger, Plan
from ..core.provenance import GIB, Estimate

# Source value -> the tag users see.
SOURCE_TAGS = {
    "checkpoint": "checkpoint", "config": "config", "catalog": "catalog",
    "derived": "derived", "user": "flag", "vllm_default": "vLLM default",
    "estimated": "estimated", "calibrated": "calibrated", "measured": "measured",
}
# Ledger terms in display order: (attribute, label, sign shown before the label)
TERMS = (
    ("total", "total (CUDA)", " "),
    ("requested", "requested", " "),
    ("weights", "weights", "-"),
    ("activation", "activation peak", "-"),
    ("non_torch", "non-torch", "-"),
    ("cuda_graph", "CUDA graphs", "-"),
    ("kv_cache", "KV cache", "="),
)


def use_color(stream=None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set or TERM=dumb."""
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR") is not None or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def can_encode(text: str, stream=None) -> bool:
    """Whether the output stream can print `text` (else ASCII fallbacks are used)."""
    enc = getattr(stream if stream is not None else sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(enc)
        return True
    except (UnicodeEncodeError, LookupError):
        return False


class _Style:
    def __init__(self, color: bool, unicode: bool):
        self.color = color
        self.ok = "✓" if unicode else "OK"
        self.fail = "✗" if unicode else "FAIL"
        self.warn = "!"
        self.dash = "–" if unicode else "-"
        self.dot = "·" if unicode else "|"

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def bold(self, t: str) -> str:
        return self._wrap("1", t)

    def green(self, t: str) -> str:
        return self._wrap("32", t)

    def red(self, t: str) -> str:
        return self._wrap("31", t)

    def yellow(self, t: str) -> str:
        return self._wrap("33", t)

    def dim(self, t: str) -> str:
        return self._wrap("2", t)


def gib_text(n_bytes: int | float | None) -> str:
    """Bytes as GiB with 2 decimals (`-` for unknown)."""
    if n_bytes is None:
        return "-"
    return f"{n_bytes / GIB:.2f}"


def _band(est: Estimate, st: _Style) -> str:
    if est.low_bytes == est.high_bytes:
        return ""
    sep = st.dash if est.low_bytes >= 0 else " to "
    return f"{est.low_bytes / GIB:.2f}{sep}{est.high_bytes / GIB:.2f}"


def _tag(est: Estimate) -> str:
    src = getattr(est.source, "value", est.source)
    return SOURCE_TAGS.get(str(src), str(src))


def _num(n: int | float | None) -> str:
    return "-" if n is None else f"{n:,}"


def _requested_label(plan: Plan) -> str:
    u = plan.settings.get("gpu_memory_utilization")
    return f"requested ({u:g} x total)" if isinstance(u, (int, float)) else "requested"


def _rank_title(ledger: Ledger, plan: Plan) -> str:
    n = len(plan.ledgers)
    where = f"rank {ledger.rank}"
    if n > 1:
        where += f" (tp {ledger.tp_rank}, pp {ledger.pp_rank}"
        if ledger.layers != (0, 0):
            where += f", layers {_layers(ledger)}"
        where += f"), the tightest of {n}"
    return where


def _ledger_rows(ledger: Ledger, plan: Plan, st: _Style) -> list[str]:
    rows = [f"  {'':<2}{'':<26}{'GiB':>9}   {'band':<17}  source"]
    for attr, label, sign in TERMS:
        est: Estimate = getattr(ledger, attr)
        if attr == "requested":
            label = _requested_label(plan)
        line = (f"  {sign:<2}{label:<26}{gib_text(est.value_bytes):>9}   "
                f"{_band(est, st):<17}  {_tag(est)}")
        if attr == "kv_cache":
            line = st.bold(line) if est.value_bytes > 0 else st.red(line)
        rows.append(line)
    return rows


def _all_ranks_rows(plan: Plan, st: _Style, per_row: int = 8) -> list[str]:
    """Every rank side by side, `per_row` ranks per block (so wide TP x PP stays readable)."""
    rows: list[str] = []
    for start in range(0, len(plan.ledgers), per_row):
        ledgers = plan.ledgers[start:start + per_row]
        if start:
            rows.append("")
        rows.append("  " + f"{'GiB':<28}" + "".join(f"{'r' + str(l.rank):>9}" for l in ledgers))
        for attr, label, sign in TERMS:
            if attr == "requested":
                label = _requested_label(plan)
            cells = "".join(f"{gib_text(getattr(l, attr).value_bytes):>9}" for l in ledgers)
            rows.append(f"  {sign:<2}{label:<26}{cells}")
        rows.append("  " + f"{'  blocks':<28}"
                    + "".join(f"{_num(l.num_blocks):>9}" for l in ledgers))
        rows.append("  " + f"{'  layers':<28}" + "".join(
            f"{_layers(l):>9}" for l in ledgers))
    t = plan.tightest
    rows.append(st.dim(f"  tightest: rank {t.rank} (vLLM takes the minimum over ranks)"))
    return rows


def _layers(ledger: Ledger) -> str:
    first, end = ledger.layers
    return f"{first}-{end - 1}" if (first, end) != (0, 0) else "-"


def _verdict(plan: Plan, st: _Style) -> list[str]:
    out = plan.outcome
    if out.ok:
        kv = plan.kv
        tail = ""
        if kv is not None:
            tail = (f": KV cache {gib_text(plan.tightest.kv_cache.value_bytes)} GiB, "
                    f"{_num(kv.tokens)} tokens, {kv.max_concurrency:.2f}x concurrency at "
                    f"{_num(kv.max_model_len)} tokens")
        lines = [st.green(f"{st.ok} starts") + tail]
    else:
        kind = out.failure or "failure"
        lines = [st.red(f"{st.fail} fails: {kind}")]
        if out.message:
            lines.append(f"  vLLM: {out.message}")
    for risk in out.risks:
        lines.append(st.yellow(f"{st.warn} risk: {risk}"))
    return lines


def _kv_lines(plan: Plan, st: _Style) -> list[str]:
    kv = plan.kv
    if kv is None:
        return []
    lines = [st.bold("KV capacity"),
             f"  {_num(kv.bytes_per_token)} bytes/token {st.dot} block size {kv.block_size} "
             f"{st.dot} {_num(kv.page_size_bytes)} bytes/block",
             f"  {_num(kv.num_blocks)} blocks {st.dot} {_num(kv.tokens)} tokens {st.dot} "
             f"max concurrency {kv.max_concurrency:.2f}x at max_model_len {_num(kv.max_model_len)}"
             f" ({_num(kv.blocks_per_request)} blocks/request)"]
    if kv.estimated_max_model_len:
        lines.append(f"  longest request that fits: {_num(kv.estimated_max_model_len)} tokens")
    return lines


_KEY_SETTINGS = ("tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization",
                 "max_model_len", "max_num_seqs", "max_num_batched_tokens", "dtype",
                 "kv_cache_dtype", "kv_cache_dtype_skip_layers", "block_size", "enforce_eager", "quantization",
                 "kv_cache_memory_bytes", "num_gpu_blocks_override", "mamba_cache_mode",
                 "mamba_cache_dtype", "mamba_ssm_cache_dtype",
                 "cudagraph_mode", "optimization_level", "compilation_mode",
                 "cudagraph_capture_sizes", "cuda_graph_sizes", "max_cudagraph_capture_size",
                 "performance_mode", "decode_context_parallel_size", "mm_encoder_tp_mode",
                 "enable_multimodal_encoder_data_parallel", "limit_mm_per_prompt",
                 "kv_offloading_size", "num_speculative_tokens")
# NOTE: shown only when set away from these (the default says nothing)
_QUIET = {"decode_context_parallel_size": 1, "enable_multimodal_encoder_data_parallel": False,
          "num_speculative_tokens": 0}


def _settings_line(plan: Plan, st: _Style) -> list[str]:
    parts = []
    for key in _KEY_SETTINGS:
        if key not in plan.settings:
            continue
        val = plan.settings[key]
        if val is None or (key in ("kv_cache_memory_bytes", "num_gpu_blocks_override")
                           and not val) or (key in _QUIET and _QUIET[key] == val):
            continue
        src = plan.settings_sources.get(key)
        tag = SOURCE_TAGS.get(str(src), str(src)) if src else ""
        if key == "limit_mm_per_prompt":
            sval = ",".join(f"{k}={n}" for k, n in val)   # NOTE: vLLM's older key=value form
        elif isinstance(val, (tuple, list)):
            sval = " ".join(str(v) for v in val)        # NOTE: capture sizes, as typed
        else:
            sval = f"{val:,}" if isinstance(val, int) and not isinstance(val, bool) else str(val)
        parts.append(f"{key} {sval}" + (st.dim(f" ({tag})") if tag else ""))
    if not parts:
        return []
    lines = [st.bold("Settings")]
    line = " "
    for p in parts:
        piece = f" {p};"
        if len(line) + len(piece) > 100 and line.strip():
            lines.append(line.rstrip(";"))
            line = " "
        line += piece
    lines.append(line.rstrip(";"))
    return lines


def render_plan(plan: Plan, *, all_ranks: bool = False, color: bool = False,
                unicode: bool | None = None, fix_command: str | None = None,
                extra_assumptions: tuple[str, ...] = ()) -> str:
    """The human-readable report of `plan`. `fix_command` is the copy-pasteable command
    with the first fix applied (the caller builds it from the user's flags)."""
    if unicode is None:
        unicode = can_encode("✓✗–·")
    st = _Style(color, unicode)
    calib = " (calibrated)" if plan.calibrated else ""
    lines = [st.bold(f"{plan.model} on {plan.gpu}") +
             f" {st.dot} vLLM {plan.vllm_version} ({plan.engine}){calib}", ""]
    lines += _verdict(plan, st)
    lines.append("")
    if plan.ledgers:
        if all_ranks and len(plan.ledgers) > 1:
            lines.append(st.bold(f"Memory per rank ({len(plan.ledgers)} ranks)"))
            lines += _all_ranks_rows(plan, st)
        else:
            lines.append(st.bold(f"Memory on {_rank_title(plan.tightest, plan)}"))
            lines += _ledger_rows(plan.tightest, plan, st)
        lines.append("")
    kv_lines = _kv_lines(plan, st)
    if kv_lines:
        lines += kv_lines + [""]
    set_lines = _settings_line(plan, st)
    if set_lines:
        lines += set_lines + [""]
    if plan.fixes:
        fix = plan.fixes[0]
        lines.append(st.bold("Fix") + f": {fix.summary}")
        if fix.flags:
            lines.append("  change: " + " ".join(
                _flag_text(k, v) for k, v in fix.flags.items()))
        if fix_command:
            lines.append(f"  {fix_command}")
        if len(plan.fixes) > 1:
            lines.append(st.dim(f"  ({len(plan.fixes) - 1} more in --json)"))
        lines.append("")
    if plan.log_lines:
        lines.append(st.bold("Predicted vLLM log"))
        lines += [f"  {l}" for l in plan.log_lines]
        lines.append("")
    assumptions = tuple(extra_assumptions) + tuple(plan.assumptions)
    if assumptions:
        lines.append(st.bold("Assumptions"))
        lines += [f"  - {a}" for a in assumptions]
        lines.append("")
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)


def _flag_text(key: str, value: object) -> str:
    flag = key if key.startswith("-") else "--" + key.replace("_", "-")
    if value in ("", None, True, "true", "True"):
        return flag
    return f"{flag} {value}"
