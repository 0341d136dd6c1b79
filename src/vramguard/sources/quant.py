"""QuantSpec from a checkpoint's `quantization_config` (or ModelOpt's hf_quant_config.json).

Bytes per parameter include the scales and zeros the format stores next to the packed
weights, e.g. GPTQ int4 group 128: 0.5 packed + 2/128 fp16 scales + 0.5/128 packed zeros
= 0.5195. Embeddings and lm_head stay 16-bit unless the config says otherwise.
"""

from __future__ import annotations

import re

from ..core.model import MARLIN_BITS, MARLIN_GROUPS, QuantSpec
from ..errors import SourceError

MXFP4 = 0.5 + 1 / 32          # 4-bit values + one e8m0 scale per 32 = 4.25 bits
NVFP4 = 0.5 + 1 / 16          # 4-bit values + one fp8 scale per 16 = 4.5 bits
FP8 = 1.0


def int_bytes(bits: float, group: int | None, *, zeros: bool = True) -> float:
    """Bytes per weight of packed integers with 16-bit scales (and packed zeros) per group."""
    if not group or group <= 0:
        return bits / 8                                     # per-channel scales: negligible
    return bits / 8 + 2 / group + (bits / 8 / group if zeros else 0.0)


def _num(qc: dict, *keys: str) -> float | None:
    for key in keys:
        value = qc.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            return float(value)
    return None


def _check_widths(qc: dict, where: str) -> None:
    """A bit width or group size that is present must be one (vLLM's quantization configs
    reject others, e.g. GPTQ "only 2/3/4/8-bit weight quantization is supported")."""
    for key in ("bits", "w_bit", "nbits", "weight_bits", "num_bits"):
        if key in qc and qc[key] is not None:
            v = qc[key]
            if not (isinstance(v, (int, float)) and not isinstance(v, bool) and 1 <= v <= 16):
                raise SourceError(f"quantization_config.{key} is {v!r:.40}, not a bit width "
                                  "(1 to 16)", where=where, fix="Fix or re-download config.json")
    for key in ("group_size", "q_group_size"):
        if key in qc and qc[key] is not None:
            v = qc[key]
            if not (isinstance(v, int) and not isinstance(v, bool) and (v == -1 or v > 0)):
                raise SourceError(f"quantization_config.{key} is {v!r:.40}, not a group size "
                                  "(-1 for per-channel, or a positive number of weights)",
                                  where=where, fix="Fix or re-download config.json")


# NOTE: gptq_marlin / awq_marlin `is_*_marlin_compatible`: the keys must be there, under
# these names (an old AutoAWQ config's w_bit / q_group_size are not read there); the bits
# and group sizes Marlin takes are core's (`model.MARLIN_BITS` / `MARLIN_GROUPS`)
def _marlin_keys(method: str, qc: dict) -> bool | None:
    """Whether vLLM's Marlin override can convert this AWQ / GPTQ checkpoint, by the keys and
    values it checks (GPTQ: 4 / 8 bits, symmetric, desc_act given; AWQ: 4 bits with zero
    points); None for other methods, and where the release decides it (8-bit AWQ)."""
    if method not in ("gptq", "awq"):
        return None
    if method == "gptq" and (qc.get("checkpoint_format") == "marlin" or qc.get("is_marlin_format")):
        return True     # NOTE: serialized for Marlin: vLLM's "marlin" method takes it
    extra = ("sym", "desc_act") if method == "gptq" else ("zero_point",)
    values = [qc.get(k) for k in ("bits", "group_size") + extra]
    if any(v is None for v in values):
        return False
    bits, group = values[0], values[1]
    if method == "awq" and bits == 8:
        return None     # NOTE: awq_marlin took 8 bits in 0.5.3-0.5.x only (uint4 after)
    return bits in MARLIN_BITS[method] and group in MARLIN_GROUPS and values[2] is True


