"""Small readers for the values inside vLLM log lines: numbers, sizes, dicts, OOM text.

Never raise on content (the parser calls them on arbitrary lines); `ast.literal_eval`
only, never `eval`.
"""

from __future__ import annotations

import ast
import math

from . import patterns as P
from .extracted import TorchOom


def _f(text: str | None) -> float | None:
    """A logged number; None when unreadable or not finite (a 400-digit figure is not a
    measurement: `float` makes it infinite)."""
    if text is None:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _i(text: str | None) -> int | None:
    v = _f(text)
    return int(v) if v is not None else None


def _gib(value: str | None, unit: str | None) -> float | None:
    v = _f(value)
    if v is None:
        return None
    return round(v * P.UNIT_GIB.get(unit or "GiB", 1.0), 4)


def parse_oom(text: str) -> TorchOom:
    """The numbers of a torch/HIP OOM message (any of them may be missing)."""
    m_dev = P.OOM_DEVICE.search(text)
    m_tried = P.OOM_TRIED.search(text)
    m_total = P.OOM_TOTAL.search(text)
    m_old = None if m_total else P.OOM_OLD.search(text)
    m_use = P.OOM_IN_USE.search(text)
    m_alloc = P.OOM_ALLOCATED.search(text)
    m_res = P.OOM_RESERVED.search(text)
    device = m_dev.group(1) if m_dev else ("HIP" if "hip" in text.lower() else None)
    out = dict(device=device,
               tried_gib=_gib(*m_tried.groups()) if m_tried else None,
               process_in_use_gib=_gib(*m_use.groups()) if m_use else None,
               allocated_gib=_gib(*m_alloc.groups()) if m_alloc else None,
               reserved_unallocated_gib=_gib(*m_res.groups()) if m_res else None,
               other_processes_gib=tuple(_gib(a, b) for a, b in P.OOM_OTHER.findall(text)))
    if m_total:
        out.update(gpu_index=int(m_total.group(1)), total_gib=_gib(*m_total.group(2, 3)),
                   free_gib=_gib(*m_total.group(4, 5)))
    elif m_old:
        out.update(gpu_index=int(m_old.group(1)), total_gib=_gib(*m_old.group(2, 3)),
                   allocated_gib=_gib(*m_old.group(4, 5)), free_gib=_gib(*m_old.group(6, 7)))
    return TorchOom(**out)


def parse_args_dict(text: str) -> dict:
    """`{'model': 'x', 'max_model_len': 8192, …}` -> dict, safely (ast.literal_eval, never
    eval). A truncated or elided dict falls back to its readable `'key': literal` pairs."""
    text = text.strip().rstrip("`").strip()
    try:
        value = ast.literal_eval(text)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    out: dict = {}
    for key, raw in P.ARG_PAIR.findall(text):
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return out


def _config_dump(text: str) -> dict:
    """The interesting fields of `Initializing … with config: model='…', …`."""
    keep = {"model", "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size",
            "enforce_eager", "kv_cache_dtype", "dtype", "quantization", "data_parallel_size"}
    out: dict = {}
    for key, raw in P.CONFIG_PAIR.findall(text):
        if key not in keep or key in out:
            continue
        raw = raw.strip("'\"")
        if raw in ("None", ""):
            continue
        if raw in ("True", "False"):
            out[key] = raw == "True"
        elif raw.isdigit():
            out[key] = int(raw)
        else:
            out[key] = raw.replace("torch.", "")
    if "max_seq_len" in out:
        out["max_model_len"] = out.pop("max_seq_len")
    return out


def _args_from_command(cmd: str) -> dict:
    """A loose `--flag value` reading of a pasted `vllm serve …` line (no validation)."""
    import shlex
    text = cmd.replace("\\", " ")
    try:
        tokens = shlex.split(text)      # NOTE: a quoted JSON value stays one token
    except ValueError:
        tokens = text.split()
    out: dict = {}
    if len(tokens) > 2 and tokens[0] == "vllm" and tokens[1] == "serve" \
            and not tokens[2].startswith("-"):
        out["model"] = tokens[2]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("--") and len(tok) > 2:
            name, _, val = tok[2:].partition("=")
            key = name.replace("-", "_")
            if not val and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                val, i = tokens[i + 1], i + 1
            out[key] = _literal(val) if val else True
        i += 1
    return out


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text


