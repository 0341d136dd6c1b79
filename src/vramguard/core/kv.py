"""KV-cache specs, grouping, page sizes, blocks/tokens/concurrency and the capacity check.

§4-§6 of the reference. One `KvLayout` per worker (its PP stage's layers at its TP rank):
block size, groups (one per kind x layers-per-group), page `P`, and per-request blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import lcm

from .model import (CHUNKED, CSA, FULL, MAMBA, MLA, NONE, SLIDING, AttentionSpec, ModelSpec,
                    counted, distinct_index, fields_key)
from ._frozen import replacer
from .kv_mamba import MAMBA_DEFAULT_CHUNK, mamba_page_bytes, mamba_state_dtype_bytes
from .kv_quant import (PER_TOKEN_HEAD, TURBOQUANT, aligned_block_size, packed_head_bytes,
                       skip_layers)
from .rules import VllmRules
from .settings import Settings, uses_mtp

_FP8 = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}
# packed MLA layouts: bytes per token per layer regardless of the latent size (§4)
MLA_PACKED_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
_ATTN = (FULL, SLIDING, CHUNKED, MLA)
NVFP4_KV_BYTES = 0.5625         # bytes per element of an nvfp4 KV cache (values + scales)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_dtype_bytes(spec: ModelSpec, settings: Settings, rules: VllmRules,
                   model_dtype_bytes: int) -> tuple[float, str]:
    """(bytes per element, effective kv_cache_dtype) - fp8 variants are 1 byte, nvfp4 9/16
    (§4)."""
    d = (settings.kv_cache_dtype or "auto").lower()
    if d == "auto" and rules.modelopt_kv_auto_fp8 and spec.quant and spec.quant.kv_cache_scheme:
        scheme = spec.quant.kv_cache_scheme.lower()
        d = "fp8" if "fp8" in scheme else ("nvfp4" if "fp4" in scheme else d)
    if d in _FP8 or d == "nvfp4_ds_mla" or d in TURBOQUANT or d in PER_TOKEN_HEAD:
        return 1, d      # NOTE: TurboQuant / per-token-head: packed (kv_quant.packed_head_bytes)
    if d.startswith("nvfp4"):
        # NOTE: per head and side, head/2 bytes of packed 4-bit values + head/16 fp8 block
        # scales (`nvfp4_kv_cache_full_dim`): 9/16 byte per element.
        return NVFP4_KV_BYTES, d
    if d in ("bfloat16", "float16", "half", "bf16", "fp16"):
        return 2, d
    if d in ("float32", "float", "fp32"):
        return 4, d
    return model_dtype_bytes, "auto"


@dataclass(frozen=True)
class KvGroup:
    """One KV-cache group: `num_layers` layers of one kind sharing the block table."""

    kind: str
    num_layers: int               # real layers in the group
    padded_layers: int            # layers the page accounts for (padding included)
    window_tokens: int | None = None
    per_request_fixed: int | None = None     # mamba: blocks per request regardless of L
    # tokens per block where it differs from the layout's: a layer kind with a smaller page
    # per token holds more tokens in the unified page (unify_kv_cache_spec_page_size)
    block_size: int | None = None
    extra_blocks: int = 0         # blocks beyond the length's (mamba "all": speculative ones)


@dataclass(frozen=True)
class KvLayout:
    """The KV layout of one worker."""

    block_size: int
    page_size_bytes: int          # P: bytes per block (all layers of one group)
    bytes_per_token: int          # attention bytes per token on this worker (all layers)
    groups: tuple[KvGroup, ...]
    attn_page_per_token_layer: int      # bytes/token of one attention layer
    mamba_page_bytes: int = 0           # per-layer mamba page (after padding)
    mamba_padding_pct: float = 0.0
    block_size_enlarged: bool = False
    padding_layers: int = 0
    inflight_tokens: int = 0            # I of the sliding/chunked caps
    attention_free: bool = False
    # groups with pages of different sizes (DeepSeek-V4, core/kv_csa.py): each group's page
    # where concurrency weighs blocks by page (0.26), and the bytes per block of vLLM's
    # one-request check where it differs from the pool's block (0.26-0.28)
    group_page_bytes: tuple[int, ...] = ()
    check_block_bytes: int = 0
    # the layout vLLM's one-request check and auto-fit read where it is not this worker's
    # (0.14-0.16 with PP: the whole model's, `rules.kv_fit_whole_model`)
    check_layout: "KvLayout | None" = None
    # --decode-context-parallel-size: each token's attention KV lives on one of this many
    # ranks, so a request needs cdiv(L, block x cp_shard) blocks per GPU (Mamba state is not
    # sharded); the pool's blocks and pages are unchanged
    cp_shard: int = 1
    # attention layers whose KV is in the quantized format (not kept at the model dtype by
    # the layers as their own specs for the fit check of 0.7-0.13 (`check_bytes`): (kind as
    # the model declares it, window, layers, bytes per token; MAMBA: one page per layer)
    layer_terms: tuple[tuple[str, int | None, int, int], ...] = ()
    # --kv-cache-dtype-skip-layers / TurboQuant's boundary layers): their init buffers
    quantized_layers: int = 0

    def blocks_per_request(self, max_model_len: int) -> int:
        """Σ over groups of the blocks one request of `max_model_len` needs."""
        # NOTE: a loop, not a generator: called several times per screened candidate.
        b, inflight, shard = self.block_size, self.inflight_tokens, self.cp_shard
        n = 0
        for g in self.groups:
            n += _group_blocks(g, max_model_len, b, inflight, shard)
        return n

    def needed_bytes(self, max_model_len: int, per_request: int | None = None) -> int:
        """vLLM's `max_memory_usage` for one request of `max_model_len`, on this worker
        (`per_request`: `blocks_per_request(max_model_len)` when the caller has it)."""
        if per_request is None:
            per_request = self.blocks_per_request(max_model_len)
        return per_request * (self.check_block_bytes or self.page_size_bytes)

    def check_bytes(self, max_model_len: int, mode: str = "groups",
                    per_request: int | None = None) -> int:
        """The bytes vLLM's fit check asks for one request (`rules.kv_fit_check`): "groups"
        (0.19+: every group's blocks), "first_group" (0.14-0.18: the first group's blocks x
        the group count's pages), "layers" (0.7-0.13: each layer's own spec before grouping,
        its window cap kept, no padding layers)."""
        if self.check_layout is not None:
            return self.check_layout.check_bytes(max_model_len, mode)
        if mode == "first_group" and len(self.groups) > 1 and not self.group_page_bytes:
            g = self.groups[0]
            return (_group_blocks(g, max_model_len, self.block_size, self.inflight_tokens,
                                  self.cp_shard) * self.page_size_bytes)
        if mode == "layers" and self.layer_terms:
            b, total = self.block_size, 0
            for kind, window, n, bpt in self.layer_terms:
                if kind == MAMBA:
                    total += n * self.mamba_page_bytes
                    continue
                g = KvGroup(kind if window else FULL, n, n, window)
                total += n * _group_blocks(g, max_model_len, b, self.inflight_tokens,
                                           self.cp_shard) * b * bpt
            return total
        return self.needed_bytes(max_model_len, per_request)

    def concurrency_blocks(self, max_model_len: int, per_request: int | None = None) -> int:
        """Blocks per request in vLLM's maximum-concurrency figure (page-weighted where the
        groups' pages differ in size and the version weighs them; `per_request` as in
        `needed_bytes`)."""
        if not self.group_page_bytes:
            return (self.blocks_per_request(max_model_len) if per_request is None
                    else per_request)
        b, inflight, shard = self.block_size, self.inflight_tokens, self.cp_shard
        weighted = sum(_group_blocks(g, max_model_len, b, inflight, shard) * page
                       for g, page in zip(self.groups, self.group_page_bytes))
        return cdiv(weighted, self.group_page_bytes[0])


def _group_blocks(g: KvGroup, L: int, b: int, inflight: int, shard: int = 1) -> int:
    if g.per_request_fixed is not None:
        return g.per_request_fixed
    if g.block_size:
        b = g.block_size
    if g.kind == SLIDING and g.window_tokens:
        return cdiv(min(g.window_tokens - 1 + inflight, L), b) + 1
    if g.kind == CHUNKED and g.window_tokens:
        return cdiv(min(g.window_tokens + inflight, L), b)
    if shard > 1 and g.kind != MAMBA:
        b *= shard
    return cdiv(L, b) + g.extra_blocks


def default_block_size(spec: ModelSpec, settings: Settings, rules: VllmRules, *,
                       device: str = "cuda", compute_capability: tuple[int, int] | None = None) -> int:
    """Block size before hybrid enlargement: user > CPU 128 > MLA 64/128 > 16 (§9); an MLA
    backend's forced size replaces the user's where the release does so."""
    user = settings.block_size
    if device == "cpu":
        return int(user) if user else (16 if spec.uses_mla else rules.cpu_block_size)
    if spec.uses_mla and rules.mla_supported:
        size, backend = _mla_block_size(spec, rules, compute_capability,
                                        settings.kv_cache_dtype)
        return _mla_user_block(rules, int(user), size, backend) if user else size
    return int(user) if user else 16


def hybrid_alignment(spec: ModelSpec, rules: VllmRules, cc: tuple[int, int] | None,
                     block_size: int) -> int:
    """The attention block alignment vLLM uses when it unifies a hybrid's pages
    (`rules.mla_hybrid_align`, `hybrid_align_256_blackwell`, `hybrid_align_from_block`)."""
    if rules.hybrid_align_from_block:
        return block_size if spec.uses_mla else max(16, block_size)
    if spec.uses_mla:
        return rules.mla_hybrid_align
    mode = rules.hybrid_align_256_blackwell
    if mode and spec.head_dim == 256 and cc and (cc == (10, 0) if mode == "cc100"
                                                 else cc[0] == 10):
        return 32          # NOTE: FlashInfer, head size 256 (flashinfer issue 1993)
    return 16


def _mla_block_size(spec: ModelSpec, rules: VllmRules, cc: tuple[int, int] | None,
                    kv_dtype: str | None = None) -> tuple[int, str | None]:
    """(block size, the backend that forces it or None) of the MLA backend vLLM picks for
    this GPU family (rules fields)."""
    mla = next(l.attention for l in spec.layers if l.attention.kind == MLA)
    major = cc[0] if cc else None
    if mla.indexer_bytes_per_token and rules.mla_block_sparse and major in (9, 10):
        return rules.mla_block_sparse, "sparse"
    if major == 10:
        if mla.mla_qk_nope_head_dim in rules.mla_flashinfer_nope:
            return rules.mla_block_flashinfer, "flashinfer"
        if rules.mla_block_blackwell and (cc == (10, 0) or not rules.mla_blackwell_cc100_only):
            return rules.mla_block_blackwell, "cutlass"
        return rules.mla_block_size, None
    if major == 9:
        if rules.mla_block_hopper_fp8 and (kv_dtype or "auto").startswith("fp8"):
            return rules.mla_block_hopper_fp8, "flashmla"
        if rules.mla_block_hopper:
            return rules.mla_block_hopper, "flashmla" if rules.mla_block_hopper > 16 else None
    return rules.mla_block_size, None


def _mla_user_block(rules: VllmRules, user: int, forced: int, backend: str | None) -> int:
    """A user's --block-size on an MLA model (`rules.mla_user_block`)."""
    mode = rules.mla_user_block
    if mode is None or backend is None:
        return user
    if mode == "replace":
        return forced
    keep = user % forced == 0 or (backend == "flashinfer" and user == 32)
    return user if keep else forced