def _names(qc: dict, *keys: str) -> tuple[str, ...]:
    out: list[str] = []
    for key in keys:
        value = qc.get(key)
        if isinstance(value, list):
            out += [str(v) for v in value if isinstance(v, (str, int, float))]
        elif isinstance(value, dict):
            out += [str(k) for k in value]
    return tuple(out)


_SHARED_EXPERT = re.compile(r"shared_experts?(?!_gate)")


def _split_by_skips(per: float, skip: tuple[str, ...]) -> dict:
    """Rates per component when the skip list keeps attention or dense MLPs 16-bit.

    NOTE: experts-only checkpoints (Kimi-K2 int4, many W4A16 MoE builds) list
    `re:.*self_attn.*`, `re:.*shared_experts.*`, `re:.*mlp\\.(gate|up|down)_proj.*`.
    """
    low = [s.lower() for s in skip]
    attn = any("self_attn" in s or ".attn" in s or s.endswith("attn") for s in low)
    # NOTE: `mlp.shared_expert_gate` (a tiny gate Qwen3-Next / Qwen3.5 keep 16-bit) is not
    # the shared expert itself
    dense = any(_SHARED_EXPERT.search(s) or ("mlp" in s and "proj" in s) for s in low)
    out = {"linear_bytes_per_param": 2.0 if dense else per}
    if dense:
        out["expert_bytes_per_param"] = per
    if attn:
        out["attention_bytes_per_param"] = 2.0
    return out


def quant_from_config(qc: object, *, where: str) -> QuantSpec | None:
    """A QuantSpec for `quantization_config`, or None when there is none."""
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise SourceError(f"quantization_config is {type(qc).__name__}, not an object", where=where,
                          fix="Fix or re-download config.json")
    if isinstance(qc.get("quantization"), dict):              # ModelOpt hf_quant_config.json
        qc = {"quant_method": "modelopt", **qc["quantization"]}
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower().replace("_", "-")
    if not method:
        if qc.get("load_in_4bit") or qc.get("load_in_8bit"):
            method = "bitsandbytes"
        else:
            return None
    _check_widths(qc, where)
    skip = _names(qc, "modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers",
                  "llm_int8_skip_modules", "ignore_layers")
    if method in ("fp8", "fbgemm-fp8", "ptpc-fp8", "fp-quant"):
        block = qc.get("weight_block_size")
        per, shape = FP8, None
        if isinstance(block, list) and len(block) == 2 and all(
                isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block):
            per += 4 / (block[0] * block[1])                 # one fp32 scale per block
            shape = (block[0], block[1])
        return QuantSpec(method=method.replace("-", "_"), bits=8, unquantized_modules=skip,
                         block_shape=shape, **_split_by_skips(per, skip))
    if method in ("gptq", "awq", "gptq-marlin", "awq-marlin", "marlin", "auto-round", "autoround",
                  "hqq", "gptq-bitblas", "awq-bitblas"):
        bits = _num(qc, "bits", "w_bit", "nbits", "weight_bits") or 4
        group = _num(qc, "group_size", "q_group_size")
        zeros = method.startswith("gptq") or bool(qc.get("zero_point", True))
        lm_head = bool(qc.get("lm_head")) or False
        return QuantSpec(method=method.replace("-", "_"), bits=bits,
                         group_size=int(group) if group else None, lm_head_quantized=lm_head,
                         unquantized_modules=skip, marlin_compatible=_marlin_keys(method, qc),
                         **_split_by_skips(int_bytes(bits, int(group or 0), zeros=zeros), skip))
    if method == "compressed-tensors":
        return _compressed_tensors(qc, skip)
    if method == "mxfp4":
        return QuantSpec(method="mxfp4", bits=4.25, group_size=32, linear_bytes_per_param=2.0,
                         expert_bytes_per_param=MXFP4, attention_bytes_per_param=2.0,
                         unquantized_modules=skip)
    if method == "bitsandbytes":
        four = bool(qc.get("load_in_4bit")) or not qc.get("load_in_8bit")
        per = (0.5 + (1 / 64 + 4 / 64 / 256 if qc.get("bnb_4bit_use_double_quant") else 4 / 64)
               if four else 1.0)
        return QuantSpec(method="bitsandbytes", bits=4 if four else 8, group_size=64 if four else None,
                         linear_bytes_per_param=per, unquantized_modules=skip)
    if method == "modelopt":
        return _modelopt(qc, skip)
    bits = _num(qc, "bits", "w_bit", "num_bits", "weight_bits", "nbits")
    group = _num(qc, "group_size", "q_group_size")
    per = int_bytes(bits, int(group or 0)) if bits else 2.0
    return QuantSpec(method=method, bits=bits, group_size=int(group) if group else None,
                     linear_bytes_per_param=per, unquantized_modules=skip)


