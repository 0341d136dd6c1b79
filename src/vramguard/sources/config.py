"""A Hugging Face config.json dict -> ModelSpec (pure: no I/O).

`spec_from_config` normalises the many spellings of the same facts (nested text_config /
llm_config, remote-code configs such as Qwen-7B and ChatGLM, GPT-2 style names), picks a
family builder (generic decoder, MLA, Gated-DeltaNet or Mamba hybrid, encoder, ...), and
records the provenance of every field. An architecture it does not know but that has the
standard fields is counted as a dense Llama-like decoder and flagged in `notes`.
"""

from __future__ import annotations

from ..core.maxlen import MAX_LEN_KEYS      # the keys vLLM reads to derive max_model_len
from ..core.model import ModelSpec
from ..core.provenance import Source
from ..errors import SourceError
from . import families
from ._fields import LIMITS, Fields
from .layers import GEMMA3N_TYPES, GEMMA3N_WIDTHS, Arch, Body, build_decoder
from .quant import quant_from_config
from .vision import vision_from_config

_TEXT_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")
_NESTED_SKIP = set(_TEXT_KEYS) | {"vision_config", "audio_config", "quantization_config",
                                  "vision_tokenizer_config", "audio_tokenizer_config"}

MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa",
             "mistral_large_3", "deepseek_vl_v2"}
GDN_TYPES = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
MAMBA_TYPES = {"jamba", "granitemoehybrid", "bamba", "nemotron_h", "falcon_h1"}
# Architectures whose memory-relevant parts the config does not describe well enough: refused
# with the reason rather than planned as their closest family.
UNMODELED_TYPES = {
    # NOTE: vLLM longcat_flash_ngram.py (0.26+): n-gram embedding tables beside the
    # LongCat-Flash layers (and `num_hidden_layers` = 2 x the decoder layers)
    "longcat_flash_ngram": "LongCat-Flash-Lite's n-gram embedding tables are",
}
LINEAR_ATTN_TYPES = {"minimax", "minimax_text_01", "minimax_m1"}
ENCODER_TYPES = {"xlm-roberta", "xlm-roberta-xl", "roberta", "bert", "camembert"}
KNOWN_GENERIC = {
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl",
    "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl", "qwen3_vl_text",
    "qwen3_vl_moe", "qwen3_vl_moe_text", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma4",
    "gemma4_text", "gemma3n", "gemma3n_text", "phi3", "granite", "granitemoe", "granitemoeshared",
    "glm", "glm4", "glm4_moe", "minimax_m2", "llama4", "llama4_text", "apertus", "apertus1p5_text", "exaone", "exaone4",
    "olmo", "olmo2", "olmoe", "gpt_oss", "internlm2", "starcoder2", "cohere", "cohere2",
    "mistral3", "deepseek", "yi", "dots1", "ernie4_5", "ernie4_5_moe", "seed_oss", "hunyuan",
    "stablelm", "nemotron", "phimoe", "arcee", "smollm3", "olmo3", "mimo", "mimo_v2_flash",
    "bailing_moe", "bailing_moe_v2", "hunyuan_v1_dense", "hunyuan_v1_moe", "ministral"}
GPT2_TYPES = {"gpt2", "gpt_bigcode", "bloom"}
# model types whose transformers config defaults tie_word_embeddings to True
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text", "gemma4_text", "gemma3n_text", "opt",
                   "gpt2", "gpt_bigcode", "bloom", "cohere", "cohere2", "lfm2"}
MAMBA_ONLY_TYPES = {"mamba", "falcon_mamba"}
DECI_TYPES = {"nemotron-nas", "deci", "decilm"}

