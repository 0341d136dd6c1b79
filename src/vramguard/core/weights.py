"""Weight bytes per rank (`W`, the "Model loading took ..." value), §4.1 and §8.

Sharding follows `LayerParams`' semantics: q/o/mlp/mixer/shared experts / TP; K/V
projections / min(TP, KV heads); routed experts / TP (or / EP size); router, norms and
replicated attention parts on every rank; embedding and LM head vocab-parallel with the
vocabulary padded to 64, the embedding on the first PP stage and the LM head (and final
norm) on the last. Layers are split over PP stages like vLLM's `get_pp_indices`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import reduce
from itertools import chain
from operator import add
from typing import NamedTuple

from .model import (DTYPE_BYTES, MLA, LayerParams, ModelSpec, QuantSpec, distinct_index,
                    fields_key)
from .settings import Settings, is_pooling, uses_mtp

VOCAB_PADDING = 64
_GIB = 1 << 30

# Effective bytes per parameter of quantized linear weights when only a method name is known
# (a `--quantization` flag without a checkpoint quantization_config), §8.
METHOD_BYTES_PER_PARAM = {
    "fp8": 1.0, "fbgemm_fp8": 1.0, "ptpc_fp8": 1.0, "modelopt": 1.0, "compressed-tensors": 1.0,
    "awq": 0.52, "awq_marlin": 0.52, "gptq": 0.52, "gptq_marlin": 0.52, "marlin": 0.52,
    # NOTE: online bitsandbytes quantizes with compress_statistics (double quant): 0.5 +
    # 1/64 + 4/16384 bytes per parameter (model_loader/bitsandbytes_loader.py)
    "auto_round": 0.52, "bitsandbytes": 0.516, "mxfp4": 0.53, "nvfp4": 0.5625,
    "modelopt_fp4": 0.5625, "experts_int8": 1.0, "int8": 1.0, "gguf": 0.5625,
}


# NOTE: model classes that build their embedding (and LM head) on every pipeline stage, with
# no `is_first_rank` / `is_last_rank` guard (models/*.py, checked in 0.33's sources); Llama-,
# Qwen2- and DeepSeek-style classes hold them on the first / last stage only
EMBED_EVERY_STAGE = frozenset({
    "gemma", "gemma2", "gemma3", "gemma3_text", "mixtral", "qwen2_moe", "qwen3_moe",
    "qwen3_next", "gpt_oss", "dbrx", "olmoe", "phimoe", "granitemoe", "minicpm", "cohere",
    "cohere2", "internlm2", "jamba", "nemotron_h", "qwen3_5", "qwen3_5_moe"})
HEAD_EVERY_STAGE = EMBED_EVERY_STAGE - {"qwen3_5", "qwen3_5_moe"}


def pp_layer_split(num_layers: int, pp: int,
                   layout: str | tuple[int, ...] | None = None) -> tuple[tuple[int, int], ...]:
    """[start, end) per PP stage, as vLLM's `get_pp_indices` (`layout`: `rules.pp_layout`).

    None (0.8+): n // pp each, the remainder on the stages before the last: 32 over 3 ->
    11/11/10; 61 over 4 -> 15/15/16/15. "last" (0.5.1-0.7.3): the remainder on the last
    stage (32 over 3 -> 10/10/12). A tuple: VLLM_PP_LAYER_PARTITION's sizes (validation has
    checked that they are `pp` and sum to `num_layers`).
    """
    if isinstance(layout, tuple):
        sizes = list(layout)
    elif pp <= 1:
        return ((0, num_layers),)
    else:
        sizes = [num_layers // pp] * pp
        if layout == "last":
            sizes[-1] += num_layers % pp
        else:
            for i in range(2, num_layers % pp + 2):
                sizes[-i] += 1
    out, start = [], 0
    for s in sizes:
        out.append((start, start + s))
        start += s
    return tuple(out)


def runtime_dtype_bytes(settings: Settings) -> int:
    """Bytes per element of the dtype vLLM runs in (`auto`: fp32/fp16 -> fp16, bf16 -> bf16).

    NOTE: with `auto` vLLM runs a config's float32 in 16-bit, and any dtype the platform does
    not support (an `int8` or `float8_e4m3fn` torch_dtype) in its preferred 16-bit dtype
    ("Falling back to bfloat16 for compatibility", config/model.py `_resolve_auto_dtype`)."""
    d = (settings.dtype or "auto").lower()
    if d == "auto":
        return 2
    return DTYPE_BYTES.get(d, 2)


def effective_quant(spec: ModelSpec, settings: Settings) -> QuantSpec | None:
    """The checkpoint's quantization, or the one a `--quantization` flag asks for.

    NOTE: a flag naming a smaller format than the config declares (e.g. `awq` next to a
    16-bit or fp8 config) means the config is not the quantized checkpoint's: the flag wins.
    """
    q = (settings.quantization or "").lower()
    rate = METHOD_BYTES_PER_PARAM.get(q) if q not in ("", "none", "auto") else None
    if spec.quant is not None:
        same = q.split("_")[0] == spec.quant.method.lower().split("_")[0]
        if rate is not None and not same and rate < 0.9 \
                and spec.quant.linear_bytes_per_param >= 0.9 \
                and (spec.quant.expert_bytes_per_param or 1.0) >= 0.9:
            return QuantSpec(method=q, linear_bytes_per_param=rate)
        return spec.quant
    if rate is None:
        return None
    return QuantSpec(method=q, linear_bytes_per_param=rate)


def local_experts(spec: ModelSpec, settings: Settings) -> int | None:
    """Physical experts on the heaviest rank under expert parallelism (None without it):
    ceil((E + redundant) / (TP x DP)), the redundant ones EPLB's (fused_moe/layer.py)."""
    if not settings.enable_expert_parallel or spec.moe is None or not spec.moe.num_experts:
        return None
    extra = settings.num_redundant_experts if settings.enable_eplb else 0
    ep = settings.tensor_parallel_size * settings.data_parallel_size
    return -(-(spec.moe.num_experts + extra) // ep)


def eplb_buffer_bytes(spec: ModelSpec, settings: Settings, dtype_b: float) -> int:
    """EPLB's per-rank working set (eplb/eplb_state.py `add_model`): one MoE layer's local
    expert weights again (the rearrangement buffer), an int64 logical-to-physical map of
    MoE layers x experts x 1,024 slots and an int32 load window of 1,000 x MoE layers x
    physical experts."""
    local = local_experts(spec, settings)
    if not settings.enable_eplb or local is None:
        return 0
    m = spec.moe
    quant = effective_quant(spec, settings)
    exp_b = (quant.expert_bytes_per_param or quant.linear_bytes_per_param) if quant else dtype_b
    layers = [l for l in spec.layers if l.params.experts]
    one = max(l.params.experts for l in layers) * local / m.num_experts * exp_b
    maps = (len(layers) * m.num_experts * 1024 * 8
            + 1000 * len(layers) * (m.num_experts + settings.num_redundant_experts) * 4)
    return int(one) + maps


def _mla_fp8_stays(quant: QuantSpec | None, cc: tuple[int, int] | None) -> bool:
    """The MLA projections keep FP8 weights on the GPU (v0 then requantizes what it
    absorbs): FP8 checkpoints, unless the GPU below 8.9 runs them as Marlin's repacked
    int32 (per-tensor/channel only: block FP8 never goes to Marlin; ROCm never does)."""
    if quant is None:
        return False
    fp8 = quant.method == "fp8" or "W8A8-FP8" in quant.linear_schemes
    return fp8 and (quant.block_shape is not None or cc is None or cc >= (8, 9))


def mla_backend_bytes(spec: ModelSpec, settings: Settings, dtype_b: float,
                      layers: tuple[int, int], cc: tuple[int, int] | None = None,
                      absorbed: bool = False) -> int:
    """What vLLM's MLA backend keeps next to the weights of the MLA layers in `layers`
    (start, end) on one TP rank, inside the weights measurement (its
    `process_weights_after_loading`):

    - a quantized checkpoint: the dequantized kv_b_proj (kv_lora_rank x local heads x
      (qk_nope + v) in the model dtype) that W_UK / W_UV view (every release with MLA, v0
      0.7.1+ and v1 0.8+: "we just store fp16/bf16 copies", mla/common.py);
    - `absorbed` (v0 0.7.1-0.7.3, default VLLM_MLA_PERFORM_MATRIX_ABSORPTION=1,
      attention/backends/mla/utils.py): W_Q_UK (q_lora_rank or hidden x local heads x
      kv_lora_rank) and W_UV_O (local heads x kv_lora_rank x hidden), requantized to FP8
      when the weights are FP8, else in the model dtype, and W_QR (q_lora_rank or hidden x
      local heads x rope dim) in the model dtype.

    NOTE: FP8 block scales of the requantized matrices (one fp32 per 128 x 128) are left out.
    """
    tp = settings.tensor_parallel_size
    quant = effective_quant(spec, settings)
    # NOTE: attention is quantized when its rate (as `_rank_bytes` reads it) is under 16 bits
    dequant_kv = quant is not None and (quant.attention_bytes_per_param
                                        or quant.linear_bytes_per_param) < 2.0
    absorbed_b = 1 if _mla_fp8_stays(quant, cc) else dtype_b
    nh, h = spec.num_attention_heads, spec.hidden_size
    local = nh // tp
    total = 0.0
    for layer in spec.layers[layers[0]:layers[1]]:
        a, p = layer.attention, layer.params
        if a.kind != MLA or not (nh and h and a.mla_kv_lora_rank):
            continue
        rope, nope, kv = a.mla_rope_head_dim or 0, a.mla_qk_nope_head_dim or 0, a.mla_kv_lora_rank
        per_cache = a.cache_layers or 1
        v_dim = p.attn_o // per_cache // (nh * h)
        one = kv * local * (nope + v_dim) * dtype_b if dequant_kv else 0
        if absorbed:
            q_in = p.attn_q // per_cache // max(1, nh * (nope + rope))   # q_lora_rank or hidden
            one += ((q_in * local * kv + local * kv * h) * absorbed_b
                    + q_in * local * rope * dtype_b)
        total += one * per_cache
    return int(total)


def moe_partition(settings: Settings) -> int:
    """Ranks one expert's intermediate size is split over: none with expert parallelism
    (whole experts per rank), else TP x DP (fused_moe/layer.py `flatten_tp_across_dp`)."""
    if settings.enable_expert_parallel:
        return 1
    return settings.tensor_parallel_size * settings.data_parallel_size


def mxfp4_layout(rules, compute_capability: tuple[int, int] | None,
                 vendor: str = "nvidia") -> tuple[int, int, int]:
    """(intermediate step, hidden step, scale copies) of the MXFP4 MoE kernel vLLM picks
    (quantization/mxfp4.py `get_mxfp4_backend`, fused_moe/oracle/mxfp4.py): Marlin before
    Hopper, on SM12x and on Hopper before 0.12 (its Triton kernels were not bundled) pads
    the per-rank intermediate size to 128 and the hidden size to 256; Triton (Hopper 0.12+)
    to 64, keeping the scales twice (the swizzled copy beside the loaded one); FlashInfer
    (Blackwell SM10x) to 256 / 256, 128 / 256 from 0.27 (`rules.mxfp4_*`)."""
    cc = compute_capability
    if rules is None or vendor != "nvidia" or cc is None:
        return 256, 1, 1
    if cc < (9, 0) or cc[0] == 12 or (cc[0] == 9 and rules.mxfp4_hopper == "marlin"):
        return 128, 256, 1
    if cc[0] == 9:
        return 64, 1, 2
    if cc[0] == 10:
        return rules.mxfp4_fi_inter, 256, 1
    return 256, 1, 1


def _expert_padding(spec: ModelSpec, quant: QuantSpec | None, tp: int,
                    layout: tuple[int, int, int] | None) -> float:
    """MXFP4 MoE experts' bytes over their unpadded MXFP4 bytes on one rank: the kernel's
    padding of the per-rank intermediate and hidden sizes, and a second copy of the scales
    (`mxfp4_layout`)."""
    if not quant or quant.method != "mxfp4" or spec.moe is None:
        return 1.0
    inter_step, hidden_step, copies = layout or (256, 1, 1)
    inter = max(1, spec.moe.moe_intermediate_size // max(1, tp))
    f = -(-inter // inter_step) * inter_step / inter
    h = max(1, spec.hidden_size)
    f *= -(-h // hidden_step) * hidden_step / h
    if copies > 1:
        f *= (0.5 + copies / 32) / (0.5 + 1 / 32)
    return f


@dataclass(frozen=True)
class RankWeights:
    """Weight bytes on one rank and how they were derived."""

    bytes: int
    derived_bytes: int            # from the architecture, before checkpoint scaling
    params: int                   # parameters held on this rank
    scale: float                  # checkpoint total / derived total (1.0 when no checkpoint)
    rope_cache_bytes: int
    offloaded_bytes: int
    lora_bytes: int
    from_checkpoint: bool


def layer_index(spec: ModelSpec) -> tuple[tuple, tuple[int, ...]]:
    """What `_rank_bytes` reads of each layer, (parameter counts, KV heads), as
    `model.distinct_index`: the distinct pairs and each layer's position among them."""
    default_kv = spec.num_kv_heads or 1
    params = [l.params for l in spec.layers]
    kv_heads = [l.attention.num_kv_heads or default_kv for l in spec.layers]
    return distinct_index(list(zip(params, kv_heads)), zip(map(_PARAMS_KEY, params), kv_heads))


_PARAMS_KEY = fields_key(LayerParams)


def _rank_bytes(spec: ModelSpec, settings: Settings, tp_rank_stage: tuple[int, int],
                dtype_b: float, quant: QuantSpec | None,
                expert_pad: float = 1.0, index=None,
                pp_layout: str | tuple[int, ...] | None = None,
                vision_every_stage: bool = False) -> tuple[float, int]:
    """(bytes, params) on one rank of stage `pp_rank` (of `pp` stages); `index`:
    `layer_index(spec)` when the caller has it; `pp_layout`: `rules.pp_layout`."""
    pp_rank, pp = tp_rank_stage
    tp = settings.tensor_parallel_size
    # NOTE: routed experts are split over TP x DP ranks with or without expert parallelism:
    # without it the MoE layer flattens TP x DP into one tensor-parallel group
    # (fused_moe/layer.py `flatten_tp_size`, 0.8+)
    ep = tp * settings.data_parallel_size
    # NOTE: expert parallelism places whole experts; the first E % EP ranks hold one more
    # (fused_moe/layer.py `determine_expert_map`, 0.10.1+): the heaviest rank's share
    per_rank = local_experts(spec, settings)
    lin = quant.linear_bytes_per_param if quant else dtype_b
    exp_b = (quant.expert_bytes_per_param if quant and quant.expert_bytes_per_param
             else lin)
    att_b = (quant.attention_bytes_per_param if quant and quant.attention_bytes_per_param
             else lin)
    start, end = pp_layer_split(spec.num_layers, pp, pp_layout)[pp_rank]
    pairs, per_layer = index if index is not None else layer_index(spec)
    # NOTE: each distinct layer's terms computed once; the float sum still adds them layer by
    # layer, in layer order (bit-identical to a loop over the layers).
    terms, counts = [], []
    for p, kv_heads in pairs:
        kv_div = max(1, min(tp, kv_heads))
        att = p.attn_q / tp + p.attn_o / tp + p.attn_kv / kv_div
        rep = p.attn_replicated + p.router + p.norms
        dense = p.mlp / tp + p.shared_experts / tp + p.mixer / tp
        experts = (p.experts / ep if per_rank is None
                   else p.experts * per_rank / spec.moe.num_experts)
        router_b = 4 if p.router_fp32 else dtype_b
        terms.append((att * att_b + dense * lin + experts * exp_b * expert_pad
                      + p.router * router_b + p.norms * dtype_b, p.attn_replicated * att_b))
        counts.append(int(att + rep + dense + experts))
    # NOTE: the float sum adds each layer's two terms in layer order (bit-identical to a loop;
    # `reduce` over `add` runs in C, and unlike `sum` never compensates rounding).
    layers = per_layer[start:end]
    total_b = reduce(add, chain.from_iterable(map(terms.__getitem__, layers)), 0.0)
    params = sum(map(counts.__getitem__, layers))
    vocab = max(1, spec.vocab_size)
    padded = -(-vocab // VOCAB_PADDING) * VOCAB_PADDING
    shard = padded / vocab / tp
    emb_b = lin if quant and quant.embedding_quantized else dtype_b
    head_b = lin if quant and quant.lm_head_quantized else dtype_b
    every = pp > 1 and spec.model_type in EMBED_EVERY_STAGE
    if every and pp_rank != 0:
        total_b += spec.embed_params * shard * emb_b
        params += int(spec.embed_params * shard)
    if vision_every_stage and pp_rank != 0:
        total_b, params = _plus_vision(spec, settings, total_b, params, dtype_b)
    if pp_rank == 0:
        total_b += (spec.embed_params * shard * emb_b + spec.extra_params * dtype_b
                    + spec.extra_tp_params / tp * dtype_b)
        params += int(spec.embed_params * shard) + spec.extra_params + spec.extra_tp_params // tp
        total_b, params = _plus_vision(spec, settings, total_b, params, dtype_b)
    last = pp_rank == pp - 1
    # NOTE: a pooling model has no LM head (vLLM's adapters delete it; a score head of
    # hidden x labels is left out)
    if (last or (pp > 1 and spec.model_type in HEAD_EVERY_STAGE)) \
            and not is_pooling(spec, settings):
        head = spec.lm_head_params
        if spec.tie_word_embeddings and pp > 1 and not head and not every:
            head = spec.embed_params          # tied head is materialized on the last stage
        total_b += head * shard * head_b
        params += int(head * shard)
    if last:
        total_b += spec.final_norm_params * dtype_b
        params += spec.final_norm_params
    return total_b, params


def _plus_vision(spec: ModelSpec, settings: Settings, total_b: float, params: int,
                 dtype_b: float) -> tuple[float, int]:
    """The multimodal towers' weights added to a stage (none with --language-model-only).

    NOTE: --mm-encoder-tp-mode data replicates the encoder on every TP rank
    (`stage_terms.mm_settings` has already applied vLLM's fallback to "weights")."""
    if not spec.vision or settings.language_model_only:
        return total_b, params
    enc = 1 if settings.mm_encoder_tp_mode == "data" else settings.tensor_parallel_size
    return (total_b + spec.vision.num_params / enc * dtype_b,
            params + spec.vision.num_params // enc)


def _total_bytes(spec: ModelSpec, settings: Settings | None, dtype_b: float,
                 quant: QuantSpec | None, index=None) -> float:
    """The whole model (TP 1, PP 1) in `dtype_b` / `quant`; `settings` is not read."""
    one = Settings(tensor_parallel_size=1, pipeline_parallel_size=1)
    return _rank_bytes(spec, one, (0, 1), dtype_b, quant, index=index)[0]


def rope_cache_bytes(spec: ModelSpec, dtype_b: int) -> int:
    """RoPE cos/sin cache buffer: max positions x rotary dim, in the model dtype."""
    if spec.uses_mla or not spec.head_dim:
        return 0
    pos = spec.max_len_keys.get("max_position_embeddings") or 0
    return int(pos) * int(spec.head_dim) * dtype_b


class LoraRules(NamedTuple):
    """What the release does with LoRA slots (`rules.lora_*`): routed experts adapted
    (0.11.1+), the extra vocabulary (256 up to 0.11.2, 0 after), a tied LM head wrapped as a
    second embedding besides the logits (0.11.1+), and the architectures whose embedding and
    LM head take LoRA (`embedding_modules`)."""

    moe: bool = False
    extra_vocab: int = 0
    tied_double: bool = False
    embedding_archs: frozenset = frozenset()
    # v0 0.7.0-0.7.3 create the slots after the weights are measured and outside the
    # profiled peak: not in the budget (`rules.lora_outside_budget`)
    outside_budget: bool = False


def lora_bytes(spec: ModelSpec, settings: Settings, dtype_b: int,
               lora: LoraRules = LoraRules()) -> int:
    """LoRA slot buffers per rank: `max_loras` slots of rank `max_lora_rank` (default 1 / 16)
    on every adapted linear; stacked layers keep one A per slice (q, k, v; gate, up); the
    embedding and LM head wrappers where the model adapts them (`lora_vocab_elems`).

    NOTE: a column-parallel layer (qkv, gate_up) keeps its A over the full input and splits
    B, a row-parallel one (o, down) splits A and keeps B over the full output
    (lora/layers/base_linear.py, row_parallel_linear.py). MoE layers: from 0.11.1 (`moe`)
    every routed expert has its slots (lora/layers/fused_moe.py); before, vLLM adapts only
    their attention."""
    if not settings.enable_lora:
        return 0
    # NOTE: --lora-dtype sets the slots' dtype (LoRAConfig.lora_dtype; auto: the model's)
    if settings.lora_dtype not in (None, "auto"):
        dtype_b = DTYPE_BYTES.get(settings.lora_dtype, dtype_b)
    slots = settings.max_loras or 1
    rank = settings.max_lora_rank or 16
    tp = max(1, settings.tensor_parallel_size)
    h = spec.hidden_size
    q = spec.num_attention_heads * spec.head_dim
    kv = 2 * spec.num_kv_heads * spec.head_dim
    inter = spec.intermediate_size or 4 * h
    attn = (3 * h + (q + kv) / tp) + (q / tp + h)
    mlp = (2 * h + 2 * inter / tp) + (inter / tp + h)
    n_moe = sum(1 for l in spec.layers if l.params.experts) if spec.moe else 0
    if settings.fully_sharded_loras:
        # NOTE: --fully-sharded-loras splits column-parallel A by rank and row-parallel B by
        # output over TP too (lora/layers/*_parallel_linear.py): every linear slot / TP
        attn, mlp = attn_full_shard(h, q, kv, tp), mlp_full_shard(h, inter, tp)
    per_model = attn * spec.num_layers + mlp * (spec.num_layers - n_moe)
    if lora.moe and n_moe:
        m = spec.moe
        ep = settings.enable_expert_parallel
        group = tp * settings.data_parallel_size
        local = m.num_experts / group if ep else m.num_experts
        e_inter = m.moe_intermediate_size / (1 if ep else group)
        per_model += n_moe * local * (2 * (h + e_inter) + e_inter + h)
    if settings.lora_extra_vocab_size is not None and lora.extra_vocab:
        lora = lora._replace(extra_vocab=settings.lora_extra_vocab_size)
    per_model += lora_vocab_elems(spec, rank, lora) / rank
    return int(slots * rank * per_model / settings.pipeline_parallel_size * dtype_b)


def attn_full_shard(h: int, q: int, kv: int, tp: int) -> float:
    """Per-rank LoRA A+B elements per unit rank of one attention block, fully sharded."""
    return (3 * h + q + kv) / tp + (q + h) / tp


def mlp_full_shard(h: int, inter: int, tp: int) -> float:
    """... and of one gated MLP."""
    return (2 * h + 2 * inter) / tp + (inter + h) / tp


def lora_vocab_elems(spec: ModelSpec, rank: int, lora: LoraRules) -> int:
    """Elements per LoRA slot of the embedding and LM-head wrappers, on every TP rank (the
    whole vocabulary: lora/layers/vocal_parallel_embedding.py, logits_processor.py): the
    embedding's A (vocab [+ extra] x rank) and B (hidden x rank) and its extra-vocabulary
    rows; the logits' A (rank x hidden) and B (vocab, padded to 256 with the extra vocab,
    x rank). An untied model has both; a tied one the embedding, twice from 0.11.1 (its LM
    head is the embedding module, wrapped again) plus the logits.

    NOTE: up to 0.11.2 Llama-style classes also grow their base embedding by extra x
    max_loras rows and their LM head by the extra rows; those rows are left out."""
    if spec.architecture not in lora.embedding_archs:
        return 0
    h, vocab, extra = spec.hidden_size, spec.vocab_size, lora.extra_vocab
    emb = rank * (vocab + extra + h) + extra * h
    rows = -(-(vocab + extra) // 256) * 256 if extra else vocab
    logits = rank * (h + rows) + extra * h
    tied = spec.tie_word_embeddings and not spec.lm_head_params
    if not tied:
        return emb + logits
    return 2 * emb + logits if lora.tied_double else emb


def mtp_draft_bytes(spec: ModelSpec, settings: Settings, dtype_b: int, engine: str,
                    head_shared: bool = True) -> int:
    """MTP drafter weights on the last PP stage, per TP rank (0 without speculative decoding).

    NOTE: with speculative decoding on a checkpoint that carries MTP layers, vLLM's drafter
    loads them inside the same "Model loading took" measurement (v1 `load_model` then
    `drafter.load_model`). Each MTP layer is a decoder layer like the model's largest,
    quantized as the checkpoint is unless its ignore list names the MTP layer (GLM-5.3-NVFP4
    keeps it BF16), plus eh_proj (2H x H, a replicated nn.Linear) and norms. Its own copies
    of the embedding are freed for the target's at PP 1 (v1/spec_decode/eagle.py), of the
    LM head (shared_head.head) from 0.16 (`head_shared`). Same assumption as
    `kv.draft_attention`: a model's MTP layers are its drafter."""
    if (engine != "v1" or settings.num_speculative_tokens <= 0 or not spec.mtp_params
            or not uses_mtp(settings)):
        return 0
    tp, h = max(1, settings.tensor_parallel_size), spec.hidden_size
    n = max(1, spec.mtp_layers)
    quant = None if _mtp_unquantized(spec) else effective_quant(spec, settings)
    largest = max(spec.layers, key=lambda l: l.params.total())
    one = replace(spec, layers=(largest,), num_layers=1, embed_params=0, lm_head_params=0,
                  final_norm_params=0, extra_params=0, extra_tp_params=0, vision=None,
                  tie_word_embeddings=False)
    layer_b, _ = _rank_bytes(one, replace(settings, pipeline_parallel_size=1), (0, 1), dtype_b,
                             quant, _expert_padding(spec, quant, moe_partition(settings), None))
    copies = (0 if head_shared else spec.mtp_head_params) + (
        spec.mtp_embed_params if settings.pipeline_parallel_size > 1 else 0)
    return int(n * (layer_b + (2 * h * h + 3 * h) * dtype_b) + copies * dtype_b / tp)


def _mtp_unquantized(spec: ModelSpec) -> bool:
    """Whether the checkpoint's quantization leaves the MTP layers out (its ignore list names
    "mtp" or the MTP layer's index, which follows the decoder layers)."""
    q = spec.quant
    if q is None:
        return True
    index = f"layers.{spec.num_layers}"
    return any("mtp" in m.lower() or index in m for m in q.unquantized_modules)


def draft_bytes(spec: ModelSpec, settings: Settings, dtype_b: int, rules) -> int:
    """The drafter's weights inside vLLM's weights figure, on the last PP stage, per TP rank
    (0 without speculative decoding): a separate draft model (`spec.draft`, sharded over the
    target's TP ranks: vLLM requires draft TP = target TP for draft models and loads EAGLE
    heads with the target's config), else the model's own MTP layers (`mtp_draft_bytes`).

    NOTE: v0 0.7-0.9.2 loads a draft model before profiling but deducts only the target
    runner's weights (`rules.draft_model` "v0_outside"): not in the budget, 0 here."""
    if settings.num_speculative_tokens <= 0:
        return 0
    if spec.draft is not None:
        if rules.draft_model == "v0_outside":
            return 0
        return spec.draft.weights_bytes // max(1, settings.tensor_parallel_size)
    return mtp_draft_bytes(spec, settings, dtype_b, rules.engine, rules.mtp_head_shared)


def checkpoint_scale(spec: ModelSpec, index=None) -> tuple[float, bool]:
    """(checkpoint total / total derived from the architecture, whether a checkpoint total
    was used): 1.0 and False without one. Depends on the model alone (`index`:
    `layer_index(spec)` when the caller has it)."""
    ck = spec.checkpoint
    if ck is not None and ck.total_bytes:
        stored = _total_bytes(spec, None, spec.dtype_bytes, spec.quant, index)
        if stored > 0:
            # NOTE: the checkpoint wins; the architecture says how it splits over ranks.
            return ck.total_bytes / stored, True
    return 1.0, False


def weights_per_rank(spec: ModelSpec, settings: Settings,
                     compute_capability: tuple[int, int] | None = None, *,
                     scale: tuple[float, bool] | None = None,
                     index=None, lora: LoraRules = LoraRules(),
                     pp_layout: str | tuple[int, ...] | None = None,
                     vision_every_stage: bool = False,
                     mxfp4: tuple[int, int, int] | None = None) -> tuple[RankWeights, ...]:
    """Weight bytes on each PP stage (TP ranks of one stage hold the same amount).

    `scale`: `checkpoint_scale(spec)`, `index`: `layer_index(spec)`, when the caller has
    them (they depend on the model alone); `lora`: the release's LoRA rules (`LoraRules`);
    `pp_layout`: the layers per stage (`rules.pp_layout`); `vision_every_stage`: every PP
    stage builds the multimodal towers (V1's model classes, `stage_terms.runtime_fixed`);
    `mxfp4`: the MXFP4 kernel's layout (`mxfp4_layout`)."""
    dtype_b = runtime_dtype_bytes(settings)
    quant = effective_quant(spec, settings)
    pp = settings.pipeline_parallel_size
    if index is None:
        index = layer_index(spec)
    scale, from_ckpt = checkpoint_scale(spec, index) if scale is None else scale
    rope = rope_cache_bytes(spec, dtype_b)
    lora_rules = lora
    lora = lora_bytes(spec, settings, dtype_b, lora_rules)
    offload_total = int(settings.cpu_offload_gb * _GIB)
    out = []
    pad = _expert_padding(spec, quant, moe_partition(settings), mxfp4)
    for stage in range(pp):
        b, params = _rank_bytes(spec, settings, (stage, pp), dtype_b, quant, pad, index,
                                pp_layout, vision_every_stage)
        scaled = b * scale
        off = min(offload_total, int(scaled))
        counted = 0 if lora_rules.outside_budget else lora
        out.append(RankWeights(bytes=int(scaled) - off + rope + counted, derived_bytes=int(b),
                               params=params, scale=scale, rope_cache_bytes=rope,
                               offloaded_bytes=off, lora_bytes=lora, from_checkpoint=from_ckpt))
    return tuple(out)
