"""The tuner's candidates: the search context (one planner run per distinct candidate),
and the TP/PP sizes, lengths, flag variants and utilization it tries.
"""

from __future__ import annotations

from operator import attrgetter

from . import _memo
from .errors import UsageError
from .effective import GIVEN_FLAGS, flag_dicts
from .plan import Plan
from .planner import family_of, free_at_start, screen
from .maxlen import swa_off
from .rules import VllmRules
from .settings import Settings
from .tuner_types import (LEN_LADDER, PP_SIZES, TP_SIZES, GpuTarget, TuneRequest, _DEFAULTS,
                          _align, _copy, _pinned, headroom_for, max_safe_utilization)
from .validation import bf16_refused


class _FamilyEntry:
    """The candidates of one family the search screened: the planner's family and the given
    flags' dicts they share (`planner.screen`'s `family` and `flags`; None with the memo
    caches off)."""

    __slots__ = ("family", "flags")

    def __init__(self):
        self.family = None
        self.flags: dict = {}


# NOTE: every candidate is `req.base` with the searched flags (`_memo.SEARCHED`) and these
# changed (`_candidate`; tests/core/test_tuner_screen.py holds it): they name its family, and
# with the searched flags the candidate, without hashing its other fields.
_FAMILY_FIELDS = ("tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype",
                  "quantization", "dtype")
_family_key = attrgetter(*_FAMILY_FIELDS)
_candidate_key = attrgetter(*_FAMILY_FIELDS, *sorted(_memo.SEARCHED))


