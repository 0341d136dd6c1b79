"""Per-layer attention kinds and parameter counts of decoder families, from a text config.

Counting conventions (checked against published parameter counts in the tests):
- linear weights plus their biases; RMSNorm = H, LayerNorm = 2H parameters;
- sharding follows `LayerParams`: q/o/mlp/mixer split by TP, K/V by min(TP, kv heads),
  routed experts by TP (or EP), routers, norms and MLA down-projections replicated;
- MTP / next-token-prediction layers are not part of the model vLLM loads by default, so they
  are left out of the layers; `config.py` reports them in `ModelSpec.mtp_params` and notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.model import (CHUNKED, FULL, MAMBA, NONE, SLIDING, AttentionSpec, LayerParams,
                          LayerSpec, MoESpec)
from ._fields import LIMITS, Fields

# Families whose MLP is up/down only (no gate projection).
NON_GATED_MLP = {"apertus", "apertus1p5_text", "starcoder2", "nemotron", "gpt_bigcode", "gpt2",
                 "phi", "opt", "falcon", "gpt_neox", "gptj", "mpt", "bloom", "nemotron_h"}
# Families with a bias on q/k/v (and not on o) when the config has no `attention_bias` key.
QKV_BIAS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text",
            "glm", "glm4", "chatglm", "qwen"}
# Families with four norms per layer (pre/post attention, pre/post MLP).
FOUR_NORMS = {"gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text", "gemma3n",
              "gemma3n_text", "glm4"}
# One norm per layer (parallel attention + MLP blocks).
ONE_NORM = {"cohere", "cohere2"}
# q_norm/k_norm over head_dim ("head") or over all heads ("full").
QK_NORM_HEAD = {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_vl_text", "qwen3_vl_moe_text",
                "qwen3_5_text", "qwen3_5_moe_text", "gemma3", "gemma3_text", "gemma4",
                "gemma4_text", "gemma3n", "gemma3n_text", "apertus", "apertus1p5_text",
                "exaone4", "dots1"}
QK_NORM_FULL = {"olmo2", "olmo3", "olmoe", "minimax_m2"}
LAYERNORM = {"opt", "phi", "starcoder2", "gpt2", "gpt_bigcode", "falcon", "gpt_neox",
             "xlm-roberta", "bert", "roberta", "stablelm", "persimmon"}


@dataclass
class Arch:
    """The common dimensions of a decoder, read and checked by `config.py`."""

    t: Fields
    model_type: str
    hidden: int
    num_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int | None
    tie: bool
    notes: list[str] = field(default_factory=list)


@dataclass
class Body:
    """What a family builder returns: layers plus the non-layer parameters."""

    layers: list[LayerSpec]
    moe: MoESpec | None = None
    embed: int = 0
    lm_head: int = 0
    final_norm: int = 0
    extra: int = 0
    extra_tp: int = 0                # model-level weights split over TP (`extra_tp_params`)
    encoder_only: bool = False
    num_kv_heads: int | None = None
    head_dim: int | None = None
    token_buffer_bytes: int = 0      # bytes per batched token allocated at model init


# ---- building blocks -------------------------------------------------------------------
def norm_size(model_type: str, hidden: int) -> int:
    return 2 * hidden if model_type in LAYERNORM else hidden


def attn_params(h: int, nh: int, nkv: int, d: int, *, qkv_bias: bool = False,
                o_bias: bool = False, q_gate: bool = False, v_dim: int | None = None,
                no_v: bool = False) -> dict:
    """q/kv/o parameter counts of one attention block (weights + biases)."""
    q_out = nh * d * (2 if q_gate else 1)
    vd = d if v_dim is None else v_dim
    kv_out = nkv * d + (0 if no_v else nkv * vd)
    return {"attn_q": h * q_out + (q_out if qkv_bias else 0),
            "attn_kv": h * kv_out + (kv_out if qkv_bias else 0),
            "attn_o": nh * vd * h + (h if o_bias else 0)}


def mlp_params(h: int, inter: int, *, gated: bool = True, bias: bool = False) -> int:
    if gated:
        return 3 * h * inter + (2 * inter + h if bias else 0)
    return 2 * h * inter + (inter + h if bias else 0)


def qk_norm_params(model_type: str, t: Fields, nh: int, nkv: int, d: int) -> int:
    if model_type in QK_NORM_FULL or t.str("qk_norm_type") == "per_layer":
        return nh * d + nkv * d
    if model_type in QK_NORM_HEAD or (t.bool("use_qk_norm") and model_type not in
                                      ("llama4_text", "llama4")) or t.bool("qk_norm"):
        return 2 * d
    return 0


def qkv_bias_of(a: Arch) -> tuple[bool, bool]:
    """(q/k/v bias, o bias) as the family's modeling code sets them."""
    if a.t.has("attention_bias"):
        bias = a.t.bool("attention_bias")
        o_bias = bias and not (a.model_type.startswith(("qwen", "glm")))
        return bias, o_bias
    return (a.model_type in QKV_BIAS or a.t.bool("add_qkv_bias") or a.t.bool("use_qkv_bias"),
            False)


