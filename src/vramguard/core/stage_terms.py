"""The planner's per-stage terms: weights, activation peak, non-torch memory, CUDA graphs and
the KV layout of each pipeline stage, estimated from the model and settings alone
(`base_terms`, memoized per family by `_memo.family_terms`), then replaced by measured or
pinned values (`override`). Split out of `planner` (which walks the startup over these terms).
"""

from __future__ import annotations

from dataclasses import replace
from math import lcm
from typing import TYPE_CHECKING

from . import _memo
from ._frozen import maker, replacer
from . import activation as act
from .all2all import dp_moe
from . import kv as kvm
from .arch_support import encoder_tp_data
from .calibration import Calibration
from .gpu import GpuSpec
from .kv_mamba import GDN_CHECKPOINT_ALIGN, mamba_checkpoint_kinds
from .kv_quant import init_buffer_bytes
from .model import MAMBA, ModelSpec
from .provenance import Estimate, Source
from .rules import VllmRules
from .runner import async_scheduling, mamba_cache_mode, model_runner_v2
from .settings import Settings, is_pooling
from .weights import (LoraRules, draft_bytes, eplb_buffer_bytes, mla_backend_bytes,
                      moe_partition, mxfp4_layout, pp_layer_split, runtime_dtype_bytes)

if TYPE_CHECKING:
    from .planner import PlanHooks


# NOTE: built for every (tokens, seqs) a search tries: without the frozen __init__ (_frozen.py).
_profile_shape, _estimate = maker(act.ProfileShape), maker(Estimate)
_ESTIMATED = Source.ESTIMATED


def _banded(value: int, rel: float, note: str) -> Estimate:
    """`Estimate.banded(value, rel, Source.ESTIMATED, note)` for an int value."""
    spread = abs(value) * rel
    return _estimate(value_bytes=int(value), low_bytes=int(value - spread),
                     high_bytes=int(value + spread), source=_ESTIMATED, note=note)


def plus_bytes(est: Estimate, extra: int, note: str) -> Estimate:
    """`est` with `extra` bytes added to its value and band, `note` appended."""
    return _estimate(value_bytes=est.value_bytes + extra, low_bytes=est.low_bytes + extra,
                     high_bytes=est.high_bytes + extra, source=est.source, note=est.note + note)


