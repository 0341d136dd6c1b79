"""The outcome builder: a finished startup walk -> `Plan` (ledgers, log lines, assumptions, fixes).

`PlanReport` is mixed into the planner's `_Walk`; it only reads what the walk decided
(`self.stages`, `self.fail`, `self.risks`, `self.logs`, ...) and computes nothing new.
"""

from __future__ import annotations

import math

from . import activation as act
from . import failures as F
from . import kv as kvm
from . import messages as msg
from ._frozen import maker, replacer
from .arch_support import native_releases, not_native
# NOTE: sources as text (effective.py: Enum.value is too slow for the tuner's hot path)
from .effective import DEFAULT, USER
from .gpu_catalog import uma_free_share
from .plan import Fix, KvCapacity, Ledger, Outcome, Plan
from .plan_notes import PlanNotes
from .provenance import GIB, Estimate, Source
from .shard_fix import shard_fix
from .kv_quant import TURBOQUANT, skip_layers
from .model import CSA
from .stage_terms import mm_encoder_off

__all__ = ["PlanReport"]

# NOTE: built once or more per screened candidate: without the frozen __init__ (_frozen.py).
_ledger, _outcome, _plan = maker(Ledger), maker(Outcome), maker(Plan)
# NOTE: most screened candidates start without a risk: one shared (frozen) outcome for them.
_STARTS = Outcome(ok=True)
_estimate = maker(Estimate)
_CATALOG, _DERIVED_SRC, _MEASURED = Source.CATALOG, Source.DERIVED, Source.MEASURED
# NOTE: where the GPU's total came from (`GpuSpec.source`): the catalog, --gpu-memory-gib,
# NVML; else derived (nvidia-smi MiB minus the driver's share)
_GPU_SOURCE = {"catalog": Source.CATALOG, "user": Source.USER, "nvml": Source.MEASURED}
_NOT_BUDGETED = "not budgeted in this version: must fit outside u x total"
# NOTE: releases whose config has a cudagraph_mode (0.10.1+): the plan echoes its value.
_HAS_CUDAGRAPH_MODE = frozenset({"level", "opt", "opt_piecewise", "opt_decode"})
# Qwen2/2.5-VL's dummy video (qwen2_vl.py `_get_max_video_frames`): 16,384 merged tokens per
# frame pair (3584x3584 at patch 14, merge 2x2, temporal 2), at most 14 frames from 0.11.0
QWEN_VIDEO_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl"})
QWEN_FRAME_PAIR_TOKENS = 16384
QWEN_VIDEO_MAX_FRAME_PAIRS = 7


_replace_ledger = replacer(Ledger)


def _tp_rank(ledger: Ledger, rank: int, tp_rank: int) -> Ledger:
    """`dataclasses.replace(ledger, rank=..., tp_rank=...)` without re-running `__init__`.

    NOTE: the TP ranks of a stage share every term; up to 8 ledgers per stage are built for
    each screened candidate."""
    return _replace_ledger(ledger, rank=rank, tp_rank=tp_rank)


