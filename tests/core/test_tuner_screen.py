"""planner.screen (the tuner's candidate path) gives the plans `planner.plan` gives.

`screen()` returns the plan without detail and a function that finishes the same walk in
full; the tuner shows the finished plans instead of planning the options again. Both must
equal fresh `plan(detail=False)` / `plan(detail=True)` plans, field by field, for random
settings (calibration and hooks included: they replace the memoized stage terms). The
objects the planner builds without `__init__` (core/_frozen.py) must carry every field.
"""

from __future__ import annotations

import dataclasses
import random
from functools import lru_cache

import pytest

from vramguard.core import _memo, planner
from vramguard.core._frozen import HASH_KEY, maker, replacer
from vramguard.core.calibration import Calibration, CalibrationKey
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.plan import KvCapacity, Ledger, Outcome, Plan
from vramguard.core.provenance import Estimate, Source
from vramguard.core.settings import Settings
from vramguard.errors import UsageError
from vramguard.sources.resolve import load_model_spec

from test_tuner_memo import GPUS, MODELS, VERSIONS, random_settings


@lru_cache(maxsize=None)
def spec(model):
    return load_model_spec(model, offline=True)


def _extras(rng: random.Random, model: str, gpu: str, version, s) -> dict:
    kw: dict = {}
    if rng.random() < 0.15:
        kw["hooks"] = planner.PlanHooks(weights_bytes=rng.choice((None, 10 << 30)),
                                        activation_bytes=rng.choice((None, 1 << 30)),
                                        cuda_graph_bytes=rng.choice((None, 1 << 29)))
    if rng.random() < 0.15:
        key = CalibrationKey(gpu, version or planner.NEWEST_VERSION, spec(model).model_type,
                             s.tensor_parallel_size, s.pipeline_parallel_size)
        kw["calibration"] = Calibration(key, activation_bytes=2 << 30, non_torch_bytes=1 << 29,
                                        max_num_batched_tokens=rng.choice((None, 4096)))
    return kw


def _fields_complete(p: Plan) -> None:
    objs = [p, p.outcome, *p.ledgers, *(p.kv,) * (p.kv is not None)]
    objs += [getattr(l, f.name) for l in p.ledgers for f in dataclasses.fields(l)
             if isinstance(getattr(l, f.name), Estimate)]
    for o in objs:
        assert set(vars(o)) == {f.name for f in dataclasses.fields(o)}, type(o)


@pytest.mark.parametrize("memo", [True, False])
def test_screen_equals_plan(memo):
    rng = random.Random(99)
    _memo.clear()
    _memo.set_enabled(memo)
    try:
        for _ in range(400):
            model, gpu, version = rng.choice(MODELS), rng.choice(GPUS), rng.choice(VERSIONS)
            s = random_settings(rng)
            kw = {"vllm_version": version, "free_bytes": rng.choice((None, 30 << 30)),
                  **_extras(rng, model, gpu, version, s)}
            args = (spec(model), s, lookup_gpu(gpu))
            try:
                full = planner.plan(*args, **kw)
            except UsageError as exc:
                with pytest.raises(UsageError) as again:
                    planner.screen(*args, **kw)
                assert again.value.line() == exc.line()
                continue
            bare = planner.plan(*args, detail=False, **kw)
            screened, finish = planner.screen(*args, **kw)
            assert screened == bare and screened.to_dict() == bare.to_dict()
            finished = finish()
            assert finished == full and finished.to_dict() == full.to_dict()
            _fields_complete(screened)
            _fields_complete(finished)
    finally:
        _memo.set_enabled(True)


def test_maker_builds_equal_objects():
    e = Estimate(5, 4, 6, Source.ESTIMATED, "x")
    assert maker(Estimate)(value_bytes=5, low_bytes=4, high_bytes=6,
                           source=Source.ESTIMATED, note="x") == e
    for cls in (Ledger, KvCapacity, Outcome, Plan):
        assert maker(cls).field_names == {f.name for f in dataclasses.fields(cls)}