def runtime_base(spec: ModelSpec, s: Settings, rules: VllmRules, tokens: int, seqs: int,
                 fixed: tuple) -> tuple:
    """What `base_terms` computes that no KV-cache setting changes: per stage (activation,
    non-torch with the V2 sampler's state, graph term, graph pool where it differs); the
    in-flight tokens; the init buffers' bytes. `fixed`: `fixed_terms(...)`."""
    fixed, _kv_name, ctx = fixed
    tp, ep_div, dtype_b, copies, eager, graph_mode, graph_sizes, async_sched, v2, sampler = ctx
    # NOTE: --language-model-only loads no encoder; --skip-mm-profiling leaves it out of the
    # profile run (vLLM logs "Skipping memory profiling for multimodal encoder").
    num_reqs, encoder = act.mm_profile(spec, tokens, seqs,
                                       rules.v0_mm_profile_seqs and not s.language_model_only,
                                       rules.v0_mm_dropped_when_long)
    # NOTE: V0 reads no --skip-mm-profiling (0.10.1-0.10.2: only V1's profile run does); a
    # prompt limited to 0 items of every input has no multimodal data in either engine
    skip = s.skip_mm_profiling and (rules.engine == "v1" or (
        s.limit_mm_per_prompt is not None and mm_encoder_off(spec, s)))
    encoder = encoder and not (s.language_model_only or skip
                               or (v2 and not rules.v2_profiles_encoder))
    items, kept = 1, 0
    if encoder and spec.vision is not None:
        items, kept = _v1_encoder_batch(spec, s, rules, tokens, seqs, dtype_b)
    if encoder and rules.engine == "v0" and rules.v0_mm_profile_seqs:
        # NOTE: each of v0's dummy sequences carries an image (the default limit of one per
        # prompt), all encoded in the one profile forward (worker/model_runner.py)
        items = num_reqs
    # NOTE: V1's model runner profiles the encoder on every PP rank; Model Runner V2 (0.27+)
    # on the first
    every_rank = rules.engine == "v1" and not v2
    if rules.v1_profile_logits:
        # NOTE: V1 0.7.x has no dummy sampler: the logits of every batched token (0.7.0-0.7.2)
        # or of each dummy request (0.7.3), in the model dtype
        num_reqs = tokens if rules.v1_profile_logits == "tokens" else seqs
        copies = dtype_b / 4
    inflight = kvm.inflight_tokens(rules, s, tokens, async_sched, v2)
    pp = s.pipeline_parallel_size
    buffers = (tokens * (spec.token_buffer_bytes + spec.token_buffer_elems * dtype_b)
               if rules.init_token_buffers else 0)
    # NOTE: allocated after the weights are measured; from 0.27 the budget charges all memory
    # consumed since the snapshot, so the V2 sampler's per-request state is in it.
    state = (act.v2_sampler_state_bytes(spec, seqs) if v2 and rules.consumed_model and sampler
             else 0)
    dp_ranks, deepep, combine_copy = 1, 0, False
    if s.data_parallel_size > 1:
        _backend, dp_ranks, deepep, combine_copy = dp_moe(spec, s, rules, tokens)
    out = []
    for r, rng, _w, n_est, _shape, mamba_slot, _windowed in fixed:
        if state and r == pp - 1:
            n_est = plus_bytes(n_est, state, " + the V2 sampler's per-request penalty state")
        if deepep:
            # NOTE: DeepEP's runtime allocates them outside torch after the weights are measured
            n_est = plus_bytes(n_est, deepep, " + DeepEP's all-to-all buffers")
        # NOTE: computed, not memoized: a search gives most (tokens, seqs) once, and looking
        # the peak up cost more than the arithmetic.
        a_val = act.activation_bytes(spec, _profile_shape(
            batched_tokens=tokens, num_reqs=num_reqs, last_pp_rank=r == pp - 1,
            first_pp_rank=r == 0 or every_rank, tp=tp, moe_inter_divisor=ep_div,
            dtype_bytes=dtype_b,
            engine=rules.engine, sampler_copies=copies, encoder_profiled=encoder,
            encoder_items=items, encoder_kept_bytes=kept, sampler=sampler,
            encoder_dp=s.mm_encoder_tp_mode == "data", moe_chunk=rules.moe_chunk_tokens,
            dp_ranks=dp_ranks, dp_combine_copy=combine_copy, moe_ws_layout=rules.moe_ws_layout))
        note = "profile run: tokens x hidden, MoE workspace, sampler logits"
        if dp_ranks > 1:
            note += f" (MoE over the tokens of {dp_ranks} DP ranks)"
        if mamba_slot:
            # NOTE: v0 allocates the Mamba state in the profile run's first forward.
            a_val += mamba_slot * v0_mamba_slots(rules, seqs, eager)
            note += ", v0 Mamba state"
        if s.enable_eplb and rules.eplb_buffer == "peak":
            a_val += eplb_buffer_bytes(spec, s, dtype_b)
            note += ", EPLB's rearrangement"
        a_est = _banded(a_val, act.ACT_REL, note)
        g_val, g_pool = _graph_terms(rng[1] - rng[0], seqs, tokens, s, rules,
                                     graph_mode == "NONE", graph_sizes)
        g_est = _banded(g_val, act.GRAPH_REL,
                        "CUDA graph pool" if g_val else "no CUDA graphs captured")
        out.append((a_est, n_est, g_est, g_pool))
    return tuple(out), inflight, buffers


def _v1_encoder_batch(spec: ModelSpec, s: Settings, rules: VllmRules, tokens: int, seqs: int,
                      dtype_b: int) -> tuple[int, int]:
    """(images in V1's encoder dummy batch, bytes of their outputs kept in the encoder cache
    through the text forward: T rows each, the budget's rows in 0.11.0-0.11.2)."""
    if rules.engine != "v1" or not rules.mm_items_formula:
        return 1, 0
    item_tokens = act.vision_max_tokens(spec)
    limit = dict(s.limit_mm_per_prompt or ()).get("image", rules.mm_default_limit)
    items = act.v1_mm_items(rules.mm_items_formula, item_tokens, tokens, seqs, limit,
                            s.enable_chunked_prefill is not False)
    rows = max(tokens, item_tokens) if rules.mm_outputs_padded else item_tokens
    return items, items * rows * spec.hidden_size * dtype_b


