"""The planner: what vLLM decides at startup, per rank, before launch and without a GPU.

`plan(spec, settings, gpu, ...)` resolves the version row, the effective settings, then
walks vLLM's startup order (§2): snapshot and free-memory check, weight load, profile run,
graph estimate, `K`, grouping and the capacity check, blocks (minimum over workers), graph
capture and the sampler warm-up, and returns a `Plan` with vLLM's own messages and log lines
(built by `plan_report.PlanReport`, which the walk mixes in).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from . import _memo
from ._frozen import maker
from . import activation as act
from . import failures as F
from . import kv as kvm
from . import messages as msg
from .calibration import Calibration, CalibrationKey
from .draft import draft_note
from .effective import DERIVED, graph_mode_source
from .effective import Eff as _Eff
from .effective import resolve_settings as _resolve_settings
from .family import (TERMS, Family, check_family, family_base, family_of, free_at_start,
                     free_bytes_at_start)
from .gpu import GpuSpec
from .maxlen import swa_off
from .model import MAMBA, ModelSpec
from .plan import KvCapacity, Plan
from .plan_report import PlanReport
from .provenance import GIB, Estimate, Source
from .rules import NEWEST_VERSION, VllmRules, resolve_rules
from .runner import token_buffer_term
from .settings import Settings
from .stage_terms import override as _override
from .stage_terms import (FULL_GRAPH_MODES, mm_settings, plus_bytes,
                          sampler_copies)
from .validation import validate_searched
from .weights import draft_bytes, pp_layer_split, runtime_dtype_bytes

__all__ = ["plan", "screen", "family_of", "free_at_start", "resolve_rules", "NEWEST_VERSION",
           "PlanHooks"]


@dataclass(frozen=True)
class PlanHooks:
    """Test/what-if hook: fixed byte values for the estimated terms (None: estimate)."""

    weights_bytes: int | None = None
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    context_bytes: int | None = None


# NOTE: built for every screened candidate: without the frozen __init__ (_frozen.py).
_estimate, _kv_capacity = maker(Estimate), maker(KvCapacity)

_DERIVED_SRC = Source.DERIVED


@dataclass(slots=True)
class _Stage:
    pp_rank: int
    layers: tuple[int, int]
    weights: Estimate
    activation: Estimate
    non_torch: Estimate
    graph: Estimate
    layout: kvm.KvLayout
    graph_pool: int | None = None   # the captured pool where it differs from `graph`
    kv: int = 0
    num_blocks: int = 0


# ---- per-stage terms -------------------------------------------------------------------

def _calibration_for(cal: Calibration | None, spec: ModelSpec, s: Settings, gpu: GpuSpec,
                     rules: VllmRules, version: str) -> Calibration | None:
    if cal is None:
        return None
    key = CalibrationKey(gpu.name, version, spec.model_type, s.tensor_parallel_size,
                         s.pipeline_parallel_size)
    alt = CalibrationKey(gpu.name, rules.version, spec.model_type, s.tensor_parallel_size,
                         s.pipeline_parallel_size)
    return cal if (cal.matches(key) or cal.matches(alt)) else None


def _stage_terms(spec: ModelSpec, s: Settings, eff: _Eff, fam: Family, gpu: GpuSpec,
                 cal: Calibration | None, hooks: PlanHooks | None) -> tuple[list[_Stage], str, str]:
    """The per-stage terms, the effective KV dtype name and CUDA-graph mode of one plan."""
    tokens, seqs = eff.values["max_num_batched_tokens"], eff.values["max_num_seqs"]
    # NOTE: the estimates depend on neither the utilization nor max_model_len: a search
    # that varies those reuses them (kept in the family, per (tokens, seqs)).
    hit = fam.terms.get((tokens, seqs))     # NOTE: most candidates of a family: no call
    if hit is None:
        hit = _memo.family_terms(fam.terms, fam.shared, spec, s, fam.rules, gpu, fam.device,
                                 tokens, seqs, TERMS)
    terms, kv_name, graph_mode, fam.v2 = hit
    stages = [_Stage(*terms[0])] if len(terms) == 1 else [_Stage(*t) for t in terms]
    extra = token_buffer_term(spec, s, fam.rules, fam.v2, gpu, fam.device, seqs,
                              eff.values["max_model_len"])
    if extra:
        for st in stages:
            st.non_torch = plus_bytes(st.non_torch, *extra)
    if cal is not None or hooks is not None:
        for st in stages:
            _override(st, cal, hooks, tokens, graph_mode == "NONE")
    return stages, kv_name, graph_mode


def _sub(a: Estimate, *terms: Estimate, note: str = "") -> Estimate:
    """a − Σ terms with the band widened accordingly (a's uncertainty included)."""
    # NOTE: one loop, no generators: runs once per stage of every screened candidate.
    val, low, high = a.value_bytes, a.low_bytes, a.high_bytes
    estimated = calibrated = False
    for t in terms:
        val -= t.value_bytes
        low -= t.high_bytes
        high -= t.low_bytes
        if t.source == Source.ESTIMATED:
            estimated = True
        elif t.source == Source.CALIBRATED:
            calibrated = True
    src = Source.ESTIMATED if estimated else (Source.CALIBRATED if calibrated else Source.DERIVED)
    return _estimate(value_bytes=val, low_bytes=low, high_bytes=high, source=src, note=note)


# ---- the entry point -------------------------------------------------------------------

def plan(spec: ModelSpec, settings: Settings, gpu: GpuSpec, *, vllm_version: str | None = None,
         engine: str | None = None, free_bytes: int | None = None, other_used_bytes: int = 0,
         calibration: Calibration | None = None, hooks: PlanHooks | None = None,
         env: dict[str, str] | None = None, detail: bool = True, cuda_ordinal: int = 0) -> Plan:
    """Predict vLLM's startup for `spec` + `settings` on `gpu`.

    `free_bytes` is the free memory per GPU at vLLM's snapshot (what vLLM prints as
    "Free memory on device (F/T)"); by default `total − CUDA context − other_used_bytes`.
    `vllm_version` defaults to the newest examined release; `engine` to that release's
    default (v1 falls back to v0 on compute capability < 8.0 in 0.8-0.10). A matching
    `calibration` replaces the activation / non-torch / graph estimates. `hooks` pins terms
    to given byte values (tests and what-ifs). `env` holds the launch's environment variables
    (e.g. `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`). `detail=False` leaves out the
    predicted log lines, assumptions and fixes (the same numbers and outcome, about a third
    faster: the tuner screens candidates this way). `cuda_ordinal` is the GPU's position among
    the devices CUDA shows vLLM (its messages name `cuda:N`). Raises UsageError for vLLM's own
    validation.
    """
    return _walk(spec, settings, gpu, vllm_version, engine, free_bytes, other_used_bytes,
                 calibration, hooks, env, detail, cuda_ordinal).run()


def screen(spec: ModelSpec, settings: Settings, gpu: GpuSpec, *, vllm_version: str | None = None,
           engine: str | None = None, free_bytes: int | None = None, other_used_bytes: int = 0,
           calibration: Calibration | None = None, hooks: PlanHooks | None = None,
           env: dict[str, str] | None = None, cuda_ordinal: int = 0,
           family: Family | None = None,
           flags: tuple[dict, dict] | None = None) -> tuple[Plan, Callable[[], Plan]]:
    """`plan(..., detail=False)`, and a function that returns the same plan in full (log
    lines, assumptions, fixes) from the same startup walk, without planning it again.

    A search that screens many candidates of one family (settings equal but for the searched
    flags, `_memo.SEARCHED`) may pass what they share: `family`, `family_of(spec, settings,
    gpu, ...)` of any of them, and `flags`, `effective.flag_dicts(settings)` of any with the
    same `user_set`, KV pool and blocks override (both are read, never changed).

    NOTE: a search screens many candidates and shows a few; re-planning those in full
    repeated the walk. The full plan equals `plan(..., detail=True)` with the same inputs."""
    walk = _walk(spec, settings, gpu, vllm_version, engine, free_bytes, other_used_bytes,
                 calibration, hooks, env, False, cuda_ordinal, family, flags)
    return walk.run(), walk.detailed


def _walk(spec, settings, gpu, vllm_version, engine, free_bytes, other_used_bytes, calibration,
          hooks, env, detail, cuda_ordinal=0, fam=None, flags=None) -> "_Walk":
    version = vllm_version or NEWEST_VERSION
    if fam is None:
        fam = family_of(spec, settings, gpu, version, engine, env)
    swa_warning = None
    if fam.rules.interleaved_swa_off is not None and not settings.disable_sliding_window:
        swa_warning = swa_off(spec, fam.rules, env)
        if swa_warning:
            # NOTE: vLLM's ModelConfig turns the windows off itself: plan what it then runs
            settings = replace(settings, disable_sliding_window=True)
            fam, flags = family_of(spec, settings, gpu, version, engine, env), None
    rules, device = fam.rules, fam.device
    if fam.checked:
        # NOTE: the family's other flags passed every check: only those of the searched ones
        # can fail (in the same order).
        validate_searched(settings, rules, version)
    else:
        check_family(fam, spec, settings, rules, gpu, version)
    base = fam.base if fam.base is not None else family_base(fam, spec, settings, gpu)
    eff, derived = _resolve_settings(spec, settings, rules, gpu, device, base, flags)
    if swa_warning:
        eff.set("disable_sliding_window", True, DERIVED)
    cal = _calibration_for(calibration, spec, settings, gpu, rules, version)
    # NOTE: the plan echoes the flags as given; the terms read what they do to the encoder
    if spec.vision is not None:
        settings = mm_settings(spec, settings, rules, version)
    stages, kv_name, graph_mode = _stage_terms(spec, settings, eff, fam, gpu, cal, hooks)
    ctx = hooks.context_bytes if hooks and hooks.context_bytes is not None else fam.context_bytes
    walk = _Walk(spec, settings, gpu, rules, eff, stages, version, free_bytes, other_used_bytes,
                 cal, hooks, device, derived, detail, kv_name, cuda_ordinal, ctx)
    walk.fallback, walk.graph_mode = fam.fallback, graph_mode
    walk.swa_warning = swa_warning
    walk.v2 = fam.v2
    if base.pooling:
        walk.pooling = True
    # NOTE: the graph flags and mode are the family's (not searched): their source once
    if fam.graph_source is None:
        fam.graph_source = graph_mode_source(settings, graph_mode)
    walk.graph_source = fam.graph_source
    return walk


# ---- the startup walk ------------------------------------------------------------------

_BUDGET_NOTE = {False: "requested - weights - activation - non-torch",
                True: "requested - weights - activation - non-torch - graphs"}


@dataclass
class _Fail:
    failure: str
    message: str


class _Walk(PlanReport):
    """vLLM's startup order (§2) over the per-stage terms; `PlanReport` builds the Plan."""

    # NOTE: what most walks leave as it starts, as class attributes (a walk per screened
    # candidate sets only what it changes).
    fail: _Fail | None = None
    est_len: int | None = None
    forced_pool_free_bytes: int | None = None   # free memory a forced pool overran
    fallback: str | None = None     # why v1 fell back to v0 (`family._pick_rules`)
    swa_warning: str | None = None  # vLLM turned the sliding windows off (`maxlen.swa_off`)
    pooling: bool = False           # a pooling model (`SettingsBase.pooling`)
    v2: bool = False                # Model Runner V2 runs the model (`Family.v2`)
    graph_mode = "NONE"             # the CUDA graphs captured (`_walk` sets it)
    graph_source: str               # where `graph_mode` came from (`_walk` sets it)
    _bpr: tuple | None = None       # (layout, L, its blocks per request)
    cap: KvCapacity | None = None   # the capacity `run` found

    def __init__(self, spec, settings, gpu, rules, eff, stages, version, free_bytes,
                 other_used, cal, hooks, device, derived, detail=True, kv_name="auto",
                 cuda_ordinal=0, context_bytes=0):
        self.spec, self.s, self.gpu, self.rules = spec, settings, gpu, rules
        self.cuda_ordinal = cuda_ordinal
        self.detail, self.kv_name = detail, kv_name
        self.eff, self.stages, self.version = eff, stages, version
        self.cal, self.hooks, self.device, self.derived = cal, hooks, device, derived
        self.T = gpu.total_bytes
        self.u = eff.values["gpu_memory_utilization"]
        raw_r = self.u * self.T
        self.R = float(math.ceil(raw_r)) if rules.request_ceil else raw_r
        self.ctx = context_bytes             # CUDA context etc. before the snapshot
        self.F = free_bytes_at_start(self.T, free_bytes, self.ctx, other_used)
        self.free_given = free_bytes is not None
        self.L = eff.values["max_model_len"]
        self.assumptions: list[str] = []
        self.logs: list[str] = []
        self.risks: list[str] = []
        # NOTE: vLLM 0.25+ takes --mm-ipc-gpu-memory-gb out of a multimodal model's KV budget
        # after logging it (`reserve_mm_ipc_gpu_memory`); a text-only model drops the flag
        self.mm_reserve = (int(settings.mm_ipc_gpu_memory_gb * GIB)
                           if rules.mm_ipc_reserve and spec.vision is not None else 0)

    def _draft_assumptions(self) -> list[str]:
        """The drafter's note (first among the walk's assumptions; detail only)."""
        s = self.s
        if s.num_speculative_tokens > 0 and self.spec.draft is not None:
            return [draft_note(self.spec.draft, s, self.rules)]
        draft = draft_bytes(self.spec, s, runtime_dtype_bytes(s), self.rules)
        if not draft:
            return []
        n = max(1, self.spec.mtp_layers)
        return [f"Speculative decoding: the checkpoint's MTP layer{'s are' if n > 1 else ' is'} "
                f"the drafter (+{draft / GIB:.2f} GiB of weights on the last stage, {n} more "
                f"attention layer{'s' if n > 1 else ''} in the KV groups)."]

    # -- budget per stage --
    def _budget_terms(self, st: _Stage) -> tuple[Estimate, ...]:
        """What vLLM subtracts from u x total for the KV cache (whole-GPU releases also
        subtract everything else on the GPU, `T - F`)."""
        if self.rules.graph_budget == "subtracted":
            return st.weights, st.activation, st.non_torch, st.graph
        return st.weights, st.activation, st.non_torch

    def _kv_bytes(self, st: _Stage) -> int:
        """K, the KV budget in bytes: `_kv_budget(st).value_bytes` without its band.

        NOTE: the walk needs the value only; the band is for the ledgers, which a screened
        plan builds when first read."""
        if self.s.kv_cache_memory_bytes is not None:
            return int(self.s.kv_cache_memory_bytes) - self.mm_reserve
        # NOTE: `_budget_terms` spelled out (no tuple per stage of a screened candidate);
        # tests/core/test_tuner_screen.py holds it equal to the ledgers' KV term.
        rules = self.rules
        kv = (int(self.R) - st.weights.value_bytes - st.activation.value_bytes
              - st.non_torch.value_bytes)
        if rules.graph_budget == "subtracted":
            kv -= st.graph.value_bytes
        return (kv - (self.T - self.F) if rules.whole_gpu else kv) - self.mm_reserve

    def _kv_budget(self, st: _Stage) -> Estimate:
        """K with its band and provenance (the ledgers' KV term)."""
        reserve = ((Estimate.exact(self.mm_reserve, Source.USER, "--mm-ipc-gpu-memory-gb"),)
                   if self.mm_reserve else ())
        if self.s.kv_cache_memory_bytes is not None:
            user = Estimate.exact(self.s.kv_cache_memory_bytes, Source.USER,
                                  "--kv-cache-memory-bytes")
            return _sub(user, *reserve, note="--kv-cache-memory-bytes - --mm-ipc-gpu-memory-gb"
                        ) if reserve else user
        r = int(self.R)     # NOTE: `Estimate.exact` without __init__ (_frozen.py)
        req = _estimate(value_bytes=r, low_bytes=r, high_bytes=r, source=_DERIVED_SRC,
                        note="u x total")
        terms = self._budget_terms(st)
        if self.rules.whole_gpu:
            terms += (Estimate.exact(self.T - self.F, Source.DERIVED,
                                     "whole-GPU budget: memory used by everything else"),)
        note = _BUDGET_NOTE[self.rules.graph_budget == "subtracted"]
        return _sub(req, *terms, *reserve,
                    note=note + (" - mm IPC reservation" if reserve else ""))

    def _failed(self, failure: str, message: str) -> None:
        if self.fail is None:
            self.fail = _Fail(failure, message)

    def run(self) -> Plan:
        self._free_check()
        for st in self.stages:
            st.kv = self._kv_bytes(st)
        self._load_and_profile()
        if self.mm_reserve and self.fail is None:
            k = min(st.kv for st in self.stages)
            if k <= 0:
                self._failed(F.NO_KV_MEMORY,
                             msg.mm_ipc_message(self.rules, self.mm_reserve, k + self.mm_reserve))
        kv_cap = None
        if self.fail is None:
            kv_cap = self._capacity()
        if self.fail is None and kv_cap is not None:
            self._after_allocation(kv_cap)
        self.cap = kv_cap
        return self._build(kv_cap)

    def detailed(self) -> Plan:
        """The finished walk's plan with log lines, assumptions and fixes."""
        self.detail = True
        return self._build(self.cap)

    def _free_check(self) -> None:
        if not self.rules.free_memory_check or self.F >= self.R:
            return
        if self.device == "cpu":
            text = (f"Available memory on node 0 ({round(self.F / GIB, 2)}/{round(self.T / GIB, 2)}"
                    f" GiB) on startup is less than desired CPU memory utilization ({self.u}, "
                    f"{round(self.R / GIB, 2)} GiB). On the CPU backend, the "
                    "`--gpu-memory-utilization` flag controls the fraction of CPU memory reserved "
                    "(despite its name). To resolve: …")
        else:
            text = msg.free_memory_message(self.rules, self.F, self.T, self.u, self.R,
                                           device=f"cuda:{self.cuda_ordinal}")
        self._failed(F.FREE_MEMORY_BELOW_REQUEST, text)

    def _load_transient(self) -> int:
        """Online FP8 materializes the weights in 16-bit first (§8; `rules.
        online_fp8_bf16_load_peak`): every layer's at init up to 0.15 (one extra byte per
        quantized parameter of the first stage), the largest layer's in 0.16-0.18."""
        mode = self.rules.online_fp8_bf16_load_peak
        if (not mode or self.spec.quant is not None or not self.spec.layers
                or (self.s.quantization or "").lower() != "fp8"):
            return 0
        tp = self.s.tensor_parallel_size
        per_layer = [(l.params.total() - l.params.norms - l.params.router) // tp
                     for l in self.spec.layers]
        if mode == "layer":
            return max(per_layer)
        start, end = pp_layer_split(self.spec.num_layers, self.s.pipeline_parallel_size,
                                    self.rules.pp_layout)[0]
        return sum(per_layer[start:end])

    def _load_and_profile(self) -> None:
        extra = self._load_transient()
        for st in self.stages:
            W = st.weights.value_bytes
            if W + extra > self.F:
                # NOTE: the load fails where the weights outgrow the free memory: what is left
                # to allocate then, with the rest of the free memory already taken.
                need = W + extra
                tried = min(need, max(need - self.F, 1 << 20))
                torch = msg.torch_oom_text(tried, self.T, self.F - (need - tried))
                self._failed(F.WEIGHTS_OOM, msg.weights_oom_message(torch)
                             if self.rules.msg_load_failure else torch)
                return
            peak = W + st.activation.value_bytes + st.non_torch.value_bytes
            if peak > self.F:
                self._failed(F.PROFILE_RUN_OOM,
                             msg.torch_oom_text(st.activation.value_bytes, self.T, self.F - W))
                return

    # -- the engine core: check, blocks, tokens --
    def _avail(self, st: _Stage) -> int:
        P = st.layout.page_size_bytes
        k = st.kv
        if self.s.num_gpu_blocks_override and self.rules.override_before_check:
            k = self.s.num_gpu_blocks_override * P
        return k - P if self.rules.null_block_in_check else k

    def _capacity(self) -> KvCapacity | None:
        rules, s = self.rules, self.s
        stages = self.stages
        # NOTE: one stage without PP: no list or key function per screened candidate.
        if (stages[0].layout.attention_free if len(stages) == 1
                else all([st.layout.attention_free for st in stages])):
            self.assumptions.append("attention-free model: no KV cache")
            if s.max_model_len_auto:
                self.logs.append("Auto-fit max_model_len: attention-free model, using derived "
                                 f"max_model_len={self.L}")
            return None
        v1 = rules.engine == "v1"
        for st in stages:
            st.num_blocks = kvm.num_blocks_for(st.layout, st.kv)
        if v1:
            for st in stages:
                if self._avail(st) <= 0:
                    self._failed(F.NO_KV_MEMORY, msg.no_kv_message(rules))
                    return None
            if s.max_model_len_auto:
                fit = min(kvm.estimate_max_len(st.layout, self._avail(st), self.L,
                                               rules.kv_fit_check) for st in stages)
                if fit <= 0:
                    self._failed(F.NO_KV_MEMORY, msg.autofit_fail_message())
                    return None
                # NOTE: the limiting worker's memory as the fit check sees it (the null block
                # and a blocks override applied)
                kv_min = min(self._avail(st) for st in stages)
                dev = "CPU" if self.device == "cpu" else "GPU"
                self.logs.append(msg.autofit_log(rules, self.L, fit, kv_min, dev)
                                 if fit < self.L else
                                 msg.autofit_full_log(rules, self.L, kv_min, dev))
                self.L = fit
                self.eff.set("max_model_len", fit, DERIVED)
            for st in stages:
                need = st.layout.check_bytes(self.L, rules.kv_fit_check,
                                             self._per_request(st.layout))
                avail = self._avail(st)
                if need > avail:
                    est = None
                    if rules.estimate_max_len != "none":
                        est = kvm.estimate_max_len(st.layout, avail, self.L,
                                                   rules.kv_fit_check) or None
                    self.est_len = est
                    self._failed(F.KV_BELOW_MAX_MODEL_LEN,
                                 msg.fit_message(rules, self.L, need, avail, est))
                    break
        elif min(st.num_blocks for st in stages) <= 0 and not s.num_gpu_blocks_override:
            # NOTE: v0 replaces the profiled blocks by the override before its checks
            self._failed(F.NO_KV_MEMORY, msg.no_kv_message(rules))
            return None
        tight = stages[0] if len(stages) == 1 else min(stages, key=lambda st: st.num_blocks)
        blocks = tight.num_blocks
        override = s.num_gpu_blocks_override
        if override:
            self.logs.append(msg.override_log(blocks, override, rules))
            blocks = override
        layout = tight.layout
        # NOTE: v0 splits the blocks over its PP virtual engines before this check (0.8+).
        v0_tokens = layout.block_size * (blocks // s.pipeline_parallel_size
                                         if rules.v0_fit_divides_pp else blocks)
        if not v1 and self.fail is None and self.L > v0_tokens:
            self.est_len = v0_tokens
            self._failed(F.KV_BELOW_MAX_MODEL_LEN, msg.v0_fit_message(self.L, v0_tokens))
        per_request = self._per_request(layout)
        conc = kvm.concurrency(rules, layout, blocks, self.L, rules.engine, per_request)
        toks = kvm.tokens(rules, layout, blocks, conc, self.L, rules.engine)
        return _kv_capacity(bytes_per_token=layout.bytes_per_token, block_size=layout.block_size,
                            page_size_bytes=layout.page_size_bytes, num_blocks=blocks,
                            tokens=toks, max_concurrency=conc, max_model_len=self.L,
                            blocks_per_request=per_request,
                            estimated_max_model_len=self.est_len)

    def _per_request(self, layout: kvm.KvLayout) -> int:
        """`layout.blocks_per_request(self.L)`, once per layout of the walk (the fit check,
        the concurrency and the capacity read it)."""
        # NOTE: the stages of one walk share a layout unless PP splits the layers unevenly.
        last = self._bpr
        if last is not None and last[0] is layout and last[1] == self.L:
            return last[2]
        n = layout.blocks_per_request(self.L)
        self._bpr = (layout, self.L, n)
        return n

    # -- after the KV allocation: mamba check, graphs, sampler warm-up --
    def _v2_warmup(self) -> bool:
        """Model Runner V2 warms its kernels up with 2-token prompts (0.17+:
        gpu/warmup.py `warmup_kernels`), not the V1 runner's dummy sampler run."""
        return self.rules.v2_kernel_warmup and self.v2

    def sampler_warmup(self) -> tuple[int, int]:
        """(dummy requests, bytes) of v1's sampler warm-up on the last PP rank: the V1
        runner's min(max_num_seqs, batched tokens) requests; V2's prompts of 2 + k tokens."""
        s = self.s
        tokens = self.eff.values["max_num_batched_tokens"]
        if self._v2_warmup():
            tokens //= 2 + s.num_speculative_tokens
        reqs = min(self.eff.values["max_num_seqs"], tokens)
        # NOTE: with speculative decoding the warm-up runs the dummy rejection sampler too.
        copies = (sampler_copies(self.spec, s, self.rules, self.v2) if s.num_speculative_tokens
                  else 0)
        if self.pooling:
            return reqs, 0          # NOTE: a pooling model warms its pooler up, not a sampler
        return reqs, act.sampler_warmup_bytes(self.spec, reqs, copies)

    def _allocation_fits(self, cap: KvCapacity) -> bool:
        """The pool is allocated one tensor of `blocks x page per layer` at a time into what
        the weights and non-torch memory leave free; only a pool the user forced
        (--kv-cache-memory-bytes, --num-gpu-blocks-override) can be larger: torch's OOM."""
        for st in self.stages:
            free = self.F - st.weights.value_bytes - st.non_torch.value_bytes
            pool = cap.num_blocks * st.layout.page_size_bytes
            if pool <= free:
                continue
            layers = max((g.padded_layers for g in st.layout.groups), default=1)
            tensor = max(1, pool // max(1, layers))
            self.forced_pool_free_bytes = max(0, free)
            # NOTE: the tensors that fit are allocated; the next one fails.
            self._failed(F.NO_KV_MEMORY, msg.torch_oom_text(tensor, self.T,
                                                            max(free, 0) % tensor))
            return False
        return True

    def _after_allocation(self, cap: KvCapacity) -> None:
        rules, s, spec = self.rules, self.s, self.spec
        if ((s.kv_cache_memory_bytes is not None or s.num_gpu_blocks_override)
                and self.device != "cpu" and not self._allocation_fits(cap)):
            return
        seqs = self.eff.values["max_num_seqs"]
        # NOTE: any Mamba layer (hybrid or pure: `kv_cache_config.has_mamba_layers`), only
        # with full CUDA graphs (config/compilation.py: each decode graph's sequence needs a
        # block; piecewise graphs do not check).
        if (rules.mamba_blocks_check and self.graph_mode in FULL_GRAPH_MODES
                and seqs > cap.num_blocks and MAMBA in spec.attention_kinds()):
            self._failed(F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS,
                         msg.mamba_blocks_message(seqs, cap.num_blocks))
            return
        stages = self.stages
        st = stages[0] if len(stages) == 1 else min(stages, key=lambda x: x.kv)
        allocated = cap.num_blocks * st.layout.page_size_bytes
        used = (self.T - self.F) + st.weights.value_bytes + st.non_torch.value_bytes + allocated
        free_after_kv = self.T - used
        g = st.graph
        if rules.graph_budget != "subtracted" and g.value_bytes > 0:
            if g.low_bytes > free_after_kv:
                self._failed(F.CUDA_GRAPH_OOM, msg.torch_oom_text(g.value_bytes, self.T,
                                                                  free_after_kv))
                return
            if max(g.high_bytes, 1.2 * g.value_bytes) > free_after_kv:
                self.risks.append(f"{F.CUDA_GRAPH_OOM}: CUDA graphs (~{g.value_bytes / GIB:.2f} "
                                  f"GiB) must fit in the {free_after_kv / GIB:.2f} GiB left "
                                  "outside gpu_memory_utilization")
        # NOTE: the captured pool is allocated after the KV cache in every version (§2, steps
        # 8-9). When the estimate is subtracted (0.20+) the budget left room for it, but the
        # pool itself still takes memory: ~1.2x the estimate (0.19 logs: "CUDA graph pool
        # memory: 1.55 GiB (actual), 1.09 GiB (estimated)").
        graph_pool = g.value_bytes if rules.graph_budget != "subtracted" else int(
            act.GRAPH_ACTUAL_OVER_ESTIMATE * g.value_bytes)
        if st.graph_pool is not None:       # LoRA-specialised graphs (0.18+): pool > estimate
            graph_pool = st.graph_pool
            if graph_pool > free_after_kv:
                self._failed(F.CUDA_GRAPH_OOM, msg.torch_oom_text(graph_pool, self.T,
                                                                  free_after_kv))
                return
        # NOTE: the sampler warm-up runs on the last PP rank, after KV and graphs are allocated.
        last = self.stages[-1]
        used_last = ((self.T - self.F) + last.weights.value_bytes + last.non_torch.value_bytes
                     + cap.num_blocks * last.layout.page_size_bytes)
        free_after_graphs = self.T - used_last - graph_pool
        reqs, need = self.sampler_warmup()
        if (rules.engine != "v1" or self.device == "cpu" or need <= free_after_graphs
                or rules.v1_profile_logits):     # NOTE: V1 0.7.x warms no sampler up
            return
        if need > 1.25 * free_after_graphs:
            # NOTE: V2's kernel warm-up raises torch's own OOM (no sampler wrapper)
            text = (msg.torch_oom_text(reqs * self.spec.vocab_size * 4, self.T,
                                       max(free_after_graphs, 0))
                    if self._v2_warmup() else msg.sampler_oom_message(reqs))
            self._failed(F.SAMPLER_WARMUP_OOM, text)
        else:
            self.risks.append(f"{F.SAMPLER_WARMUP_OOM}: the sampler warm-up needs "
                              f"~{need / GIB:.2f} GiB with {reqs} requests; about "
                              f"{max(free_after_graphs, 0) / GIB:.2f} GiB will be free")