# ---- attention kinds ----------------------------------------------------------------------
def layer_kinds(a: Arch) -> list[str]:
    """The KV kind of each layer (FULL / SLIDING / CHUNKED / MAMBA), before MLA."""
    t, n, mt = a.t, a.num_layers, a.model_type
    window = t.opt_int("sliding_window", lo=0, hi=LIMITS["positions"]) or 0
    max_pos = t.opt_int("max_position_embeddings", lo=0, hi=LIMITS["positions"]) or 0
    types = t.list("layer_types")
    if types is not None:
        if len(types) < n:
            raise t.error(f"layer_types has {len(types)} entries for {n} layers")
        return [_kind_of(str(x)) for x in types[:n]]
    pattern = t.int_list("hybrid_layer_pattern", lo=0, hi=1)
    if pattern is not None and len(pattern) >= n:           # MiMo-V2: 1 = sliding window
        return [SLIDING if pattern[i] else FULL for i in range(n)]
    if mt in ("llama4", "llama4_text") and t.has("attention_chunk_size"):
        nope = t.int_list("no_rope_layers", lo=0, hi=1) or [
            int((i + 1) % 4 != 0) for i in range(n)]
        return [CHUNKED if i < len(nope) and nope[i] else FULL for i in range(n)]
    if window <= 0:
        return [FULL] * n
    if mt in ("gemma2", "gpt_oss"):                        # alternating, sliding first
        return [SLIDING if i % 2 == 0 else FULL for i in range(n)]
    if mt in ("gemma3", "gemma3_text", "cohere2", "exaone4"):
        pattern = t.opt_int("sliding_window_pattern", lo=1, hi=LIMITS["layers"]) or (
            4 if mt in ("cohere2", "exaone4") else 6)
        return [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(n)]
    if mt.startswith("qwen2") or mt.startswith("qwen3"):
        if not t.bool("use_sliding_window"):
            return [FULL] * n
        first = t.opt_int("max_window_layers", lo=0, hi=LIMITS["layers"]) or 0
        return [SLIDING if i >= first else FULL for i in range(n)]
    if max_pos and window >= max_pos:
        return [FULL] * n
    # NOTE: vLLM's Attention falls back to the model-level cache_config.sliding_window when a
    # layer has no per-layer window, so every layer is a sliding-window layer.
    a.notes.append(f"sliding_window={window} is model-level: every layer is a sliding-window "
                   "layer (unless --disable-sliding-window)")
    return [SLIDING] * n


def _kind_of(name: str) -> str:
    name = name.lower()
    if "sliding" in name or name == "local":
        return SLIDING
    if "chunk" in name:
        return CHUNKED
    if "linear" in name or "mamba" in name or "delta" in name or name == "conv":
        return MAMBA
    return FULL


