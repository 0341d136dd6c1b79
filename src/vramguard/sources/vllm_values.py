"""vLLM flag values -> `Settings` field changes: one value of a known memory flag, as a
command line, a `--config` YAML file or a logged `non-default args` dict gives it.

Split from `sources.vllm_args` (which re-exports `human_readable_int` and `convert_value`);
the flag table these conversions follow is `sources.vllm_flags`.
"""

from __future__ import annotations

import json
import re

from ..errors import UsageError
from . import vllm_compile
from .vllm_flags import (
    BOOL, CHOICE, COMPILE, FLAGS, FLOAT_FRAC, FLOAT_NONNEG, HUMAN_INT, INT_LIST, JSON, MAXLEN,
    STR_LIST,
    MM_LIMITS, POS_INT, QUANT_METHODS, TRIBOOL, Flag as _Flag)

_HUMAN_RE = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)")
_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BIN = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIX_HELP = "a whole number, or k/m/g (x1000) or K/M/G (x1024) suffixes such as 25.6k or 32K"


def human_readable_int(text: str) -> int | None:
    """vLLM's human_readable_int: `25.6k` -> 25600, `32K` -> 32768, `8192` -> 8192.

    Decimals are only allowed with the decimal (lower-case) suffixes. None if malformed.
    """
    m = _HUMAN_RE.fullmatch(text.strip())
    if not m:
        return None
    number, suffix = m.groups()
    if suffix in _DEC:
        return int(float(number) * _DEC[suffix])
    if "." in number:
        return None
    return int(number) * _BIN.get(suffix, 1)


_UNSET_VAR = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$")


def _bad(flag: str, value: object, allowed: str) -> UsageError:
    fix = f"Expected {allowed}."
    if isinstance(value, str) and _UNSET_VAR.match(value):
        # NOTE: a template's variable the pasted text does not set (envsubst, .env, Helm)
        fix += f" {value} is a variable the pasted text does not set: write its value."
    return UsageError(f"invalid value {value!r}", where=flag, fix=fix)


def _to_int(flag: str, value: object, spec: _Flag, human: bool) -> int:
    if isinstance(value, bool):
        raise _bad(flag, value, "an integer")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    else:
        text = str(value).strip()
        if human:
            n = human_readable_int(text)
        else:
            n = int(text) if re.fullmatch(r"[+-]?\d+", text) else None
        if n is None:
            raise _bad(flag, value, _SUFFIX_HELP if human else "a whole number")
    lo, hi = spec.lo, spec.hi
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        rng = f"{int(lo)} to {int(hi)}" if hi is not None else f"a whole number >= {int(lo)}"
        raise _bad(flag, value, rng)
    return n


def _to_float(flag: str, value: object, spec: _Flag) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        x = float(value)
    except (TypeError, ValueError):
        raise _bad(flag, value, "a number") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise _bad(flag, value, "a number")
    if spec.kind == FLOAT_FRAC and not (0 < x <= 1):
        raise _bad(flag, value, "a fraction of total GPU memory, 0 < value <= 1 (e.g. 0.9)")
    if spec.kind == FLOAT_NONNEG and x < 0:
        raise _bad(flag, value, "a number of GiB >= 0")
    return x