# transformers defaults for keys a (nested) config commonly omits, by model_type.
_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072, "head_dim": 256,
                    "num_key_value_heads": 4, "sliding_window": 4096,
                    "sliding_window_pattern": 6, "tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True}, "gemma": {"tie_word_embeddings": True},
    "gemma4_text": {"tie_word_embeddings": True}, "opt": {"tie_word_embeddings": True},
    "mistral": {"vocab_size": 32000, "max_position_embeddings": 131072},
    "qwen": {"max_position_embeddings": 8192},
}
# remote-code / legacy names -> the standard ones (first present wins).
_ALIASES = {
    "hidden_size": ("hidden_size", "d_model", "n_embd", "n_embed", "model_dim", "dim"),
    "num_hidden_layers": ("num_hidden_layers", "num_layers", "n_layer", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "vocab_size": ("vocab_size", "padded_vocab_size", "n_vocab"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "ffn_dim", "n_inner",
                          "ffn_intermediate_size"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads",
                            "num_key_value_groups_"),
}


def spec_from_config(config: dict, *, name: str, source_ref: str | None = None,
                     origin: Source = Source.CONFIG) -> ModelSpec:
    """Turn a config.json dict into a ModelSpec. Raises SourceError on a bad config.

    `origin` is the Source of values read from the dict (CONFIG, or CATALOG for the
    embedded catalog); computed values are DERIVED.
    """
    where = source_ref or name
    try:
        return _spec(config, name=name, where=where, source_ref=source_ref, origin=origin)
    except SourceError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, ZeroDivisionError,
            OverflowError, RecursionError) as exc:          # NOTE: last-resort translation
        raise SourceError(f"unexpected value in config ({type(exc).__name__}: {exc})"[:300],
                          where=where, fix="Check the config.json against the published one")


def text_view(top: Fields) -> tuple[Fields, str]:
    """The language-model config: nested text/llm config merged over the top level."""
    merged = {k: v for k, v in top.data.items() if k not in _NESTED_SKIP}
    path = ""
    for key in _TEXT_KEYS:
        sub = top.sub(key)
        if sub is not None:
            merged.update(sub.data)
            path = key
            if "architectures" in top.data:
                merged["architectures"] = top.data["architectures"]
            break
    mt = merged.get("model_type")
    if isinstance(mt, str) and mt in PER_LAYER_LIST_TYPES:
        _collapse_per_layer(merged, top.where)
    if mt in GEMMA3N_TYPES and isinstance(merged.get("intermediate_size"), list):
        # NOTE: vLLM gemma3n.py reads `config.intermediate_size[layer_idx]` (MatFormer slices
        # may differ by layer): the list goes to the layers, the largest width is the model's.
        widths = merged["intermediate_size"]
        merged[GEMMA3N_WIDTHS] = widths
        merged["intermediate_size"] = max((w for w in widths if isinstance(w, int)
                                           and not isinstance(w, bool)), default=None)
    defaulted = []
    for k, v in _DEFAULTS.get(mt if isinstance(mt, str) else "", {}).items():
        if merged.get(k) is None:
            merged[k] = v
            defaulted.append(k)
    view = Fields(merged, top.where, path)
    view.defaulted = tuple(defaulted)
    return view, path


# NOTE: Hunyuan's configs give some MoE sizes as one value per layer (vLLM's hunyuan_v1.py
# reads `config.moe_topk[layer_id]`, ...); equal values are that value.
PER_LAYER_LIST_TYPES = {"hunyuan", "hunyuan_v1_moe", "hunyuan_v1_dense"}
_PER_LAYER_KEYS = ("moe_topk", "moe_intermediate_size", "num_shared_expert", "num_experts")


def _collapse_per_layer(merged: dict, where: str) -> None:
    for key in _PER_LAYER_KEYS:
        value = merged.get(key)
        if not isinstance(value, list) or not value:
            continue
        if any(v != value[0] for v in value):
            raise SourceError(f"{key} differs between layers ({sorted(set(map(str, value)))[:4]}); "
                              "vramguard models one value for all layers", where=where,
                              fix="Plan with the largest value in a copy of config.json")
        merged[key] = value[0]


def _first(t: Fields, key: str, **kw) -> tuple[str, int] | None:
    return t.first_int(_ALIASES[key], **kw)


