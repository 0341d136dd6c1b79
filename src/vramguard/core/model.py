"""ModelSpec: the architecture facts vramguard needs, with the provenance of each field.

Built by `vramguard.sources` (config.json, safetensors headers, GGUF, catalog); consumed by
the planner. Frozen dataclasses, standard library only. Parameter counts are whole numbers;
sharding across tensor-parallel ranks is described per component so the planner can compute
the weights on each rank without knowing the architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from math import prod
from operator import attrgetter
from typing import Callable

from .provenance import Source

# Attention kinds of a layer, as vLLM's KV-cache manager groups them.
FULL = "full"            # full attention (MHA/GQA/MQA)
SLIDING = "sliding"      # sliding-window attention, window `sliding_window_tokens`
CHUNKED = "chunked"      # chunked-local attention (Llama 4), chunk `chunk_size_tokens`
MLA = "mla"              # multi-head latent attention (DeepSeek V2/V3, Kimi)
MAMBA = "mamba"          # Mamba / linear attention / Gated DeltaNet: per-request state
CSA = "csa"              # DeepSeek-V4 compressed sparse attention: a sliding-window cache,
                         # plus, with `compress_ratio` > 1, a compressed latent, compressor
                         # states and (ratio 4) an indexer (core/kv_csa.py)
NONE = "none"            # no KV cache at all (e.g. an encoder-only or cross layer we skip)
ATTENTION_KINDS = (FULL, SLIDING, CHUNKED, MLA, MAMBA, CSA, NONE)

DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "int8": 1,
}


@dataclass(frozen=True)
class MambaState:
    """Per-layer recurrent state of a Mamba / linear-attention layer (one per request).

    `conv_shape` and `ssm_shape` are the unsharded shapes; their first dimension is split
    across tensor-parallel ranks. The dtypes are vLLM's choice by release
    (`kv.mamba_state_dtype_bytes`): `ssm_hook` names the model's config hook that supplies the
    SSM dtype when `--mamba-ssm-cache-dtype` is auto ("nemotron_h", "qwen3_5"), and
    `ssm_dtype` what the config declares for it (None: nothing declared).
    """

    kind: str                        # "mamba1" | "mamba2" | "gdn" | "linear_attention" ...
    conv_shape: tuple[int, ...]      # e.g. (conv_dim, kernel - 1)
    ssm_shape: tuple[int, ...]       # e.g. (heads, head_dim, state)
    ssm_dtype: str | None = None
    ssm_hook: str | None = None
    # Mamba2's B/C groups and state size: groups that do not divide TP are replicated to
    # TP ("extra_groups_for_head_shards", mamba_utils.py), widening the conv state
    groups: int = 0
    group_state: int = 0
    # the config's Mamba chunk size (0: none; vLLM's default 2048): "all" mode aligns the
    # hybrid block to it
    chunk_size: int = 0

    def page_bytes(self, tp: int, conv_bytes: int, ssm_bytes: int | None = None) -> int:
        """Bytes of one request's state on one TP rank (conv + ssm), before page padding;
        the SSM state in `ssm_bytes` per element (default: as the conv state)."""
        ssm_b = conv_bytes if ssm_bytes is None else ssm_bytes
        conv = self.conv_shape
        if self.groups and self.groups % tp and conv:
            conv = (conv[0] + 2 * (tp - self.groups) * self.group_state,) + conv[1:]
        return (_sharded_prod(conv, tp) * conv_bytes
                + _sharded_prod(self.ssm_shape, tp) * ssm_b)


def _sharded_prod(shape: tuple[int, ...], tp: int) -> int:
    if not shape:
        return 0
    return (shape[0] // tp) * prod(shape[1:])


@dataclass(frozen=True)
class AttentionSpec:
    """What one decoder layer keeps in the KV cache."""

    kind: str = FULL
    num_kv_heads: int | None = None        # FULL/SLIDING/CHUNKED
    head_dim: int | None = None            # K head size (and V unless v_head_dim is set)
    v_head_dim: int | None = None          # when V differs from K (rare)
    sliding_window_tokens: int | None = None
    chunk_size_tokens: int | None = None
    mla_kv_lora_rank: int | None = None    # MLA latent
    mla_rope_head_dim: int | None = None
    mla_qk_nope_head_dim: int | None = None   # decides vLLM's Blackwell MLA backend
    mamba: MambaState | None = None
    indexer_bytes_per_token: int = 0       # sparse-attention indexer key cache (DeepSeek V3.2 /
                                           # GLM-5 DSA): fixed bytes (fp8 + scales), any KV dtype
    compress_ratio: int = 0                # CSA: tokens per compressed entry (0/1: none)
    indexer_head_dim: int = 0              # CSA: indexer key size (ratio-4 layers)
    cache_layers: int = 1                  # attention modules of the layer, each with its own
                                           # KV cache (LongCat-Flash: 2)

    @property
    def parallel_mamba(self) -> bool:
        """An attention layer that also runs a Mamba mixer (Falcon-H1): it keeps a KV cache
        and a Mamba state, two cache layers to vLLM."""
        return self.mamba is not None and self.kind != MAMBA

    def kv_bytes_per_token(self, tp: int, dtype_bytes: float) -> int:
        """KV bytes one token costs in this layer (all its `cache_layers`) on one TP rank (0
        for MAMBA/NONE); `dtype_bytes` per element (9/16 for nvfp4).

        NOTE: when TP > KV heads vLLM replicates one head per rank (max(1, H_kv // tp));
        MLA's latent is replicated on every rank, so it does not shrink with TP.
        """
        return self.cache_layers * self._cache_layer_bytes(tp, dtype_bytes)

    def _cache_layer_bytes(self, tp: int, dtype_bytes: float) -> int:
        if self.kind in (FULL, SLIDING, CHUNKED):
            heads = max(1, (self.num_kv_heads or 0) // tp)
            v_dim = self.v_head_dim if self.v_head_dim is not None else self.head_dim
            # NOTE: int(): 9/16-byte elements (nvfp4) are whole bytes per 16-element head
            return int(heads * ((self.head_dim or 0) + (v_dim or 0)) * dtype_bytes)
        if self.kind == MLA:
            return int(((self.mla_kv_lora_rank or 0) + (self.mla_rope_head_dim or 0)) * dtype_bytes
                       + self.indexer_bytes_per_token)
        if self.kind == CSA and self.compress_ratio > 1:
            # NOTE: the compressed latent (and indexer keys) per token of context; the
            # sliding-window cache and compressor states do not grow with the context.
            idx = self.indexer_head_dim + self.indexer_head_dim // 128 * 4
            return (((self.head_dim or 0) * dtype_bytes + idx) // self.compress_ratio)
        return 0


@dataclass(frozen=True)
class LayerParams:
    """Parameter counts of one decoder layer, split by how vLLM shards them over TP.

    - `attn_q`, `attn_o`, `mlp`, `shared_experts`, `mixer`: column/row parallel, / TP;
    - `attn_kv`: K and V projections, / min(TP, num_kv_heads) (replicated beyond);
    - `experts`: all routed experts, / TP (or / EP size with expert parallelism);
    - `attn_replicated`, `router`, `norms`: replicated on every rank.
    All counts are for linear weights plus their biases; norms are never quantized.
    """

    attn_q: int = 0
    attn_kv: int = 0
    attn_o: int = 0
    attn_replicated: int = 0
    mlp: int = 0
    experts: int = 0
    shared_experts: int = 0
    router: int = 0
    norms: int = 0
    mixer: int = 0
    router_fp32: bool = False   # the router kept in fp32 whatever the dtype (LongCat-Flash)

    def total(self) -> int:
        return (self.attn_q + self.attn_kv + self.attn_o + self.attn_replicated + self.mlp
                + self.experts + self.shared_experts + self.router + self.norms + self.mixer)

    def active(self, num_experts: int | None, experts_per_tok: int | None) -> int:
        """Parameters used per token (routed experts scaled by top-k / num_experts)."""
        if not self.experts or not num_experts or not experts_per_tok:
            return self.total()
        return self.total() - self.experts + self.experts * experts_per_tok // num_experts


def distinct_index(items, keys=None) -> tuple[tuple, tuple[int, ...]]:
    """(the distinct values of `items` in order of first occurrence, each item's position in
    that tuple). `keys`: a stand-in per item, equal exactly when the items are equal
    (`fields_key(cls)` for dataclass instances).

    NOTE: a model's layers are distinct objects with one or two distinct values (attention
    specs, parameter counts): per-layer work can be done once per value. A dataclass's
    generated `__hash__` and `__eq__` run in Python; the tuple of its fields hashes and
    compares in C."""
    seen: dict = {}
    first: list = []
    index = []
    for item, key in zip(items, items if keys is None else keys):
        i = seen.get(key)
        if i is None:
            i = seen[key] = len(first)
            first.append(item)
        index.append(i)
    return tuple(first), tuple(index)


def fields_key(cls) -> Callable[[object], tuple]:
    """The tuple of a dataclass instance's fields, in order: what its generated `__eq__`
    compares (for instances of one class), as a `distinct_index` key."""
    return attrgetter(*(f.name for f in fields(cls)))


def counted(values: tuple, index) -> tuple[tuple[object, int], ...]:
    """(value, how many times) for the positions in `index`, in order of first occurrence."""
    counts: dict[int, int] = {}
    for i in index:
        counts[i] = counts.get(i, 0) + 1
    return tuple((values[i], n) for i, n in counts.items())


@dataclass(frozen=True)
class LayerSpec:
    """One decoder layer: its KV-cache kind and its parameters."""

    attention: AttentionSpec
    params: LayerParams


@dataclass(frozen=True)
class MoESpec:
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int | None = None
    first_dense_layers: int = 0           # DeepSeek first_k_dense_replace
    moe_layer_freq: int = 1


# Marlin's constraints on an AWQ / GPTQ checkpoint it converts (awq_marlin / gptq_marlin
# `is_*_marlin_compatible`): bits and group sizes
MARLIN_BITS = {"awq": (4,), "gptq": (4, 8)}
MARLIN_GROUPS = (-1, 32, 64, 128)


@dataclass(frozen=True)
class QuantSpec:
    """Weight quantization as the checkpoint declares it (or as a flag requests it).

    `linear_bytes_per_param` is the effective size of quantized linear weights including
    scales/zeros (e.g. GPTQ int4 g128 ~ 0.52). `expert_bytes_per_param` overrides it for
    MoE experts (gpt-oss mxfp4 experts with bf16 attention). Embeddings and lm_head stay
    16-bit unless `embedding_quantized` / `lm_head_quantized`.
    """

    method: str                          # "fp8", "gptq", "awq", "compressed-tensors", "mxfp4", "gguf", ...
    bits: float | None = None
    group_size: int | None = None
    linear_bytes_per_param: float = 2.0
    expert_bytes_per_param: float | None = None
    attention_bytes_per_param: float | None = None   # when attention is not quantized
    lm_head_quantized: bool = False
    embedding_quantized: bool = False
    unquantized_modules: tuple[str, ...] = ()
    kv_cache_scheme: str | None = None   # checkpoint-declared KV quant (ModelOpt fp8/nvfp4)
    # compressed-tensors: the schemes of the config groups that quantize plain Linear layers
    # (not experts only), named as vLLM's scheme classes: "W8A8-FP8", "W8A16-FP8",
    # "W8A8-INT8", "WNA16", "W4A4-FP4", "W4A16-FP4" (core/quant_schemes.py checks them)
    linear_schemes: tuple[str, ...] = ()
    block_shape: tuple[int, int] | None = None   # block FP8: weight_block_size [n, k]
    # AWQ / GPTQ: whether vLLM's Marlin override can convert the checkpoint, by the keys it
    # reads (bits, group_size, sym + desc_act / zero_point); the GPU's capability aside.
    # None: not said (not an AWQ / GPTQ config)
    marlin_compatible: bool | None = None


@dataclass(frozen=True)
class VisionSpec:
    """A multimodal encoder (vision/audio tower + projector)."""

    num_params: int
    hidden_size: int | None = None
    num_layers: int | None = None
    image_size: int | None = None
    patch_size: int | None = None
    # the inputs it encodes (what --limit-mm-per-prompt counts): image, video, audio
    modalities: tuple[str, ...] = ("image",)
    # one worst-case image: the prompt tokens it takes (after merging / pooling) and the
    # patches the encoder sees, where the config says them (None: derived from the sizes)
    tokens_per_item: int | None = None
    patches_per_item: int | None = None


@dataclass(frozen=True)
class CheckpointInfo:
    """What the checkpoint files themselves say (safetensors headers, GGUF, .bin index)."""

    format: str                          # "safetensors" | "gguf" | "pytorch_bin"
    total_bytes: int
    num_params: int | None = None
    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    num_tensors: int | None = None
    approximate: bool = False            # True for .bin sizes (zip entries, index metadata)
    path: str | None = None


@dataclass(frozen=True)
class DraftModel:
    """The separate drafter of speculative decoding (`--speculative-config` "model": a small
    LM, an EAGLE head, Medusa heads) as the target's workers load it; `sources/draft.py`
    builds it from the drafter's config or checkpoint headers.

    `method` is the one vLLM infers from the drafter when the flags name none (0.17+ rules:
    "eagle-"/"eagle3" in the name, Medusa/MLP-speculator configs, else "draft_model").
    `weights_bytes` is what it loads in total, before TP sharding (vLLM shards a drafter
    over the target's TP ranks); `attention` its KV-cache layers (none for Medusa heads)."""

    name: str
    method: str
    weights_bytes: int
    attention: tuple[AttentionSpec, ...] = ()
    from_checkpoint: bool = False


@dataclass(frozen=True)
class ModelSpec:
    """Everything vramguard knows about a model's architecture and bytes.

    `provenance` maps field names to their Source; `notes` carries warnings such as
    "unknown architecture: derived from standard fields".
    """

    name: str
    architecture: str
    model_type: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    torch_dtype: str                     # as declared: "bfloat16", "float16", "float32"
    layers: tuple[LayerSpec, ...]
    intermediate_size: int | None = None
    tie_word_embeddings: bool = False
    embed_params: int = 0                # token embedding (vocab-parallel)
    lm_head_params: int = 0              # 0 when tied
    final_norm_params: int = 0
    extra_params: int = 0                # e.g. position embeddings, replicated on the first rank
    # model-level weights split over TP on the first stage (Gemma-3n / Gemma-4's per-layer
    # embedding table, vocab-parallel, and their column-parallel input projections)
    extra_tp_params: int = 0
    max_len_keys: dict[str, int] = field(default_factory=dict)   # config keys vLLM reads
    rope_scaling: dict | None = None
    tokenizer_max_length: int | None = None
    # a sentence-transformers config's max_seq_length (sentence_bert_config.json, ...)
    encoder_max_seq_length: int | None = None
    moe: MoESpec | None = None
    vision: VisionSpec | None = None
    quant: QuantSpec | None = None
    checkpoint: CheckpointInfo | None = None
    is_encoder_only: bool = False        # embedding / pooling models (bge-m3)
    provenance: dict[str, Source] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    source_ref: str | None = None        # path or id it was read from
    mtp_params: int = 0                  # MTP / next-token-prediction layers in the checkpoint:
                                         # not loaded unless speculative decoding uses them
    mtp_layers: int = 0                  # how many MTP layers (0: unknown or none)
    # ... of `mtp_params`: the MTP layers' own copies of the embedding and the LM head
    mtp_embed_params: int = 0
    mtp_head_params: int = 0
    draft: DraftModel | None = None      # a separate drafter named by the launch (not the
                                         # model's own: attached by sources/draft.py)
    # per batched token, what the model allocates at init, inside vLLM's weights measurement
    # (x max_num_batched_tokens): fixed bytes (the DSA top-k index buffer, int32) and elements
    # of the model dtype (the Gemma-3n/4 per-layer-embedding input buffer)
    token_buffer_bytes: int = 0
    token_buffer_elems: int = 0

    # ---- parameter counts -------------------------------------------------------------
    def num_params(self) -> int:
        """Total parameters from the architecture (LM + vision)."""
        return (self.embed_params + self.lm_head_params + self.final_norm_params
                + self.extra_params + self.extra_tp_params
                + sum(l.params.total() for l in self.layers)
                + (self.vision.num_params if self.vision else 0))

    def num_active_params(self) -> int:
        """Parameters used per token (differs from num_params for MoE)."""
        n_exp = self.moe.num_experts if self.moe else None
        k = self.moe.num_experts_per_tok if self.moe else None
        return (self.embed_params + self.lm_head_params + self.final_norm_params
                + self.extra_params + self.extra_tp_params
                + sum(l.params.active(n_exp, k) for l in self.layers)
                + (self.vision.num_params if self.vision else 0))

    def params_by_component(self) -> dict[str, int]:
        """Parameter breakdown: embeddings, attention, mlp, experts, lm_head, vision, ..."""
        out = {"embeddings": self.embed_params + self.extra_params + self.extra_tp_params,
               "attention": 0, "mlp": 0,
               "experts": 0, "mixer": 0, "norms": self.final_norm_params,
               "lm_head": self.lm_head_params,
               "vision": self.vision.num_params if self.vision else 0}
        for layer in self.layers:
            p = layer.params
            out["attention"] += p.attn_q + p.attn_kv + p.attn_o + p.attn_replicated
            out["mlp"] += p.mlp
            out["experts"] += p.experts + p.shared_experts + p.router
            out["mixer"] += p.mixer
            out["norms"] += p.norms
        return out

    # ---- KV cache ---------------------------------------------------------------------
    def kv_bytes_per_token(self, tp: int = 1, dtype_bytes: int = 2,
                           layers: range | None = None) -> int:
        """KV bytes per token on one TP rank, over `layers` (default: all), every kind."""
        sel = self.layers if layers is None else [self.layers[i] for i in layers]
        return sum(l.attention.kv_bytes_per_token(tp, dtype_bytes) for l in sel)

    def attention_kinds(self) -> frozenset[str]:
        """The KV-cache kinds of the layers.

        NOTE: read several times per plan (MLA, hybrid, Mamba checks); the spec is frozen, so
        the set is computed once and kept in the instance (not a field: equality unchanged)."""
        kinds = self.__dict__.get("_attention_kinds")
        if kinds is None:
            kinds = {l.attention.kind for l in self.layers}
            if any(l.attention.parallel_mamba for l in self.layers):
                kinds.add(MAMBA)
            kinds = self.__dict__["_attention_kinds"] = frozenset(kinds)
        return kinds

    @property
    def is_hybrid(self) -> bool:
        """Has Mamba/linear-attention layers next to attention layers."""
        kinds = self.attention_kinds()
        return MAMBA in kinds and bool(kinds - {MAMBA, NONE})

    @property
    def uses_mla(self) -> bool:
        return MLA in self.attention_kinds()

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element of the declared dtype (2 when unknown)."""
        return DTYPE_BYTES.get(self.torch_dtype, 2)
