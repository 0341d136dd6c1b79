"""vLLM's compilation flags -> `Settings` field changes: `-O N`, `--optimization-level`,
`--compilation-config` / `-cc` (a JSON object, an old level number, or dotted `-cc.KEY=V`),
`--cudagraph-capture-sizes` and `--cuda-graph-sizes`.

Only what changes the CUDA graphs vLLM captures is read (`level` / `mode`, `cudagraph_mode`,
the older `use_cudagraph` and `full_cuda_graph`, `cudagraph_capture_sizes`,
`max_cudagraph_capture_size`); `core.stage_terms.cudagraph_mode` reads them by release.
Other keys (`pass_config`, `backend`, ...) are returned as not modelled.
"""

from __future__ import annotations

import json

from ..errors import UsageError

# vLLM's CompilationMode (0.11.1+) and the older CompilationLevel names, by number
MODE_NAMES = {"NONE": 0, "NO_COMPILATION": 0, "STOCK_TORCH_COMPILE": 1, "DYNAMO_AS_IS": 1,
              "DYNAMO_TRACE_ONCE": 2, "DYNAMO_ONCE": 2, "VLLM_COMPILE": 3, "PIECEWISE": 3}
# vLLM's CUDAGraphMode names (0.10.1+); the enum's plain values 0, 1, 2 too
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
MODELLED_KEYS = frozenset({"level", "mode", "cudagraph_mode", "use_cudagraph",
                           "full_cuda_graph", "cudagraph_capture_sizes",
                           "max_cudagraph_capture_size"})
_MAX_SIZE = 1 << 20       # NOTE: a batch size beyond any GPU; larger is an input error
_JSON_HELP = ("a JSON object such as '{\"cudagraph_mode\": \"PIECEWISE\"}', or a level "
              "0-3")


def unmodelled_note(flag: str, keys: list[str]) -> str:
    """The plan's note for compilation-config keys vramguard does not read."""
    return (f"{flag}: not modelled, although vLLM's memory may depend on them: "
            + ", ".join(keys))


def _bad(where: str, value: object, allowed: str) -> UsageError:
    return UsageError(f"invalid value {value!r}", where=where, fix=f"Expected {allowed}.")


def optimization_level(where: str, value: object) -> dict:
    """`-O N` / `--optimization-level N` (0-3) -> {"optimization_level": N}."""
    text = str(value).strip()
    if not text.isdigit() or int(text) > 3:
        raise _bad(where, value, "an optimization level 0, 1, 2 or 3 (-O0 ... -O3)")
    return {"optimization_level": int(text)}


def compilation_config(where: str, value: object) -> tuple[dict, list[str]]:
    """`--compilation-config` / `-cc` / `-O` JSON (or an old level number) -> (Settings
    changes, the keys given that are not modelled)."""
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return {"compilation_mode": _mode(where, text)}, []
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise _bad(where, text, _JSON_HELP) from None
    if isinstance(value, int) and not isinstance(value, bool):
        return {"compilation_mode": _mode(where, value)}, []
    if not isinstance(value, dict):
        raise _bad(where, value, _JSON_HELP)
    changes: dict = {}
    # NOTE: cudagraph_mode last: it wins over the older use_cudagraph / full_cuda_graph.
    for key in sorted(value, key=lambda k: str(k) == "cudagraph_mode"):
        changes.update(compilation_key(where, str(key), value[key]))
    other = [str(k) for k in value if str(k) not in MODELLED_KEYS]
    return changes, other


def compilation_key(where: str, key: str, value: object) -> dict:
    """One key of the compilation config (also dotted: `-cc.cudagraph_mode=NONE`)."""
    at = f"{where}.{key}"
    if value is None:
        return {}
    if key in ("level", "mode"):
        return {"compilation_mode": _mode(at, value)}
    if key == "cudagraph_mode":
        return {"cudagraph_mode": _graph_mode(at, value)}
    if key == "use_cudagraph":
        # NOTE: 0.9.1-0.11.0: False captures no graphs (mapped to cudagraph_mode NONE).
        return {"cudagraph_mode": "NONE"} if not _flag(at, value) else {}
    if key == "full_cuda_graph":
        return {"cudagraph_mode": "FULL"} if _flag(at, value) else {}
    if key == "cudagraph_capture_sizes":
        return {"cudagraph_capture_sizes": int_list(at, value)}
    if key == "max_cudagraph_capture_size":
        return {"max_cudagraph_capture_size": _size(at, value)}
    return {}


def int_list(where: str, value: object) -> tuple[int, ...]:
    """Batch sizes: a list, a JSON list text, or space/comma separated numbers."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                raise _bad(where, text, "a list of batch sizes such as [1, 2, 4, 8]") from None
        else:
            value = [t for t in text.replace(",", " ").split() if t]
    if not isinstance(value, (list, tuple)):
        value = [value]
    return tuple(_size(where, v) for v in value)


def _size(where: str, value: object) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not 1 <= int(text) <= _MAX_SIZE:
        raise _bad(where, value, f"a batch size between 1 and {_MAX_SIZE:,}")
    return int(text)


def _mode(where: str, value: object) -> int:
    text = str(value).strip()
    if text.isdigit() and int(text) <= 3:
        return int(text)
    name = text.upper().rsplit(".", 1)[-1]     # NOTE: "CompilationMode.VLLM_COMPILE"
    if name in MODE_NAMES:
        return MODE_NAMES[name]
    raise _bad(where, value, "a compilation mode 0-3 (or NONE, STOCK_TORCH_COMPILE, "
                             "DYNAMO_TRACE_ONCE, VLLM_COMPILE)")


def _graph_mode(where: str, value: object) -> str:
    text = str(value).strip()
    if text.isdigit() and int(text) <= 2:
        return GRAPH_MODES[int(text)]
    name = text.upper().rsplit(".", 1)[-1]     # NOTE: "CUDAGraphMode.PIECEWISE"
    if name in GRAPH_MODES:
        return name
    raise _bad(where, value, "a CUDA graph mode: " + ", ".join(GRAPH_MODES))


def _flag(where: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise _bad(where, value, "true or false")