def test_settings_hash_is_cached_and_not_copied_by_replace():
    a = Settings(max_num_seqs=3, user_set=frozenset({"max_num_seqs"}))
    h = hash(a)
    assert hash(a) == h == hash(Settings(max_num_seqs=3, user_set=frozenset({"max_num_seqs"})))
    b = replacer(Settings)(a, max_num_seqs=4)
    assert HASH_KEY not in vars(b)          # the copy's values differ: its own hash
    assert b != a and hash(b) == hash(Settings(max_num_seqs=4,
                                               user_set=frozenset({"max_num_seqs"})))
    assert {a: 1}.get(replacer(Settings)(b, max_num_seqs=3)) == 1


def test_maker_refuses_classes_with_more_than_fields():
    @dataclasses.dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self):
            pass

    @dataclasses.dataclass
    class Mutable:
        x: int

    for cls in (Checked, Mutable):
        with pytest.raises(TypeError):
            maker(cls)


def test_tp_rank_ledgers_copy_the_stage_ledger():
    """The TP ranks of a stage (built without __init__) differ from its first ledger only in
    rank and tp_rank, numbered stage by stage."""
    from vramguard.core.settings import Settings
    s = Settings(tensor_parallel_size=4, pipeline_parallel_size=2,
                 user_set=frozenset({"tensor_parallel_size", "pipeline_parallel_size"}))
    p = planner.plan(spec("Qwen/Qwen3-30B-A3B"), s, lookup_gpu("H100-80GB"))
    assert [(l.rank, l.tp_rank, l.pp_rank) for l in p.ledgers] == [
        (pp * 4 + t, t, pp) for pp in range(2) for t in range(4)]
    for l in p.ledgers:
        first = p.ledgers[l.pp_rank * 4]
        assert dataclasses.replace(l, rank=first.rank, tp_rank=0) == first
    _fields_complete(p)


def test_tune_finishes_the_recommendation_and_the_rest_on_demand():
    """`tune` shows the recommended option in full; every other option carries its screened
    plan (same numbers and outcome, no log lines) and `Option.detailed()` finishes it into the
    plan `planner.plan` gives for its settings."""
    from vramguard.core.settings import Settings
    from vramguard.core.tuner import GpuTarget, TuneRequest, tune
    from vramguard.core.workload import Workload
    gpu = lookup_gpu("RTX-3090")
    res = tune(TuneRequest(spec("Qwen/Qwen2.5-7B-Instruct"), Settings(), (GpuTarget(gpu),),
                           workload=Workload(800, 2000, 6000)))
    rec = res.recommended
    assert rec is not None and rec.plan.log_lines and rec.plan.assumptions
    assert rec.finish is None and rec.detailed() is rec
    others = [o for o in res.options if o is not rec]
    assert others
    for o in others:
        assert o.finish is not None and o.plan.log_lines == ()
        full = o.detailed()
        assert full.finish is None and full.plan.log_lines
        fresh = planner.plan(spec("Qwen/Qwen2.5-7B-Instruct"), o.settings, o.gpu.spec,
                             free_bytes=o.gpu.free_bytes)
        assert full.plan == fresh and full.plan.to_dict() == fresh.to_dict()
        assert dataclasses.replace(full, plan=o.plan) == o   # `finish` is not compared


def test_walk_kv_bytes_equal_the_ledgers_kv_term():
    """The walk sizes the pool with `_kv_bytes` (no band); the ledgers show `_kv_budget`:
    the same K on every stage, for random settings (whole-GPU releases, forced pools, PP)."""
    rng = random.Random(7)
    checked = 0
    # NOTE: about 40 % of the draws give a release a flag it does not have (refused first)
    for _ in range(600):
        model, gpu, version = rng.choice(MODELS), rng.choice(GPUS), rng.choice(VERSIONS)
        s = random_settings(rng)
        try:
            walk = planner._walk(spec(model), s, lookup_gpu(gpu), version, None,
                                 rng.choice((None, 30 << 30)), 0, None, None, None, False)
        except UsageError:
            continue
        walk.run()
        for st in walk.stages:
            assert walk._kv_budget(st).value_bytes == st.kv
            checked += 1
    assert checked > 200