class _Ctx:
    """One search: the request, a plan cache (identical candidates are planned once), the
    number of planner runs and the first of vLLM's own validation errors."""

    def __init__(self, req: TuneRequest):
        self.req = req
        self.runs = 0
        self.error: UsageError | None = None
        # NOTE: the memoized row and derived length (the planner's own caches): `tune` is
        # also called once per catalog GPU and per pin by `tuner_explain`.
        self.rules = _memo.resolve_rules(req.vllm_version, req.engine)
        self._env = dict(req.env) if req.env else None
        # NOTE: the window caps the length when the user disables it, or vLLM does (an
        # interleaved model on some releases, `maxlen.swa_off`), as in the plans.
        no_window = req.base.disable_sliding_window or (
            self.rules.interleaved_swa_off is not None
            and swa_off(req.spec, self.rules, self._env) is not None)
        derived = _memo.derived_max_model_len(req.spec, self.rules, no_window,
                                              _memo.sliding_window(req.spec))
        # NOTE: without a length key in the config vLLM takes any length the user gives
        self.limit_len = None if derived.no_key else derived.limit
        self.default_len = derived.limit
        self._gpus: dict[int, tuple[GpuTarget, float]] = {}
        self._gpu_keys: dict[int, tuple[GpuTarget, int]] = {}
        self._last_gpu: tuple = (None, None)
        self._families: dict[tuple, _FamilyEntry] = {}
        self._plans: list[dict] = []      # per GPU key: (plan, finish) per candidate key

    def gpu_key(self, gpu: GpuTarget) -> int:
        """The same number for equal GPU targets (its plan table's index; with the candidate's
        key, what names a candidate).

        NOTE: hashing a GpuTarget hashes every field of its GpuSpec, on every lookup; the
        search passes a handful of objects: each is compared by value once, then by identity."""
        if gpu is self._last_gpu[0]:
            return self._last_gpu[1]      # NOTE: a search judges one GPU target at a time
        hit = self._gpu_keys.get(id(gpu))
        if hit is not None and hit[0] is gpu:
            self._last_gpu = hit
            return hit[1]
        key = next((k for g, k in self._gpu_keys.values() if g == gpu), len(self._plans))
        if key == len(self._plans):
            self._plans.append({})
        # NOTE: the target kept alive with its key: its id is not reused
        self._gpu_keys[id(gpu)] = self._last_gpu = (gpu, key)
        return key

    def plan(self, settings: Settings, gpu: GpuTarget) -> Plan | None:
        """The candidate's plan without detail (None when vLLM's validation rejects it)."""
        return self.screened(settings, gpu)[0]

    def screened(self, settings: Settings, gpu: GpuTarget) -> tuple:
        """(plan, the function that finishes it), screened once per distinct candidate."""
        plans = self._plans[self.gpu_key(gpu)]
        key = _candidate_key(settings)
        hit = plans.get(key)
        if hit is None:
            hit = plans[key] = self._screen(settings, gpu)
        return hit

    def key_of(self, s: Settings, gpu: GpuTarget) -> tuple:
        """What names the candidate `s` on `gpu` in this search (equal for equal candidates)."""
        return self.gpu_key(gpu), _candidate_key(s)

    def _family(self, s: Settings, gpu: GpuTarget) -> _FamilyEntry:
        key = (self.gpu_key(gpu), _family_key(s))
        fam = self._families.get(key)
        if fam is None:
            fam = self._families[key] = _FamilyEntry()
        return fam

    def _screen(self, settings: Settings, gpu: GpuTarget) -> tuple:
        self.runs += 1
        req = self.req
        try:
            shared, flags = self._shared(settings, gpu, self._family(settings, gpu))
            # NOTE: candidates are screened without log lines/assumptions/fixes (same numbers,
            # a third faster); `detailed` finishes the walk of the options shown.
            return screen(req.spec, settings, gpu.spec, vllm_version=req.vllm_version,
                          engine=req.engine, free_bytes=gpu.free_bytes, env=self._env,
                          family=shared, flags=flags)
        except UsageError as exc:
            # NOTE: kept without its traceback, whose frames hold this context (a cycle left
            # for the collector, which `tune` pauses); the message is what is shown.
            self.error = self.error or exc.with_traceback(None)
            return None, None

    def _shared(self, s: Settings, gpu: GpuTarget, fam: _FamilyEntry) -> tuple:
        """`planner.screen`'s `family` and `flags` for the candidate `s` of `fam`, or
        (None, None) with the memo caches off."""
        if not _memo.is_enabled():
            return None, None
        family = self._planner_family(s, gpu, fam)
        # NOTE: within a family the given flags' values differ only in these two.
        key = (s.user_set, s.kv_cache_memory_bytes, s.num_gpu_blocks_override)
        flags = fam.flags.get(key)
        if flags is None:
            # NOTE: the sources read which given flags the user_set names (any flag at all:
            # without one, the values decide): user_sets that differ in other flags share.
            given = (bool(s.user_set), s.user_set & GIVEN_FLAGS, *key[1:])
            flags = fam.flags.get(given)
            if flags is None:
                flags = fam.flags[given] = flag_dicts(s)
            fam.flags[key] = flags
        return family, flags

    def _planner_family(self, s: Settings, gpu: GpuTarget, fam: _FamilyEntry):
        """`planner.family_of` the candidate `s` of `fam` (kept in `fam` with the memo on)."""
        if fam.family is not None:
            return fam.family
        req = self.req
        family = family_of(req.spec, s, gpu.spec, req.vllm_version, req.engine, self._env)
        if _memo.is_enabled():
            fam.family = family
        return family

    def free_at_start(self, s: Settings, gpu: GpuTarget) -> int:
        """The free memory at vLLM's snapshot in the plan of `s` (`planner.free_at_start`),
        without building its ledgers."""
        return free_at_start(gpu.spec, gpu.free_bytes,
                             self._planner_family(s, gpu, self._family(s, gpu)))

    def take_error(self) -> UsageError:
        """The first validation error, no longer kept here (raised, its traceback holds the
        raising frame: kept, that frame's context would close a reference cycle)."""
        err, self.error = self.error, None
        return err

    def gpus_for(self, world: int) -> tuple[GpuTarget, float]:
        """`_gpus_for(self.req, world)`, once per world size."""
        hit = self._gpus.get(world)
        if hit is None:
            hit = self._gpus[world] = _gpus_for(self.req, world)
        return hit

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
    limit = ctx.limit_len
    if req.workload is not None:
        p99 = req.workload.p99_tokens
        if limit is not None and p99 > limit:
            raise UsageError(f"the workload's p99 ({p99} tokens) is longer than the model's "
                             f"maximum length ({limit})", where="--workload",
                             fix="Requests that long cannot be served by this model")
        return [_align(p99) if limit is None else min(_align(p99), limit)]
    return [None, *(n for n in LEN_LADDER if n < ctx.default_len)]


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