class PlanReport(PlanNotes):
    """The `Plan` of a startup walk (mixin of `planner._Walk`)."""

    # NOTE: built once per walk, shared by the screened plan and the full one (`detailed`).
    _ledgers_built: tuple[Ledger, ...] | None = None
    _outcome_built: Outcome | None = None

    def _ledgers(self) -> tuple[Ledger, ...]:
        # NOTE: the full plan of a screened walk (`_Walk.detailed`) shares its ledgers.
        done = self._ledgers_built
        if done is None:
            done = self._ledgers_built = self._build_ledgers()
        return done

    def _build_ledgers(self) -> tuple[Ledger, ...]:
        tp = self.s.tensor_parallel_size
        T, F = int(self.T), self.F
        # NOTE: `Estimate.exact(...)` built with `_estimate` (the same object, no __init__).
        total = _estimate(value_bytes=T, low_bytes=T, high_bytes=T,
                          source=_GPU_SOURCE.get(self.gpu.source, _DERIVED_SRC),
                          note=self.gpu.name)
        if self.free_given:
            f = int(F)
            free = _estimate(value_bytes=f, low_bytes=f, high_bytes=f, source=_MEASURED,
                             note="given")
        elif (seen := self._uma_free_seen()) is not None:
            free = _estimate(value_bytes=int(F), low_bytes=int(seen[0] * self.T),
                             high_bytes=int(seen[2] * self.T), source=Source.ESTIMATED,
                             note="median of public startups' free memory (the host shares it)")
        else:
            free = Estimate.banded(F, 0.0, Source.ESTIMATED, "total - CUDA context - others",
                                   abs_bytes=256 << 20)
        r = int(self.R)
        req = _estimate(value_bytes=r, low_bytes=r, high_bytes=r, source=_DERIVED_SRC,
                        note="ceil(u x total)" if self.rules.request_ceil else "(u x total)")
        budgeted = self.rules.graph_budget == "subtracted"
        out = []
        for st in self.stages:
            g = st.graph
            if not budgeted:
                g = _estimate(value_bytes=g.value_bytes, low_bytes=g.low_bytes,
                              high_bytes=g.high_bytes, source=g.source, note=_NOT_BUDGETED)
            layout = st.layout
            first = _ledger(rank=st.pp_rank * tp, tp_rank=0, pp_rank=st.pp_rank,
                            total=total, free_at_start=free, requested=req,
                            weights=st.weights, activation=st.activation,
                            non_torch=st.non_torch, cuda_graph=g, kv_cache=self._kv_budget(st),
                            kv_bytes_per_token=layout.bytes_per_token,
                            page_size_bytes=layout.page_size_bytes,
                            num_blocks=st.num_blocks, layers=st.layers)
            out.append(first)
            if tp > 1:
                base = st.pp_rank * tp
                out.extend([_tp_rank(first, base + t, t) for t in range(1, tp)])
        return tuple(out)

    def _mm_ipc_note(self) -> str:
        gb = f"--mm-ipc-gpu-memory-gb {self.s.mm_ipc_gpu_memory_gb:g}"
        if self.mm_reserve:
            return (f"{gb}: {self.mm_reserve / GIB:.2f} GiB of the KV cache budget reserved for "
                    "the frontend's multimodal GPU decoding (a GPU video decoder's own "
                    "reservation, pynvvideocodec, is not counted)")
        return f"{gb}: no reservation (a text-only model, or a vLLM release before 0.25)"

    def _log_lines(self, cap: KvCapacity | None) -> tuple[str, ...]:
        rules = self.rules
        if self.device == "cpu":
            lines = ["Loading weights took … seconds"]
        else:
            v2 = bool(rules.log_weights_v2) and self.v2
            lines = [msg.weights_log(rules, self.stages[0].weights.value_bytes, v2)]
        if (self.fail and self.fail.failure in (F.FREE_MEMORY_BELOW_REQUEST, F.WEIGHTS_OOM,
                                                F.PROFILE_RUN_OOM)):
            return tuple(lines[:0] if self.fail.failure == F.FREE_MEMORY_BELOW_REQUEST else lines)
        st = min(self.stages, key=lambda x: x.kv)
        lay = st.layout
        if lay.block_size_enlarged:
            lines.append(msg.block_size_log(lay.block_size))
            if lay.mamba_padding_pct > 0:
                lines.append(msg.mamba_padding_log(lay.mamba_padding_pct))
        if self.s.kv_cache_memory_bytes is not None and self.device != "cpu":
            # NOTE: vLLM returns from determine_available_memory here: no "Available KV cache
            # memory" line follows (gpu_worker.py, every release with the flag)
            lines.append(msg.kv_memory_bytes_log(self.F, self.s.kv_cache_memory_bytes,
                                                 self.rules))
        elif self.device != "cpu":
            lines += msg.available_kv_log(rules, st.kv + self.mm_reserve, total_bytes=self.T,
                                          util=self.u, weights_bytes=st.weights.value_bytes,
                                          non_torch_bytes=st.non_torch.value_bytes,
                                          activation_bytes=st.activation.value_bytes)
        if self.mm_reserve and st.kv > 0:
            lines.append(msg.mm_ipc_log(self.mm_reserve, st.kv))
        lines += self.logs
        if cap is not None and (self.fail is None or self.fail.failure not in (
                F.NO_KV_MEMORY, F.KV_BELOW_MAX_MODEL_LEN) or rules.engine == "v0"):
            swap = self.s.swap_space if self.s.swap_space is not None else 4.0
            cpu_blocks = int(swap * GIB) // cap.page_size_bytes if cap.page_size_bytes else 0
            if self.s.decode_context_parallel_size > 1:
                line = msg.dcp_multiply_log(rules, self.s.decode_context_parallel_size)
                lines += [line] if line else []
            lines += self._per_worker_capacity(cap) or msg.capacity_log(
                rules, cap.num_blocks, cap.tokens, cap.max_model_len, cap.max_concurrency,
                num_cpu_blocks=cpu_blocks, device="CPU" if self.device == "cpu" else "GPU")
        return tuple(lines)

    def _per_worker_capacity(self, cap: KvCapacity) -> tuple[str, ...]:
        """≤0.11.0 v1 prints the capacity once per PP stage's workers, before the minimum."""
        rules = self.rules
        if not (rules.log_capacity_per_worker and rules.engine == "v1"
                and len(self.stages) > 1) or self.s.num_gpu_blocks_override:
            return ()
        out: list[str] = []
        for st in self.stages:
            conc = kvm.concurrency(rules, st.layout, st.num_blocks, cap.max_model_len, "v1")
            toks = kvm.tokens(rules, st.layout, st.num_blocks, conc, cap.max_model_len, "v1")
            out += msg.capacity_log(rules, st.num_blocks, toks, cap.max_model_len, conc)
        return tuple(out)

    def _mm_profile_note(self) -> str | None:
        """How v0 profiles a multimodal model (fewer dummy sequences; text only 0.7.0-0.8.2)."""
        mm = (act.vision_max_tokens(self.spec)
              if self.rules.v0_mm_profile_seqs and not self.s.language_model_only else 0)
        if not mm:
            return None
        tokens, seqs = self.eff.values["max_num_batched_tokens"], self.eff.values["max_num_seqs"]
        reqs, encoder = act.mm_profile(self.spec, tokens, seqs, True,
                                       self.rules.v0_mm_dropped_when_long)
        note = (f"v0 profiles a multimodal model with max(1, min({seqs}, {tokens} // ~{mm} "
                f"worst-case image tokens)) = {reqs} dummy sequence(s), so the dummy sampler "
                f"sees {reqs} request(s)")
        if not encoder:
            note += ("; the worst-case multimodal prompt does not fit the profiling sequence, "
                     "and 0.7.0-0.8.2 then profile text only (no encoder in the peak)")
        return note + "."

    def _dummy_video_note(self) -> str | None:
        """Qwen2/2.5-VL on v1 0.10.0 and 0.11+: the profile run's dummy video grows with
        max_model_len (one 16,384-token frame pair per 16,384 tokens, up to 7), which the
        activation estimate (one worst-case image) does not count."""
        s = self.s
        if (not self.rules.mm_dummy_at_max_len or self.spec.model_type not in QWEN_VIDEO_TYPES
                or s.language_model_only or s.skip_mm_profiling
                or dict(s.limit_mm_per_prompt or ()).get("video", 1) == 0
                or (not self.rules.v2_profiles_encoder and self.v2)):
            return None
        pairs = max(1, min(QWEN_VIDEO_MAX_FRAME_PAIRS, self.L // QWEN_FRAME_PAIR_TOKENS))
        if pairs < 2:
            return None
        return (f"vLLM profiles {self.spec.model_type}'s worst-case video at max_model_len "
                f"{self.L:,}: ~{pairs * QWEN_FRAME_PAIR_TOKENS * 4:,} vision patches, {pairs}x "
                "the one image the activation estimate counts (not modelled: no startup log "
                "checks its size). If the profile run runs out of memory, pass "
                "--limit-mm-per-prompt '{\"video\": 0}' or a shorter --max-model-len.")

    def _mm_limits_note(self) -> str:
        """What --limit-mm-per-prompt does to the encoder (`stage_terms.mm_settings`)."""
        limits = ", ".join(f"{k} {v}" for k, v in self.s.limit_mm_per_prompt)
        vision = self.spec.vision
        if vision is None:
            return f"--limit-mm-per-prompt ({limits}): a text-only model, no effect."
        inputs = ", ".join(vision.modalities)
        if not mm_encoder_off(self.spec, self.s):
            return (f"--limit-mm-per-prompt ({limits}): the encoder ({inputs}) is profiled as "
                    "without it (limits above 0 are not modelled).")
        loaded = ("not loaded either" if self.s.language_model_only else
                  "still loaded (this release builds it whatever the limit)")
        return (f"--limit-mm-per-prompt ({limits}) turns off every input of the encoder "
                f"({inputs}): not profiled, and {loaded}.")

    def _kv_quant_note(self) -> str | None:
        """The layers a quantized KV cache keeps at the model dtype (detail only)."""
        skip = skip_layers(self.spec, self.s, self.rules, self.kv_name)
        if not skip:
            return None
        shown = ", ".join(str(i) for i in sorted(skip)[:12]) + (", …" if len(skip) > 12 else "")
        why = (" (TurboQuant keeps the first and last two)" if self.kv_name in TURBOQUANT
               else "")
        many = len(skip) > 1
        return (f"KV cache {self.kv_name}: layer{'s' if many else ''} {shown} "
                f"keep{'' if many else 's'} the model dtype{why}; all layers share one block pool"
                + (" and the block size covers the larger page" if self.rules.kv_skip_align
                   else "") + ".")

    def _arch_note(self) -> list[str]:
        """The architecture outside this release's registry (plans go on from 0.7.2, where
        vLLM falls back to its Transformers backend, and for development builds)."""
        arch = self.spec.architecture
        if not not_native(arch, self.version):
            return []
        then = (f"vLLM {self.version} loads it through its Transformers backend when the "
                "installed transformers implements it compatibly, else it stops at startup"
                if self.rules.transformers_fallback else
                "a development build may have it; the release stops at startup")
        return [f"{arch} is not in vLLM {self.version}'s model registry (implemented by vLLM "
                f"{native_releases(arch)}): {then}. The terms here are for a native "
                "implementation."]

    def _uma_free_seen(self) -> tuple[float, float, float] | None:
        """`uma_free_share` of this unified-memory part, where the default free memory is
        taken from it (no measured figure)."""
        return None if self.free_given else uma_free_share(self.gpu)

    def _free_default_note(self) -> str:
        """How the default free memory was estimated (an assumption line's end)."""
        seen = self._uma_free_seen()
        if seen is not None:
            lo, _mid, hi = (x * self.T / GIB for x in seen)
            return (f" (the median of what public {self.gpu.name} startups had free at vLLM's "
                    f"start, {lo:.1f}-{hi:.1f} GiB: the host shares this memory; pass "
                    "--gpu-free-gib, or run `vramguard check` on the machine).")
        return (f" (total minus ~{self.ctx / GIB:.2f} GiB CUDA context"
                + (" and NCCL" if self.rules.snapshot_after_nccl and self.s.world_size > 1
                   else "") + ").")

    def _assumptions(self, cap: KvCapacity | None) -> tuple[str, ...]:
        st = min(self.stages, key=lambda x: x.kv)
        g = lambda b: f"{b / GIB:.2f} GiB"  # noqa: E731
        out = [f"vLLM {self.version} ({self.rules.engine} engine; rules of {self.rules.version})."
               + (f" vLLM falls back from its default V1 engine to V0 here ({self.fallback}); "
                  "--engine v1 plans V1." if self.fallback else ""),
               f"Total memory {g(self.T)} as CUDA reports it for {self.gpu.name} "
               f"({self.gpu.source}).",
               (f"Free memory at vLLM's snapshot: {g(self.F)}" + (" (given)." if self.free_given
                else self._free_default_note()))]
        out += self._arch_note()
        if self.swa_warning:
            out.append(f"vLLM turns the sliding windows off itself: \"{self.swa_warning}\"")
        out.append(f"Weights per rank {g(st.weights.value_bytes)} ({st.weights.source.value}: "
                   f"{st.weights.note}).")
        out.append(f"Activation peak {g(st.activation.value_bytes)} ({st.activation.source.value}"
                   f"; {self.eff.values['max_num_batched_tokens']} batched tokens, "
                   f"{self.eff.values['max_num_seqs']} seqs{self._sampler_note()}).")
        out += self._v0_mamba_note(st)
        mm_note = self._mm_profile_note() or self._dummy_video_note()
        if mm_note:
            out.append(mm_note)
        if self.s.limit_mm_per_prompt is not None:
            out.append(self._mm_limits_note())
        kvq = self._kv_quant_note()
        if kvq:
            out.append(kvq)
        if self.s.mm_ipc_gpu_memory_gb:
            out.append(self._mm_ipc_note())
        if self.s.kv_offloading_size:
            where = ("one file in /dev/shm" if self.rules.kv_offload_in_shm else "pinned memory")
            out.append(f"KV offloading (--kv-offloading-size {self.s.kv_offloading_size:g}): host "
                       f"memory ({where}), not GPU memory; the GPU pool is planned as without "
                       "it (`vramguard check` checks the host)")
        if self.spec.vision is not None and (
                self.eff.values.get("mm_encoder_tp_mode") == "data"
                or self.eff.values.get("enable_multimodal_encoder_data_parallel")):
            out.append(self._encoder_tp_note())
        out.append(f"Non-torch memory {g(st.non_torch.value_bytes)} "
                   f"({st.non_torch.source.value}; TP={self.s.tensor_parallel_size}"
                   f"{self._all_reduce_note()}).")
        gm = {"headroom": "not budgeted: graphs must fit in the memory outside u x total",
              "estimated": "estimated and logged but not subtracted "
                           "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)",
              "subtracted": "subtracted from the budget"}[self.rules.graph_budget]
        out.append(f"CUDA graphs {g(st.graph.value_bytes)} ({st.graph.source.value}; {gm}).")
        out += self._graph_flag_notes()
        out += self._lora_graph_notes(st) + self._outside_budget_notes()
        out += self._mla_backend_note(st) + self._all2all_note()
        if self.rules.whole_gpu:
            out.append("This version charges everything already on the GPU (other processes, "
                       "CUDA context) to the KV budget.")
        if self.gpu.uma and self.rules.uma_free_is_host_ram:
            out.append(f"{self.gpu.name} has unified memory: from 0.11.1 vLLM takes the host's "
                       "available RAM as free memory; pass the measured value as free memory.")
        if self.gpu.uma and self.rules.engine == "v1" and self.device == "cuda":
            # NOTE: not in the numbers: the growth varies run to run (docs/accuracy.md)
            out.append("On unified memory, host memory that vLLM's processes allocate during the "
                       "profile run can count as non-torch memory: the model runner's token "
                       "buffers are counted here, but public DGX Spark (GB10) startups show "
                       "1-5 GiB more than the non-torch term, and the same launch's pool varied "
                       "by 1-2 GiB between boots; `vramguard calibrate` learns your machine's "
                       "figure from its logs.")
        if self.derived is not None and self.L > self.derived.limit:
            out.append(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: max_model_len {self.L} is above the "
                       f"model's derived maximum ({self.derived.key}={self.derived.limit}); vLLM "
                       "only warns, and positions beyond it may give wrong outputs.")
        if self._load_transient():
            what = ("every layer in 16-bit at init (up to 0.15)"
                    if self.rules.online_fp8_bf16_load_peak == "whole"
                    else "each layer in 16-bit while loading (0.16-0.18)")
            out.append(f"Online FP8 materializes {what}: ~{g(self._load_transient())} more at "
                       "the load peak.")
        if cap is not None:
            # NOTE: DeepSeek-V4's groups have their own blocks and pages (`_csa_notes`).
            wider = sorted({g.block_size for g in st.layout.groups if g.block_size}
                           if CSA not in self.spec.attention_kinds() else ())
            out.append(f"KV: {cap.bytes_per_token} B/token per rank, block size "
                       f"{cap.block_size}"
                       + (f" ({'/'.join(map(str, wider))} for the layers with a smaller page "
                          "per token, pages unified)" if wider else "")
                       + f", {cap.page_size_bytes} B per block, "
                       f"{cap.blocks_per_request} blocks per request of {cap.max_model_len}.")
            out += self._layout_notes(st.layout)
        out += self._draft_assumptions()
        out += self.assumptions
        out += list(self.spec.notes)
        return tuple(out)

    def _fixes(self, cap: KvCapacity | None) -> tuple[Fix, ...]:
        if self.fail is None:
            return ()
        f, s, rules = self.fail.failure, self.s, self.rules
        st = min(self.stages, key=lambda x: x.kv)
        out: list[Fix] = []
        max_u = min(0.98, math.floor(self.F / self.T * 100) / 100)
        tp2 = s.tensor_parallel_size * 2
        tp_ok = (self.spec.num_attention_heads or 1) % tp2 == 0

        def util_for(extra_bytes: float) -> float | None:
            u = math.ceil((self.R + extra_bytes) / self.T * 100) / 100
            return u if self.u < u <= max_u else None

        if f == F.FREE_MEMORY_BELOW_REQUEST:
            u = math.floor(self.F / self.T * 100) / 100 - 0.01
            if u > 0:           # NOTE: else nothing is free: no utilization helps
                out.append(Fix(f"lower --gpu-memory-utilization to {u:.2f} (free memory "
                               f"is {self.F / GIB:.2f} GiB)",
                               {"--gpu-memory-utilization": f"{u:.2f}"}))
            out.append(Fix("stop the other processes on the GPU", {}))
        elif f in (F.WEIGHTS_OOM, F.PROFILE_RUN_OOM):
            out.append(shard_fix(self.spec, self.s, self.gpu, self.R, self.stages))
            if f == F.PROFILE_RUN_OOM:
                out.append(Fix("lower --max-num-batched-tokens to 2048",
                               {"--max-num-batched-tokens": "2048"}))
            if not self.spec.quant:
                out.append(Fix("quantize the weights: --quantization fp8",
                               {"--quantization": "fp8"}))
        elif f == F.NO_KV_MEMORY and self.forced_pool_free_bytes is not None:
            out.extend(self._forced_pool_fixes())
        elif f in (F.NO_KV_MEMORY, F.KV_BELOW_MAX_MODEL_LEN):
            need = st.layout.check_bytes(self.L, rules.kv_fit_check) + (
                st.layout.page_size_bytes if rules.null_block_in_check else 0)
            u = util_for(need - st.kv)
            if u is not None:
                out.append(Fix(f"raise --gpu-memory-utilization to {u:.2f}",
                               {"--gpu-memory-utilization": f"{u:.2f}"}))
            if self.est_len:
                out.append(Fix(f"lower --max-model-len to {self.est_len}",
                               {"--max-model-len": str(self.est_len)}))
            if (s.kv_cache_dtype or "auto") == "auto" and st.layout.bytes_per_token and \
                    st.kv > 0 and need / 2 <= st.kv:
                out.append(Fix("store the KV cache in fp8: --kv-cache-dtype fp8",
                               {"--kv-cache-dtype": "fp8"}))
            if tp_ok:
                out.append(Fix(f"spread the model over more GPUs: -tp {tp2}",
                               {"--tensor-parallel-size": str(tp2)}))
        elif f == F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS and cap is not None:
            out.append(Fix(f"lower --max-num-seqs to {cap.num_blocks}",
                           {"--max-num-seqs": str(cap.num_blocks)}))
            # NOTE: vLLM checks the Mamba blocks for full decode graphs only.
            out.append(Fix("capture piecewise CUDA graphs only (no full decode graphs, slower "
                           "decode): --compilation-config '{\"cudagraph_mode\": \"PIECEWISE\"}'",
                           {"--compilation-config": '{"cudagraph_mode": "PIECEWISE"}'}))
        elif f == F.CUDA_GRAPH_OOM:
            out.append(Fix("lower --gpu-memory-utilization by 0.05 to leave room for CUDA graphs",
                           {"--gpu-memory-utilization": f"{self.u - 0.05:.2f}"}))
            out.append(Fix("disable CUDA graphs: --enforce-eager", {"--enforce-eager": ""}))
            if rules.capture_max_flag and (s.max_cudagraph_capture_size or 512) > 128:
                out.append(Fix("capture fewer, smaller CUDA graphs (slower decode above 128 "
                               "sequences): --max-cudagraph-capture-size 128",
                               {"--max-cudagraph-capture-size": "128"}))
        elif f == F.SAMPLER_WARMUP_OOM:
            seqs = max(1, self.eff.values["max_num_seqs"] // 2)
            out.append(Fix(f"lower --max-num-seqs to {seqs}", {"--max-num-seqs": str(seqs)}))
            out.append(Fix("lower --gpu-memory-utilization by 0.03",
                           {"--gpu-memory-utilization": f"{self.u - 0.03:.2f}"}))
        return tuple(out)

    def _encoder_tp_note(self) -> str:
        """--mm-encoder-tp-mode data (or 0.9.1-0.12's switch): replicated or fallen back."""
        flag = ("--enable-multimodal-encoder-data-parallel"
                if self.eff.values.get("enable_multimodal_encoder_data_parallel")
                else "--mm-encoder-tp-mode data")
        if self.s.mm_encoder_tp_mode == "data":     # NOTE: `mm_settings` kept it: replicated
            return f"{flag}: the encoder is replicated on every TP rank (in the weights)"
        return (f"{flag}: vLLM falls back to 'weights' for this model ('This model does not "
                "support `--mm-encoder-tp-mode data`'; before 0.10.2 its model ignores the "
                "switch): the encoder is sharded over the TP ranks")

    def _forced_pool_fixes(self) -> list[Fix]:
        """A pool forced larger than the GPU holds: a smaller one (room left for the CUDA
        graphs at the top of their band and the sampler warm-up), or vLLM's own sizing."""
        warmup = self.sampler_warmup()[1] if self.rules.engine == "v1" else 0
        room = min(self.F - st.weights.value_bytes - st.non_torch.value_bytes
                   - st.graph.high_bytes for st in self.stages) - warmup
        if self.s.kv_cache_memory_bytes is not None:
            flag, value = "--kv-cache-memory-bytes", room // (64 << 20) * (64 << 20)
            shown = f"{value} ({value / GIB:.2f} GiB)"
        else:
            page = max(st.layout.page_size_bytes for st in self.stages)
            flag, value = "--num-gpu-blocks-override", room // page if page else 0
            shown = str(value)
        out = [Fix(f"lower {flag} to {shown}: what fits after weights, non-torch memory, CUDA "
                   "graphs and the sampler warm-up", {flag: str(value)})] if value > 0 else []
        out.append(Fix(f"drop {flag}: vLLM sizes the pool from --gpu-memory-utilization", {}))
        return out

    def _build(self, cap: KvCapacity | None) -> Plan:
        outcome = self._outcome_built
        if outcome is None:
            fail = self.fail
            if fail is None and not self.risks:
                outcome = _STARTS
            else:
                outcome = _outcome(ok=fail is None, failure=fail.failure if fail else None,
                                   message=fail.message if fail else None,
                                   risks=tuple(self.risks))
            self._outcome_built = outcome
        eff, s = self.eff, self.s
        # NOTE: the dicts filled directly (`Eff.set` per setting, per screened candidate).
        values, sources = eff.values, eff.sources
        if cap is not None:
            values["block_size"] = cap.block_size
            sources["block_size"] = USER if s.block_size else DEFAULT
        kv_name = self.kv_name      # NOTE: `kv.kv_dtype_bytes` of the stage terms
        values["kv_cache_dtype"] = kv_name
        sources["kv_cache_dtype"] = (USER if kv_name == s.kv_cache_dtype
                                     and s.kv_cache_dtype != "auto" else DEFAULT)
        if self.rules.cudagraph_control in _HAS_CUDAGRAPH_MODE:
            values["cudagraph_mode"] = self.graph_mode
            sources["cudagraph_mode"] = self.graph_source
        if not self.detail:
            # NOTE: a screened plan: its ledgers are built when first read (`Plan.__getattr__`;
            # the full plan shares them), and it holds the walk's settings dicts (no copy:
            # finishing the walk sets the same keys to the same values, into its own copies).
            return _plan(model=self.spec.name, gpu=self.gpu.name, vllm_version=self.version,
                         engine=self.rules.engine, outcome=outcome, _lazy_ledgers=self._ledgers,
                         kv=cap, settings=eff.values, settings_sources=eff.sources,
                         log_lines=(), assumptions=(), fixes=(),
                         calibrated=self.cal is not None)
        return _plan(model=self.spec.name, gpu=self.gpu.name, vllm_version=self.version,
                     engine=self.rules.engine, outcome=outcome, ledgers=self._ledgers(), kv=cap,
                     settings=dict(eff.values), settings_sources=dict(eff.sources),
                     log_lines=self._log_lines(cap), assumptions=self._assumptions(cap),
                     fixes=self._fixes(cap), calibrated=self.cal is not None)
