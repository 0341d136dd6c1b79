"""Why a tuning target is impossible: the nearest feasible target, the pins that block it,
and larger GPUs that would hold it. Used by `core.tuner.tune` when nothing meets the target;
every figure comes from planner runs (through the tuner's candidate cache).
"""

from __future__ import annotations

from dataclasses import replace

from .errors import UsageError
from .provenance import GIB
from .settings import Settings
from .tuner import (LEN_ALIGN_TOKENS, SEARCHABLE_PINS, GpuTarget, Option, TuneRequest, _Ctx,
                    _judge, _pinned, _set, tune)


def explain(ctx: _Ctx, options: list[Option]) -> tuple[str, str | None]:
    """Why nothing meets the target, and the nearest feasible target."""
    req = ctx.req
    starting = [o for o in options if o.starts]
    g = req.gpus[0].spec.name
    if not starting:
        return _why_nothing_starts(ctx, options, g), None
    best = max(starting, key=lambda o: (o.needs_more_gpus == 0, o.supported_concurrency,
                                        o.max_model_len))
    L = best.max_model_len
    want, pinned = _wanted(req)
    pct = int(round(req.target_kv_usage * 100))
    where = (f"-tp {best.settings.tensor_parallel_size}"
             + (f" -pp {best.settings.pipeline_parallel_size}"
                if best.settings.pipeline_parallel_size > 1 else "")
             + f", --kv-cache-dtype {best.settings.kv_cache_dtype}"
             + (f", --quantization {best.settings.quantization}" if best.settings.quantization
                else "")
             + (f"; needs {best.gpus_needed} GPUs" if best.needs_more_gpus else ""))
    nearest = (f"at most {best.supported_concurrency} concurrent requests of {L} tokens at "
               f"{pct}% KV usage ({where})")
    fit_len = _longest_len_for(ctx, best, want)
    if fit_len:
        nearest += f"; or {want} concurrent requests of at most {fit_len} tokens"
    reason = (f"the target of {want} concurrent request(s) of {L} tokens at {pct}% KV usage "
              "does not fit" + (f" (--max-num-seqs {want} is pinned: the KV target holds "
                                "every sequence)" if pinned else ""))
    return reason, nearest


def _wanted(req: TuneRequest) -> tuple[int, bool]:
    """(the concurrency the target needs, whether a pinned --max-num-seqs sets it): a pinned
    max_num_seqs above --concurrency must fit the target too (`Option.meets_target`)."""
    want = req.concurrency or 1
    seqs = req.base.max_num_seqs if _pinned(req.base, "max_num_seqs") else None
    if seqs and seqs > want:
        return seqs, True
    return want, False


def _why_nothing_starts(ctx: _Ctx, options: list[Option], g: str) -> str:
    req = ctx.req
    if not options:
        free = min(x.free for x in req.gpus) / GIB
        return (f"no memory to start on {len(req.gpus)} x {g}: {free:.2f} GiB free, less than "
                "the headroom kept; free the GPU or lower --headroom-gib")
    failures = sorted({o.plan.outcome.failure or "risk" for o in options})
    why = (f"no setting starts on {len(req.gpus)} x {g} ({', '.join(failures)})"
           + (" even with more GPUs" if req.allow_more_gpus else ""))
    if "weights_oom" in failures:
        if req.allow_more_gpus:
            why += "; pipeline parallelism across nodes or a larger GPU is the only way"
        return why
    if "profile_run_oom" in failures or "sampler_warmup_oom" in failures:
        why += ("; the profile run's activation peak (batched tokens x hidden size, sampler "
                "logits of max_num_seqs requests) does not fit")
        if req.concurrency:
            why += f": lower --concurrency {req.concurrency}"
    return why


def _longest_len_for(ctx: _Ctx, opt: Option, want: int) -> int | None:
    """The longest max_model_len (a multiple of 256) at which `want` requests fit the
    target on `opt`'s setup (bisection with the planner)."""
    lo, hi = 0, opt.max_model_len // LEN_ALIGN_TOKENS
    s0 = _set(opt.settings, max_num_seqs=max(1, want)) if not _pinned(
        ctx.req.base, "max_num_seqs") else opt.settings
    tokens = int(opt.plan.settings.get("max_num_batched_tokens") or 0)
    if tokens < want and not _pinned(ctx.req.base, "max_num_batched_tokens"):
        s0 = _set(s0, max_num_batched_tokens=want)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        s = _set(s0, max_model_len=mid * LEN_ALIGN_TOKENS)
        o = _judge(ctx, s, opt.gpu, opt.headroom_bytes)
        if o is not None and o.starts and o.supported_concurrency >= want:
            lo = mid
        else:
            hi = mid - 1
    return lo * LEN_ALIGN_TOKENS or None


def blocking_pins(req: TuneRequest) -> tuple[str, ...]:
    """The pinned flags whose release alone makes the target feasible."""
    out = []
    for name in SEARCHABLE_PINS:
        if not _pinned(req.base, name):
            continue
        base = replace(req.base, user_set=req.base.user_set - {name},
                       **{name: getattr(Settings(), name)})
        try:
            res = tune(replace(req, base=base, curve=False, allow_more_gpus=False,
                               explain=False))
        except UsageError:
            continue
        if res.recommended is not None:
            out.append(name)
    return tuple(out)


def larger_gpus(req: TuneRequest, limit: int = 3) -> tuple[str, ...]:
    """Catalog GPUs (bigger than the given ones) on which the same count would fit."""
    from .gpu_catalog import list_gpus
    have = max(g.spec.total_bytes for g in req.gpus)
    vendor = req.gpus[0].spec.vendor
    seen, out = set(), []
    for spec in sorted(list_gpus(), key=lambda g: g.total_bytes):
        if spec.total_bytes <= have or spec.vendor != vendor or spec.uma:
            continue
        if spec.total_bytes in seen:
            continue
        seen.add(spec.total_bytes)
        gpus = tuple(GpuTarget(spec) for _ in req.gpus)
        try:
            res = tune(replace(req, gpus=gpus, curve=False, allow_more_gpus=False,
                               allow_quantization=False, explain=False))
        except UsageError:
            continue
        if res.recommended is not None:
            out.append(spec.name)
            if len(out) >= limit:
                break
    return tuple(out)