def _spec(config: dict, *, name: str, where: str, source_ref: str | None,
          origin: Source) -> ModelSpec:
    top = Fields(config, where)
    t, nested = text_view(top)
    top_type = (top.str("model_type") or "").lower()
    mt = (t.str("model_type") or top_type).lower()
    notes: list[str] = []
    prov: dict[str, Source] = {"model_type": origin, "architecture": origin}
    archs = top.list("architectures") or t.list("architectures") or []
    architecture = str(archs[0]) if archs else (mt or "unknown")

    if mt in UNMODELED_TYPES:
        raise SourceError(f"{mt}: {UNMODELED_TYPES[mt]} not modelled", where=where,
                          fix="Plan a close relative from the catalog (`vramguard model list`) "
                              "and calibrate it with a real startup log (`vramguard calibrate`)")
    dims = _dims(t, mt, origin, prov)
    family = _family(t, mt, top_type)
    if family == "mamba_only":
        dims.setdefault("num_attention_heads", 0)          # attention-free
    if family == "unknown":
        missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                               "vocab_size", "intermediate_size") if k not in dims]
        if missing:
            raise SourceError(f"unknown architecture {mt or '(no model_type)'} without "
                              f"{', '.join(missing)}", where=where,
                              fix="Pass a complete config.json, or pick a catalog model "
                                  "(`vramguard model list`)")
        notes.append(f"unknown architecture {mt or '(no model_type)'}: derived as a dense "
                     "Llama-like decoder from the standard fields")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        if key not in dims:
            raise SourceError(f"missing {key} (or one of {', '.join(_ALIASES[key][1:])})",
                              where=where, fix="Pass a complete config.json")
    a = _arch(t, mt, dims, origin, prov, notes)
    body = _build(family, a)
    vision = vision_from_config(top, a.hidden, notes)
    quant = quant_from_config(top.data.get("quantization_config",
                                           t.data.get("quantization_config")), where=where)
    if vision:
        prov["vision"] = Source.DERIVED
    if quant:
        prov["quant"] = origin
    max_len, rope = _max_len(t, prov, origin)
    mtp, mtp_layers, mtp_embed, mtp_head = _mtp(t, body, a, notes)
    for key in ("layers", "embed_params", "lm_head_params", "final_norm_params", "extra_params",
                "extra_tp_params"):
        prov[key] = Source.DERIVED
    if body.moe:
        prov["moe"] = origin
    if nested:
        notes.append(f"language model read from {nested}")
    _mark_defaults(t, prov, notes)
    return ModelSpec(
        name=name, architecture=architecture, model_type=top_type or mt,
        num_layers=a.num_layers, hidden_size=a.hidden, num_attention_heads=a.heads,
        num_kv_heads=body.num_kv_heads or a.kv_heads, head_dim=body.head_dim or a.head_dim,
        vocab_size=a.vocab, torch_dtype=_dtype(top, t, prov, origin, notes),
        layers=tuple(body.layers), intermediate_size=a.intermediate, tie_word_embeddings=a.tie,
        embed_params=body.embed, lm_head_params=body.lm_head, final_norm_params=body.final_norm,
        extra_params=body.extra, extra_tp_params=body.extra_tp, max_len_keys=max_len, rope_scaling=rope, moe=body.moe,
        vision=vision, quant=quant, is_encoder_only=body.encoder_only, provenance=prov,
        notes=tuple(notes), source_ref=source_ref, mtp_params=mtp,
        mtp_layers=mtp_layers, mtp_embed_params=mtp_embed, mtp_head_params=mtp_head,
        token_buffer_bytes=body.token_buffer_bytes,
        token_buffer_elems=_ple_buffer_elems(t, architecture, a))


# NOTE: the multimodal Gemma-3n / Gemma-4 classes pre-allocate their per-layer-embedding input
# buffer at init, (max_num_batched_tokens, layers, hidden_size_per_layer_input) in the model
# dtype (vLLM gemma3n_mm.py 0.10.1+, gemma4_mm.py), inside the weights measurement.
_PLE_BUFFER_ARCHS = ("Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration")


def _ple_buffer_elems(t: Fields, architecture: str, a: Arch) -> int:
    if architecture not in _PLE_BUFFER_ARCHS:
        return 0
    ple = t.opt_int("hidden_size_per_layer_input", lo=0, hi=LIMITS["hidden"]) or 0
    return a.num_layers * ple


