"""Estimates of the profile-run terms vLLM measures: activation `A`, non-torch `N`, graphs `G`.

These are the only fitted parts of the planner. Each is a small physical model with a few
global coefficients (documented, with the data they were fitted on, in docs/accuracy.md):

* `A` (activation peak of the dummy forward + sampler): the residual stream and the
  per-layer temporaries of `max_num_batched_tokens` tokens (∝ tokens × hidden), the fused-MoE
  workspace (∝ tokens × top-k × (3·expert intermediate / TP + hidden)), and on the last PP rank
  the sampler's fp32 logits for min(max_num_seqs, max_num_batched_tokens) requests × vocab;
  a vision tower adds an encoder batch (∝ tokens × vision hidden).
* `N` (non-torch growth): cuBLAS/attention workspaces, plus custom all-reduce and NCCL
  buffers when TP > 1.
* `G` (CUDA-graph pool): a fixed part plus a per-layer part, scaled by how many batch sizes
  are captured (the default list goes up to min(2·max_num_seqs, 512)).
* CUDA context: what a process's context takes before vLLM's snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ModelSpec

_GIB = 1 << 30

# ---- fitted global coefficients (docs/accuracy.md) --------------------------------------
# bytes per (token × hidden) of the dummy forward, by engine (v1 keeps more temporaries
# alive under torch.compile; v0 runs eager layers)
ACT_BYTES_PER_TOKEN_HIDDEN = {"v0": 21.4, "v1": 30.0}
ACT_MOE_FACTOR = 1.6                  # × the fused-MoE workspace bytes
# NOTE: the fp32 logit copies of the profile run's dummy sampler are a version-table field
# (VllmRules.profile_sampler_copies): v0 samples the dummy batch with top_k = vocab − 1, which
# takes the sort-based top-k/top-p path (values, int64 indices, probabilities, cumsum).
SAMPLER_WARMUP_COPIES = 6.0           # × fp32 logits in the v1 sampler warm-up (top-k/p, logprobs)
# encoder profiling, per (patch × vision hidden): v0 profiles the encoder inside the one
# dummy forward (eager ViT, all temporaries live); v1 runs it alone with fused attention.
# NOTE: v0's 59 B was refitted on the same Jetson Qwen2.5-VL-7B runs (4.92/4.93 GiB) once the
# profile run's single sequence was modelled (`v0_mm_profile_seqs`); 44 B had absorbed a
# 256-request dummy sampler that the run does not have.
VISION_BYTES_PER_PATCH_HIDDEN = {"v0": 59.0, "v1": 8.0}
VISION_DYNAMIC_MAX_PATCHES = 65536    # dynamic-resolution towers: 16384 merged tokens × 2×2
VISION_DYNAMIC_MERGE = 4              # ... 2×2 patches per merged token
NON_TORCH_BASE = int(0.2 * _GIB)      # cuBLAS / attention workspaces
NON_TORCH_TP = int(1.85 * _GIB)       # custom all-reduce + NCCL growth when TP > 1
GRAPH_BASE = int(0.30 * _GIB)         # CUDA graph pool: fixed part
GRAPH_PER_LAYER = int(0.018 * _GIB)   # ... and per decoder layer on the rank
GRAPH_FULL_SIZES = 67                 # number of capture sizes up to 512 (1, 2, 4, 8..512)
# graphs vLLM (0.12+) captures for that full list (steps of 16 above 256): the fits' graphs,
# whose per-graph share each graph beyond the list adds
GRAPH_FIT_GRAPHS = 51
# the captured pool over vLLM's own estimate of it (0.19 log: "CUDA graph pool memory: 1.55 GiB
# (actual), 1.09 GiB (estimated)"); used where the estimate is subtracted (0.20+) and the pool
# is then allocated after the KV cache, before the sampler warm-up
GRAPH_ACTUAL_OVER_ESTIMATE = 1.2
# CUDA context + allocator before the snapshot: grows with the card (page tables, SMs):
# 0.3 GiB + 0.25 % of the total, at most 0.6 GiB (observed: H100 0.51, L40S 0.49, A100-40GB
# 0.41, RTX 4090 0.38, RTX 3090 ~0.35 GiB); ROCm 0.35 GiB (MI300X 0.33, MI50 0.45)
CUDA_CONTEXT_BASE = int(0.3 * _GIB)
CUDA_CONTEXT_PER_TOTAL = 0.0025
CUDA_CONTEXT_MAX = int(0.6 * _GIB)
ROCM_CONTEXT = int(0.35 * _GIB)
NCCL_BEFORE_SNAPSHOT = int(1.0 * _GIB)  # NCCL communicators when world size > 1 (0.11+)
CUBLAS_BEFORE_SNAPSHOT = int(0.1 * _GIB)  # 0.33: cuBLAS handles created before the snapshot

# relative uncertainty of each estimate (the honest band)
ACT_REL, NON_TORCH_REL, GRAPH_REL = 0.35, 0.5, 0.5


@dataclass(frozen=True)
class ProfileShape:
    """What the profile run processes on one rank."""

    batched_tokens: int
    num_reqs: int
    last_pp_rank: bool
    first_pp_rank: bool
    tp: int
    moe_inter_divisor: int      # TP without expert parallelism, 1 with it
    dtype_bytes: int
    engine: str = "v1"
    sampler_copies: float = 2.1
    encoder_profiled: bool = True   # False: v0 dropped the mm dummy data (see mm_profile)
    encoder_items: int = 1          # v1: images in the encoder's dummy batch (`v1_mm_items`)
    encoder_kept_bytes: int = 0     # v1: their outputs, alive through the text forward
    sampler: bool = True            # False: a pooling model (no dummy sampler)
    encoder_dp: bool = False        # --mm-encoder-tp-mode data: whole items per TP rank
    moe_chunk: int | None = None    # the fused-MoE kernel's token chunk (`rules.moe_chunk_tokens`)
    dp_ranks: int = 1               # V1 data parallelism: MoE layers see every DP rank's tokens
    dp_combine_copy: bool = False   # the naive all-to-all's all-reduce output (0.8-0.19)
    moe_ws_layout: str = "fused"    # the fused-MoE caches' shapes by release (`dp_moe_extra_bytes`)


def vision_item(spec: ModelSpec) -> tuple[int, int]:
    """(prompt tokens, encoder patches) of one worst-case image ((0, 0) without a vision
    tower): what the config says (`VisionSpec.tokens_per_item`), else a fixed tower's patch
    grid (one token per patch), else a dynamic tower's largest image (65,536 patches merged
    2×2 into 16,384 tokens). Other modalities (video) are not counted."""
    v = spec.vision
    if v is None or not v.hidden_size:
        return 0, 0
    if v.tokens_per_item and v.patches_per_item:
        return v.tokens_per_item, v.patches_per_item
    if v.image_size and v.patch_size:
        grid = (v.image_size // v.patch_size) ** 2
        return v.tokens_per_item or grid, grid
    return VISION_DYNAMIC_MAX_PATCHES // VISION_DYNAMIC_MERGE, VISION_DYNAMIC_MAX_PATCHES


def vision_encoder_bytes(spec: ModelSpec, tp: int, engine: str = "v1", items: int = 1,
                         data_parallel: bool = False) -> int:
    """Peak of the encoder's dummy batch: `items` worst-case images' patches × vision hidden.

    NOTE: --mm-encoder-tp-mode data gives each TP rank whole items of the batch at full width
    (models/vision.py `run_dp_sharded_*vision_model`): ceil(items / TP) of them, unsharded."""
    v = spec.vision
    if v is None:
        return 0
    patches = vision_item(spec)[1]
    if not patches:
        return 0
    per = VISION_BYTES_PER_PATCH_HIDDEN["v0" if engine == "v0" else "v1"]
    if data_parallel:
        return int(-(-items // max(1, tp)) * patches * v.hidden_size * per)
    return int(items * patches * v.hidden_size * per / max(1, tp) ** 0.5)


def vision_max_tokens(spec: ModelSpec) -> int:
    """Tokens one worst-case image takes in the prompt (0 without a vision tower)."""
    return vision_item(spec)[0]


def v1_mm_items(formula: str, item_tokens: int, tokens: int, seqs: int, limit: int,
                chunked: bool) -> int:
    """Images in V1's encoder dummy batch (`rules.mm_items_formula`): the encoder budget
    max(batched tokens, T) holds budget // T of them (cdiv up to 0.9.2), at most
    max_num_seqs x the per-prompt limit (`MultiModalBudget.get_max_items`; without chunked
    prefill the requests are capped at batched tokens // T from 0.10.1).

    NOTE: from 0.10.1 the per-prompt count is also capped at max_model_len // T; a plan's
    activation does not read max_model_len, so that cap (which bites only with very few
    sequences or a length below limit x T) is left out."""
    if not item_tokens:
        return 1
    budget = max(tokens, item_tokens)
    if formula == "cdiv":
        return max(1, min(-(-budget // item_tokens), seqs * max(1, limit)))
    reqs = seqs
    if formula == "per_prompt" and not chunked:
        reqs = min(reqs, tokens // item_tokens)
    return max(1, min(budget // item_tokens, reqs * max(1, limit)))


def mm_profile(spec: ModelSpec, tokens: int, seqs: int, reqs_by_mm: bool,
               dropped_when_long: bool) -> tuple[int, bool]:
    """(requests the profile run's dummy sampler sees, whether the encoder is profiled).

    NOTE: v0's profile run lowers the number of dummy sequences of a multimodal model to
    max(1, min(max_num_seqs, tokens // worst-case mm tokens)) (`reqs_by_mm`), and 0.7.0-0.8.2
    replace a worst-case prompt longer than the profiling sequence (tokens // sequences) by a
    text-only one (`dropped_when_long`). v1 samples min(max_num_seqs, tokens)."""
    reqs = min(seqs, tokens)
    mm = vision_max_tokens(spec) if reqs_by_mm else 0
    if not mm:
        return reqs, True
    reqs = max(1, min(seqs, tokens // mm))
    return reqs, not (dropped_when_long and mm > tokens // reqs)


def activation_bytes(spec: ModelSpec, shape: ProfileShape) -> int:
    """Activation peak `A` on one rank: the batched tokens' hidden states, the MoE workspace,
    the sampler's fp32 logits (last PP rank) and the multimodal encoder's batch (first rank).

    v0 profiles text and multimodal inputs in one forward (the encoder adds); v1 runs the
    encoder batch first and frees it, so the peak is the larger of the two.
    """
    t = shape.batched_tokens
    eng = "v0" if shape.engine == "v0" else "v1"
    dtype_scale = 1.0 + 0.3 * (shape.dtype_bytes / 2 - 1)
    total = int(t * spec.hidden_size * ACT_BYTES_PER_TOKEN_HIDDEN[eng] * dtype_scale)
    if spec.moe is not None:
        m = spec.moe
        inter = m.moe_intermediate_size / max(1, shape.moe_inter_divisor)
        # NOTE: the fused-MoE kernel runs the tokens in chunks of VLLM_FUSED_MOE_CHUNK_SIZE
        # (0.5.1-0.17), sizing its workspace for one chunk
        mt = min(t, shape.moe_chunk) if shape.moe_chunk else t
        ws = mt * m.num_experts_per_tok * (3 * inter + spec.hidden_size) * 2
        total += int(ws * ACT_MOE_FACTOR)
        if shape.dp_ranks > 1:
            total += dp_moe_extra_bytes(spec, shape, inter)
    if shape.last_pp_rank and shape.sampler and not spec.is_encoder_only:
        total += int(shape.num_reqs * spec.vocab_size * 4 * shape.sampler_copies)
    enc = (vision_encoder_bytes(spec, shape.tp, eng, shape.encoder_items, shape.encoder_dp)
           if shape.first_pp_rank and shape.encoder_profiled else 0)
    if enc:
        # NOTE: v1 keeps the encoder outputs (in the encoder cache) through the text forward
        total = total + enc if eng == "v0" else max(total + shape.encoder_kept_bytes, enc)
    return total


def dp_moe_extra_bytes(spec: ModelSpec, shape: ProfileShape, inter: float) -> int:
    """What data parallelism adds to a rank's MoE layer in the profile run (V1, 0.8+): the
    layer runs on the tokens of every DP rank (the default all-to-all gathers them: naive
    multicast up to 0.10, all-gather + reduce-scatter from 0.11; every rank profiles the same
    batched tokens T). Counted from the kernels' shapes, without the fitted factor of the
    rank's own tokens: the fused-MoE caches for the further gathered tokens (up to the chunk;
    per token and expert slot max(N, H) + N/2 values up to 0.13, max(N/2, H) + max(N, H) from
    0.14, N = 2 x the rank's intermediate size), the other ranks' hidden states and router
    logits, and the naive combine's all-reduce output (M x H; naive runs by default in
    0.8-0.10 and when asked for up to 0.19).

    NOTE: 0.20+ gathers top-k ids and weights instead of the logits (fewer bytes)."""
    m, h = spec.moe, spec.hidden_size
    t = shape.batched_tokens
    gathered = t * shape.dp_ranks
    own = min(t, shape.moe_chunk) if shape.moe_chunk else t
    mt = min(gathered, shape.moe_chunk) if shape.moe_chunk else gathered
    n = 2 * inter
    per_slot = (max(n, h) + n / 2 if shape.moe_ws_layout == "fused"
                else max(n / 2, h) + max(n, h))
    extra = int((mt - own) * m.num_experts_per_tok * per_slot * 2)
    extra += (gathered - t) * (h + m.num_experts) * 2
    if shape.dp_combine_copy:
        extra += gathered * h * 2
    return extra


def v2_sampler_state_bytes(spec: ModelSpec, num_reqs: int) -> int:
    """Model Runner V2's persistent penalty state on the last PP rank: an int32 count per
    request x vocabulary entry and a 1-bit prompt mask (`gpu/sample/penalties.py`)."""
    if spec.is_encoder_only:
        return 0
    return num_reqs * 4 * (spec.vocab_size + -(-spec.vocab_size // 32))


def sampler_warmup_bytes(spec: ModelSpec, num_reqs: int, profile_copies: float = 0.0) -> int:
    """Memory the sampler warm-up needs with `num_reqs` dummy requests (fp32 logits copies):
    the warm-up repeats the profile run's dummy sampler, so it needs at least as many copies
    as that (`profile_copies`, e.g. with the rejection sampler of speculative decoding)."""
    if spec.is_encoder_only:
        return 0
    return int(num_reqs * spec.vocab_size * 4 * max(SAMPLER_WARMUP_COPIES, profile_copies))


def non_torch_bytes(tp: int, *, custom_all_reduce: bool = True,
                    cublas_in_context: bool = False, custom_all_reduce_runs: bool = True) -> int:
    """Non-torch growth `N` during profiling on one rank (`cublas_in_context`: 0.33 creates
    the cuBLAS handles before the snapshot, so they are in the context, not in `N`).

    TP > 1: `custom_all_reduce` (its memory lands in `N`) adds the full TP share; a custom
    all-reduce that runs but is set up outside the profiling window a quarter of it; none
    (`custom_all_reduce_runs` False: PCIe parts, --disable-custom-all-reduce) nothing.
    NOTE: TP groups without custom all-reduce logged no TP share in `N` (0.8.5 v0 TP4 on
    PCIe Turing cards: 0.2 GiB; 0.11.1 TP4 on A30s: 0.09 GiB)."""
    if tp <= 1 or not custom_all_reduce_runs:
        extra = 0
    else:
        extra = NON_TORCH_TP if custom_all_reduce else NON_TORCH_TP // 4
    return NON_TORCH_BASE + extra - (CUBLAS_BEFORE_SNAPSHOT if cublas_in_context else 0)


def capture_sizes(largest: int, every_upto: int = 0) -> int:
    """How many batch sizes vLLM captures up to `largest` (1, 2, 4, then multiples of 8; the
    largest size is `stage_terms._default_sizes`' or the user's, already capped by the
    batched tokens).

    NOTE: the graph model's convention (its coefficients describe it): vLLM's own lists
    differ by release (steps of 16 above 256 from 0.12, all 67 sizes in 0.7-0.9, V0 cut at
    max_num_seqs; docs/accuracy.md, seventh session)."""
    if every_upto:
        # NOTE: --performance-mode interactivity: every size up to 32, then the usual steps.
        small = min(largest, every_upto)
        return small + max(0, largest // 8 - small // 8)
    # NOTE: (1, 2, 4) counted without a generator: once per (tokens, seqs) of a search.
    return (largest >= 1) + (largest >= 2) + (largest >= 4) + max(0, largest // 8)


def _default_grid(largest: int) -> set[int]:
    """vLLM's default capture list up to `largest` (0.12+: 1, 2, 4, steps of 8 below 256,
    of 16 from 256; config/vllm.py `_set_cudagraph_sizes`)."""
    grid = {n for n in (1, 2, 4) if n <= largest}
    grid.update(range(8, min(largest + 1, 256), 8))
    grid.update(range(256, largest + 1, 16))
    return grid


def decode_widths(max_num_seqs: int, query_len: int, largest: int, tokens: int,
                  cap: int) -> tuple[int, ...]:
    """The uniform decode widths vLLM adds to its default list (0.29+): n x query length for
    n on vLLM's request-count grid up to min(max_num_seqs, cap), within the largest size and
    the batched tokens; with one token per request, max_num_seqs itself."""
    top = min(largest, tokens)
    if query_len == 1:
        # NOTE: the common case, once per (tokens, seqs) of a search: no sets
        return (max_num_seqs,) if max_num_seqs <= top else ()
    reqs = min(max_num_seqs, cap)
    return tuple({n * query_len for n in _default_grid(reqs) | {reqs} if n * query_len <= top})


def list_units(sizes) -> int:
    """Distinct capture sizes in `capture_sizes`' units: a size above 256 counts two (the
    units step by 8 there, vLLM's own lists by 16: 51 graphs up to 512 are 67 units)."""
    return sum(2 if x > 256 else 1 for x in sizes)


def off_grid_units(sizes: tuple[int, ...], every_upto: int = 0) -> int:
    """The `list_units` of the sizes vLLM adds to its default list where they are off its
    grid (each size once). `every_upto`: the list holds every size up to it (interactivity)."""
    return list_units({w for w in sizes if not (_on_grid(w) or w <= every_upto)})


def _on_grid(n: int) -> bool:
    """Whether size `n` is on vLLM's default grid (`_default_grid`, below its largest)."""
    return n in (1, 2, 4) or (n % 8 == 0 if n < 256 else n % 16 == 0)


def graph_list_share(sizes: int) -> float:
    """The per-graph part of the pool for `sizes` (`capture_sizes`' units: steps of 8, so a
    graph above 256, where vLLM steps by 16, is two units) as a share of the full 512 list's
    (67 units, 51 graphs): proportional up to the full list (the model's convention, fitted),
    then half a fitted graph's share per further unit, i.e. one per graph above 256."""
    if sizes <= GRAPH_FULL_SIZES:
        return sizes / GRAPH_FULL_SIZES
    return 1.0 + (sizes - GRAPH_FULL_SIZES) / (2 * GRAPH_FIT_GRAPHS)


def cuda_graph_bytes(num_layers_on_rank: int, sizes: int, lora_cases: int = 1) -> int:
    """The CUDA-graph pool `G` on one rank for a capture list of `sizes` (`capture_sizes`'
    units; the list itself is `stage_terms._default_sizes` or the user's).

    `lora_cases` is 2 where vLLM captures every size twice, without and with active LoRA
    (`cudagraph_specialize_lora`, on by default with `--enable-lora` from 0.11.1): the
    per-size part of the pool doubles, the fixed part does not.
    """
    scale = 0.4 + 0.6 * graph_list_share(sizes) * lora_cases
    return int((GRAPH_BASE + GRAPH_PER_LAYER * num_layers_on_rank) * scale)


def lora_graph_estimate_bytes(num_layers_on_rank: int, sizes: int) -> int:
    """vLLM's own CUDA-graph estimate (0.18+) when LoRA-specialised graphs are captured.

    vLLM captures the first two graphs of each mode and extrapolates: first + max(second,
    1 MiB) × (graphs − 1) (`profile_cudagraph_memory`). With LoRA specialisation the two
    largest descriptors are the same size, without and with LoRA, so the second capture
    reuses the first one's pool and the slope falls to its 1 MiB floor: the estimate is about
    one graph (the model's value at one size) plus 1 MiB per further graph of either case.
    """
    first = int((GRAPH_BASE + GRAPH_PER_LAYER * num_layers_on_rank) * 0.4)
    return first + max(0, 2 * sizes - 2) * (1 << 20)


def context_bytes(world_size: int, *, nccl_before_snapshot: bool,
                  cublas_before_snapshot: bool, total_bytes: int = 80 << 30,
                  vendor: str = "nvidia") -> int:
    """Memory vLLM's own process holds before the free-memory snapshot."""
    if vendor == "amd":
        ctx = ROCM_CONTEXT
    else:
        ctx = min(CUDA_CONTEXT_MAX, CUDA_CONTEXT_BASE + int(CUDA_CONTEXT_PER_TOTAL * total_bytes))
    if world_size > 1 and nccl_before_snapshot:
        ctx += NCCL_BEFORE_SNAPSHOT
    if cublas_before_snapshot:
        ctx += CUBLAS_BEFORE_SNAPSHOT
    return ctx
