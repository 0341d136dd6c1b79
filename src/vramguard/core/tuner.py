"""The tuner: vLLM settings that start and keep a KV-usage target, judged by the planner.

The rule of thumb made exact: `max_num_seqs` requests of `max_model_len` tokens (sized from
the workload's p99, not the model's maximum) must fit in `target_kv_usage` of the KV pool,
i.e. `max_num_seqs <= target x max_concurrency` as the planner computes it (group-aware for
sliding-window and hybrid models). Every candidate is a full `planner.plan`; nothing here
re-implements vLLM's arithmetic. Flags the user pinned (`Settings.user_set`) are never
changed: when they make the target impossible, the result names them.

Searched: tensor-parallel size (beyond the GPUs given as "needs N GPUs" alternatives, and
pipeline parallelism when no single node of 8 holds the model), gpu_memory_utilization
(what is free minus a headroom), max_model_len, max_num_seqs, max_num_batched_tokens (lower
when the activation peak blocks startup), fp8 KV cache, fp8 weights (alternatives only),
and `--kv-cache-memory-bytes` (0.10.2+) as a fixed-pool alternative.
"""

from __future__ import annotations

import dataclasses

import math
from dataclasses import dataclass, field, fields, replace

from .errors import UsageError
from .gpu import GpuSpec
from .maxlen import derive_max_model_len
from .model import ModelSpec
from .plan import Plan
from .planner import plan as plan_startup
from .provenance import GIB, MIB
from .rules import resolve_rules
from .settings import Settings
from .workload import Workload

LEN_ALIGN_TOKENS = 256          # recommended max_model_len is rounded up to this
MAX_UTILIZATION = 0.95          # never recommend more (CUDA context, fragmentation)
TP_SIZES = (1, 2, 4, 8)
PP_SIZES = (2, 4)               # tried (with the largest TP) only when TP alone cannot start
LEN_LADDER = (131072, 65536, 32768, 16384, 8192, 4096, 2048)
TOKEN_LADDER = (4096, 2048, 1024, 512)      # max_num_batched_tokens when activation blocks
KV_BYTES_ALIGN = 16 * MIB

# limits on max_num_seqs, as shown to the user
LIMIT_MEMORY = "memory"             # the KV target at max_model_len
LIMIT_VLLM = "vllm_default"         # vLLM's own max_num_seqs default caps it, not memory
LIMIT_TARGET = "concurrency"        # the --concurrency asked for
LIMIT_PINNED = "pinned"             # the user's --max-num-seqs

SEARCHABLE_PINS = ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len",
                   "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
                   "kv_cache_dtype", "quantization", "kv_cache_memory_bytes", "enforce_eager",
                   "block_size", "num_gpu_blocks_override")


@dataclass(frozen=True)
class GpuTarget:
    """One GPU the server may use: its spec and the free memory now (None: assume idle)."""

    spec: GpuSpec
    free_bytes: int | None = None

    @property
    def free(self) -> int:
        return self.free_bytes if self.free_bytes is not None else self.spec.total_bytes

    @classmethod
    def from_state(cls, state) -> "GpuTarget":
        """From a live `core.gpu.GpuState` (`vramguard check`): the lowest free seen."""
        free = state.free_min_bytes if state.free_min_bytes is not None else state.free_bytes
        return cls(state.spec, free)


@dataclass(frozen=True)
class TuneRequest:
    """What the user asked for. `base.user_set` names the pinned flags."""

    spec: ModelSpec
    base: Settings
    gpus: tuple[GpuTarget, ...]
    workload: Workload | None = None
    concurrency: int | None = None          # target concurrent requests
    headroom_bytes: int | None = None       # left unallocated; None: from the GPU size
    target_kv_usage: float = 0.7
    vllm_version: str | None = None
    engine: str | None = None
    allow_quantization: bool = True         # offer fp8 weights as an alternative
    allow_more_gpus: bool = True            # offer TP/PP sizes beyond the GPUs given
    curve: bool = True                      # compute the max_model_len <-> concurrency curve
    explain: bool = True                    # blocking pins / larger GPUs when nothing fits


