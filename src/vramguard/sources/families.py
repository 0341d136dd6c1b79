"""Decoder families that the generic builder in `layers.py` cannot describe.

MLA (DeepSeek V2/V3, Kimi, GLM-5 DSA), Gated-DeltaNet hybrids (Qwen3-Next, Qwen3.5), Mamba
hybrids (Jamba, Granite-4, Nemotron-H, Bamba), MiniMax lightning attention, and a few older
layouts (Qwen-7B remote code, ChatGLM, OPT, Phi-2, BERT-style encoders, DeepSeek V4).
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..core.model import (CSA, FULL, MAMBA, MLA, NONE, AttentionSpec, LayerParams, LayerSpec,
                          MambaState)
from ._fields import LIMITS
from .layers import (Arch, Body, attn_params, attention_spec, ffn_params, layer_kinds, mlp_params,
                     moe_layer_mask, moe_of, moe_params, qk_norm_params, standard_body)


# ---- MLA ------------------------------------------------------------------------------------
# NOTE: transformers' config defaults for `v_head_dim` where a config.json leaves it out (vLLM
# reads `config.v_head_dim` from the loaded config): GLM-5 / GLM-4.7-Flash 256 (e.g.
# nvidia/GLM-5.3-NVFP4 omits it), the DeepSeek family, Kimi and LongCat 128.
MLA_V_HEAD_DIM_DEFAULTS = {"glm_moe_dsa": 256, "glm4_moe_lite": 256, "deepseek_v2": 128,
                           "deepseek_v3": 128, "deepseek_v32": 128, "kimi_k2": 128,
                           "kimi_linear": 128, "longcat_flash": 128}


def build_mla(a: Arch) -> Body:
    """DeepSeek-V2/V3 style multi-head latent attention (+ MoE, + the V3.2 / GLM-5 indexer)."""
    t, h, nh = a.t, a.hidden, a.heads
    kv_rank = t.int("kv_lora_rank", hi=LIMITS["hidden"])
    q_rank = t.opt_int("q_lora_rank", hi=LIMITS["hidden"])
    rope = t.int("qk_rope_head_dim", hi=LIMITS["hidden"])
    nope = t.int("qk_nope_head_dim", hi=LIMITS["hidden"])
    v_dim = t.int("v_head_dim", default=MLA_V_HEAD_DIM_DEFAULTS.get(a.model_type, nope),
                  hi=LIMITS["hidden"])
    qk = nope + rope
    moe = moe_of(a)
    mask = moe_layer_mask(a, moe)
    idx_heads = t.opt_int("index_n_heads", hi=LIMITS["heads"])
    idx_dim = t.opt_int("index_head_dim", hi=LIMITS["hidden"])
    idx_types = t.list("indexer_types")
    layers = []
    for i in range(a.num_layers):
        p = mla_attention_params(h, nh, kv_rank=kv_rank, q_rank=q_rank, rope=rope, nope=nope,
                                 v_dim=v_dim)
        indexer = bool(idx_heads and idx_dim and (idx_types is None or i >= len(idx_types)
                                                  or str(idx_types[i]) == "full"))
        if indexer:
            p["attn_replicated"] += (q_rank or h) * idx_heads * idx_dim + h * idx_dim + h * idx_heads
            p["norms"] += 2 * idx_dim
        p.update(ffn_params(a, moe, mask[i]))
        # NOTE: num_kv_heads stays None: kv_b_proj is split over all heads (spec.num_kv_heads)
        # NOTE: the indexer's key cache is fp8 + one fp32 scale per 128 values (vLLM
        # DeepseekV32IndexerCache), whatever the KV cache dtype: 128 + 4 = 132 bytes.
        att = AttentionSpec(kind=MLA, mla_kv_lora_rank=kv_rank, mla_rope_head_dim=rope,
                            mla_qk_nope_head_dim=nope,
                            indexer_bytes_per_token=(idx_dim + idx_dim // 128 * 4) if indexer else 0)
        layers.append(LayerSpec(att, LayerParams(**p)))
    topk_bytes = 0
    if idx_heads and idx_dim:
        n_idx = sum(l.attention.indexer_bytes_per_token > 0 for l in layers)
        a.notes.append(f"sparse-attention indexer ({idx_heads} heads x {idx_dim}) on {n_idx} "
                       f"layer(s) keeps an fp8 key cache of {idx_dim + idx_dim // 128 * 4} bytes "
                       "per token per layer, included in the KV bytes per token")
        # NOTE: the model allocates its top-k index buffer at init (max_num_batched_tokens x
        # index_topk int32, `topk_indices_buffer`), inside vLLM's weights measurement.
        topk_bytes = 4 * (t.opt_int("index_topk", hi=LIMITS["positions"]) or 0)
    return standard_body(a, layers, moe, num_kv_heads=nh, head_dim=qk,
                         token_buffer_bytes=topk_bytes)


def mla_attention_params(h: int, nh: int, *, kv_rank: int, q_rank: int | None, rope: int,
                         nope: int, v_dim: int) -> dict:
    """One MLA attention block's parameters (vLLM DeepseekV2MLAAttention) and its two
    pre-norms (the input and post-attention RMSNorms of a decoder layer)."""
    p = {"attn_replicated": h * (kv_rank + rope), "norms": 2 * h + kv_rank,
         "attn_kv": kv_rank * nh * (nope + v_dim), "attn_o": nh * v_dim * h}
    if q_rank:
        p["attn_replicated"] += h * q_rank
        p["attn_q"] = q_rank * nh * (nope + rope)
        p["norms"] += q_rank
    else:
        p["attn_q"] = h * nh * (nope + rope)
    return p


def build_longcat(a: Arch) -> Body:
    """LongCat-Flash (vLLM longcat_flash.py, 0.11+): each decoder layer runs two MLA
    attentions and two dense MLPs around one shortcut MoE whose router also scores
    `zero_expert_num` weightless identity experts (an fp32 router with a score bias)."""
    t, h, nh = a.t, a.hidden, a.heads
    kv_rank = t.int("kv_lora_rank", hi=LIMITS["hidden"])
    dims = {"kv_rank": kv_rank, "q_rank": t.opt_int("q_lora_rank", hi=LIMITS["hidden"]),
            "rope": t.int("qk_rope_head_dim", hi=LIMITS["hidden"]),
            "nope": t.int("qk_nope_head_dim", hi=LIMITS["hidden"]),
            "v_dim": t.int("v_head_dim", default=MLA_V_HEAD_DIM_DEFAULTS["longcat_flash"],
                           hi=LIMITS["hidden"])}
    moe = moe_of(a)
    if moe is None:
        raise t.error("LongCat-Flash config without n_routed_experts")
    one = mla_attention_params(h, nh, **dims)
    p = {k: 2 * v for k, v in one.items()}
    p["mlp"] = 2 * mlp_params(h, a.intermediate or 0)
    p.update(moe_params(a, moe))
    # NOTE: the router scores the real and the zero experts (vLLM LongcatRouter: a classifier
    # of n_routed_experts + zero_expert_num outputs and an e_score_correction_bias of as many),
    # kept in fp32 (router_dtype); the zero experts have no weights.
    scored = moe.num_experts + (t.opt_int("zero_expert_num", lo=0, hi=LIMITS["experts"]) or 0)
    p["router"] = h * scored + scored
    att = AttentionSpec(kind=MLA, mla_kv_lora_rank=kv_rank, mla_rope_head_dim=dims["rope"],
                        mla_qk_nope_head_dim=dims["nope"], cache_layers=2)
    layers = [LayerSpec(att, LayerParams(**p, router_fp32=True)) for _ in range(a.num_layers)]
    zero = scored - moe.num_experts
    a.notes.append("two MLA attentions and two dense MLPs per decoder layer (2 x "
                   f"{a.num_layers} KV cache layers), {moe.num_experts} experts + {zero} "
                   "weightless zero experts in an fp32 router")
    return standard_body(a, layers, moe, num_kv_heads=nh, head_dim=dims["nope"] + dims["rope"])


# ---- Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5) ------------------------------------------
def build_gdn(a: Arch) -> Body:
    t, h = a.t, a.hidden
    if t.list("layer_types") is not None:
        kinds = layer_kinds(a)
    else:
        every = t.int("full_attention_interval", default=4, hi=LIMITS["layers"])
        kinds = [FULL if (i + 1) % every == 0 else MAMBA for i in range(a.num_layers)]
    nk = t.int("linear_num_key_heads", hi=LIMITS["heads"])
    nv = t.int("linear_num_value_heads", hi=LIMITS["heads"])
    dk = t.int("linear_key_head_dim", hi=LIMITS["hidden"])
    dv = t.int("linear_value_head_dim", hi=LIMITS["hidden"])
    k = t.int("linear_conv_kernel_dim", default=4, hi=1024)
    conv_dim = 2 * nk * dk + nv * dv
    # NOTE: Qwen3.5's config hook hands vLLM its `mamba_ssm_dtype` (0.17+); Qwen3-Next has none.
    qwen35 = a.model_type.startswith("qwen3_5")
    state = MambaState(kind="gdn", conv_shape=(conv_dim, k - 1), ssm_shape=(nv, dv, dk),
                       ssm_dtype=t.str("mamba_ssm_dtype") if qwen35 else None,
                       ssm_hook="qwen3_5" if qwen35 else None)
    mixer = (h * (conv_dim + nv * dv + 2 * nv) + conv_dim * k + 2 * nv + dv + nv * dv * h)
    moe = moe_of(a)
    mask = moe_layer_mask(a, moe)
    q_gate = t.bool("attn_output_gate", default=True)
    layers = []
    for i, kind in enumerate(kinds):
        if kind == MAMBA:
            p = {"mixer": mixer, "norms": 2 * h}
            att = AttentionSpec(kind=MAMBA, mamba=state)
        else:
            p = attn_params(h, a.heads, a.kv_heads, a.head_dim, q_gate=q_gate)
            p["norms"] = 2 * h + 2 * a.head_dim
            att = attention_spec(kind, a.kv_heads, a.head_dim, a)
        p.update(ffn_params(a, moe, mask[i]))
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers, moe)


# ---- Mamba hybrids --------------------------------------------------------------------------
def mamba_chunk_size(a: Arch) -> int:
    """The config's Mamba chunk size, as vLLM's `ModelConfig.get_mamba_chunk_size` reads it
    (`mamba_chunk_size`, else `chunk_size`; 0: none given, vLLM then takes 2048)."""
    t = a.t
    return (t.opt_int("mamba_chunk_size", lo=1, hi=1 << 20)
            or t.opt_int("chunk_size", lo=1, hi=1 << 20) or 0)


def mamba2_layer(a: Arch, *, heads: int, head_dim: int, state: int, groups: int, conv: int,
                 conv_bias: bool = True, ssm_dtype: str | None = None,
                 ssm_hook: str | None = None, norm: bool = True,
                 proj_bias: bool = False) -> tuple[int, MambaState]:
    """vLLM's MambaMixer2: in_proj (z, x, B, C, dt), the conv, A/D/dt_bias, the gated norm's
    weight (`use_rms_norm`), out_proj; and its state."""
    h = a.hidden
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    params = (h * (inner + conv_dim + heads) + conv_dim * conv + (conv_dim if conv_bias else 0)
              + 3 * heads + (inner if norm else 0) + inner * h)
    if proj_bias:
        params += inner + conv_dim + heads + h
    st = MambaState(kind="mamba2", conv_shape=(conv_dim, conv - 1), ssm_shape=(heads, head_dim, state),
                    ssm_dtype=ssm_dtype, ssm_hook=ssm_hook, groups=groups, group_state=state,
                    chunk_size=mamba_chunk_size(a))
    return params, st


def build_mamba_hybrid(a: Arch) -> Body:
    """Jamba (Mamba1), Granite-4 / Bamba / Nemotron-H (Mamba2), with attention and MoE."""
    t, h, mt, n = a.t, a.hidden, a.model_type, a.num_layers
    moe = moe_of(a)
    if mt == "jamba":
        return _jamba(a, moe)
    if mt == "nemotron_h":
        return _nemotron_h(a, moe)
    if mt == "falcon_h1":
        return _falcon_h1(a)
    kinds = layer_kinds(a) if t.list("layer_types") is not None else [
        FULL if i in set(t.int_list("attn_layer_indices", lo=0, hi=LIMITS["layers"]) or []) else MAMBA
        for i in range(n)]
    heads = t.int("mamba_n_heads", hi=LIMITS["heads"])
    auto_hd = (t.int("mamba_expand", default=2, hi=64) * h) // heads
    hd = auto_hd if t.raw("mamba_d_head") == "auto" else t.int(
        "mamba_d_head", default=auto_hd, hi=LIMITS["hidden"])
    mixer, st = mamba2_layer(a, heads=heads, head_dim=hd, state=t.int("mamba_d_state", hi=65536),
                             groups=t.int("mamba_n_groups", default=1, hi=LIMITS["heads"]),
                             conv=t.int("mamba_d_conv", default=4, hi=1024),
                             conv_bias=t.bool("mamba_conv_bias", default=True))
    shared_i = t.opt_int("shared_intermediate_size", lo=0, hi=LIMITS["intermediate"])
    layers = []
    for kind in kinds:
        if kind == MAMBA:
            p = {"mixer": mixer}
            att = AttentionSpec(kind=MAMBA, mamba=st)
        else:
            p = attn_params(h, a.heads, a.kv_heads, a.head_dim)
            att = attention_spec(kind, a.kv_heads, a.head_dim, a)
        p["norms"] = 2 * h
        if moe is not None:
            p.update(moe_params(a, moe))
        elif shared_i or a.intermediate:
            p["mlp"] = mlp_params(h, shared_i or a.intermediate or 0)
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers, moe)


def _falcon_h1(a: Arch) -> Body:
    """Falcon-H1: every layer runs attention and a Mamba2 mixer side by side, then the MLP
    (vLLM falcon_h1.py `FalconH1ParallelHybrid`): each layer keeps a KV cache and a Mamba
    state (the mixer registered as layer `num_hidden_layers + i`)."""
    t, h = a.t, a.hidden
    heads = t.int("mamba_n_heads", hi=LIMITS["heads"])
    d_ssm = t.opt_int("mamba_d_ssm", hi=LIMITS["hidden"]) or int(
        t.float("mamba_expand", 2.0) * h)
    hd = max(1, d_ssm // heads) if t.raw("mamba_d_head") in (None, "auto") else t.int(
        "mamba_d_head", hi=LIMITS["hidden"])
    mixer, st = mamba2_layer(a, heads=heads, head_dim=hd, state=t.int("mamba_d_state", hi=65536),
                             groups=t.int("mamba_n_groups", default=1, hi=LIMITS["heads"]),
                             conv=t.int("mamba_d_conv", default=4, hi=1024),
                             conv_bias=t.bool("mamba_conv_bias", default=True),
                             norm=t.bool("mamba_rms_norm"), proj_bias=t.bool("mamba_proj_bias"))
    if not a.intermediate:
        raise t.error("missing intermediate_size")
    att = replace(attention_spec(FULL, a.kv_heads, a.head_dim, a), mamba=st)
    p = attn_params(h, a.heads, a.kv_heads, a.head_dim)
    p.update(mixer=mixer, norms=2 * h, mlp=mlp_params(h, a.intermediate))
    layers = [LayerSpec(att, LayerParams(**p)) for _ in range(a.num_layers)]
    a.notes.append("parallel hybrid: each layer keeps a KV cache and a Mamba2 state")
    return standard_body(a, layers)


def build_lfm2(a: Arch) -> Body:
    """LFM2: short-convolution layers (a per-request conv state of conv_dim x (L_cache - 1))
    and a few GQA attention layers with q/k norms, each with a SwiGLU MLP whose width vLLM's
    Lfm2MLP adjusts (2/3, the multiplier, rounded up to `block_multiple_of`)."""
    t, h, n = a.t, a.hidden, a.num_layers
    types = t.str_list("layer_types")
    if types is None:
        idx = set(t.int_list("full_attn_idxs", lo=0, hi=LIMITS["layers"]) or [])
        types = ["full_attention" if i in idx else "conv" for i in range(n)]
    dim = t.int("conv_dim", default=h, hi=LIMITS["hidden"])
    k = t.int("conv_L_cache", default=3, hi=1024)
    bias = t.bool("conv_bias")
    # conv (dim x L_cache), in_proj (3 x dim), out_proj; a bias on each when conv_bias
    conv_params = dim * k + 3 * dim * h + dim * dim + (5 * dim if bias else 0)
    state = MambaState(kind="short_conv", conv_shape=(dim, k - 1), ssm_shape=())
    ff = _lfm2_ff_dim(a)
    layers = []
    for i in range(n):
        if i < len(types) and types[i] == "full_attention":
            p = attn_params(h, a.heads, a.kv_heads, a.head_dim)
            p["norms"] = 2 * h + 2 * a.head_dim
            att = attention_spec(FULL, a.kv_heads, a.head_dim, a)
        else:
            p = {"mixer": conv_params, "norms": 2 * h}
            att = AttentionSpec(kind=MAMBA, mamba=state)
        p["mlp"] = mlp_params(h, ff)
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers)


def _lfm2_ff_dim(a: Arch) -> int:
    t = a.t
    ff = t.opt_int("block_ff_dim", hi=LIMITS["intermediate"]) or a.intermediate
    if not ff:
        raise t.error("missing block_ff_dim (or intermediate_size)")
    if t.bool("block_auto_adjust_ff_dim"):
        ff = int(2 * ff / 3)
        mult = t.float("block_ffn_dim_multiplier")
        if mult is not None:
            ff = int(mult * ff)
        m = t.int("block_multiple_of", default=256, hi=LIMITS["intermediate"])
        ff = m * ((ff + m - 1) // m)
    return ff


def _jamba(a: Arch, moe) -> Body:
    t, h = a.t, a.hidden
    period = t.int("attn_layer_period", default=8, hi=LIMITS["layers"])
    offset = t.int("attn_layer_offset", default=4, lo=0, hi=LIMITS["layers"])
    e_period = t.int("expert_layer_period", default=2, hi=LIMITS["layers"])
    e_offset = t.int("expert_layer_offset", default=1, lo=0, hi=LIMITS["layers"])
    inner = t.int("mamba_expand", default=2, hi=64) * h
    state = t.int("mamba_d_state", default=16, hi=65536)
    conv = t.int("mamba_d_conv", default=4, hi=1024)
    raw_rank = t.raw("mamba_dt_rank", "auto")
    dt_rank = math.ceil(h / 16) if raw_rank == "auto" else t.int("mamba_dt_rank", hi=LIMITS["hidden"])
    mixer = (h * 2 * inner + inner * conv + inner + inner * (dt_rank + 2 * state)
             + dt_rank * inner + inner + inner * state + inner + inner * h + dt_rank + 2 * state)
    st = MambaState(kind="mamba1", conv_shape=(inner, conv - 1), ssm_shape=(inner, state),
                    chunk_size=mamba_chunk_size(a))
    layers = []
    for i in range(a.num_layers):
        if i % period == offset:
            p = attn_params(h, a.heads, a.kv_heads, a.head_dim)
            att = attention_spec(FULL, a.kv_heads, a.head_dim, a)
        else:
            p = {"mixer": mixer}
            att = AttentionSpec(kind=MAMBA, mamba=st)
        p["norms"] = 2 * h
        p.update(ffn_params(a, moe, i % e_period == e_offset))
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers, moe)


_BLOCK_CHARS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def block_pattern(t) -> str:
    """Nemotron-H block pattern: hybrid_override_pattern, or layers_block_type as chars."""
    pattern = t.str("hybrid_override_pattern")
    if pattern is None:
        types = t.str_list("layers_block_type") or []
        pattern = "".join(_BLOCK_CHARS.get(x.lower(), "-") for x in types)
    return pattern


def _nemotron_h(a: Arch, moe) -> Body:
    """Nemotron-H: one block per pattern char: M mamba2, * attention, - MLP, E MoE."""
    t, h = a.t, a.hidden
    pattern = block_pattern(t)
    if len(pattern) < a.num_layers:
        raise t.error(f"hybrid_override_pattern has {len(pattern)} blocks for {a.num_layers} layers")
    heads = t.int("mamba_num_heads", hi=LIMITS["heads"])
    mixer, st = mamba2_layer(a, heads=heads, head_dim=t.int("mamba_head_dim", hi=LIMITS["hidden"]),
                             state=t.int("ssm_state_size", hi=65536),
                             groups=t.int("n_groups", default=1, hi=LIMITS["heads"]),
                             conv=t.int("conv_kernel", default=4, hi=1024),
                             conv_bias=t.bool("use_conv_bias", default=True),
                             ssm_dtype=t.str("mamba_ssm_cache_dtype"), ssm_hook="nemotron_h")
    layers = []
    for ch in pattern[:a.num_layers]:
        att = AttentionSpec(kind=NONE)
        if ch == "M":
            p = {"mixer": mixer}
            att = AttentionSpec(kind=MAMBA, mamba=st)
        elif ch == "*":
            p = attn_params(h, a.heads, a.kv_heads, a.head_dim)
            att = attention_spec(FULL, a.kv_heads, a.head_dim, a)
        elif ch == "E" and moe is not None:
            p = moe_params(a, moe)
        else:
            p = {"mlp": mlp_params(h, a.intermediate or 0, gated=False)}
        p["norms"] = h
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers, moe)


def build_mamba_only(a: Arch) -> Body:
    """Pure Mamba1 stacks (state-spaces Mamba, Falcon-Mamba): no attention, no KV cache."""
    t, h = a.t, a.hidden
    inner = a.intermediate or t.int("expand", default=2, hi=64) * h
    state = t.int("state_size", default=16, hi=65536)
    conv = t.int("conv_kernel", default=4, hi=1024)
    raw_rank = t.raw("time_step_rank", "auto")
    dt_rank = math.ceil(h / 16) if raw_rank == "auto" else t.int("time_step_rank", hi=LIMITS["hidden"])
    conv_bias = inner if t.bool("use_conv_bias", default=True) else 0
    bias = t.bool("use_bias")
    mixer = (h * 2 * inner + (2 * inner if bias else 0) + inner * conv + conv_bias
             + inner * (dt_rank + 2 * state) + dt_rank * inner + inner + inner * state + inner
             + inner * h + (h if bias else 0))
    st = MambaState(kind="mamba1", conv_shape=(inner, conv - 1), ssm_shape=(inner, state),
                    chunk_size=mamba_chunk_size(a))
    layers = [LayerSpec(AttentionSpec(kind=MAMBA, mamba=st), LayerParams(mixer=mixer, norms=h))
              for _ in range(a.num_layers)]
    return standard_body(a, layers, num_kv_heads=0, head_dim=0)


def build_decilm(a: Arch) -> Body:
    """Nemotron-NAS (DeciLM): per-layer block_configs with pruned attention / FFN widths."""
    t, h = a.t, a.hidden
    blocks = t.list("block_configs") or []
    if len(blocks) < a.num_layers:
        raise t.error(f"block_configs has {len(blocks)} entries for {a.num_layers} layers")
    layers = []
    for i, block in enumerate(blocks[:a.num_layers]):
        if not isinstance(block, dict):
            raise t.error(f"block_configs[{i}] is not an object")
        att_cfg = block.get("attention") if isinstance(block.get("attention"), dict) else {}
        ffn_cfg = block.get("ffn") if isinstance(block.get("ffn"), dict) else {}
        p: dict = {"norms": 0}
        att = AttentionSpec(kind=NONE)
        if att_cfg.get("replace_with_linear"):
            p["attn_o"], p["norms"] = h * h, h
        elif not att_cfg.get("no_op"):
            group = t.check_int(att_cfg.get("n_heads_in_group"), f"block_configs[{i}].attention."
                                "n_heads_in_group", 1, LIMITS["heads"])
            nkv = max(1, a.heads // group)
            p.update(attn_params(h, a.heads, nkv, a.head_dim))
            p["norms"] = h
            att = attention_spec(FULL, nkv, a.head_dim, a)
        if ffn_cfg.get("replace_with_linear"):
            p["mlp"], p["norms"] = h * h, p["norms"] + h
        elif not ffn_cfg.get("no_op"):
            mult = ffn_cfg.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult < 1000:
                raise t.error(f"block_configs[{i}].ffn.ffn_mult is {mult!r:.20}")
            inter = int(2 * mult * h / 3)
            inter += -inter % 256                          # rounded up to a multiple of 256
            p["mlp"], p["norms"] = mlp_params(h, inter), p["norms"] + h
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers)


def build_minimax_linear(a: Arch) -> Body:
    """MiniMax-Text-01: attn_type_list 0 = lightning (linear) attention, 1 = softmax attention."""
    t, h = a.t, a.hidden
    types = t.int_list("attn_type_list", lo=0, hi=1) or [1] * a.num_layers
    moe = moe_of(a)
    d = a.head_dim
    lin_state = MambaState(kind="linear_attention", conv_shape=(), ssm_shape=(a.heads, d, d))
    layers = []
    for i in range(a.num_layers):
        if i < len(types) and types[i] == 0:
            p = {"mixer": h * 4 * a.heads * d + a.heads * d * h + a.heads * d}
            att = AttentionSpec(kind=MAMBA, mamba=lin_state)
        else:
            p = attn_params(h, a.heads, a.kv_heads, d)
            att = attention_spec(FULL, a.kv_heads, d, a)
        p["norms"] = 2 * h + qk_norm_params(a.model_type, t, a.heads, a.kv_heads, d)
        p.update(ffn_params(a, moe, True))
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers, moe)


# ---- older and odd layouts ------------------------------------------------------------------
def build_simple(a: Arch, *, qkv_bias: bool, o_bias: bool, mlp_bias: bool, gated: bool,
                 layernorm: bool, norms_per_layer: int = 2, lm_head_bias: bool = False) -> Body:
    """Uniform full-attention stacks (Qwen-7B, ChatGLM, OPT, Phi-2)."""
    h = a.hidden
    nsize = 2 * h if layernorm else h
    p = attn_params(h, a.heads, a.kv_heads, a.head_dim, qkv_bias=qkv_bias, o_bias=o_bias)
    p["mlp"] = mlp_params(h, a.intermediate or 0, gated=gated, bias=mlp_bias)
    p["norms"] = norms_per_layer * nsize
    att = attention_spec(FULL, a.kv_heads, a.head_dim, a)
    layers = [LayerSpec(att, LayerParams(**p)) for _ in range(a.num_layers)]
    return Body(layers=layers, embed=a.vocab * h, final_norm=nsize,
                lm_head=0 if a.tie else a.vocab * h + (a.vocab if lm_head_bias else 0))


def build_opt(a: Arch) -> Body:
    t, h = a.t, a.hidden
    body = build_simple(a, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, layernorm=True)
    proj = t.opt_int("word_embed_proj_dim", hi=LIMITS["hidden"]) or h
    max_pos = t.int("max_position_embeddings", default=2048, hi=LIMITS["positions"])
    body.embed = a.vocab * proj
    body.extra = (max_pos + 2) * h + (2 * proj * h if proj != h else 0)
    if not t.bool("do_layer_norm_before", default=True) or proj != h:
        body.final_norm = 0 if proj != h else body.final_norm
    if not a.tie:
        body.lm_head = a.vocab * proj
    return body


def build_encoder(a: Arch) -> Body:
    """BERT / RoBERTa / XLM-R encoders (embedding models): no KV cache."""
    t, h = a.t, a.hidden
    p = attn_params(h, a.heads, a.kv_heads, a.head_dim, qkv_bias=True, o_bias=True)
    p["mlp"] = mlp_params(h, a.intermediate or 4 * h, gated=False, bias=True)
    p["norms"] = 4 * h
    # NOTE: no KV cache in V1; v0 allocates one for the encoder's attention all the same
    # (kv.py reads the heads there)
    att = AttentionSpec(kind=NONE, num_kv_heads=a.kv_heads, head_dim=a.head_dim)
    layers = [LayerSpec(att, LayerParams(**p)) for _ in range(a.num_layers)]
    max_pos = t.int("max_position_embeddings", default=512, hi=LIMITS["positions"])
    types = t.int("type_vocab_size", default=2, lo=0, hi=LIMITS["vocab"])
    pooler = h * h + h if (t.str("model_type") or "").startswith(("xlm-roberta", "roberta", "bert")) else 0
    return Body(layers=layers, embed=a.vocab * h, extra=(max_pos + types) * h + 2 * h + pooler,
                encoder_only=True)


def build_deepseek_v4(a: Arch) -> Body:
    """DeepSeek-V4: one shared KV head, grouped low-rank output, KV compressors + indexer.

    Parameters follow the reference layout (wq_a/wq_b, wkv, wo_a (grouped) / wo_b,
    attention sinks; per compressed layer a compressor with wkv/wgate/ape, doubled for
    ratio 4; on ratio-4 layers an indexer with its own compressor). Hyper-connection
    mixing weights (a few hundred thousand per layer) are left out.
    """
    t, h, nh = a.t, a.hidden, a.heads
    q_rank = t.int("q_lora_rank", hi=LIMITS["hidden"])
    o_rank = t.int("o_lora_rank", default=q_rank, hi=LIMITS["hidden"])
    d = a.head_dim
    groups = t.int("o_groups", default=1, hi=LIMITS["heads"])
    moe = moe_of(a)
    ratios = t.int_list("compress_ratios", lo=0, hi=1 << 20) or []
    idx_heads = t.opt_int("index_n_heads", hi=LIMITS["heads"]) or 0
    idx_dim = t.opt_int("index_head_dim", hi=LIMITS["hidden"]) or 0
    window = t.opt_int("sliding_window", hi=LIMITS["positions"])

    def compressor(ratio: int, dim: int) -> int:
        width = (2 if ratio == 4 else 1) * dim
        return 2 * h * width + ratio * width + dim

    layers = []
    for i in range(a.num_layers):
        ratio = ratios[i] if i < len(ratios) else 0
        p = {"attn_replicated": h * q_rank + h * d, "attn_q": q_rank * nh * d + nh,
             "attn_o": nh * d * o_rank + groups * o_rank * h, "norms": 2 * h + q_rank + d}
        if ratio:
            p["attn_replicated"] += compressor(ratio, d)
        if ratio == 4 and idx_heads and idx_dim:
            p["attn_replicated"] += (q_rank * idx_heads * idx_dim + h * idx_heads
                                     + compressor(ratio, idx_dim))
        p.update(ffn_params(a, moe, True))
        att = AttentionSpec(kind=CSA, num_kv_heads=1, head_dim=d, v_head_dim=0,
                            sliding_window_tokens=window, compress_ratio=ratio,
                            indexer_head_dim=idx_dim if ratio == 4 and idx_heads else 0)
        layers.append(LayerSpec(att, LayerParams(**p)))
    return standard_body(a, layers, moe, num_kv_heads=1, head_dim=d)