def base_terms(spec: ModelSpec, s: Settings, rules: VllmRules, tokens: int, seqs: int,
               fixed: tuple, runtime: tuple | None = None) -> tuple[tuple, str, str, bool]:
    """Per stage: (pp rank, layers, weights, activation, non-torch, graph, KV layout, graph
    pool where it differs from the graph term) estimated from the model and settings alone;
    the effective KV dtype name, the CUDA-graph mode and whether Model Runner V2 runs the
    model (`runtime_fixed` decides it once per family). `fixed`: `fixed_terms(...)`;
    `runtime`: `runtime_base(...)` when the caller has it (settings that differ only in the
    KV-cache dtype share it)."""
    # NOTE: a search varies the batched tokens and sequences per candidate; the terms that
    # depend on neither are computed once per family (`fixed_terms`, `_memo.family_terms`).
    if runtime is None:
        runtime = runtime_base(spec, s, rules, tokens, seqs, fixed)
    stages, kv_name, ctx = fixed
    per_stage, inflight, buffers = runtime
    quant_buffers = bool(rules.kv_quant_dtypes)
    out = []
    for (r, rng, w_est, _n, shape, _slot, windowed), (a_est, n_est, g_est, g_pool) in zip(
            stages, per_stage):
        if quant_buffers and shape.quantized_layers:
            kvq = init_buffer_bytes(spec, s, rules, kv_name, shape.quantized_layers, tokens, seqs)
            if kvq:
                # NOTE: the KV format's per-layer buffers, registered at model init
                w_est = plus_bytes(w_est, kvq, f" + {kv_name} KV buffers of the attention layers")
        if buffers:
            # NOTE: allocated at model init on every rank, inside the weights measurement.
            w_est = plus_bytes(w_est, buffers, " + init buffers sized by the batched tokens")
        # NOTE: only sliding-window/chunked groups read the in-flight tokens: other layouts
        # are the shape itself (no copy per (tokens, seqs)).
        out.append((r, rng, w_est, a_est, n_est, g_est,
                    kvm.with_inflight(shape, inflight) if windowed else shape, g_pool))
    return tuple(out), kv_name, ctx[5], ctx[8]


def runtime_fixed(spec: ModelSpec, s: Settings, rules: VllmRules, gpu: GpuSpec,
                  device: str) -> tuple:
    """What `fixed_terms` computes that no KV-cache setting changes: per stage (pp rank,
    layers, weights, non-torch, v0 Mamba slot); the dtype bytes, Mamba cache mode and MLA
    alignment the KV layout reads; and what the activation, graph and in-flight terms need
    (tp, MoE divisor, dtype bytes, sampler copies, eager, the CUDA-graph mode, the default
    capture list's bounds, async scheduling, Model Runner V2)."""
    pp, tp = s.pipeline_parallel_size, s.tensor_parallel_size
    lora = LoraRules(rules.lora_moe, rules.lora_extra_vocab, rules.lora_tied_double,
                     rules.lora_embedding_archs, rules.lora_outside_budget) \
        if s.enable_lora else None
    # NOTE: the Mamba cache mode decides the runner, the runner the sampler copies: each once.
    mamba_mode = mamba_cache_mode(spec, s, rules)
    v2 = model_runner_v2(spec, s, rules, mamba_mode)
    # NOTE: V1's model classes build the multimodal towers on every PP stage (0.33's Model
    # Runner V2 on the first only)
    towers = (pp > 1 and spec.vision is not None and rules.engine == "v1"
              and not (v2 and rules.v2_tower_first_stage))
    mxfp4 = (mxfp4_layout(rules, gpu.compute_capability, gpu.vendor)
             if spec.quant is not None and spec.quant.method == "mxfp4" else None)
    weights = _memo.weights_per_rank(spec, s, gpu.compute_capability, lora,
                                     rules.pp_layout, towers, mxfp4)
    dtype_b = runtime_dtype_bytes(s)
    eager = bool(s.enforce_eager) or device == "cpu"
    graph_mode = cudagraph_mode(s, rules, device, spec)
    custom_ar = custom_all_reduce_in_n(s, rules, gpu, graph_mode == "NONE")
    ar_runs = custom_all_reduce_runs(s, gpu)
    copies = sampler_copies(spec, s, rules, v2)
    draft_w = draft_bytes(spec, s, dtype_b, rules)
    # NOTE: EPLB's working set: in the weights from 0.20, in the profile peak up to 0.11
    eplb = eplb_buffer_bytes(spec, s, dtype_b) if s.enable_eplb and rules.eplb_buffer else 0
    graph_sizes = _default_capture(spec, rules, gpu)
    # NOTE: v0 0.7.2-0.7.3 pad MLA entries to 256 bytes of the model dtype on CUDA.
    mla_align = (rules.v0_mla_align_bytes // dtype_b if rules.v0_mla_align_bytes
                 and gpu.vendor == "nvidia" and device == "cuda" else 0)
    non_torch = act.non_torch_bytes(tp, custom_all_reduce=custom_ar,
                                    cublas_in_context=rules.cublas_before_snapshot,
                                    custom_all_reduce_runs=ar_runs)
    out = []
    for r, rng in enumerate(pp_layer_split(spec.num_layers, pp, rules.pp_layout)):
        w = weights[r]
        if r == pp - 1 and draft_w:
            w = replace(w, bytes=w.bytes + draft_w)
        if eplb and rules.eplb_buffer == "weights":
            w = replace(w, bytes=w.bytes + eplb)
        how = "parameters x bytes per rank + RoPE cache"
        mla = (mla_backend_bytes(spec, s, dtype_b, rng, gpu.compute_capability,
                                 rules.v0_mla_absorbed)
               if rules.mla_supported and spec.uses_mla else 0)
        if mla:
            w = replace(w, bytes=w.bytes + mla)
            how += " + the MLA backend's copies of the attention matrices"
        src = Source.CHECKPOINT if w.from_checkpoint else Source.CONFIG
        w_est = Estimate.banded(w.bytes, 0.01 if w.from_checkpoint else 0.03, src, how)
        n_est = Estimate.banded(non_torch, act.NON_TORCH_REL, Source.ESTIMATED,
                                "cuBLAS/attention workspaces, all-reduce buffers")
        out.append((r, rng, w_est, n_est, v0_mamba_slot_bytes(spec, s, rules, rng, dtype_b)))
    ep_div = moe_partition(s)
    ctx = (tp, ep_div, dtype_b, copies, eager, graph_mode, graph_sizes,
           async_scheduling(spec, s, rules, v2), v2, not is_pooling(spec, s))
    return tuple(out), dtype_b, mamba_mode, mla_align, ctx