@dataclass(frozen=True)
class Option:
    """One candidate setting, planned."""

    settings: Settings
    plan: Plan
    gpu: GpuTarget
    supported_concurrency: int              # requests of max_model_len within the target
    meets_target: bool
    headroom_bytes: int                     # kept free on the deciding GPU
    gpus_given: int = 1
    limit: str = LIMIT_MEMORY               # what caps max_num_seqs
    notes: tuple[str, ...] = ()

    @property
    def starts(self) -> bool:
        return self.plan.outcome.ok and not self.plan.outcome.risks

    @property
    def gpus_needed(self) -> int:
        return self.settings.world_size

    @property
    def needs_more_gpus(self) -> int:
        """How many GPUs beyond those given this option needs (0 when it fits on them)."""
        return max(0, self.gpus_needed - self.gpus_given)

    @property
    def max_model_len(self) -> int:
        return int(self.plan.settings.get("max_model_len") or 0)

    @property
    def max_num_seqs(self) -> int:
        return int(self.plan.settings.get("max_num_seqs") or 0)

    @property
    def fixed_pool(self) -> bool:
        return self.settings.kv_cache_memory_bytes is not None

    def rank_key(self) -> tuple:
        """Smaller is better: starts, meets the target, no fp8 weights, fewer GPUs, bf16 KV,
        a utilization-sized pool, longer context, more concurrency."""
        s = self.settings
        # NOTE: quantizing changes the model; more GPUs of the same kind does not.
        return (not self.starts, not self.meets_target, s.quantization is not None,
                s.world_size, s.kv_cache_dtype not in ("auto", None), self.fixed_pool,
                -self.max_model_len, -self.supported_concurrency)


@dataclass(frozen=True)
class TuneResult:
    request: TuneRequest
    recommended: Option | None
    options: tuple[Option, ...]
    reason: str | None = None               # why nothing (or nothing meeting the target) fits
    nearest: str | None = None              # the nearest feasible target, in words
    blocking_pins: tuple[str, ...] = ()     # pinned flags that make the target impossible
    num_evaluated: int = 0                  # planner runs (distinct candidates)
    curve: tuple[tuple[int, float], ...] = field(default_factory=tuple)
    larger_gpus: tuple[str, ...] = ()       # catalog GPUs on which the target would fit
    notes: tuple[str, ...] = ()


# ---- helpers -----------------------------------------------------------------------------

def default_headroom_bytes(gpu: GpuSpec) -> int:
    """Headroom left unallocated on a shared GPU: 4% of the card, at least 512 MiB.

    NOTE: covers the CUDA context of a second process, allocator fragmentation and a
    neighbour's small growth; users on a dedicated card can pass --headroom-gib 0.
    """
    return max(512 * MIB, int(gpu.total_bytes * 0.04))


def is_shared(gpu: GpuTarget) -> bool:
    """Something else holds memory on this GPU (more than 3% of it)."""
    return gpu.free_bytes is not None and gpu.free_bytes < gpu.spec.total_bytes * 0.97


def headroom_for(req: TuneRequest, gpu: GpuTarget) -> int:
    if req.headroom_bytes is not None:
        return req.headroom_bytes
    return default_headroom_bytes(gpu.spec) if is_shared(gpu) else 0


def max_safe_utilization(gpu: GpuTarget, headroom_bytes: int) -> float:
    """The largest utilization (2 decimals, floored) whose request fits in free − headroom."""
    u = (gpu.free - headroom_bytes) / gpu.spec.total_bytes
    return max(0.0, min(MAX_UTILIZATION, math.floor(u * 100 + 1e-9) / 100))


_DEFAULTS = Settings()


def _pinned(base: Settings, name: str) -> bool:
    return name in base.user_set


def _align(tokens: int) -> int:
    return int(math.ceil(tokens / LEN_ALIGN_TOKENS) * LEN_ALIGN_TOKENS)