def inflight_tokens(rules: VllmRules, settings: Settings, max_num_batched_tokens: int,
                    async_scheduling: bool = False, v2_runner: bool = False) -> int:
    """I of the sliding-window / chunked-local caps (§4): from 0.26 `max_concurrent_batches`
    x batched tokens, the batches being PP, 2 with async scheduling at PP = 1, PP + 1 with
    async scheduling under Model Runner V2 (config/vllm.py)."""
    if rules.sliding_inflight == "batched_x_batches":
        pp = settings.pipeline_parallel_size
        if async_scheduling:
            batches = pp + 1 if v2_runner else (2 if pp == 1 else pp)
        else:
            batches = pp
        return batches * max_num_batched_tokens
    return max_num_batched_tokens


def _layer_kind(kind: str, rules: VllmRules, settings: Settings, engine: str) -> str:
    if kind == MLA and not rules.mla_supported:
        return FULL
    if kind == MAMBA and engine == "v0":
        return NONE     # NOTE: v0 keeps the Mamba state outside the KV cache (mamba_cache.py)
    if kind in (SLIDING, CHUNKED):
        if engine == "v0" or not rules.hybrid_kv_manager or settings.disable_hybrid_kv_cache_manager:
            return FULL
        if kind == CHUNKED and (not rules.chunked_local_spec or rules.chunked_disables_hybrid):
            return FULL
        if kind == SLIDING and settings.disable_sliding_window:
            return FULL
    return kind