_NO_KINDS = frozenset()


def fixed_terms(spec: ModelSpec, s: Settings, rules: VllmRules, gpu: GpuSpec, device: str,
                runtime: tuple | None = None) -> tuple[tuple, str, tuple]:
    """The stage terms that depend on neither the batched tokens nor the sequences: per
    stage (pp rank, layers, weights, non-torch, KV layout shape, v0 Mamba slot, whether a
    group reads the in-flight tokens); the effective KV dtype name; and `runtime_fixed`'s
    tuple for the other terms. `runtime`: `runtime_fixed(...)` when the caller has it
    (settings that differ only in the KV-cache dtype share it)."""
    if runtime is None:
        runtime = runtime_fixed(spec, s, rules, gpu, device)
    stages, dtype_b, mamba_mode, mla_align, ctx = runtime
    kv_b, kv_name = kvm.kv_dtype_bytes(spec, s, rules, dtype_b)
    block = kvm.default_block_size(spec, s, rules, device=device,
                                   compute_capability=gpu.compute_capability)
    align = kvm.hybrid_alignment(spec, rules, gpu.compute_capability, block)
    ckpt = (mamba_checkpoint_kinds(rules, mamba_mode, gpu.compute_capability, gpu.vendor)
            if rules.mamba_ckpt_kinds and mamba_mode == "align" else _NO_KINDS)
    if "gdn" in ckpt:
        # NOTE: Gated DeltaNet exports checkpoints only when every Mamba layer can
        # (`get_mamba_prefill_checkpoint_alignment`); its blocks then align to 64 tokens
        if _memo.mamba_kinds(spec) == {"gdn"}:
            align = lcm(align, GDN_CHECKPOINT_ALIGN)
        else:
            ckpt = ckpt - {"gdn"}
    kw = dict(kv_bytes=kv_b, mamba_bytes=dtype_b, block_size=block, engine=rules.engine,
              kv_dtype_name=kv_name, kernel_alignment=align, mamba_mode=mamba_mode,
              mla_align_elems=mla_align, mamba_ckpt=ckpt)
    whole = (_memo.layout_shape(spec, s, rules, (0, spec.num_layers), **kw)
             if rules.kv_fit_whole_model and len(stages) > 1 else None)
    out = []
    for r, rng, w_est, n_est, mamba_slot in stages:
        shape = _memo.layout_shape(spec, s, rules, rng, **kw)
        if whole is not None and shape.groups:
            # NOTE: 0.14-0.16 check one request of the whole model against each worker
            shape = replace(shape, check_layout=whole)
        out.append((r, rng, w_est, n_est, shape, mamba_slot, kvm.windowed(shape)))
    return tuple(out), kv_name, ctx