def _ct_rate(weights: dict, fmt: str) -> tuple[float, float, float | None]:
    """(bytes/param, bits, group size) of one compressed-tensors weight scheme."""
    bits = _num(weights, "num_bits")
    kind = str(weights.get("type") or "").lower()
    if bits is None:                                         # infer from the format name
        bits = 4 if ("pack" in fmt or "fp4" in fmt) else 8
        kind = "float" if ("float" in fmt or "fp4" in fmt) else "int"
    group = _num(weights, "group_size")
    strategy = str(weights.get("strategy") or "").lower()
    if "nvfp4" in fmt or (kind == "float" and bits == 4):
        return NVFP4, bits, group
    if kind == "float":
        return FP8, bits, group
    sym = weights.get("symmetric", True) is not False
    grouped = strategy in ("group", "") and group and group > 0
    return int_bytes(bits, int(group) if grouped else 0, zeros=not sym), bits, group


def _ct_scheme(group: dict) -> str | None:
    """vLLM's compressed-tensors scheme of one config group (`_get_scheme_from_parts`):
    W8A8-FP8, W8A16-FP8, W8A8-INT8, WNA16 (int weights only), W4A4-FP4 / W4A16-FP4 (NVFP4);
    None for the others (W4A8, 2:4 sparse, MXFP: not checked)."""
    w, a = group.get("weights"), group.get("input_activations")
    if not isinstance(w, dict) or group.get("sparsity_config"):
        return None
    bits, kind = _num(w, "num_bits"), str(w.get("type") or "int").lower()
    act = (_num(a, "num_bits"), str(a.get("type") or "int").lower()) if isinstance(a, dict) \
        else None
    if kind == "float" and bits == 8:
        return "W8A16-FP8" if act is None else ("W8A8-FP8" if act == (8, "float") else None)
    if kind == "float" and bits == 4:
        return "W4A16-FP4" if act is None else ("W4A4-FP4" if act == (4, "float") else None)
    if kind == "int" and bits in (4, 8) and act is None:
        return "WNA16"
    if kind == "int" and bits == 8 and act == (8, "int"):
        return "W8A8-INT8"
    return None


def _ct_part(targets: object) -> str:
    """Which component a config group targets: "experts", "attention" or "linear"."""
    names = " ".join(str(t) for t in targets) if isinstance(targets, list) else ""
    if "expert" in names and "shared" not in names:
        return "experts"
    if "attn" in names:
        return "attention"
    return "linear"