def draft_attention(spec: ModelSpec, settings: Settings, layer_range: tuple[int, int],
                    engine: str) -> tuple[AttentionSpec, ...]:
    """KV-cache layers the drafter adds on the last PP stage: a separate draft model's
    (`spec.draft`: its attention layers share the target's block pool, v1 and v0 alike: v0
    gives the draft cache the same number of blocks), else the MTP layers' (v1).

    NOTE: with speculative decoding on a model whose checkpoint carries MTP layers, vLLM
    loads them as the drafter and registers their attention in the KV cache spec, so they
    join the KV groups (Qwen3.5-4B + MTP: "the MTP layer + 3 padding layers", 287,767 tokens
    where 8 attention layers alone give 324,745). Each MTP layer attends like the model's full
    attention layers; vLLM builds all `mtp_layers` of them (more speculative tokens than
    layers reuse them). A spec that records only the MTP parameters counts one layer. N-gram
    and suffix decoding load no drafter; EAGLE heads and draft LMs come as `spec.draft`.
    """
    if settings.num_speculative_tokens <= 0 or layer_range[1] != spec.num_layers:
        return ()
    if spec.draft is not None:
        return spec.draft.attention
    if engine != "v1" or not spec.mtp_params or not uses_mtp(settings):
        return ()
    att = next((l.attention for l in spec.layers if l.attention.kind in (FULL, MLA, CSA)), None)
    if att is not None and att.kind == CSA:
        # NOTE: DeepSeek-V4's MTP layer keeps only a sliding-window cache (ratio forced to 1,
        # models/deepseek_v4/attention.py).
        att = replace(att, compress_ratio=0, indexer_head_dim=0)
    return (att,) * max(1, spec.mtp_layers) if att is not None else ()