def override(st, cal: Calibration | None, hooks: PlanHooks | None, tokens: int,
              no_graphs: bool) -> None:
    """Measured (calibration) and pinned (hooks) terms replace the estimates; hooks win
    (a graph term only where graphs are captured)."""
    if cal is not None:
        if cal.weights_bytes is not None:
            st.weights = Estimate.exact(cal.weights_bytes, Source.CALIBRATED, "from your logs")
        if cal.activation_bytes is not None:
            scale = 1.0
            if cal.max_num_batched_tokens and cal.max_num_batched_tokens != tokens:
                scale = tokens / cal.max_num_batched_tokens
            st.activation = Estimate.banded(cal.activation_bytes * scale,
                                            0.05 if scale == 1 else 0.2,
                                            Source.CALIBRATED, "from your logs")
        if cal.non_torch_bytes is not None:
            st.non_torch = Estimate.exact(cal.non_torch_bytes, Source.CALIBRATED, "from your logs")
        if cal.cuda_graph_bytes is not None and not no_graphs:
            st.graph = Estimate.exact(cal.cuda_graph_bytes, Source.CALIBRATED, "from your logs")
            st.graph_pool = None
    if hooks is not None:
        if hooks.weights_bytes is not None:
            st.weights = Estimate.exact(hooks.weights_bytes, Source.USER, "given")
        if hooks.activation_bytes is not None:
            st.activation = Estimate.exact(hooks.activation_bytes, Source.USER, "given")
        if hooks.non_torch_bytes is not None:
            st.non_torch = Estimate.exact(hooks.non_torch_bytes, Source.USER, "given")
        if hooks.cuda_graph_bytes is not None and not no_graphs:
            st.graph = Estimate.exact(hooks.cuda_graph_bytes, Source.USER, "given")
            st.graph_pool = None


def lora_graph_cases(s: Settings, rules: VllmRules) -> int:
    """How many times each graph size is captured with LoRA: with and without active
    adapters from 0.11.1 (cudagraph_specialize_lora); with --specialize-active-lora (0.16+)
    once per captured adapter count too: the powers of 2 up to max_loras and max_loras + 1
    (lora/utils.py `get_captured_lora_counts`)."""
    if not (s.enable_lora and rules.lora_graph_specialize):
        return 1
    if not (s.specialize_active_lora and rules.lora_active_counts):
        return 2
    m = s.max_loras or 1
    return 1 + sum(1 for n in range(1, m + 2) if n & (n - 1) == 0 or n == m + 1)


def _default_capture(spec: ModelSpec, rules: VllmRules, gpu: GpuSpec) -> tuple[int | None, int]:
    """(a model's own largest capture size or None, the release's default largest size on
    this GPU): gpt-oss sets its own (`rules.gpt_oss_capture_max`); data-centre Blackwell
    (compute capability 10.x) takes 1024 from 0.28 (`rules.graph_cap_sm10x`), others 512."""
    own = (rules.gpt_oss_capture_max if rules.gpt_oss_capture_max
           and spec.architecture == "GptOssForCausalLM" else None)
    cc = gpu.compute_capability
    cap = rules.graph_cap_sm10x if gpu.vendor == "nvidia" and cc and cc[0] == 10 else 512
    return own, cap