class _Ctx:
    """One search: the request, a plan cache (identical candidates are planned once), the
    number of planner runs and the first of vLLM's own validation errors."""

    def __init__(self, req: TuneRequest):
        self.req = req
        self.cache: dict = {}
        self.runs = 0
        self.error: UsageError | None = None
        self.rules = resolve_rules(req.vllm_version, req.engine)
        self.limit_len = derive_max_model_len(self.req.spec, self.rules).limit

    def plan(self, settings: Settings, gpu: GpuTarget) -> Plan | None:
        key = (settings, gpu)
        if key in self.cache:
            return self.cache[key]
        self.runs += 1
        try:
            # NOTE: candidates are screened without log lines/assumptions/fixes (same numbers,
            # a third faster); the options shown are re-planned in full by `detailed`.
            p = plan_startup(self.req.spec, settings, gpu.spec, vllm_version=self.req.vllm_version,
                             engine=self.req.engine, free_bytes=gpu.free_bytes, detail=False)
        except UsageError as exc:
            self.error = self.error or exc
            p = None
        self.cache[key] = p
        return p

    def detailed(self, opt: "Option") -> "Option":
        """The option with its full plan (log lines, assumptions, fixes)."""
        p = plan_startup(self.req.spec, opt.settings, opt.gpu.spec,
                         vllm_version=self.req.vllm_version, engine=self.req.engine,
                         free_bytes=opt.gpu.free_bytes)
        return dataclasses.replace(opt, plan=p)

    def default_seqs(self, settings: Settings, gpu: GpuTarget) -> int | None:
        """vLLM's own max_num_seqs for these settings (the planner resolves it)."""
        if settings.max_num_seqs is None:
            s = settings
        else:
            s = _copy(settings, max_num_seqs=None,
                        user_set=settings.user_set - {"max_num_seqs"})
        p = self.plan(s, gpu)
        return int(p.settings.get("max_num_seqs") or 0) if p is not None else None


def _len_choices(ctx: _Ctx) -> list[int | None]:
    """max_model_len candidates: pinned; the workload's p99 (aligned, within the model's
    limit); else the model's derived maximum (None) and shorter powers of two."""
    req = ctx.req
    if _pinned(req.base, "max_model_len"):
        return [req.base.max_model_len]
    if req.workload is not None:
        p99 = req.workload.p99_tokens
        if p99 > ctx.limit_len:
            raise UsageError(f"the workload's p99 ({p99} tokens) is longer than the model's "
                             f"maximum length ({ctx.limit_len})", where="--workload",
                             fix="Requests that long cannot be served by this model")
        return [min(_align(p99), ctx.limit_len)]
    return [None, *(n for n in LEN_LADDER if n < ctx.limit_len)]


def _tp_choices(req: TuneRequest, beyond: bool = False) -> list[int]:
    """TP sizes that divide the heads; `beyond`: sizes needing more GPUs than given."""
    if _pinned(req.base, "tensor_parallel_size"):
        tp = req.base.tensor_parallel_size
        more = tp * req.base.pipeline_parallel_size > len(req.gpus)
        return [tp] if more == beyond else []
    heads = req.spec.num_attention_heads or 1
    pp = req.base.pipeline_parallel_size
    fits = [t for t in TP_SIZES if heads % t == 0]
    if beyond:
        return [t for t in fits if t * pp > len(req.gpus)]
    return [t for t in fits if t * pp <= len(req.gpus)]


def _gpus_for(req: TuneRequest, world: int) -> tuple[GpuTarget, float]:
    """The deciding GPU of the `world` GPUs with the most free memory, and the largest
    utilization every one of them allows. Beyond the GPUs given, more cards like the
    tightest one are assumed (an alternative the output labels "needs N GPUs")."""
    chosen = sorted(req.gpus, key=lambda g: g.free, reverse=True)[:world]
    u = min(max_safe_utilization(g, headroom_for(req, g)) for g in chosen)
    # NOTE: with one utilization for all, the card with the least room under u x total
    # (or the least free memory) decides; equal cards: the least free one.
    deciding = min(chosen, key=lambda g: (min(g.free, u * g.spec.total_bytes), g.free))
    return deciding, u


def _variants(req: TuneRequest) -> list[dict]:
    """Flag combinations to try besides TP: KV dtype and (as alternatives) fp8 weights."""
    kv = [req.base.kv_cache_dtype] if _pinned(req.base, "kv_cache_dtype") else ["auto", "fp8"]
    quant = [req.base.quantization]
    if (req.allow_quantization and not _pinned(req.base, "quantization")
            and req.spec.quant is None and req.base.quantization is None):
        quant.append("fp8")
    return [{"kv_cache_dtype": k, "quantization": q} for q in quant for k in kv]