def build_layout(spec: ModelSpec, settings: Settings, rules: VllmRules, layer_range: tuple[int, int],
                 *, kv_bytes: int, mamba_bytes: int, block_size: int, engine: str,
                 max_num_batched_tokens: int, async_scheduling: bool = False,
                 v2_runner: bool = False, kernel_alignment: int = 16,
                 kv_dtype_name: str = "auto", mamba_mode: str = "none",
                 mla_align_elems: int = 0, mamba_ckpt: frozenset = frozenset()) -> KvLayout:
    """The KV layout of one worker holding `layer_range` at TP `settings.tensor_parallel_size`
    (`layout_shape` with the in-flight tokens of `inflight_tokens`)."""
    shape = layout_shape(spec, settings, rules, layer_range, kv_bytes=kv_bytes,
                         mamba_bytes=mamba_bytes, block_size=block_size, engine=engine,
                         kernel_alignment=kernel_alignment, kv_dtype_name=kv_dtype_name,
                         mamba_mode=mamba_mode, mla_align_elems=mla_align_elems,
                         mamba_ckpt=mamba_ckpt)
    return with_inflight(shape, inflight_tokens(rules, settings, max_num_batched_tokens,
                                                async_scheduling, v2_runner))


def with_inflight(shape: KvLayout, inflight: int) -> KvLayout:
    """`shape` (from `layout_shape`) with the in-flight tokens `I` of the sliding/chunked caps.

    NOTE: an attention-free layout (no groups) keeps I = 0. Built without the frozen
    `__init__` (a search varies the batched tokens, hence I, per candidate)."""
    if not shape.groups:
        return shape
    if shape.check_layout is not None:
        return _replace_layout(shape, inflight_tokens=inflight,
                               check_layout=with_inflight(shape.check_layout, inflight))
    return _replace_layout(shape, inflight_tokens=inflight)