def _graph_terms(layers: int, seqs: int, tokens: int, s: Settings, rules: VllmRules,
                 no_graphs: bool, graph_sizes: tuple[int | None, int]
                 ) -> tuple[int, int | None]:
    """(the graph term vLLM logs / subtracts, the captured pool where it differs from it).
    `graph_sizes`: `_default_capture`'s (a model's largest size, the default cap)."""
    if no_graphs:
        return 0, None
    lora = lora_graph_cases(s, rules)
    # NOTE: the capture sizes grow with the speculative tokens from 0.13 (decode_query_len)
    k = s.num_speculative_tokens if rules.capture_scales_with_spec else 0
    listed = user_capture_sizes(s, rules, tokens)
    if listed is not None:
        if not listed:
            return 0, None          # NOTE: an empty list (or none <= the tokens) captures none
        sizes = listed              # NOTE: the user's list replaces vLLM's (and a model's)
    else:
        sizes = _default_sizes(seqs, tokens, k, s, rules, graph_sizes)
    pool = act.cuda_graph_bytes(layers, sizes, lora_cases=lora)
    if lora == 1 or rules.graph_budget == "headroom":
        return pool, None
    # NOTE: from 0.18 vLLM's own estimate is what it logs (and subtracts from 0.20); with
    # LoRA-specialised graphs that estimate is about one graph (activation.py), while the
    # pool, allocated after the KV cache, holds both cases.
    est = act.lora_graph_estimate_bytes(layers, sizes)
    if rules.graph_budget == "subtracted":
        pool = int(act.GRAPH_ACTUAL_OVER_ESTIMATE * pool)
    return est, pool


def _default_sizes(seqs: int, tokens: int, k: int, s: Settings, rules: VllmRules,
                   graph_sizes: tuple[int | None, int]) -> int:
    """The count (`act.capture_sizes`) of vLLM's own list: up to the user's largest size
    (--max-cudagraph-capture-size, 0.11.1+), else a model's own, else min(2 x max_num_seqs x
    query length, the default cap) with, from 0.29, the uniform decode widths; from 0.11.1
    at most max_num_batched_tokens, and from 0.20.1 that size itself when it caps the list."""
    fine = (INTERACTIVITY_SIZES if s.performance_mode == "interactivity"
            and rules.performance_mode_flag else 0)
    own, cap = graph_sizes
    extra: tuple[int, ...] = ()
    if s.max_cudagraph_capture_size is not None and rules.capture_max_flag:
        largest = s.max_cudagraph_capture_size  # NOTE: replaces vLLM's (and a model's own)
    elif own is not None:
        largest = own
    else:
        largest = min(2 * seqs * (1 + k), cap)
        if rules.capture_decode_widths:
            extra = act.decode_widths(seqs, 1 + k, largest, tokens, cap)
    if rules.capture_tokens_appended and tokens <= largest:
        extra += (tokens,)
    if rules.capture_max_flag:
        largest = min(largest, tokens)
    units = act.capture_sizes(largest, every_upto=fine)
    return units + act.off_grid_units(extra, fine) if extra else units


# NOTE: --performance-mode interactivity captures every batch size up to this one (0.17+).
INTERACTIVITY_SIZES = 32
# NOTE: the modes with full CUDA graphs (vLLM `CUDAGraphMode.has_full_cudagraphs`).
FULL_GRAPH_MODES = frozenset({"FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"})
CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
# 0.30+ without piecewise compilation (`CUDAGraphMode.without_piecewise`)
_WITHOUT_PIECEWISE = {"PIECEWISE": "NONE", "FULL_AND_PIECEWISE": "FULL_DECODE_ONLY"}


def cudagraph_mode(s: Settings, rules: VllmRules, device: str = "cuda",
                   spec: ModelSpec | None = None) -> str:
    """The CUDA graphs vLLM captures: "NONE", or the mode (`rules.cudagraph_default` where
    the release has no cudagraph_mode: V0's and early V1's graphs), from --enforce-eager,
    `-O N` / --optimization-level and the compilation config's mode and cudagraph_mode, as
    each release reads them (`VllmRules.cudagraph_control`); then what the model and the
    parallelism change (`spec` given)."""
    mode = _flag_mode(s, rules, device)
    if spec is None or mode == "NONE":
        return mode
    if rules.dp_forces_eager and s.data_parallel_size > 1:
        return "NONE"
    if (rules.graph_mamba_full and s.cudagraph_mode is None and MAMBA in spec.attention_kinds()
            and spec.architecture not in ("Lfm2ForCausalLM", "MiniMaxText01ForCausalLM")):
        return "FULL_AND_PIECEWISE"
    full = mode in FULL_GRAPH_MODES
    pool = rules.graph_pooling_piecewise
    if full and is_pooling(spec, s) and (pool == "any" or (pool == "default"
                                                             and s.cudagraph_mode is None)):
        return "PIECEWISE"
    if full and rules.graph_dcp_piecewise and s.decode_context_parallel_size > 1:
        return "PIECEWISE"
    return mode