def _to_bool(flag: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise _bad(flag, value, "true or false")


def _max_model_len(flag: str, value: object, spec: _Flag) -> dict:
    text = str(value).strip().lower() if not isinstance(value, int) else str(value)
    if text in ("auto", "-1"):
        return {"max_model_len": None, "max_model_len_auto": True}
    if text in ("none", ""):
        return {"max_model_len": None, "max_model_len_auto": False}
    try:
        n = _to_int(flag, value, spec, human=True)
    except UsageError:
        raise _bad(flag, value, "auto, -1, or a whole number >= 1, with k/m/g (x1000) or "
                                "K/M/G (x1024) suffixes such as 25.6k or 32K") from None
    return {"max_model_len": n, "max_model_len_auto": False}


_NO_SPECULATION = {"num_speculative_tokens": 0, "speculative_method": None,
                   "speculative_model": None}
_SPEC_JSON = 'a JSON object such as \'{"method": "ngram", "num_speculative_tokens": 3}\''


def _speculative(flag: str, value: object) -> dict:
    """`--speculative-config` JSON -> the number of speculative tokens and the method."""
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "None", "null"):
            return dict(_NO_SPECULATION)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise _bad(flag, value, _SPEC_JSON) from None
        except RecursionError:
            raise UsageError("not valid JSON (nested too deeply)", where=flag,
                             fix=f"Expected {_SPEC_JSON}.") from None
    if value is None:
        return dict(_NO_SPECULATION)
    if not isinstance(value, dict):
        raise _bad(flag, value, "a JSON object")
    out: dict = {}
    if "num_speculative_tokens" in value or "method" not in value:
        n = value.get("num_speculative_tokens", 0)
        out["num_speculative_tokens"] = _to_int(
            flag + ".num_speculative_tokens", n if n is not None else 0,
            _Flag("num_speculative_tokens", POS_INT, 0, 1024), human=False)
    if "method" in value:
        # NOTE: the method decides the model runner from 0.25 (n-gram, draft models and a
        # few others run on the V1 runner); dotted flags set one key at a time.
        method = value["method"]
        out["speculative_method"] = str(method).strip().lower() if method else None
    if "model" in value:
        # NOTE: a separate drafter (EAGLE head, small LM): its weights and KV layers are
        # counted when its config can be read (sources/draft.py).
        model = value["model"]
        if model is not None and not isinstance(model, str):
            raise _bad(flag + ".model", model, "a model id or path")
        out["speculative_model"] = (model.strip() or None) if model else None
    return out