_replace_layout = replacer(KvLayout)
_ATTENTION_KEY = fields_key(AttentionSpec)


def windowed(layout: KvLayout) -> bool:
    """Whether a group of `layout` caps its blocks by a window (sliding or chunked): the only
    groups whose blocks per request read the in-flight tokens."""
    return any(g.window_tokens and g.kind in (SLIDING, CHUNKED) for g in layout.groups)


def attention_runs(spec: ModelSpec,
                   layer_range: tuple[int, int]) -> tuple[tuple[AttentionSpec, int], ...]:
    """The distinct attention specs of the layers in `layer_range` with their counts, in
    order of first occurrence (what `layout_shape` reads of the layers)."""
    start, end = layer_range
    attns = [layer.attention for layer in spec.layers[start:end]]
    runs = counted(*distinct_index(attns, map(_ATTENTION_KEY, attns)))
    if any(a.cache_layers != 1 for a, _ in runs):
        # NOTE: LongCat-Flash's two attentions per decoder layer are two KV cache layers
        runs = tuple((replace(a, cache_layers=1), n * a.cache_layers) for a, n in runs)
    if any(a.parallel_mamba for a, _ in runs):
        # NOTE: Falcon-H1's layers are an attention layer and a Mamba layer to vLLM's KV
        # cache (the mixer registered under its own layer index): one run of each.
        runs = tuple(r for a, n in runs for r in (
            ((replace(a, mamba=None), n), (AttentionSpec(kind=MAMBA, mamba=a.mamba), n))
            if a.parallel_mamba else ((a, n),)))
    return runs


def layout_shape(spec: ModelSpec, settings: Settings, rules: VllmRules,
                 layer_range: tuple[int, int], **kw) -> KvLayout:
    """`build_layout` without the in-flight tokens (I = 0; `with_inflight` sets it): the
    block size, groups and pages depend on neither the batched tokens nor PP's batches; with
    --decode-context-parallel-size, the requests' tokens sharded over the DCP ranks."""
    shape = _layout_shape(spec, settings, rules, layer_range, **kw)
    dcp = settings.decode_context_parallel_size
    return _replace_layout(shape, cp_shard=dcp) if dcp > 1 else shape