def test_screen_with_a_shared_family_equals_plan():
    """`screen(..., family=family_of(other candidate), flags=flag_dicts(...))`: the family of
    any settings that differ only in the searched flags gives the plan `plan` gives."""
    from vramguard.core.effective import flag_dicts
    rng = random.Random(5)
    _memo.clear()
    compared = 0
    for _ in range(300):
        model, gpu, version = rng.choice(MODELS), rng.choice(GPUS), rng.choice(VERSIONS)
        s = random_settings(rng)
        other = dataclasses.replace(s, gpu_memory_utilization=rng.choice((0.6, 0.85, None)),
                                    max_num_seqs=rng.choice((None, 8, 128)),
                                    max_num_batched_tokens=None, max_model_len=None,
                                    user_set=s.user_set | {"max_num_seqs"})
        args = (spec(model), s, lookup_gpu(gpu))
        try:
            fam = planner.family_of(spec(model), other, lookup_gpu(gpu), version)
            bare = planner.plan(*args, vllm_version=version, detail=False)
        except UsageError:
            continue
        screened, finish = planner.screen(*args, vllm_version=version, family=fam,
                                          flags=flag_dicts(s))
        assert screened == bare and screened.to_dict() == bare.to_dict()
        full = planner.plan(*args, vllm_version=version)
        assert finish() == full and finish().to_dict() == full.to_dict()
        compared += 1
    assert compared > 100


def test_tuner_candidates_of_a_family_differ_only_in_the_searched_flags(monkeypatch):
    """The tuner names a candidate's family by its GPU, TP, PP, KV dtype, quantization and
    dtype (`tuner_candidates._family_key`), and shares the family's terms and given-flag dicts
    by that key: every candidate of one key must equal the others outside `_memo.SEARCHED`
    (and their given flags' values within one user_set, KV pool and blocks override)."""
    from vramguard.core import tuner_candidates as tc
    from vramguard.core.tuner import GpuTarget, TuneRequest, tune
    from vramguard.core.workload import Workload
    seen: dict = {}
    real = tc.screen

    def record(spec_, s, gpu, **kw):
        rest = tuple((f.name, getattr(s, f.name)) for f in dataclasses.fields(s)
                     if f.name not in _memo.SEARCHED)
        key = (id(kw["family"]) if kw["family"] is not None else None, id(gpu),
               kw["free_bytes"], tc._family_key(s))
        assert seen.setdefault(key, rest) == rest
        return real(spec_, s, gpu, **kw)

    monkeypatch.setattr(tc, "screen", record)
    rng = random.Random(3)
    for model in ("Qwen/Qwen2.5-7B-Instruct", "google/gemma-2-9b-it", "Qwen/Qwen3-30B-A3B"):
        for pins in ({}, {"max_num_seqs": 64}, {"kv_cache_dtype": "auto", "enforce_eager": True},
                     {"max_num_batched_tokens": 1024}, {"gpu_memory_utilization": 0.8}):
            for gpu, n in (("RTX-3090", 1), ("L4", 2), ("H100-80GB", 1)):
                g = lookup_gpu(gpu)
                free = rng.choice((None, int(g.total_bytes * 0.7)))
                req = TuneRequest(spec(model), Settings(**pins, user_set=frozenset(pins)),
                                  tuple(GpuTarget(g, free) for _ in range(n)),
                                  workload=rng.choice((None, Workload(500, 2000, 9000))),
                                  concurrency=rng.choice((None, 16)))
                try:
                    tune(req)
                except UsageError:
                    pass
    assert len(seen) > 50