_DEFAULTED_FIELD = {"vocab_size": "vocab_size", "head_dim": "head_dim",
                    "num_key_value_heads": "num_kv_heads", "max_position_embeddings": "max_len_keys",
                    "tie_word_embeddings": "tie_word_embeddings", "sliding_window": "layers",
                    "sliding_window_pattern": "layers"}


def _mark_defaults(t: Fields, prov: dict, notes: list) -> None:
    """Fields filled from transformers' defaults (absent from the config) are DERIVED."""
    used = t.defaulted
    for key in used:
        if key in _DEFAULTED_FIELD:
            prov[_DEFAULTED_FIELD[key]] = Source.DERIVED
    if used:
        notes.append("absent from the config, taken from transformers defaults: " + ", ".join(used))


def _dims(t: Fields, mt: str, origin: Source, prov: dict) -> dict[str, int]:
    limits = {"hidden_size": LIMITS["hidden"], "num_hidden_layers": LIMITS["layers"],
              "num_attention_heads": LIMITS["heads"], "vocab_size": LIMITS["vocab"],
              "intermediate_size": LIMITS["intermediate"]}
    dims: dict[str, int] = {}
    for key, hi in limits.items():
        hit = _first(t, key, hi=hi)
        if hit:
            dims[key] = hit[1]
            prov[_FIELD[key]] = origin          # read as is, maybe under a legacy name
    if "num_hidden_layers" not in dims:                   # Nemotron-H lists its blocks
        for key in ("hybrid_override_pattern", "layers_block_type", "block_configs"):
            value = t.raw(key)
            if isinstance(value, (str, list)) and 0 < len(value) <= LIMITS["layers"]:
                dims["num_hidden_layers"] = len(value)
                prov["num_layers"] = Source.DERIVED
                break
    if mt in GPT2_TYPES and "intermediate_size" not in dims and "hidden_size" in dims:
        dims["intermediate_size"] = 4 * dims["hidden_size"]     # GPT-2 / BLOOM: 4h
        prov["intermediate_size"] = Source.DERIVED
    if mt == "qwen" and "intermediate_size" in dims:
        dims["intermediate_size"] //= 2            # NOTE: Qwen-7B stores 2x (w1 and w2 halves)
        prov["intermediate_size"] = Source.DERIVED
    return dims


_FIELD = {"hidden_size": "hidden_size", "num_hidden_layers": "num_layers",
          "num_attention_heads": "num_attention_heads", "vocab_size": "vocab_size",
          "intermediate_size": "intermediate_size"}


