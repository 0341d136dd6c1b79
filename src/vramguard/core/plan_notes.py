"""The plan's explanatory notes (a mixin of `plan_report.PlanReport`): why a request holds
the blocks it does, what the flags did to the graphs, what lies outside the budget. They
only read what the walk decided."""

from __future__ import annotations

from .all2all import GATHER_BACKENDS, dp_moe
from .model import CHUNKED, CSA, MAMBA, SLIDING
from .provenance import GIB
from .stage_terms import (async_scheduling, custom_all_reduce_in_n, custom_all_reduce_runs,
                          lora_graph_cases, mamba_cache_mode, sampler_copies,
                          v0_mamba_slot_bytes, v0_mamba_slots)
from .weights import eplb_buffer_bytes, lora_bytes, mla_backend_bytes, runtime_dtype_bytes

__all__ = ["PlanNotes"]


def _gib(b: float) -> str:
    return f"{b / GIB:.2f} GiB"


class PlanNotes:
    """Note builders of the plan's assumptions (mixin: reads the walk's attributes)."""

    def _lora_graph_notes(self, st) -> list[str]:
        """How LoRA multiplies the captured CUDA graphs (cudagraph_specialize_lora)."""
        g, out = _gib, []
        cases = lora_graph_cases(self.s, self.rules)
        times = "twice" if cases == 2 else f"{cases} times (--specialize-active-lora)"
        if st.graph_pool is not None:
            out.append(f"With LoRA every graph size is captured {times} (cudagraph_specialize_"
                       "lora, 0.11.1+): vLLM's estimate counts about one graph; the pool, ~"
                       f"{g(st.graph_pool)}, is allocated after the KV cache.")
        elif cases > 1 and st.graph.value_bytes:
            out.append(f"With LoRA every graph size is captured {times} (cudagraph_specialize_"
                       "lora, 0.11.1+), counted in the graph term.")
        return out

    def _outside_budget_notes(self) -> list[str]:
        """Memory this release allocates outside gpu_memory_utilization's budget."""
        g, out = _gib, []
        if self.s.enable_eplb and self.rules.eplb_buffer == "outside":
            eplb_b = eplb_buffer_bytes(self.spec, self.s, runtime_dtype_bytes(self.s))
            if eplb_b:
                out.append(f"EPLB's working set, ~{g(eplb_b)} per rank, is allocated after "
                           "vLLM measures the weights (0.12-0.19): outside the budget.")
        if self.s.enable_lora and self.rules.lora_outside_budget:
            lora_b = lora_bytes(self.spec, self.s, runtime_dtype_bytes(self.s))
            out.append(f"LoRA slots take ~{g(lora_b)} per rank that this release (v0) does "
                       "not deduct: they use memory outside gpu_memory_utilization.")
        return out

    def _all2all_note(self) -> list[str]:
        """Data parallelism's MoE all-to-all: what the profile run and the buffers take."""
        s, rules = self.s, self.rules
        if s.data_parallel_size <= 1 or self.spec.moe is None or rules.engine != "v1":
            return []
        backend, ranks, b, _combine = dp_moe(self.spec, s, rules,
                                             self.eff.values["max_num_batched_tokens"])
        name = f"all-to-all {backend}" if backend else "naive multicast"
        if ranks > 1:
            return [f"DP {s.data_parallel_size}: each rank's MoE layers run on the tokens of all "
                    f"{ranks} DP ranks in the profile run ({name}), counted in the activation."]
        if b:
            nodes = (" (one node; across nodes high throughput adds an RDMA buffer of the "
                     "NVLink size)" if backend == "deepep_high_throughput" else "")
            return [f"DeepEP's buffers ({backend}), ~{_gib(b)} per rank, are allocated outside "
                    f"torch after the weights are measured: counted in non-torch memory{nodes}."]
        if backend not in GATHER_BACKENDS:
            return [f"The {backend} all-to-all's own buffers are not counted (not modelled)."]
        return []

    def _mla_backend_note(self, st) -> list[str]:
        """The MLA backend's copies of the attention matrices, counted in the weights."""
        if not (self.rules.mla_supported and self.spec.uses_mla):
            return []
        b = mla_backend_bytes(self.spec, self.s, runtime_dtype_bytes(self.s), st.layers,
                              self.gpu.compute_capability, self.rules.v0_mla_absorbed)
        if not b:
            return []
        what = ("the absorbed decode matrices W_Q_UK / W_UV_O and W_QR (v0 0.7.1-0.7.3, "
                "VLLM_MLA_PERFORM_MATRIX_ABSORPTION=1)" if self.rules.v0_mla_absorbed else
                "a 16-bit copy of the quantized kv_b_proj (W_UK / W_UV)")
        return [f"The MLA backend keeps {what} next to the weights: ~{_gib(b)} per rank, "
                "inside vLLM's weights measurement."]

    def _v0_mamba_note(self, st) -> list[str]:
        """v0 keeps the Mamba state outside the KV cache, allocated in the profile run."""
        slot = v0_mamba_slot_bytes(self.spec, self.s, self.rules, st.layers,
                                   runtime_dtype_bytes(self.s))
        if not slot:
            return []
        eager = bool(self.s.enforce_eager) or self.device == "cpu"
        n = v0_mamba_slots(self.rules, self.eff.values["max_num_seqs"], eager)
        return [f"The V0 engine allocates the Mamba state in the profile run's first forward "
                f"({n} request slots, {slot * n / GIB:.2f} GiB on this rank): it is part of the "
                "activation peak, outside the KV cache."]

    def _layout_notes(self, layout) -> list[str]:
        """Why a request holds the blocks it does, where a version rule decides it."""
        kinds = {g.kind for g in layout.groups}
        rules, s, out = self.rules, self.s, []
        if MAMBA in kinds and len(kinds) > 1:
            out += self._mamba_mode_notes()
        windowed = any(g.window_tokens for g in layout.groups if g.kind in (SLIDING, CHUNKED))
        if windowed and rules.sliding_inflight == "batched_x_batches":
            tokens = self.eff.values["max_num_batched_tokens"]
            on = async_scheduling(self.spec, s, rules, self.v2)
            out.append(f"Sliding-window/chunked layers keep room for {layout.inflight_tokens} "
                       f"in-flight tokens ({layout.inflight_tokens // max(1, tokens)} batches "
                       f"of {tokens}; async scheduling {'on' if on else 'off'}).")
        if CSA in self.spec.attention_kinds():
            out += self._csa_notes(layout)
        if rules.v0_mla_align_bytes and self.spec.uses_mla and self.gpu.vendor == "nvidia" \
                and self.device == "cuda":
            out.append("MLA cache entries are padded to 256 bytes in this version "
                       "(VLLM_CUDA_MEM_ALIGN_KV_CACHE=0 turns it off).")
        return out

    def _mamba_mode_notes(self) -> list[str]:
        """How prefix caching sets the Mamba groups' blocks per request (stage_terms)."""
        rules, s = self.rules, self.s
        mode = mamba_cache_mode(self.spec, s, rules)
        why = ("vLLM's default for hybrid models from 0.28" if s.enable_prefix_caching is None
               else "--enable-prefix-caching")
        asked = s.mamba_cache_mode
        if asked not in (None, "none", mode) and rules.mamba_cache_modes:
            return [f"--mamba-cache-mode {asked} becomes '{mode}': "
                    + ("prefix caching is off (vLLM resets it, with a warning)."
                       if mode == "none" else f"{self.spec.architecture} has no Mamba prefix "
                       "caching at every block (vLLM falls back, with a warning).")]
        if mode == "align":
            return [f"Prefix caching on ({why}): mamba_cache_mode 'align' keeps 2 blocks per "
                    "Mamba group per request (+1 per speculative token); "
                    "--no-enable-prefix-caching keeps 1."]
        if mode == "all":
            return [f"Prefix caching on ({why}): {self.spec.architecture} caches its Mamba "
                    "state per block (mamba_cache_mode 'all'): a request holds a Mamba block "
                    "per block of its length in each Mamba group; --no-enable-prefix-caching "
                    "keeps 1."]
        if s.enable_prefix_caching is False and rules.hybrid_prefix_caching_default:
            return ["Prefix caching off: 1 block per Mamba group per request "
                    "(mamba_cache_mode 'none')."]
        if s.enable_prefix_caching and not rules.mamba_cache_modes:
            return ["Prefix caching is turned off for this model: "
                    f"{self.spec.architecture} has no Mamba prefix caching in this release "
                    "(vLLM: 'Hybrid or mamba-based model detected without support for prefix "
                    "caching: disabling.')."]
        return []

    def _csa_notes(self, layout) -> list[str]:
        """DeepSeek-V4's grouping (core/kv_csa.py) and its KV dtype before 0.30."""
        out = [f"DeepSeek-V4 compressed sparse attention: {len(layout.groups)} KV-cache groups "
               f"(compressed latent and indexer keys in blocks of {layout.block_size} tokens; "
               "sliding-window and compressor-state caches in their own blocks), "
               f"{layout.page_size_bytes:,} bytes per block ('{self.rules.csa_grouping}' "
               "grouping of this version)."]
        if self.kv_name == "auto" and not self.rules.csa_auto_kv_ok:
            out.append("Before 0.30 vLLM's FlashMLA sparse path accepts only an fp8 KV cache for "
                       "DeepSeek-V4 (it asserts at model init with 'auto'): pass "
                       "--kv-cache-dtype fp8; planned as fp8_ds_mla.")
        return out

    def _sampler_note(self) -> str:
        copies = sampler_copies(self.spec, self.s, self.rules, self.v2)
        if self.s.num_speculative_tokens <= 0 or copies <= self.rules.profile_sampler_copies:
            return ""
        return (f"; with speculative decoding the dummy rejection sampler holds ~{copies:g} fp32 "
                "copies of the requests x vocabulary logits")

    def _graph_flag_notes(self) -> list[str]:
        """What the compilation flags did to the CUDA graphs (none said: nothing)."""
        s, out = self.s, []
        given = [f"{name}={v}" for name, v in (
            ("-O", s.optimization_level), ("compilation mode", s.compilation_mode),
            ("cudagraph_mode", s.cudagraph_mode)) if v is not None]
        if given and self.rules.engine == "v0":
            out.append(f"{', '.join(given)}: the V0 engine captures its CUDA graphs whatever "
                       "the compilation flags (only --enforce-eager turns them off).")
        elif given:
            mode = self.graph_mode
            what = ("no CUDA graphs are captured (as with --enforce-eager; torch.compile's own "
                    "memory is not modelled)" if mode == "NONE"
                    else f"CUDA graphs captured in mode {mode}")
            out.append(f"{', '.join(given)}: {what} in vLLM {self.version}.")
        if s.cudagraph_capture_sizes is not None or s.cuda_graph_sizes is not None:
            out.append("Your capture sizes replace vLLM's list (the graph term counts the "
                       "sizes vLLM keeps).")
        return out

    def _all_reduce_note(self) -> str:
        if self.s.tensor_parallel_size <= 1:
            return ""
        if custom_all_reduce_in_n(self.s, self.rules, self.gpu, self.graph_mode == "NONE"):
            why = ("the CUDA-graph memory probe's buffers stay mapped by the peers"
                   if self.rules.allreduce_in_n == "graph_probe"
                   else "set up inside the profiling window")
            return f"; custom all-reduce memory counted: {why}"
        if custom_all_reduce_runs(self.s, self.gpu):
            return ("; custom all-reduce set up before vLLM's snapshot: only a quarter of its "
                    "TP share counted")
        if self.gpu.peer_link is not None:
            return (f"; no custom all-reduce memory counted: vLLM turns it off on these GPUs "
                    f"(measured peer link: {self.gpu.peer_link})")
        return "; no custom all-reduce memory counted (turned off, or not NVLink-class GPUs)"