def _copy(s: Settings, **changes) -> Settings:
    """`dataclasses.replace` for Settings without re-running `__init__` (a hot path: ~10x
    faster). NOTE: Settings is a plain frozen dataclass (no __post_init__, no slots)."""
    unknown = changes.keys() - _FIELDS
    if unknown:
        raise TypeError(f"unknown Settings fields: {sorted(unknown)}")
    new = object.__new__(Settings)
    new.__dict__.update(s.__dict__)
    new.__dict__.update(changes)
    return new


_FIELDS = frozenset(f.name for f in fields(Settings))


def _set(s: Settings, **changes) -> Settings:
    """A copy with `changes` applied and recorded as set (they go on the command line)."""
    return _copy(s, user_set=s.user_set | frozenset(changes), **changes)


# ---- evaluating one candidate ------------------------------------------------------------

def _judge(ctx: _Ctx, s: Settings, gpu: GpuTarget, headroom: int, notes=(),
           limit=LIMIT_MEMORY) -> Option | None:
    req = ctx.req
    p = ctx.plan(s, gpu)
    if p is None:
        return None
    if (p.outcome.failure == "free_memory_below_request"
            and not _pinned(req.base, "gpu_memory_utilization")):
        # NOTE: the CUDA context (and NCCL with TP) is taken before vLLM's free-memory
        # check; lower the request to what is really free, minus the headroom.
        free = p.tightest.free_at_start.value_bytes - headroom
        u = math.floor(free / gpu.spec.total_bytes * 100) / 100
        if u <= 0:
            return None
        s = _copy(s, gpu_memory_utilization=u)
        p = ctx.plan(s, gpu)
        if p is None:
            return None
    conc = p.kv.max_concurrency if p.kv else 0.0
    supported = int(math.floor(req.target_kv_usage * conc + 1e-9))
    seqs = int(p.settings.get("max_num_seqs") or 0)
    want = req.concurrency or 1
    meets = (p.outcome.ok and not p.outcome.risks and supported >= max(1, want)
             and seqs <= supported)
    return Option(s, p, gpu, supported, meets, headroom, len(req.gpus), limit, tuple(notes))


def _lower_tokens(ctx: _Ctx, opt: Option) -> Option:
    """The activation peak blocks startup (or eats the KV target): smaller batched tokens."""
    req = ctx.req
    if _pinned(req.base, "max_num_batched_tokens"):
        return opt
    if opt.plan.outcome.failure not in (None, "profile_run_oom", "no_kv_memory",
                                        "kv_below_max_model_len"):
        return opt
    if ctx.rules.engine == "v0" and not opt.plan.settings.get("enable_chunked_prefill"):
        return opt   # NOTE: v0 without chunked prefill needs tokens >= max_model_len
    tokens = int(opt.plan.settings.get("max_num_batched_tokens") or 0)
    floor = req.concurrency or (req.base.max_num_seqs if _pinned(req.base, "max_num_seqs") else 1)
    best = opt
    for t in TOKEN_LADDER:
        if t >= tokens or t < floor:
            continue
        s = _set(opt.settings, max_num_batched_tokens=t)
        if (s.max_num_seqs or 0) > t and not _pinned(req.base, "max_num_seqs"):
            s = _set(s, max_num_seqs=t)
        cand = _judge(ctx, s, opt.gpu, opt.headroom_bytes, opt.notes + (
            f"max_num_batched_tokens lowered to {t}: with the default ({tokens}) the "
            "activation peak leaves too little for startup or the KV target",))
        if cand is None:
            continue
        cand = _fit_seqs(ctx, cand)
        if cand.rank_key() < best.rank_key():
            best = cand
        if cand.starts and cand.meets_target:
            break
    return best