def _variants(ctx: _Ctx) -> list[dict]:
    """Flag combinations to try besides TP: KV dtype and (as alternatives) fp8 weights; with
    float16 where vLLM would refuse the config's bfloat16 (`needs_half`)."""
    req = ctx.req
    kv = [req.base.kv_cache_dtype] if _pinned(req.base, "kv_cache_dtype") else ["auto", "fp8"]
    if req.spec.is_encoder_only and not _pinned(req.base, "kv_cache_dtype"):
        kv = ["auto"]       # NOTE: no KV cache to shrink
    quant = [req.base.quantization]
    if (req.allow_quantization and not _pinned(req.base, "quantization")
            and req.spec.quant is None and req.base.quantization is None):
        quant.append("fp8")
    half = {"dtype": "half"} if needs_half(req, ctx.rules) else {}
    return [{"kv_cache_dtype": k, "quantization": q, **half} for q in quant for k in kv]


def needs_half(req: TuneRequest, rules: VllmRules) -> bool:
    """--dtype auto that vLLM refuses on one of the GPUs (a bfloat16 config below compute
    capability 8.0 before 0.9.1, `validation.bf16_refused`): --dtype half runs there."""
    if _pinned(req.base, "dtype") or (req.base.dtype or "auto") != "auto":
        return False
    return any(bf16_refused(req.spec, "auto", rules, g.spec) for g in req.gpus)




def _pp_shapes(req: TuneRequest) -> list[tuple[int, int]]:
    heads = req.spec.num_attention_heads or 1
    if _pinned(req.base, "tensor_parallel_size"):
        tp = req.base.tensor_parallel_size
    else:
        tp = max(t for t in TP_SIZES if heads % t == 0)
    return [(tp, pp) for pp in PP_SIZES if pp <= req.spec.num_layers]


def _candidate(ctx: _Ctx, tp: int, pp: int, variant: dict,
               length: int | None) -> tuple[Settings, GpuTarget, int] | None:
    req = ctx.req
    gpu, u = ctx.gpus_for(tp * pp)
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
    pinned = req.base.user_set
    if pinned:
        changes = {k: v for k, v in changes.items()
                   if k not in pinned or k == "tensor_parallel_size"}
    # NOTE: a tuned flag equal to vLLM's default stays off the command line.
    user = pinned | {k for k, v in changes.items()
                     if v is not None and (k in pinned or v != getattr(_DEFAULTS, k))}
    return _copy(req.base, user_set=user, **changes), gpu, headroom


def _variant_notes(req: TuneRequest, s: Settings) -> tuple[str, ...]:
    notes = []
    if s.quantization == "fp8" and not _pinned(req.base, "quantization"):
        notes.append("fp8 weights: changes the model (check its quality)")
    if s.kv_cache_dtype == "fp8" and not _pinned(req.base, "kv_cache_dtype"):
        notes.append("fp8 KV cache: twice the tokens, a small quality cost")
    if s.world_size > len(req.gpus):
        notes.append(f"needs {s.world_size} GPUs (given {len(req.gpus)})")
    if s.dtype == "half" and not _pinned(req.base, "dtype"):
        notes.append("--dtype half: this vLLM refuses the config's bfloat16 on a GPU below "
                     "compute capability 8.0")
    if s.pipeline_parallel_size > 1 and not _pinned(req.base, "pipeline_parallel_size"):
        notes.append(f"pipeline parallel over {s.pipeline_parallel_size} stages "
                     "(across nodes: slower)")
    return tuple(notes)

