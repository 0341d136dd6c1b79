"""Calibrating from one log file: parse, key, learn, store (the work behind the command)."""

from __future__ import annotations

import hashlib
import json

from ..core.calibration import CalibrationKey
from ..core.provenance import GIB
from ..errors import UsageError
from .compare import gpu_for_log, model_for_log
from .versions import normalize_version
from .extracted import Extracted
from .learn import learn, model_family
from .parser import parse


def _digest(ex: Extracted, key: CalibrationKey) -> str:
    d = ex.to_dict()
    for k in ("bytes_read", "lines", "recognized_lines", "truncated_lines"):
        d.pop(k, None)
    blob = json.dumps([d, vars(key)], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# NOTE: the plan flags whose ranges a logged value must meet: vLLM refuses the same values
# at startup, so a log that carries them is damaged or edited, and its terms are not stored.
_LOGGED_FLAGS = {"tensor_parallel_size": "--tensor-parallel-size",
                 "pipeline_parallel_size": "--pipeline-parallel-size",
                 "gpu_memory_utilization": "--gpu-memory-utilization"}


def logged_value(ex: Extracted, field: str):
    """The log's TP, PP or gpu_memory_utilization, checked like its plan flag; None when
    the log does not carry it. Raises UsageError naming the logged value."""
    from ..sources.vllm_values import convert_value
    value = ex.settings.get(field)
    if field == "gpu_memory_utilization":
        value = ex.gpu_memory_utilization or value      # NOTE: the one learn() uses
    if value is None:
        return None
    try:
        return convert_value(_LOGGED_FLAGS[field], value)[field]
    except UsageError as exc:
        expected = (exc.fix or "").removeprefix("Expected ").rstrip(".")
        raise UsageError(f"{field} {value!r} in the log is not valid: expected {expected}"
                         ) from None


def logged_problem(ex: Extracted) -> str | None:
    """Why the log's TP, PP or utilization cannot be a real startup's, or None."""
    for field in _LOGGED_FLAGS:
        try:
            logged_value(ex, field)
        except UsageError as exc:
            return exc.what
    return None


def key_for_log(ex: Extracted, *, gpu: str | None = None, model: str | None = None,
                model_family_name: str | None = None, vllm_version: str | None = None):
    """(CalibrationKey, GpuSpec | None). Raises UsageError when a part cannot be told."""
    gspec, why = gpu_for_log(ex, gpu)
    if gspec is None:
        why = (why or "").removesuffix(": pass --gpu")
        raise UsageError(f"cannot tell the GPU: {why}", fix="Pass --gpu NAME")
    spec = why = None
    if not model_family_name:
        spec, why = model_for_log(ex, model)
    family = model_family(ex, spec, model_family_name)
    if not family:
        # NOTE: say why the model did not load; "cannot tell" alone hides a bad --model
        raise UsageError("cannot tell the model family (model_type)" + (f": {why}" if why else ""),
                         fix="Pass --model ID (loadable offline) or --model-family TYPE")
    return CalibrationKey(gspec.name, _version(ex, vllm_version), family,
                          logged_value(ex, "tensor_parallel_size") or 1,
                          logged_value(ex, "pipeline_parallel_size") or 1), gspec


def _version(ex: Extracted, flag: str | None) -> str:
    """The normalised vLLM version: the flag's, else the log's. Raises UsageError."""
    if flag:
        version = normalize_version(flag)
        if not version:
            # NOTE: the flag is what is bad here, not the log
            raise UsageError(f"cannot read vLLM version {flag!r}", where="--vllm-version",
                             fix="Give a release such as 0.11.0")
        return version
    version = normalize_version(ex.version)
    if not version:
        raise UsageError("the log does not print the vLLM version", fix="Pass --vllm-version")
    return version


def calibrate_log(path: str, store, *, gpu=None, model=None, model_family=None,
                  vllm_version=None) -> dict:
    """Learn from one log and store it. Returns a JSON-ready summary of what happened."""
    ex = parse(path)
    source = None if path == "-" else path
    if ex.empty:
        return {"source": path, "learned": False, "reason": "no vLLM lines in this log"}
    problem = logged_problem(ex)
    if problem:
        return {"source": path, "learned": False, "reason": problem}
    key, gspec = key_for_log(ex, gpu=gpu, model=model, model_family_name=model_family,
                             vllm_version=vllm_version)
    learned = learn(ex, key, total_gib=gspec.total_bytes / GIB if gspec else None, source=source)
    if learned is None:
        return {"source": path, "learned": False,
                "reason": "the log has no weights/KV figures to learn from (is it a startup "
                          "log that reached KV-cache sizing?)"}
    cal = learned.calibration
    outcome = "failed" if ex.errors else ("started" if ex.started else "incomplete")
    row = {
        "digest": _digest(ex, key), "source": source, "model": ex.model,
        "model_family": key.model_family, "gpu": key.gpu_name, "vllm_version": key.vllm_version,
        "engine": ex.engine, "tp": key.tensor_parallel_size, "pp": key.pipeline_parallel_size,
        "flags": ex.non_default_args or ex.settings, "outcome": outcome,
        "kv_pool_gib": ex.kv_pool_gib, "kv_tokens": ex.kv_cache_tokens,
        "max_concurrency": ex.max_concurrency,
        "concurrency_tokens": ex.concurrency_tokens_per_request,
        "weights_bytes": cal.weights_bytes, "activation_bytes": cal.activation_bytes,
        "non_torch_bytes": cal.non_torch_bytes, "cuda_graph_bytes": cal.cuda_graph_bytes,
        "max_num_batched_tokens": cal.max_num_batched_tokens, "max_num_seqs": cal.max_num_seqs,
        "derivation": learned.derivation, "notes": learned.notes,
    }
    row_id, new = store.add(row)

    def g(n):
        return round(n / GIB, 4) if n is not None else None
    return {"source": path, "learned": True, "id": row_id, "new": new, "key": vars(key),
            "derivation": learned.derivation, "notes": list(learned.notes),
            "terms_gib": {"weights": g(cal.weights_bytes), "activation": g(cal.activation_bytes),
                          "non_torch": g(cal.non_torch_bytes),
                          "cuda_graph": g(cal.cuda_graph_bytes)}}