def _fit_seqs(ctx: _Ctx, opt: Option) -> Option:
    """Set max_num_seqs to what the KV target supports (never above vLLM's own default
    unless --concurrency asks for more); halve it while the sampler warm-up is at risk."""
    req = ctx.req
    if _pinned(req.base, "max_num_seqs"):
        return replace(opt, limit=LIMIT_PINNED)
    if not opt.plan.outcome.ok:
        return opt
    default = ctx.default_seqs(opt.settings, opt.gpu) or opt.max_num_seqs or 1
    if req.concurrency:
        if opt.max_num_seqs == req.concurrency:
            return replace(opt, limit=LIMIT_TARGET)
        seqs, limit = req.concurrency, LIMIT_TARGET
    elif opt.supported_concurrency >= default:
        seqs, limit = default, LIMIT_VLLM
    else:
        seqs, limit = max(1, opt.supported_concurrency), LIMIT_MEMORY

    def attempt(n: int, lim: str) -> Option | None:
        s = _set(opt.settings, max_num_seqs=n)
        if int(opt.plan.settings.get("max_num_batched_tokens") or 0) < n:
            if _pinned(req.base, "max_num_batched_tokens"):
                return None
            s = _set(s, max_num_batched_tokens=n)
        cand = _judge(ctx, s, opt.gpu, opt.headroom_bytes, opt.notes, lim)
        if cand is not None and lim == LIMIT_VLLM:
            cand = replace(cand, notes=cand.notes + (
                f"max_num_seqs {n} is vLLM's default limit, not memory (the KV target "
                f"would allow {cand.supported_concurrency})",))
        return cand

    cand = attempt(seqs, limit)
    while (cand is not None and _risky(cand) and not req.concurrency and seqs > 1):
        seqs, limit = max(1, seqs // 2), LIMIT_MEMORY
        cand = attempt(seqs, limit)
    if cand is not None and cand.meets_target and limit == LIMIT_MEMORY:
        # NOTE: fewer sequences shrink the profile run's sampler, so the pool grows a bit.
        up = min(default, cand.supported_concurrency)
        if up > seqs:
            more = attempt(up, LIMIT_VLLM if up == default else LIMIT_MEMORY)
            if more is not None and more.starts and more.meets_target:
                cand = more
    return cand if cand is not None else opt


def _risky(opt: Option) -> bool:
    return bool(opt.plan.outcome.risks) or opt.plan.outcome.failure == "sampler_warmup_oom"


def _candidate(ctx: _Ctx, tp: int, pp: int, variant: dict,
               length: int | None) -> tuple[Settings, GpuTarget, int] | None:
    req = ctx.req
    gpu, u = _gpus_for(req, tp * pp)
    headroom = headroom_for(req, gpu)
    changes: dict = {"tensor_parallel_size": tp, **variant}
    if pp != req.base.pipeline_parallel_size:
        changes["pipeline_parallel_size"] = pp
    if not _pinned(req.base, "gpu_memory_utilization"):
        if u <= 0:
            return None
        changes["gpu_memory_utilization"] = u
    if not _pinned(req.base, "max_model_len"):
        changes["max_model_len"] = length
    if req.concurrency and not _pinned(req.base, "max_num_seqs"):
        changes["max_num_seqs"] = req.concurrency
        if not _pinned(req.base, "max_num_batched_tokens") and req.concurrency > 2048:
            changes["max_num_batched_tokens"] = req.concurrency
    changes = {k: v for k, v in changes.items()
               if not (_pinned(req.base, k) and k != "tensor_parallel_size")}
    # NOTE: a tuned flag equal to vLLM's default stays off the command line.
    user = req.base.user_set | {k for k, v in changes.items() if v is not None}
    user -= {k for k, v in changes.items()
             if not _pinned(req.base, k) and (v is None or v == getattr(_DEFAULTS, k))}
    return _copy(req.base, user_set=frozenset(user), **changes), gpu, headroom


def _variant_notes(req: TuneRequest, s: Settings) -> tuple[str, ...]:
    notes = []
    if s.quantization == "fp8" and not _pinned(req.base, "quantization"):
        notes.append("fp8 weights: changes the model (check its quality)")
    if s.kv_cache_dtype == "fp8" and not _pinned(req.base, "kv_cache_dtype"):
        notes.append("fp8 KV cache: twice the tokens, a small quality cost")
    if s.world_size > len(req.gpus):
        notes.append(f"needs {s.world_size} GPUs (given {len(req.gpus)})")
    if s.pipeline_parallel_size > 1 and not _pinned(req.base, "pipeline_parallel_size"):
        notes.append(f"pipeline parallel over {s.pipeline_parallel_size} stages "
                     "(across nodes: slower)")
    return tuple(notes)


def _one(ctx: _Ctx, tp: int, pp: int, variant: dict) -> Option | None:
    """The best option for one TP/PP/variant: the longest max_model_len that meets the
    target (else the best that starts, else the best failure)."""
    found: list[Option] = []
    for length in _len_choices(ctx):
        if length is not None and found and length >= found[-1].max_model_len:
            continue   # the ladder only helps below the derived maximum
        cand = _candidate(ctx, tp, pp, variant, length)
        if cand is None:
            continue
        s, gpu, headroom = cand
        opt = _judge(ctx, s, gpu, headroom, _variant_notes(ctx.req, s))
        if opt is None:
            continue
        opt = _fit_seqs(ctx, opt)
        if not (opt.starts and opt.meets_target):
            opt = _lower_tokens(ctx, opt)
        found.append(opt)
        if opt.starts and opt.meets_target:
            break
    return min(found, key=Option.rank_key) if found else None


def _search(ctx: _Ctx, shapes: list[tuple[int, int]]) -> list[Option]:
    options = []
    for tp, pp in shapes:
        for variant in _variants(ctx.req):
            opt = _one(ctx, tp, pp, variant)
            if opt is not None:
                options.append(opt)
    return options


def _fixed_pool(ctx: _Ctx, best: Option) -> Option | None:
    """`--kv-cache-memory-bytes` (0.10.2+): the same pool, fixed in bytes, so it does not
    move when other processes come and go; utilization only sized for the free check."""
    req = ctx.req
    if (not ctx.rules.kv_cache_memory_flag or _pinned(req.base, "kv_cache_memory_bytes")
            or _pinned(req.base, "gpu_memory_utilization") or best.fixed_pool):
        return None
    t = best.plan.tightest
    kv = t.kv_cache.value_bytes // KV_BYTES_ALIGN * KV_BYTES_ALIGN
    if kv <= 0:
        return None
    need = (t.weights.value_bytes + t.activation.value_bytes + t.non_torch.value_bytes
            + t.cuda_graph.value_bytes + kv)
    u = math.ceil(need / best.gpu.spec.total_bytes * 100) / 100
    u = min(u, best.settings.gpu_memory_utilization or MAX_UTILIZATION)
    s = _set(best.settings, kv_cache_memory_bytes=kv, gpu_memory_utilization=u)
    opt = _judge(ctx, s, best.gpu, best.headroom_bytes, best.notes + (
        f"fixed KV pool of {kv / GIB:.2f} GiB (--kv-cache-memory-bytes): the same pool "
        f"whatever else runs; needs {u * best.gpu.spec.total_bytes / GIB:.1f} GiB free "
        "at startup",), best.limit)
    return opt if opt is not None and opt.starts and opt.meets_target else None


# ---- the entry point ---------------------------------------------------------------------

def tune(req: TuneRequest) -> TuneResult:
    """Search TP/PP size, utilization, max_model_len, max_num_seqs, batched tokens, KV dtype,
    fp8 weights and a fixed KV pool; rank the options; explain when nothing fits."""
    _check(req)
    ctx = _Ctx(req)
    pp = req.base.pipeline_parallel_size
    options = _search(ctx, [(t, pp) for t in _tp_choices(req)])
    best = _best(options)
    if req.allow_more_gpus and (best is None or best.settings.quantization is not None):
        # NOTE: before changing the model (fp8 weights), see what more GPUs would do.
        options += _search(ctx, [(t, pp) for t in _tp_choices(req, beyond=True)])
        best = _best(options)
        if not any(o.starts for o in options) and not _pinned(req.base, "pipeline_parallel_size"):
            options += _search(ctx, _pp_shapes(req))
            best = _best(options)
    if not options and ctx.error is not None:
        raise ctx.error            # vLLM's own validation rejects every candidate (a pin)
    notes = []
    if best is not None:
        fixed = _fixed_pool(ctx, best)
        if fixed is not None:
            options.append(fixed)
    options = [ctx.detailed(o) for o in _dedupe(sorted(options, key=Option.rank_key))]
    if best is not None:
        best = next(o for o in options if o.settings == best.settings and o.gpu == best.gpu)
    reason = nearest = None
    blocking: tuple[str, ...] = ()
    larger: tuple[str, ...] = ()
    if best is None:
        from .tuner_explain import blocking_pins, explain, larger_gpus
        reason, nearest = explain(ctx, options)
        if req.explain:
            blocking = blocking_pins(req)
            if (not any(o.starts for o in options) and options
                    and all(g.free_bytes is None for g in req.gpus)):
                larger = larger_gpus(req)
                n = len(req.gpus)
                if not larger and "larger GPU" in reason:
                    reason += f" (no catalog GPU holds it on {n} card{'s' if n > 1 else ''})"
    elif best.needs_more_gpus:
        notes.append(f"nothing meets the target on the {len(req.gpus)} GPU(s) given; the "
                     f"recommendation needs {best.gpus_needed}")
    if all(g.free_bytes is None for g in req.gpus):
        notes.append("GPUs assumed idle (all memory free); pass --gpu-free-gib when something "
                     "else runs on them")
    if req.workload is None and not _pinned(req.base, "max_model_len"):
        notes.append("no workload given: max_model_len is the longest that fits; pass "
                     "--workload p50=…,p90=…,p99=… to size it from your requests")
    curve = concurrency_curve(ctx, best) if (best and req.curve) else ()
    return TuneResult(req, best, tuple(options), reason, nearest, blocking, ctx.runs, curve,
                      larger, tuple(notes))


def _check(req: TuneRequest) -> None:
    if not req.gpus:
        raise UsageError("no GPU given", where="--gpu", fix="Name at least one GPU")
    if not 0 < req.target_kv_usage <= 1:
        raise UsageError(f"--target-kv-usage {req.target_kv_usage} is outside (0, 1]",
                         where="--target-kv-usage", fix="Give a fraction such as 0.7")
    if req.concurrency is not None and req.concurrency < 1:
        raise UsageError(f"--concurrency {req.concurrency} must be at least 1",
                         where="--concurrency")
    if req.headroom_bytes is not None and req.headroom_bytes < 0:
        raise UsageError("the headroom must be >= 0", where="--headroom-gib")


def _best(options: list[Option]) -> Option | None:
    return next((o for o in sorted(options, key=Option.rank_key)
                 if o.starts and o.meets_target), None)


def _pp_shapes(req: TuneRequest) -> list[tuple[int, int]]:
    heads = req.spec.num_attention_heads or 1
    if _pinned(req.base, "tensor_parallel_size"):
        tp = req.base.tensor_parallel_size
    else:
        tp = max(t for t in TP_SIZES if heads % t == 0)
    return [(tp, pp) for pp in PP_SIZES if pp <= req.spec.num_layers]


def _dedupe(options: list[Option]) -> list[Option]:
    seen, out = set(), []
    for o in options:
        key = (o.settings, o.gpu)
        if key not in seen:
            seen.add(key)
            out.append(o)
    return out


# ---- the curve and display helpers --------------------------------------------------------

def concurrency_curve(ctx: _Ctx, opt: Option, points: int = 12) -> tuple[tuple[int, float], ...]:
    """max_model_len ↔ max concurrency of the chosen setup (re-planned at each length)."""
    top = opt.max_model_len
    lo = 512
    if top <= lo:
        return ((top, round(opt.plan.kv.max_concurrency, 2) if opt.plan.kv else 0.0),)
    ratio = (top / lo) ** (1 / (points - 1))
    lengths = sorted({int(lo * ratio ** i) // 16 * 16 for i in range(points)
                      if int(lo * ratio ** i) < top * 0.95} | {top})
    curve = []
    for length in lengths:
        s = _copy(opt.settings, max_model_len=length)
        p = ctx.plan(s, opt.gpu)
        if p is not None and p.kv:
            curve.append((length, round(p.kv.max_concurrency, 2)))
    return tuple(curve)


def headroom_gib(opt: Option) -> float:
    """GiB left unallocated on the deciding GPU after vLLM takes u x total."""
    u = opt.plan.settings.get("gpu_memory_utilization") or 0
    return (opt.gpu.free - u * opt.gpu.spec.total_bytes) / GIB


def needs_more_gpus(opt: Option, req: TuneRequest) -> int:
    """How many GPUs beyond those given this option needs (0 when it fits on them)."""
    return max(0, opt.settings.world_size - len(req.gpus))