def _eplb_config(flag: str, value: object) -> dict:
    """`--eplb-config` JSON -> its number of redundant experts (the other keys tune the
    rebalancing, not memory)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() not in ("", "None", "null") else None
        except (json.JSONDecodeError, RecursionError):
            raise _bad(flag, value, "a JSON object such as '{\"num_redundant_experts\": 32}'") \
                from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(flag, value, "a JSON object")
    if "num_redundant_experts" not in value:
        return {}
    return {"num_redundant_experts": _to_int(flag + ".num_redundant_experts",
                                             value["num_redundant_experts"],
                                             _Flag("num_redundant_experts", POS_INT, 0, 1 << 16),
                                             human=False)}


_MM_HELP = 'a JSON object such as \'{"image": 0, "video": 0}\' (or image=0,video=0)'
_MM_COUNT = _Flag("limit_mm_per_prompt", POS_INT, 0, 1 << 20)


def mm_limits(flag: str, value: object, notes: list[str] | None = None) -> dict:
    """`--limit-mm-per-prompt` -> items per prompt by modality, sorted: `{"image": 0}`,
    `{"image": {"count": 1, "width": 512}}` (0.11.1+: the size is noted, not modelled) and
    the old `image=16,video=2`."""
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "None", "null"):
            return {"limit_mm_per_prompt": None}
        try:
            value = json.loads(text) if text.startswith("{") else _mm_pairs(flag, text)
        except (json.JSONDecodeError, RecursionError):
            raise _bad(flag, value, _MM_HELP) from None
    if not isinstance(value, dict):
        raise _bad(flag, value, _MM_HELP)
    out: dict[str, int] = {}
    for key, count in value.items():
        name = str(key).strip()
        if not re.fullmatch(r"[A-Za-z_][\w-]*", name):
            raise _bad(flag, key, "modality names such as image, video, audio")
        if isinstance(count, dict):
            if "count" not in count:
                raise _bad(f"{flag}.{name}", count, 'an object with a "count"')
            extra = sorted(str(k) for k in count if k != "count")
            if extra and notes is not None:
                notes.append(f"{flag}.{name}: {', '.join(extra)} (the dummy item's size) "
                             "not modelled")
            count = count["count"]
        out[name] = _to_int(f"{flag}.{name}", count, _MM_COUNT, human=False)
    return {"limit_mm_per_prompt": tuple(sorted(out.items())) or None}


def _mm_pairs(flag: str, text: str) -> dict:
    pairs = {}
    for part in text.split(","):
        key, sep, val = part.partition("=")
        if not sep:
            raise _bad(flag, text, _MM_HELP)
        pairs[key.strip()] = val.strip()
    return pairs


def convert_value(flag: str, value: object, notes: list[str] | None = None) -> dict:
    """Parse one value of a known memory flag (string from a command line, or a typed
    value from YAML / a `non-default args` dict) into Settings field changes."""
    spec = FLAGS[flag]
    kind = spec.kind
    if kind == MAXLEN:
        return _max_model_len(flag, value, spec)
    if kind in (POS_INT, HUMAN_INT):
        if spec.field in ("max_num_seqs", "max_num_batched_tokens", "block_size",
                          "kv_cache_memory_bytes", "num_gpu_blocks_override", "max_loras",
                          "max_lora_rank") and str(value).strip() in ("None", ""):
            return {spec.field: None}
        return {spec.field: _to_int(flag, value, spec, human=kind == HUMAN_INT)}
    if kind in (FLOAT_FRAC, FLOAT_NONNEG):
        return {spec.field: _to_float(flag, value, spec)}
    if kind in (BOOL, TRIBOOL):
        return {spec.field: _to_bool(flag, value)}
    if kind == CHOICE:
        text = str(value).strip()
        if text not in spec.choices:
            import difflib
            close = difflib.get_close_matches(text, spec.choices, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise _bad(flag, value, "one of " + ", ".join(spec.choices) + hint)
        return {spec.field: text}
    if kind == JSON:
        if spec.field == "num_redundant_experts":
            return _eplb_config(flag, value)
        return _speculative(flag, value)
    if kind == MM_LIMITS:
        return mm_limits(flag, value, notes)
    if kind == INT_LIST:
        if isinstance(value, str) and value.strip() in ("None", ""):
            return {spec.field: None}
        return {spec.field: vllm_compile.int_list(flag, value)}
    if kind == STR_LIST:
        return {spec.field: skip_layer_list(flag, value)}
    if kind == COMPILE:
        changes, other = vllm_compile.compilation_config(flag, value)
        if other and notes is not None:
            notes.append(vllm_compile.unmodelled_note(flag, other))
        return changes
    # STR
    text = str(value).strip()
    if spec.field == "quantization":
        if text in ("None", "none", ""):
            return {"quantization": None}
        if not re.fullmatch(r"[A-Za-z0-9_\-.]+", text):
            raise _bad(flag, value, "a quantization method such as awq, gptq, fp8")
        if text not in QUANT_METHODS and notes is not None:
            notes.append(f"--quantization {text!r} is not a method vramguard knows; "
                         "weights are planned from the checkpoint")
        return {"quantization": text}
    if spec.field in ("speculative_model", "speculative_method") and text in ("None", "none"):
        return {spec.field: None}
    if spec.field == "speculative_method" and text:
        return {"speculative_method": text.lower()}     # NOTE: as the JSON's "method"
    if not text:
        raise _bad(flag, value, "a non-empty value")
    return {spec.field: text}


def skip_layer_list(flag: str, value) -> tuple[str, ...] | None:
    """--kv-cache-dtype-skip-layers: layer indices or attention types, as vLLM's list[str]
    (space-separated on the command line, a list in --config YAML)."""
    items = value if isinstance(value, (list, tuple)) else str(value).split()
    out = tuple(str(v).strip() for v in items if str(v).strip())
    if not out or out == ("None",):
        return None
    for item in out:
        if not re.fullmatch(r"[0-9]{1,6}|[a-z_]+", item):
            raise _bad(flag, value, "layer indices such as 0 1 31, or sliding_window")
    return out