def _arch(t: Fields, mt: str, dims: dict, origin: Source, prov: dict, notes: list) -> Arch:
    heads = dims["num_attention_heads"]
    hidden = dims["hidden_size"]
    if heads == 0:                                          # attention-free (Mamba)
        return Arch(t=t, model_type=mt, hidden=hidden, num_layers=dims["num_hidden_layers"],
                    heads=0, kv_heads=0, head_dim=0, vocab=dims["vocab_size"],
                    intermediate=dims.get("intermediate_size"),
                    tie=t.bool("tie_word_embeddings"), notes=notes)
    kv = _kv_heads(t, mt, heads, origin, prov)
    if kv > heads:
        raise t.error(f"num_key_value_heads {kv} exceeds num_attention_heads {heads}")
    if heads % kv:
        # NOTE: grouped-query attention repeats each KV head for a whole group of query heads
        raise t.error(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    d_hit = t.first_int(("head_dim", "kv_channels", "hidden_size_per_head", "attention_head_dim"),
                        hi=LIMITS["hidden"])
    if d_hit:
        head_dim = d_hit[1]
        prov["head_dim"] = origin
    else:
        if hidden < heads:
            raise t.error(f"hidden_size {hidden} is smaller than num_attention_heads {heads}")
        head_dim = hidden // heads
        prov["head_dim"] = Source.DERIVED
    tie = t.bool("tie_word_embeddings", default=mt in TIED_BY_DEFAULT)
    prov["tie_word_embeddings"] = origin if t.has("tie_word_embeddings") else Source.DERIVED
    return Arch(t=t, model_type=mt, hidden=hidden, num_layers=dims["num_hidden_layers"],
                heads=heads, kv_heads=kv, head_dim=head_dim, vocab=dims["vocab_size"],
                intermediate=dims.get("intermediate_size"), tie=tie, notes=notes)


def _kv_heads(t: Fields, mt: str, heads: int, origin: Source, prov: dict) -> int:
    if mt == "chatglm":
        if t.bool("multi_query_attention"):
            prov["num_kv_heads"] = origin
            return t.int("multi_query_group_num", hi=LIMITS["heads"])
        prov["num_kv_heads"] = Source.DERIVED
        return heads
    hit = _first(t, "num_key_value_heads", hi=LIMITS["heads"])
    if hit:
        prov["num_kv_heads"] = origin
        return hit[1]
    if t.bool("multi_query"):
        prov["num_kv_heads"] = Source.DERIVED
        return 1
    prov["num_kv_heads"] = Source.DERIVED
    return heads


def _family(t: Fields, mt: str, top_type: str) -> str:
    if mt == "deepseek_v4":
        return "deepseek_v4"
    if mt == "longcat_flash":
        return "longcat"
    # NOTE: vLLM's `is_deepseek_mla`: an MLA model type with a kv_lora_rank (DeepSeek-OCR's
    # DeepSeek-V2 language model has `kv_lora_rank: null`, `use_mla: false`: plain attention)
    if t.has("kv_lora_rank") and (mt in MLA_TYPES or t.has("qk_rope_head_dim")):
        return "mla"
    if mt in GDN_TYPES or top_type in GDN_TYPES or t.has("linear_num_value_heads"):
        return "gdn"
    if mt in MAMBA_TYPES:
        return "mamba"
    if mt in MAMBA_ONLY_TYPES:
        return "mamba_only"
    if mt in DECI_TYPES:
        return "decilm"
    if mt in LINEAR_ATTN_TYPES:
        return "linear"
    if mt == "lfm2":
        return "lfm2"
    if mt in ENCODER_TYPES:
        return "encoder"
    if mt in ("qwen", "chatglm", "opt", "phi"):
        return mt
    if mt in GPT2_TYPES:
        return "gpt2"
    if mt in KNOWN_GENERIC or top_type in KNOWN_GENERIC:
        return "decoder"
    return "unknown"


def _build_gpt2(a: Arch) -> Body:
    body = families.build_simple(a, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False,
                                 layernorm=True)
    positions = a.t.opt_int("n_positions", hi=LIMITS["positions"]) or 0
    body.extra = positions * a.hidden + (2 * a.hidden if a.model_type == "bloom" else 0)
    return body


_BUILDERS = {
    "mla": families.build_mla, "deepseek_v4": families.build_deepseek_v4,
    "longcat": families.build_longcat,
    "gdn": families.build_gdn, "mamba": families.build_mamba_hybrid,
    "linear": families.build_minimax_linear, "lfm2": families.build_lfm2, "mamba_only": families.build_mamba_only,
    "decilm": families.build_decilm, "encoder": families.build_encoder,
    "opt": families.build_opt, "gpt2": _build_gpt2,
    "qwen": lambda a: families.build_simple(a, qkv_bias=True, o_bias=False, mlp_bias=False,
                                            gated=True, layernorm=False),
    "chatglm": lambda a: families.build_simple(
        a, qkv_bias=a.t.bool("add_qkv_bias"), o_bias=a.t.bool("add_bias_linear"),
        mlp_bias=a.t.bool("add_bias_linear"), gated=True,
        layernorm=not a.t.bool("rmsnorm", default=True)),
    "phi": lambda a: families.build_simple(a, qkv_bias=True, o_bias=True, mlp_bias=True,
                                           gated=False, layernorm=True, norms_per_layer=1,
                                           lm_head_bias=True),
}


def _build(family: str, a: Arch) -> Body:
    return _BUILDERS.get(family, build_decoder)(a)


def _max_len(t: Fields, prov: dict, origin: Source) -> tuple[dict[str, int], dict | None]:
    keys = {}
    # NOTE: original_max_position_embeddings (top level: Phi-3/4 LongRoPE) is not a length
    # key; vLLM 0.11.1+ defaults a LongRoPE model to it (`maxlen.derive_max_model_len`)
    for key in (*MAX_LEN_KEYS, "original_max_position_embeddings"):
        value = t.opt_int(key, lo=1, hi=LIMITS["positions"])
        if value is not None:
            keys[key] = value
    prov["max_len_keys"] = origin
    rope = t.dict("rope_scaling")
    params = t.dict("rope_parameters")
    if rope is None and params is not None:
        if isinstance(params.get("full_attention"), dict):      # Gemma 4: per layer type
            params = params["full_attention"]
        rope = params
    if rope is not None:
        _check_rope(t, rope)
        prov["rope_scaling"] = origin
    return keys, rope


def _check_rope(t: Fields, rope: dict) -> None:
    """The numbers consumers read from rope_scaling must be numbers."""
    for key in ("factor", "original_max_position_embeddings"):
        value = rope.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or value != value or not 0 < value < 1e15):
            raise t.error(f"rope_scaling.{key} is {value!r:.40}, not a positive number below "
                          "10^15")
    kind = rope.get("rope_type", rope.get("type"))
    if kind is not None and not isinstance(kind, str):
        raise t.error(f"rope_scaling.rope_type is {kind!r:.40}, not a string")