def _layout_shape(spec: ModelSpec, settings: Settings, rules: VllmRules,
                  layer_range: tuple[int, int], *, kv_bytes: int, mamba_bytes: int,
                  block_size: int, engine: str, kernel_alignment: int = 16,
                  kv_dtype_name: str = "auto", runs=None, mamba_mode: str = "none",
                  mla_align_elems: int = 0, mamba_ckpt: frozenset = frozenset()) -> KvLayout:
    """`layout_shape` before context parallelism.

    `runs`: `attention_runs(spec, layer_range)` when the caller has it. `mamba_mode`:
    vLLM's mamba_cache_mode with prefix caching on a hybrid model ("align": a request holds one
    more block per Mamba group; "all": a Mamba state per block of the sequence, like full
    attention; `stage_terms.mamba_cache_mode`). `mla_align_elems`: MLA entries rounded up to a
    multiple of this many elements (v0 0.7.2-0.7.3 on CUDA). `mamba_ckpt`: the state kinds
    that hold a prefill-checkpoint block in "align" mode (`kv_mamba.mamba_checkpoint_kinds`)."""
    tp = settings.tensor_parallel_size
    if runs is None:
        runs = attention_runs(spec, layer_range)
    draft = draft_attention(spec, settings, layer_range, engine)
    if draft:
        runs = runs + counted(*distinct_index(draft))
    if any(a.kind == CSA for a, _ in runs):
        from .kv_csa import csa_layout     # NOTE: DeepSeek-V4 only; kv_csa imports kv
        return csa_layout(runs, settings, rules, kv_dtype_name, kv_bytes)
    kinds: dict[tuple[str, int | None], int] = {}
    kind_bpt: dict[tuple[str, int | None], int] = {}     # per-layer bytes/token per kind
    attn_bpt = 0
    per_layer_bpt = 0
    mamba_page = 0
    quantized = 0
    terms: dict[tuple[str, int | None, int], int] = {}     # (kind, window, bpt) -> layers
    ckpt = False            # NOTE: a state kind with a prefill-checkpoint block
    chunk = 0               # NOTE: the Mamba chunk size the config gives
    skip = skip_layers(spec, settings, rules, kv_dtype_name)
    marked = _mark_skipped(spec, layer_range, runs, skip)
    # NOTE: one pass per distinct spec for its `n` layers: the same result as one pass per
    # layer (counts and bytes are whole numbers, a maximum does not change when repeated,
    # and each group key first appears with the first layer that has it).
    v0_encoder = engine == "v0" and spec.is_encoder_only
    for a, n, full in marked:
        kind = _layer_kind(a.kind, rules, settings, engine)
        if v0_encoder and kind == NONE and a.head_dim:
            # NOTE: v0's cache engine counts every attention layer, an encoder's too
            # (worker/cache_engine.py get_cache_block_size): its KV cache is allocated
            kind, a = FULL, replace(a, kind=FULL)
        if kind == NONE:
            continue
        if kind == MAMBA:
            if a.mamba is not None:
                ckpt = ckpt or a.mamba.kind in mamba_ckpt
                chunk = chunk or a.mamba.chunk_size
                mamba_page = max(mamba_page, mamba_page_bytes(
                    a.mamba, tp, mamba_state_dtype_bytes(a.mamba, settings, rules, mamba_bytes),
                    settings.num_speculative_tokens, rules.conv_spec_kinds))
            kinds[(MAMBA, None)] = kinds.get((MAMBA, None), 0) + n
            terms[(MAMBA, None, 0)] = terms.get((MAMBA, None, 0), 0) + n
            continue
        bpt = _attn_bpt(a, tp, mamba_bytes if full else kv_bytes,
                        "auto" if full else kv_dtype_name)
        quantized += 0 if full else n
        if full:
            pass            # NOTE: a skipped layer keeps the model dtype, unpacked
        elif a.kind == MLA and kv_dtype_name in MLA_PACKED_BYTES:
            bpt = MLA_PACKED_BYTES[kv_dtype_name]
        elif kind == MLA and mla_align_elems:
            bpt = cdiv(bpt // kv_bytes, mla_align_elems) * mla_align_elems * kv_bytes
        if a.kind == MLA and kind == FULL:
            # NOTE: before MLA support (v0 < 0.7.1, v1 < 0.8) DeepSeek-V2 used full heads of
            # qk_nope + qk_rope, padded to 256 for FlashAttention up to 0.6.
            heads = max(1, spec.num_attention_heads // tp)
            width = 256 if rules.mla_full_head_pad else (
                (a.mla_qk_nope_head_dim or 128) + (a.mla_rope_head_dim or 64))
            bpt = heads * 2 * width * kv_bytes
        raw_window = (a.sliding_window_tokens if a.kind == SLIDING else
                      a.chunk_size_tokens if a.kind == CHUNKED else None)
        tkey = (a.kind if raw_window else kind, raw_window, bpt)
        terms[tkey] = terms.get(tkey, 0) + n
        attn_bpt += bpt * n     # NOTE: whole bytes (int dtype sizes): exact
        per_layer_bpt = max(per_layer_bpt, bpt)
        window = a.sliding_window_tokens if kind == SLIDING else (
            a.chunk_size_tokens if kind == CHUNKED else None)
        key = (kind, window)
        kinds[key] = kinds.get(key, 0) + n
        kind_bpt[key] = max(kind_bpt.get(key, 0), bpt)
    inflight = 0          # NOTE: set by `with_inflight`
    b = block_size
    if skip and rules.kv_skip_align:
        b = _skip_aligned_block(spec, tp, b, kv_bytes, kv_dtype_name, mamba_bytes)
    enlarged, pad_pct = False, 0.0
    has_mamba = (MAMBA, None) in kinds
    n_attn = sum(n for (k, _), n in kinds.items() if k != MAMBA)
    if not kinds:
        return KvLayout(block_size=b, page_size_bytes=0, bytes_per_token=0, groups=(),
                        attn_page_per_token_layer=0, attention_free=True)
    if has_mamba and rules.hybrid_page_unification and per_layer_bpt:
        if mamba_mode == "all" and n_attn:
            # NOTE: "all" aligns the block to lcm(Mamba chunk size, kernel alignment)
            # (0.15-0.31 HybridAttentionMambaModelConfig / platforms `_align_hybrid_block_size`)
            unit = lcm(chunk or MAMBA_DEFAULT_CHUNK, kernel_alignment)
            target = unit * cdiv(cdiv(mamba_page, per_layer_bpt), unit)
            if target > b:
                b, enlarged = target, True
        elif mamba_page > b * per_layer_bpt:
            align = kernel_alignment
            b = align * cdiv(mamba_page, align * per_layer_bpt)
            enlarged = True
        padded = b * per_layer_bpt
        if mamba_page:
            pad_pct = (padded - mamba_page) / mamba_page * 100
        mamba_page = padded
    elif has_mamba and not per_layer_bpt:
        per_layer_bpt = 0
    spec_blocks = (settings.num_speculative_tokens
                   if has_mamba and mamba_mode in rules.mamba_spec_block_modes else 0)
    if len(kinds) == 1 and not has_mamba:
        (kind, window), n = next(iter(kinds.items()))
        groups = (KvGroup(kind, n, n, window),)
        page = b * attn_bpt
        return KvLayout(block_size=b, page_size_bytes=page, bytes_per_token=attn_bpt,
                        groups=groups, attn_page_per_token_layer=per_layer_bpt,
                        inflight_tokens=inflight, quantized_layers=quantized,
                        layer_terms=_terms(terms))
    # Grouped (hybrid or mixed attention): equal-size groups, padding layers added.
    counts = sorted(kinds.values())
    lo, hi = counts[0], counts[-1]
    group_size = hi if hi < lo * rules.kv_group_max_ratio else lo
    groups: list[KvGroup] = []
    padding = 0
    aligned = mamba_mode == "align" and bool(n_attn)
    mamba_blocks = 1 + spec_blocks + (1 + ckpt if aligned else 0)
    # NOTE: "all" (MambaSpec.max_memory_usage_bytes): cdiv(L, block) + speculative blocks, the
    # Mamba block being the (unified) attention block size.
    per_block_mamba = mamba_mode == "all" and bool(n_attn)
    for (kind, window), n in kinds.items():
        num = cdiv(n, group_size)
        padding += num * group_size - n
        fixed = mamba_blocks if kind == MAMBA and not per_block_mamba else None
        extra = spec_blocks if kind == MAMBA and per_block_mamba else 0
        gb = _unified_block_size(b, per_layer_bpt, kind_bpt.get((kind, window), 0))
        for i in range(num):
            real = min(group_size, n - i * group_size)
            groups.append(KvGroup(kind, real, group_size, window, fixed, gb, extra))
    unit_page = max(b * per_layer_bpt, mamba_page)
    page = unit_page * group_size
    return KvLayout(block_size=b, page_size_bytes=page, bytes_per_token=attn_bpt,
                    groups=tuple(groups), attn_page_per_token_layer=per_layer_bpt,
                    mamba_page_bytes=mamba_page, mamba_padding_pct=pad_pct,
                    block_size_enlarged=enlarged, padding_layers=padding,
                    inflight_tokens=inflight, attention_free=n_attn == 0 and not has_mamba,
                    quantized_layers=quantized, layer_terms=_terms(terms))


def _terms(terms: dict) -> tuple[tuple[str, int | None, int, int], ...]:
    """`KvLayout.layer_terms` from (kind, window, bytes per token) -> layers."""
    return tuple((k, w, n, bpt) for (k, w, bpt), n in terms.items())


def _mark_skipped(spec: ModelSpec, layer_range: tuple[int, int], runs,
                  skip: frozenset[int]) -> list[tuple[AttentionSpec, int, bool]]:
    """`runs` as (spec, layers, kept at the model dtype): the skipped layers of the range
    split off their spec's run (a drafter's layers, after the range's, are never skipped)."""
    if not skip:
        return [(a, n, False) for a, n in runs]
    start, end = layer_range
    held: dict = {}
    for i in skip:
        if start <= i < end:
            a = spec.layers[i].attention
            held[a] = held.get(a, 0) + 1
    out = []
    for a, n in runs:
        k = min(held.pop(a, 0), n)
        if n - k:
            out.append((a, n - k, False))
        if k:
            out.append((a, k, True))
    return out


def _attn_bpt(a: AttentionSpec, tp: int, kv_bytes: float, kv_name: str) -> int:
    """One layer's KV bytes per token on a rank: packed formats by their slot, others by
    element width."""
    if a.kind in _ATTN and a.kind != MLA and (kv_name in TURBOQUANT or kv_name in PER_TOKEN_HEAD):
        d = a.head_dim or 0
        v = a.v_head_dim if a.v_head_dim is not None else d
        return max(1, (a.num_kv_heads or 0) // tp) * packed_head_bytes(kv_name, d, v)
    return a.kv_bytes_per_token(tp, kv_bytes)


def _skip_aligned_block(spec: ModelSpec, tp: int, block: int, kv_bytes: float, kv_name: str,
                        model_bytes: int) -> int:
    """0.25+: the block size when skipped layers share the pool with quantized ones; vLLM
    sizes the quantized page as a plain `FullAttentionSpec` of the cache dtype (TurboQuant:
    1-byte elements, its packing unseen there)."""
    heads = max(1, (spec.num_kv_heads or 0) // tp)
    d = spec.head_dim or 0
    packed = None if kv_name in TURBOQUANT else packed_head_bytes(kv_name, d, d)
    primary = heads * packed if packed else int(heads * 2 * d * kv_bytes)
    return aligned_block_size(block, heads * 2 * d * model_bytes, primary)


def _unified_block_size(b: int, page_bpt: int, bpt: int) -> int | None:
    """Tokens per block of a layer kind whose page per token is smaller than the largest:
    vLLM enlarges its block size so its page equals the others' (None: unchanged)."""
    if not bpt or bpt >= page_bpt or (b * page_bpt) % bpt:
        return None
    return b * page_bpt // bpt


# ---- capacity --------------------------------------------------------------------------

def estimate_max_len(layout: KvLayout, avail_bytes: int, max_model_len: int,
                     mode: str = "groups") -> int:
    """vLLM's binary search over [1, L] for the largest L' whose one request fits (0: none);
    `mode`: the release's fit check (`KvLayout.check_bytes`)."""
    if layout.page_size_bytes <= 0:
        return max_model_len
    if layout.check_bytes(1, mode) > avail_bytes:
        return 0
    lo, hi = 1, max_model_len
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.check_bytes(mid, mode) <= avail_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def num_blocks_for(layout: KvLayout, kv_bytes: int) -> int:
    """`K // P` (0 when negative)."""
    if layout.page_size_bytes <= 0 or kv_bytes <= 0:
        return 0
    return kv_bytes // layout.page_size_bytes


def concurrency(rules: VllmRules, layout: KvLayout, num_blocks: int, max_model_len: int,
                engine: str, per_request: int | None = None) -> float:
    """Maximum concurrency as that version computes it (§1b); `per_request`:
    `layout.blocks_per_request(max_model_len)` when the caller has it."""
    if max_model_len <= 0:
        return 0.0
    if engine == "v1" and rules.concurrency_formula == "blocks_over_per_request":
        per = layout.concurrency_blocks(max_model_len, per_request)
        return num_blocks / per if per else 0.0
    return num_blocks * layout.block_size / max_model_len


def tokens(rules: VllmRules, layout: KvLayout, num_blocks: int, conc: float,
           max_model_len: int, engine: str) -> int:
    """Tokens in the KV pool as that version reports them (§1b)."""
    if engine == "v1" and rules.tokens_formula == "conc_x_len":
        return int(conc * max_model_len)
    groups = max(1, len(layout.groups))
    return num_blocks // groups * layout.block_size * layout.cp_shard