def _compressed_tensors(qc: dict, skip: tuple[str, ...]) -> QuantSpec:
    fmt = str(qc.get("format") or "").lower()
    groups = qc.get("config_groups")
    rates: dict[str, tuple[float, float, float | None]] = {}
    schemes: list[str] = []
    if isinstance(groups, dict):
        for group in groups.values():
            if isinstance(group, dict) and isinstance(group.get("weights"), dict):
                g_fmt = str(group.get("format") or fmt).lower()
                part = _ct_part(group.get("targets"))
                rates.setdefault(part, _ct_rate(group["weights"], g_fmt))
                scheme = _ct_scheme(group)
                if scheme and part != "experts" and scheme not in schemes:
                    schemes.append(scheme)
    if not rates:
        rates["linear"] = _ct_rate({}, fmt)
    # NOTE: the scheme targeting plain Linear layers is the default for every component.
    per, bits, group = rates.get("linear") or next(iter(rates.values()))
    split = _split_by_skips(per, skip)
    if "experts" in rates:
        split["expert_bytes_per_param"] = rates["experts"][0]
        if "linear" not in rates:
            split["linear_bytes_per_param"] = 2.0
    if "attention" in rates:
        split["attention_bytes_per_param"] = rates["attention"][0]
    kv = qc.get("kv_cache_scheme")
    kv_scheme = None
    if isinstance(kv, dict):
        kv_bits = _num(kv, "num_bits")
        kv_scheme = "fp8" if kv_bits == 8 else (f"{int(kv_bits)}bit" if kv_bits else None)
    if split.get("linear_bytes_per_param") == split.get("attention_bytes_per_param") == 2.0:
        schemes = []        # NOTE: experts only (attention and dense MLPs ignored)
    return QuantSpec(method="compressed-tensors", bits=bits,
                     group_size=int(group) if group and group > 0 else None,
                     unquantized_modules=skip, kv_cache_scheme=kv_scheme,
                     linear_schemes=tuple(schemes), **split)


_ALGO_RATE = {"NVFP4": NVFP4, "FP8": FP8, "FP8_PB_WO": FP8, "FP8_PER_CHANNEL_PER_TOKEN": FP8,
              "W4A8_AWQ": 0.5 + 2 / 128, "W4A16_AWQ": 0.5 + 2 / 128, "MXFP4": MXFP4}


def _mixed_rates(layers: object) -> dict:
    """Bytes/param of experts, attention and other linears from ModelOpt's quantized_layers."""
    if not isinstance(layers, dict):
        return {}
    found: dict[str, float] = {}
    for name, info in layers.items():
        algo = info.get("quant_algo") if isinstance(info, dict) else None
        rate = _ALGO_RATE.get(str(algo).upper()) if algo else None
        if rate is None:
            continue
        name = str(name)
        part = ("experts" if "expert" in name and "shared" not in name else
                "attention" if "attn" in name else "linear")
        found.setdefault(part, rate)
    return found


def _modelopt(qc: dict, skip: tuple[str, ...]) -> QuantSpec:
    algo = str(qc.get("quant_algo") or "").upper()
    kv_algo = qc.get("kv_cache_quant_algo")
    kv = str(kv_algo).lower() if isinstance(kv_algo, str) and kv_algo else None
    group = _num(qc, "group_size")
    # NOTE: ModelOpt's exclude list keeps the matching layers 16-bit (`is_layer_excluded`,
    # wildcards such as `model.layers.*.self_attn*`)
    if algo == "NVFP4":
        return QuantSpec(method="modelopt_fp4", bits=4.5, group_size=int(group or 16),
                         unquantized_modules=skip, kv_cache_scheme=kv,
                         **_split_by_skips(NVFP4, skip))
    if algo in ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"):
        return QuantSpec(method="modelopt", bits=8, unquantized_modules=skip,
                         kv_cache_scheme=kv, **_split_by_skips(FP8, skip))
    if algo == "MIXED_PRECISION":
        rates = _mixed_rates(qc.get("quantized_layers"))
        # NOTE: without the per-layer map, assume the common recipe (GLM-5, DeepSeek NVFP4
        # builds): FP8 attention and dense layers, NVFP4 routed experts.
        return QuantSpec(method="modelopt_mixed", bits=None,
                         linear_bytes_per_param=rates.get("linear", FP8),
                         expert_bytes_per_param=rates.get("experts", NVFP4),
                         attention_bytes_per_param=rates.get("attention"),
                         unquantized_modules=skip, kv_cache_scheme=kv)
    if algo.startswith("W4A8"):
        return QuantSpec(method="modelopt", bits=4, group_size=int(group or 128),
                         linear_bytes_per_param=int_bytes(4, int(group or 128), zeros=False),
                         unquantized_modules=skip, kv_cache_scheme=kv)
    return QuantSpec(method="modelopt", linear_bytes_per_param=FP8, unquantized_modules=skip,
                     kv_cache_scheme=kv)