def _flag_mode(s: Settings, rules: VllmRules, device: str) -> str:
    """The mode the flags give (`cudagraph_mode` before the model's own changes)."""
    if s.enforce_eager or device == "cpu":
        return "NONE"
    control, mode = rules.cudagraph_control, s.cudagraph_mode
    if control == "eager_only":
        return rules.cudagraph_default
    if control == "use_cudagraph":
        return "NONE" if mode == "NONE" else rules.cudagraph_default
    if control == "level":
        # NOTE: `-O N` is the compilation level before 0.12; 3 (PIECEWISE) is the default.
        level = next((x for x in (s.compilation_mode, s.optimization_level) if x is not None), 3)
        if mode is not None:
            return mode
        return rules.cudagraph_default if level == 3 else "NONE"
    opt = 2 if s.optimization_level is None else s.optimization_level
    compiled = (s.compilation_mode if s.compilation_mode is not None else (3 if opt else 0)) == 3
    if mode is None:
        mode = "NONE" if opt == 0 else ("PIECEWISE" if opt == 1 else rules.cudagraph_default)
    if compiled or mode == "NONE" or control == "opt":
        return mode if compiled else "NONE"
    if control == "opt_piecewise":
        return "NONE" if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") else mode
    return _WITHOUT_PIECEWISE.get(mode, mode)


def user_capture_sizes(s: Settings, rules: VllmRules, tokens: int) -> int | None:
    """How many batch sizes the user's capture list makes vLLM capture (None: no list):
    --cudagraph-capture-sizes / the compilation config's list (deduplicated; from 0.11.1 the
    sizes <= max_num_batched_tokens), or --cuda-graph-sizes (0.9-0.11.0: one value is the
    largest of the default sizes 1, 2, 4, 8, 16, ...)."""
    if s.cudagraph_capture_sizes is not None:
        sizes = set(s.cudagraph_capture_sizes)
        return act.list_units({x for x in sizes if x <= tokens} if rules.capture_max_flag
                              else sizes)
    given = s.cuda_graph_sizes
    if given is None or not rules.cuda_graph_sizes_flag:
        return None
    if rules.cuda_graph_sizes_flag == "max" and len(given) == 1:
        return act.capture_sizes(min(given[0], tokens))
    return act.list_units({x for x in given if x <= tokens})


def sampler_copies(spec: ModelSpec, s: Settings, rules: VllmRules,
                   v2: bool | None = None) -> float:
    """fp32 (reqs x vocab) logit copies at the peak of the dummy sampler (profile run and
    warm-up): with speculative decoding the v1 runner also runs the rejection sampler
    (rules.py); Model Runner V2 profiles the plain sampler only. `v2`: whether Model Runner
    V2 runs the model, when the caller knows it."""
    copies = rules.profile_sampler_copies
    if v2 is None:
        v2 = model_runner_v2(spec, s, rules)
    if s.num_speculative_tokens > 0 and not v2:
        copies = max(copies, rules.spec_sampler_copies)
    return copies


def v0_mamba_slot_bytes(spec: ModelSpec, s: Settings, rules: VllmRules,
                        layer_range: tuple[int, int], dtype_bytes: int) -> int:
    """v0: one request slot of the Mamba state of a stage's layers on one TP rank (the
    model dtype for conv and SSM state alike, models/mamba_cache.py); 0 on v1."""
    if rules.engine != "v0" or not _memo.has_mamba(spec):
        return 0
    tp, total = s.tensor_parallel_size, 0
    for a, n in _memo.attention_runs(spec, layer_range):
        if a.mamba is not None:            # NOTE: Falcon-H1's attention layers carry one too
            total += n * a.mamba.page_bytes(tp, dtype_bytes)
    return total


V0_MAX_CAPTURE = 8192


