"""Calibrating from one log file: parse, key, learn, store (the work behind the command)."""

from __future__ import annotations

import hashlib
import json

from ..core.calibration import CalibrationKey
from ..core.provenance import GIB
from ..errors import UsageError
from .compare import gpu_for_log, model_for_log
from .fields import normalize_version
from .extracted import Extracted
from .learn import learn, model_family
from .parser import parse


def _digest(ex: Extracted, key: CalibrationKey) -> str:
    d = ex.to_dict()
    for k in ("bytes_read", "lines", "recognized_lines", "truncated_lines"):
        d.pop(k, None)
    blob = json.dumps([d, vars(key)], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def key_for_log(ex: Extracted, *, gpu: str | None = None, model: str | None = None,
                model_family_name: str | None = None, vllm_version: str | None = None):
    """(CalibrationKey, GpuSpec | None). Raises UsageError when a part cannot be told."""
    gspec, why = gpu_for_log(ex, gpu)
    if gspec is None:
        raise UsageError(f"cannot tell the GPU: {why}", fix="Pass --gpu NAME")
    spec = None
    if not model_family_name:
        spec, _ = model_for_log(ex, model)
    family = model_family(ex, spec, model_family_name)
    if not family:
        raise UsageError("cannot tell the model family (model_type)",
                         fix="Pass --model ID (loadable offline) or --model-family TYPE")
    version = normalize_version(vllm_version or ex.version)
    if not version:
        raise UsageError("the log does not print the vLLM version", fix="Pass --vllm-version")
    s = ex.settings
    tp = int(s.get("tensor_parallel_size") or 1)
    pp = int(s.get("pipeline_parallel_size") or 1)
    return CalibrationKey(gspec.name, version, family, tp, pp), gspec


def calibrate_log(path: str, store, *, gpu=None, model=None, model_family=None,
                  vllm_version=None) -> dict:
    """Learn from one log and store it. Returns a JSON-ready summary of what happened."""
    ex = parse(path)
    source = None if path == "-" else path
    if ex.empty:
        return {"source": path, "learned": False, "reason": "no vLLM lines in this log"}
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
