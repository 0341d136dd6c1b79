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

import gc
import math
from contextlib import contextmanager
from dataclasses import replace

from . import failures as F
from ._frozen import maker
from .errors import UsageError
from .gpu_catalog import uma_free_share
from .provenance import GIB
from .settings import Settings
from .tuner_candidates import (_Ctx, _candidate, _len_choices, _pp_shapes, _tp_choices,
                               _variant_notes, _variants)
# NOTE: the types and helpers moved to tuner_types; imported here under their old names.
from .tuner_types import (KV_BYTES_ALIGN, LEN_ALIGN_TOKENS, LIMIT_MEMORY, LIMIT_PINNED,
                          LIMIT_TARGET, LIMIT_VLLM, MAX_UTILIZATION, SEARCHABLE_PINS,
                          TOKEN_LADDER, GpuTarget, Option, TuneRequest, TuneResult, _copy,
                          _pinned, _set, default_headroom_bytes, headroom_for, headroom_gib,
                          is_shared, max_safe_utilization, needs_more_gpus, with_fields)

__all__ = ["GpuTarget", "TuneRequest", "Option", "TuneResult", "tune", "concurrency_curve",
           "default_headroom_bytes", "headroom_for", "headroom_gib", "is_shared",
           "max_safe_utilization", "needs_more_gpus", "LEN_ALIGN_TOKENS", "LIMIT_MEMORY",
           "LIMIT_PINNED", "LIMIT_TARGET", "LIMIT_VLLM", "MAX_UTILIZATION", "SEARCHABLE_PINS"]


# ---- evaluating one candidate ------------------------------------------------------------

# NOTE: one per judged candidate: without the frozen __init__ (_frozen.py).
_option = maker(Option)


def _judge(ctx: _Ctx, s: Settings, gpu: GpuTarget, headroom: int, notes=(),
           limit=LIMIT_MEMORY) -> Option | None:
    req = ctx.req
    # NOTE: the option keeps how to finish its screened walk (`Option.detailed`)
    p, finish = ctx.screened(s, gpu)
    if p is None:
        return None
    if (p.outcome.failure == "free_memory_below_request"
            and not _pinned(req.base, "gpu_memory_utilization")):
        # NOTE: the CUDA context (and NCCL with TP) is taken before vLLM's free-memory
        # check; lower the request to what is really free, minus the headroom.
        free = ctx.free_at_start(s, gpu) - headroom
        u = math.floor(free / gpu.spec.total_bytes * 100) / 100
        if u <= 0:
            return None
        s = _copy(s, gpu_memory_utilization=u)
        p, finish = ctx.screened(s, gpu)
        if p is None:
            return None
    if not _pinned(req.base, "gpu_memory_utilization") and s.kv_cache_memory_bytes is None:
        s, p, finish = _outside_budget(ctx, s, gpu, p, finish)
    seqs = int(p.settings.get("max_num_seqs") or 0)
    want = req.concurrency or 1
    if p.kv is None and p.outcome.ok:
        # NOTE: no KV cache (an encoder-only pooling model): nothing but max_num_seqs limits
        # the concurrency.
        supported = max(seqs, want)
    else:
        conc = p.kv.max_concurrency if p.kv else 0.0
        supported = int(math.floor(req.target_kv_usage * conc + 1e-9))
    meets = (p.outcome.ok and not p.outcome.risks and supported >= max(1, want)
             and seqs <= supported)
    return _option(settings=s, plan=p, gpu=gpu, supported_concurrency=supported,
                   meets_target=meets, headroom_bytes=headroom, gpus_given=len(req.gpus),
                   limit=limit, notes=tuple(notes), finish=finish)


# NOTE: at most this many 1% steps down from the utilization the search picked.
_UTIL_STEPS = 15


def _outside_budget(ctx: _Ctx, s: Settings, gpu: GpuTarget, p, finish):
    """Memory vLLM uses outside `gpu_memory_utilization` x total (CUDA graphs up to 0.17;
    the sampler warm-up when max_num_seqs cannot move): lower the utilization 1% at a time
    until it fits; (s, p, finish) unchanged when no step clears it."""
    o = p.outcome
    if o.failure is None and not o.risks:
        return s, p, finish      # NOTE: the common case, on every judged candidate
    kinds = _outside_kinds(ctx.req)
    if not _short(p, kinds):
        return s, p, finish
    u = p.settings["gpu_memory_utilization"]
    for _ in range(_UTIL_STEPS):
        u = round(u - 0.01, 2)
        if u <= 0:
            break
        s2 = _copy(s, gpu_memory_utilization=u)
        p2, finish2 = ctx.screened(s2, gpu)
        if p2 is None:
            break
        if not _short(p2, kinds):
            return s2, p2, finish2
    return s, p, finish


def _outside_kinds(req) -> tuple[str, ...]:
    # NOTE: fewer sequences also shrink the sampler warm-up; `_fit_seqs` tries that first
    # (it keeps more KV) unless the sequences are pinned or set by --concurrency.
    if req.concurrency or _pinned(req.base, "max_num_seqs"):
        return (F.CUDA_GRAPH_OOM, F.SAMPLER_WARMUP_OOM)
    return (F.CUDA_GRAPH_OOM,)