def v0_mamba_slots(rules: VllmRules, max_num_seqs: int, eager: bool) -> int:
    """v0: how many requests the Mamba state is allocated for (`VllmRules.v0_mamba_slots`):
    max_num_seqs rounded up to a CUDA-graph batch size (1, 2, 4, then multiples of 8), or
    exactly max_num_seqs with --enforce-eager (0.7.3+), or 8,194 (0.6.5-0.7.2, eager)."""
    mode = rules.v0_mamba_slots
    if eager and mode == "eager_8194":
        return 8194
    if eager and mode == "capture":
        return max_num_seqs
    # NOTE: the largest batch size captured is 8,192 (more sequences are capped to it).
    return next((b for b in (1, 2, 4) if max_num_seqs <= b),
                min(-(-max_num_seqs // 8) * 8, V0_MAX_CAPTURE))


def custom_all_reduce_in_n(s: Settings, rules: VllmRules, gpu: GpuSpec, eager: bool) -> bool:
    """Whether TP > 1 custom all-reduce memory counts in the non-torch term `N` (it runs on
    this GPU, is not turned off, and this version measures it in the profiling window)."""
    return custom_all_reduce_runs(s, gpu) and _allreduce_in_n(rules, eager)


# NOTE: the TP group sizes vLLM's CustomAllreduce takes (`_SUPPORTED_WORLD_SIZES`; 16 is a
# multi-node size, added later); any other size logs a warning and runs without it.
CUSTOM_AR_WORLD_SIZES = frozenset({2, 4, 6, 8, 16})


def custom_all_reduce_runs(s: Settings, gpu: GpuSpec) -> bool:
    """Whether vLLM turns its custom all-reduce on for this TP group
    (`device_communicators/custom_all_reduce.py`): a supported group size, not disabled, and
    on NVIDIA every pair over NVLink, or two GPUs with peer access ("more than two PCIe-only
    GPUs" and "lacks GPU P2P capability" turn it off). `gpu.peer_link` is that fact when
    measured; unknown, the GPU's class decides."""
    tp = s.tensor_parallel_size
    if s.disable_custom_all_reduce or tp not in CUSTOM_AR_WORLD_SIZES:
        return False
    if gpu.vendor != "nvidia":
        return True                 # NOTE: ROCm peers over XGMI; vLLM runs no P2P test there
    if gpu.peer_link is None:
        return _nvlink_class(gpu)
    return gpu.peer_link == "nvlink" or (gpu.peer_link == "p2p" and tp == 2)


def _allreduce_in_n(rules: VllmRules, eager: bool) -> bool:
    """Whether TP>1 custom all-reduce memory lands in the measured non-torch growth."""
    if rules.allreduce_in_n == "graph_probe":
        return not eager
    return rules.allreduce_in_n == "always"


def _nvlink_class(gpu: GpuSpec) -> bool:
    """Data-centre parts where custom all-reduce runs (NVLink / full P2P)."""
    name = gpu.name.upper()
    return any(k in name for k in ("A100", "H100-80GB", "H200", "H20", "B200", "B300", "GH200"))


# NOTE: `mm_settings` runs for every candidate a search screens on a multimodal model
_settings_with = replacer(Settings)


def mm_encoder_off(spec: ModelSpec, s: Settings) -> bool:
    """--limit-mm-per-prompt limits every modality the encoder takes to 0 (a modality left
    out keeps vLLM's default limit, so the encoder stays)."""
    limits = s.limit_mm_per_prompt
    if not limits or spec.vision is None:
        return False
    given = dict(limits)
    return all(given.get(m, 1) == 0 for m in spec.vision.modalities)


def mm_settings(spec: ModelSpec, s: Settings, rules: VllmRules, version: str) -> Settings:
    """The settings the terms read once the multimodal flags are applied (the plan echoes them
    as given): --enable-multimodal-encoder-data-parallel is --mm-encoder-tp-mode data, which
    falls back to "weights" for a model whose encoder vLLM `version` cannot replicate
    (`arch_support.encoder_tp_data`); --limit-mm-per-prompt with every modality at 0 turns the
    encoder's profile off (any release) and, where the release skips building the tower
    (`rules.mm_zero_skips_tower`), its weights."""
    # NOTE: 0.10.2-0.12 set the mode to "data" when the switch is on (EngineArgs
    # __post_init__); before 0.10.2 the models read the switch itself.
    mode = "data" if s.enable_multimodal_encoder_data_parallel else s.mm_encoder_tp_mode
    if mode == "data":
        mode = "data" if encoder_tp_data(spec.architecture, version) else "weights"
    if mode != s.mm_encoder_tp_mode:
        s = _settings_with(s, mm_encoder_tp_mode=mode)
    if s.limit_mm_per_prompt is None or not mm_encoder_off(spec, s):
        return s
    skips = rules.mm_zero_skips_tower
    loaded = not ("*" in skips or spec.model_type in skips)
    return _settings_with(s, skip_mm_profiling=True,
                          language_model_only=s.language_model_only or not loaded)