_FLOAT_DTYPES = frozenset({"float32", "float", "float16", "half", "bfloat16"})


def _dtype(top: Fields, t: Fields, prov: dict, origin: Source, notes: list) -> str:
    for f in (top, t):
        for key in ("torch_dtype", "dtype"):
            value = f.data.get(key)
            if isinstance(value, str) and value:
                prov["torch_dtype"] = origin
                name = value.replace("torch.", "").lower()
                if name not in _FLOAT_DTYPES:
                    notes.append(f"config declares torch_dtype {value!r:.40}, not a dtype vLLM "
                                 "runs a model in: with --dtype auto it falls back to the "
                                 "GPU's 16-bit dtype (bfloat16 on compute capability 8.0+)")
                return name
    prov["torch_dtype"] = Source.DERIVED
    # NOTE: vLLM downcasts float32 configs: to float16 up to 0.9.0; by 0.9.2 to the platform's
    # first supported dtype (`_resolve_auto_dtype`: bfloat16 on compute capability 8.0+).
    notes.append("config declares no torch_dtype: assumed float32 (vLLM --dtype auto serves "
                 "it in 16-bit: bfloat16 on compute capability 8.0+ GPUs from 0.9.2, "
                 "float16 on older GPUs and releases)")
    return "float32"


def _mtp(t: Fields, body: Body, a: Arch, notes: list) -> tuple[int, int, int, int]:
    """(parameters, number, embedding-copy parameters, head-copy parameters) of the MTP
    layers the checkpoint carries (kept out of `layers`)."""
    hit = t.first_int(("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules"),
                      lo=0, hi=LIMITS["layers"])
    if hit is None and a.model_type == "qwen3_next":
        # NOTE: vLLM's qwen3_next_mtp.py builds getattr(config, "num_nextn_predict_layers", 1)
        # MTP layers: Qwen3-Next's config names none, its checkpoint carries one
        hit = ("qwen3_next_mtp default", 1)
    if not hit or not hit[1] or not body.layers:
        return 0, 0, 0, 0
    n, h = hit[1], a.hidden
    # NOTE: DeepSeek-style MTP = one decoder layer + eh_proj (2H x H) + 3 norms, and the
    # checkpoint stores its own copy of the embedding and output head (DeepSeek-V3 685B).
    per_layer = max(l.params.total() for l in body.layers) + 2 * h * h + 3 * h
    copies = hit[0] == "num_nextn_predict_layers" or t.bool("mtp_use_dedicated_embeddings")
    emb, head = (body.embed, body.lm_head or body.embed) if copies else (0, 0)
    per_layer += emb + head
    notes.append(f"{n} MTP layer(s) ({hit[0]}; about {n * per_layer / 1e9:.2f}B params"
                 f"{' incl. their embedding/head copies' if copies else ''}) are in the checkpoint "
                 "but not loaded unless speculative decoding uses them; not counted in the total")
    return n * per_layer, n, n * emb, n * head