def attention_spec(kind: str, nkv: int, d: int, a: Arch, *, v_dim: int | None = None) -> AttentionSpec:
    window = a.t.opt_int("sliding_window", lo=0, hi=LIMITS["positions"])
    chunk = a.t.opt_int("attention_chunk_size", lo=1, hi=LIMITS["positions"])
    return AttentionSpec(kind=kind, num_kv_heads=nkv, head_dim=d, v_head_dim=v_dim,
                         sliding_window_tokens=window if kind == SLIDING else None,
                         chunk_size_tokens=chunk if kind == CHUNKED else None)


# ---- MoE ----------------------------------------------------------------------------------
def moe_of(a: Arch) -> MoESpec | None:
    """MoE facts from the many spellings of the same few numbers (None for dense)."""
    t = a.t
    if a.model_type in ("gemma4", "gemma4_text") and not t.bool("enable_moe_block"):
        return None
    hit = t.first_int(("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
                      lo=0, hi=LIMITS["experts"])
    if not hit or hit[1] <= 1:
        return None
    k = t.first_int(("num_experts_per_tok", "experts_per_token", "top_k_experts", "moe_topk",
                     "num_experts_per_token", "moe_k"), lo=1, hi=LIMITS["experts"])
    if k and k[1] > hit[1]:
        raise t.error(f"{k[0]} {k[1]} exceeds the {hit[1]} experts ({hit[0]})")
    hit_i = t.first_int(("moe_intermediate_size", "expert_intermediate_size",
                         "expert_ffn_hidden_size"),
                        hi=LIMITS["intermediate"])
    inter = hit_i[1] if hit_i else a.intermediate
    if not inter:
        raise t.error("MoE config without moe_intermediate_size or intermediate_size")
    n_shared, shared_i = 0, None
    hit_s = t.first_int(("n_shared_experts", "num_shared_experts"), lo=0, hi=LIMITS["experts"])
    if hit_s and hit_s[1]:
        n_shared, shared_i = hit_s[1], inter
    elif t.bool("use_mixed_mlp_moe"):
        # NOTE: Hunyuan: one shared MLP of intermediate_size x num_shared_expert (hunyuan_v1.py)
        n_shared = t.opt_int("num_shared_expert", lo=0, hi=LIMITS["experts"]) or 0
        shared_i = a.intermediate if n_shared else None
    for key in ("shared_expert_intermediate_size", "shared_intermediate_size",
                "moe_shared_expert_intermediate_size"):
        size = t.opt_int(key, lo=0, hi=LIMITS["intermediate"])
        if size:
            n_shared, shared_i = max(n_shared, 1), size
    if a.model_type in ("llama4", "llama4_text"):
        n_shared, shared_i = 1, inter
    first_dense = t.opt_int("first_k_dense_replace", lo=0, hi=LIMITS["layers"]) or 0
    freq = 1 if isinstance(t.raw("moe_layer_freq"), list) else (
        t.opt_int("moe_layer_freq", lo=1, hi=LIMITS["layers"]) or 1)
    return MoESpec(num_experts=hit[1], num_experts_per_tok=(k[1] if k else 1),
                   moe_intermediate_size=inter, num_shared_experts=n_shared,
                   shared_expert_intermediate_size=shared_i, first_dense_layers=first_dense,
                   moe_layer_freq=freq)


def moe_layer_mask(a: Arch, moe: MoESpec | None) -> list[bool]:
    """Which layers carry the MoE block instead of a dense MLP."""
    n, t = a.num_layers, a.t
    if moe is None:
        return [False] * n
    types = t.list("mlp_layer_types")
    if types is not None and len(types) >= n:
        return [str(x).lower() in ("sparse", "moe") for x in types[:n]]
    if isinstance(t.raw("moe_layer_freq"), list):          # MiMo-V2: one 0/1 flag per layer
        flags = t.int_list("moe_layer_freq", lo=0, hi=1) or []
        return [i < len(flags) and bool(flags[i]) for i in range(n)]
    if a.model_type in ("llama4", "llama4_text"):
        listed = t.int_list("moe_layers", lo=0, hi=LIMITS["layers"])
        if listed is None:
            step = t.opt_int("interleave_moe_layer_step", lo=1, hi=LIMITS["layers"]) or 1
            listed = list(range(step - 1, n, step))
        return [i in set(listed) for i in range(n)]
    only = set(t.int_list("mlp_only_layers", lo=0, hi=LIMITS["layers"]) or [])
    step = t.opt_int("decoder_sparse_step", lo=1, hi=LIMITS["layers"]) or 1
    return [i >= moe.first_dense_layers and i % moe.moe_layer_freq == 0
            and i not in only and (i + 1) % step == 0 for i in range(n)]


def moe_params(a: Arch, moe: MoESpec, *, expert_bias: bool = False) -> dict:
    h = a.hidden
    gated = a.model_type not in NON_GATED_MLP
    latent = a.t.opt_int("moe_latent_size", hi=LIMITS["hidden"])
    per_expert = mlp_params(latent or h, moe.moe_intermediate_size, gated=gated)
    if expert_bias:
        per_expert += 2 * moe.moe_intermediate_size + h
    router = h * moe.num_experts
    if (expert_bias or a.t.bool("use_routing_bias") or a.t.str("topk_method") == "noaux_tc"
            or a.model_type.startswith("gemma4")):          # bias / per-expert scale
        router += moe.num_experts
    shared = 0
    if moe.num_shared_experts and moe.shared_expert_intermediate_size:
        shared = moe.num_shared_experts * mlp_params(h, moe.shared_expert_intermediate_size,
                                                     gated=gated)
        if a.t.has("shared_expert_intermediate_size"):
            router += h                     # Qwen2-MoE / Qwen3-Next shared_expert_gate
    if latent:                              # Nemotron latent MoE: H -> latent -> H around experts
        shared += 2 * h * latent
    return {"experts": moe.num_experts * per_expert, "shared_experts": shared, "router": router}


def ffn_params(a: Arch, moe: MoESpec | None, is_moe: bool) -> dict:
    """The MoE block of a MoE layer, else the dense (gated) MLP."""
    if is_moe and moe is not None:
        return moe_params(a, moe)
    return {"mlp": mlp_params(a.hidden, a.intermediate or 0)}


def standard_body(a: Arch, layers: list[LayerSpec], moe: MoESpec | None = None, **kw) -> Body:
    """Layers plus an embedding, an RMS final norm and an (untied) LM head."""
    h = a.hidden
    return Body(layers=layers, moe=moe, embed=a.vocab * h, final_norm=h,
                lm_head=0 if a.tie else a.vocab * h, **kw)


# ---- the generic decoder (llama, qwen, mistral, gemma, phi3, granite, gpt-oss, llama4 ...) --
def build_decoder(a: Arch) -> Body:
    t, h, mt = a.t, a.hidden, a.model_type
    kinds = layer_kinds(a)
    moe = moe_of(a)
    mask = moe_layer_mask(a, moe)
    qkv_bias, o_bias = qkv_bias_of(a)
    gated = mt not in NON_GATED_MLP
    mlp_bias = t.bool("mlp_bias")
    norm = norm_size(mt, h) * (4 if mt in FOUR_NORMS else 1 if mt in ONE_NORM else 2)
    q_gate = t.bool("attn_output_gate", default=mt == "qwen3_next")
    dense_i = a.intermediate
    if mt in ("llama4", "llama4_text"):
        dense_i = t.opt_int("intermediate_size_mlp", hi=LIMITS["intermediate"]) or dense_i
    both = mt in ("gemma4", "gemma4_text") and moe is not None   # dense MLP + MoE each layer
    g = (_Gemma4(a) if mt in ("gemma4", "gemma4_text")
         else _Gemma3n(a) if mt in GEMMA3N_TYPES else None)
    # NOTE: Hunyuan's cross-layer attention: layers whose index is not a multiple of
    # cla_share_factor read the previous layer's K/V (no K/V projection, no cache of their own)
    cla = (t.int("cla_share_factor", default=1, hi=LIMITS["layers"])
           if mt.startswith("hunyuan") and t.bool("use_cla") else 1)
    layers = []
    for i, kind in enumerate(kinds):
        nq, nkv, d, vd = layer_heads(a, kind)
        shared_kv = i % cla != 0
        if g:
            nkv, d = g.heads_dim(kind)
            shared_kv = g.shares_kv(i)
        p = attn_params(h, nq, nkv, d, qkv_bias=qkv_bias, o_bias=o_bias, q_gate=q_gate,
                        v_dim=vd, no_v=bool(g and g.k_eq_v and kind == FULL))
        p["norms"] = norm + qk_norm_params(mt, t, nq, nkv, d)
        if shared_kv:                       # Gemma 4, Hunyuan CLA: an earlier layer's K/V
            p["attn_kv"], p["norms"] = 0, p["norms"] - (d if g or t.bool("use_qk_norm") else 0)
        if mt == "gpt_oss" or (kind == SLIDING and t.bool("add_swa_attention_sink_bias")):
            p["attn_q"] += nq                               # attention sinks
        if mask[i] and moe is not None:
            p.update(moe_params(a, moe, expert_bias=(mt == "gpt_oss")))
            if both:
                p["mlp"] = mlp_params(h, dense_i or 0, gated=gated, bias=mlp_bias)
                p["norms"] += 3 * h
                p["router"] += h                            # router scale (per_expert_scale: +E)
        else:
            if not dense_i:
                raise t.error("missing intermediate_size")
            inter = g.inter(i, dense_i) if g else dense_i
            p["mlp"] = mlp_params(h, inter, gated=gated, bias=mlp_bias)
        if g:
            p["norms"] += g.layer_scalar
            p["mlp"] += g.layer_extra_params()
        kind = NONE if shared_kv else kind
        layers.append(LayerSpec(attention_spec(kind, nkv, d, a, v_dim=vd), LayerParams(**p)))
    body = Body(layers=layers, moe=moe, embed=a.vocab * h, final_norm=norm_size(mt, h),
                lm_head=0 if a.tie else _lm_head_vocab(a) * h)
    if g:
        body.extra, body.extra_tp = g.model_extra_params(), g.model_tp_params()
    return body


def layer_heads(a: Arch, kind: str) -> tuple[int, int, int, int | None]:
    """(q heads, kv heads, K head dim, V head dim or None) of a layer of this kind."""
    t = a.t
    # NOTE: 0 is "not used" (DeepSeek-OCR's plain-attention DeepSeek-V2 config), not a size
    v_dim = t.opt_int("v_head_dim", lo=0, hi=LIMITS["hidden"]) or None
    if kind == SLIDING and t.has("swa_num_key_value_heads"):           # MiMo-V2
        return (t.int("swa_num_attention_heads", default=a.heads, hi=LIMITS["heads"]),
                t.int("swa_num_key_value_heads", hi=LIMITS["heads"]),
                t.int("swa_head_dim", default=a.head_dim, hi=LIMITS["hidden"]),
                t.opt_int("swa_v_head_dim", hi=LIMITS["hidden"]) or v_dim)
    return a.heads, a.kv_heads, a.head_dim, v_dim


def _lm_head_vocab(a: Arch) -> int:
    return a.t.opt_int("output_vocab_size", hi=LIMITS["vocab"]) or a.vocab


GEMMA3N_TYPES = ("gemma3n", "gemma3n_text")
# the per-layer MLP widths of a Gemma-3n config, kept by config.text_view beside the scalar
# `intermediate_size` the dimensions read
GEMMA3N_WIDTHS = "intermediate_size (per layer)"


class _Gemma4:
    """Gemma 4 text specifics: global heads, shared KV layers, double-wide MLP, PLE."""

    layer_scalar = 1        # a learned scalar per layer

    def __init__(self, a: Arch):
        t = a.t
        self.a = a
        self.global_d = t.opt_int("global_head_dim", hi=LIMITS["hidden"]) or a.head_dim
        self.k_eq_v = t.bool("attention_k_eq_v")
        # NOTE: global K/V heads apply only with attention_k_eq_v (transformers Gemma4TextAttention)
        self.global_kv = (t.opt_int("num_global_key_value_heads", hi=LIMITS["heads"])
                          if self.k_eq_v else None) or a.kv_heads
        shared = t.opt_int("num_kv_shared_layers", lo=0, hi=LIMITS["layers"]) or 0
        self.first_shared = a.num_layers - min(shared, a.num_layers)
        self.double = t.bool("use_double_wide_mlp")
        self.ple = t.opt_int("hidden_size_per_layer_input", lo=0, hi=LIMITS["hidden"]) or 0
        self.ple_vocab = t.opt_int("vocab_size_per_layer_input", hi=LIMITS["vocab"]) or a.vocab

    def heads_dim(self, kind: str) -> tuple[int, int]:
        if kind == FULL:
            return self.global_kv, self.global_d
        return self.a.kv_heads, self.a.head_dim

    def shares_kv(self, i: int) -> bool:
        return i >= self.first_shared > 0

    def inter(self, i: int, base: int) -> int:
        return 2 * base if self.double and self.shares_kv(i) else base

    def ple_layer_params(self) -> int:
        """Per-layer-input gate and projection (+ their norm) of one layer."""
        h = self.a.hidden
        return 2 * h * self.ple + h if self.ple else 0

    def layer_extra_params(self) -> int:
        """What a layer has beside attention, MLP and norms (counted with the MLP)."""
        return self.ple_layer_params()

    def ple_params(self) -> int:
        """The per-layer embedding table and its input projection (vLLM: VocabParallelEmbedding
        and ColumnParallelLinear, split over TP)."""
        if not self.ple:
            return 0
        n, h = self.a.num_layers, self.a.hidden
        return self.ple_vocab * n * self.ple + h * n * self.ple

    def model_extra_params(self) -> int:
        """Model-level parameters beside the embedding, final norm and LM head, replicated
        (the per-layer projection's norm)."""
        return self.ple

    def model_tp_params(self) -> int:
        """Model-level parameters split over TP."""
        return self.ple_params()


class _Gemma3n(_Gemma4):
    """Gemma 3n text (vLLM gemma3n.py): Gemma 4's shared KV layers and per-layer embeddings,
    plus AltUp (`altup_num_inputs` residual streams: per-layer coefficients and router,
    model-level projections), a low-rank Laurel block per layer and a per-layer MLP width.

    NOTE: the shared layers hold no K/V projection (transformers, vLLM 0.30+); vLLM 0.9.2-0.29
    still built it (31,461,120 parameters, 60 MiB at bf16 on E4B), not counted."""

    layer_scalar = 0

    def __init__(self, a: Arch):
        super().__init__(a)
        t = a.t
        self.altup = t.int("altup_num_inputs", default=4, lo=1, hi=64)
        self.laurel = t.int("laurel_rank", default=64, lo=0, hi=LIMITS["hidden"])
        self.widths = t.int_list(GEMMA3N_WIDTHS, lo=1, hi=LIMITS["intermediate"])
        if self.widths is not None and len(self.widths) < a.num_layers:
            raise t.error(f"intermediate_size lists {len(self.widths)} widths for "
                          f"{a.num_layers} layers")

    def inter(self, i: int, base: int) -> int:
        return self.widths[i] if self.widths else base

    def layer_extra_params(self) -> int:
        h, n = self.a.hidden, self.altup
        laurel = 2 * h * self.laurel + h                 # left, right, post-Laurel norm
        # correction and prediction coefficients, modality router, router norm, output scale
        altup = n * n + n ** 3 + h * n + 2 * h
        return self.ple_layer_params() + laurel + altup

    def model_tp_params(self) -> int:
        h = self.a.hidden        # AltUp (un)embed projections: column-parallel (gemma3n.py)
        return self.ple_params() + 2 * (self.altup - 1) * h * h