def _short(p, kinds: tuple[str, ...]) -> bool:
    o = p.outcome
    return o.failure in kinds or any(r.split(":", 1)[0] in kinds for r in o.risks)


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
        return with_fields(opt, limit=LIMIT_PINNED)
    if not opt.plan.outcome.ok and opt.plan.outcome.failure not in _SEQS_FIX:
        return opt
    default = ctx.default_seqs(opt.settings, opt.gpu) or opt.max_num_seqs or 1
    if req.concurrency:
        if opt.max_num_seqs == req.concurrency:
            return with_fields(opt, limit=LIMIT_TARGET)
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
            why = ("the model has no KV cache" if cand.plan.kv is None and cand.starts
                   else f"the KV target would allow {cand.supported_concurrency}")
            cand = with_fields(cand, notes=cand.notes + (
                f"max_num_seqs {n} is vLLM's default limit, not memory ({why})",))
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


# NOTE: failures after the KV allocation that fewer sequences cure (vLLM's own advice: "lower
# max_num_seqs"): the pool is sized, so the supported concurrency is known.
_SEQS_FIX = (F.SAMPLER_WARMUP_OOM, F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS, F.CUDA_GRAPH_OOM)


def _risky(opt: Option) -> bool:
    return bool(opt.plan.outcome.risks) or opt.plan.outcome.failure == F.SAMPLER_WARMUP_OOM



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
        for variant in _variants(ctx):
            opt = _one(ctx, tp, pp, variant)
            if opt is not None:
                options.append(opt)
    return options


def _fixed_pool(ctx: _Ctx, best: Option) -> Option | None:
    """`--kv-cache-memory-bytes` (0.10.2+): the same pool, fixed in bytes, so it does not
    move when other processes come and go; utilization only sized for the free check."""
    req = ctx.req
    if (not ctx.rules.kv_cache_memory_flag or _pinned(req.base, "kv_cache_memory_bytes")
            or _pinned(req.base, "gpu_memory_utilization") or best.fixed_pool
            or best.plan.kv is None):
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
    fp8 weights and a fixed KV pool; rank the options; explain when nothing fits.

    The cyclic garbage collector is paused during the search (resumed as it was after)."""
    with _no_cyclic_gc():
        return _tune(req)


@contextmanager
def _no_cyclic_gc():
    """CPython's cyclic collector paused, then restored to its prior state.

    NOTE: a search builds tens of thousands of small records (settings, plans, estimates), all
    acyclic: reference counting frees them, and the collector's passes (one per 700
    allocations, the older generations over every live object) find nothing to collect while
    costing 5-10 % of the search (bench/tuner.py). tests/core/test_tuner.py holds that the
    search leaves no cycle behind."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _tune(req: TuneRequest) -> TuneResult:
    _check(req)
    req = _without_default_pins(req)
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
        raise ctx.take_error()     # vLLM's own validation rejects every candidate (a pin)
    notes = []
    if best is not None:
        fixed = _fixed_pool(ctx, best)
        if fixed is not None:
            options.append(fixed)
    # NOTE: only the recommendation is shown in full (`plan.to_dict()` in --json); the other
    # options keep their screened plans and finish on demand (`Option.detailed`).
    options = _dedupe(ctx, sorted(options, key=Option.rank_key))
    if best is not None:
        best_key = ctx.key_of(best.settings, best.gpu)
        i = next(i for i, o in enumerate(options) if ctx.key_of(o.settings, o.gpu) == best_key)
        options[i] = best = options[i].detailed()
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
        shared = any(uma_free_share(g.spec) for g in req.gpus)
        free = ("the median of what public startups had free, as the host shares unified "
                "memory" if shared else "all memory free")
        notes.append(f"GPUs assumed idle ({free}); pass --gpu-free-gib when something else "
                     "runs on them")
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


# NOTE: flags given as None (`--max-num-seqs None`: vLLM's default) pin nothing; the search
# compares these numerically.
_NONE_IS_DEFAULT = frozenset({"max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                              "kv_cache_memory_bytes", "num_gpu_blocks_override", "block_size"})


def _without_default_pins(req: TuneRequest) -> TuneRequest:
    base = req.base
    unset = {n for n in _NONE_IS_DEFAULT & base.user_set if getattr(base, n) is None}
    if not unset:
        return req
    return replace(req, base=_copy(base, user_set=base.user_set - unset))


def _best(options: list[Option]) -> Option | None:
    # NOTE: the first of the best ranked, as in the ranked list (min keeps the first of ties)
    return min((o for o in options if o.starts and o.meets_target), key=Option.rank_key,
               default=None)


def _dedupe(ctx: _Ctx, options: list[Option]) -> list[Option]:
    seen, out = set(), []
    for o in options:
        key = ctx.key_of(o.settings, o.gpu)     # NOTE: not the Settings' 57 fields
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

