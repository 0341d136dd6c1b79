"""The launch gate (probe/gate.py) and --adjust (probe/adjust.py) with a hand-built planner
(probe_fakes.toy_planner: R = u x T, F = free - 0.5 GiB, K = R - 16 - 2 GiB, 128 KiB/token)."""

from __future__ import annotations

import pytest

from probe_fakes import GIB, state, toy_planner
from vramguard.core import failures
from vramguard.core.settings import Settings
from vramguard.probe.adjust import adjust
from vramguard.probe.gate import Margins, evaluate, highest_utilization, processes_to_stop
from vramguard.probe.verdict import Problem

PLAN = toy_planner()
T = int(79.19 * GIB)


def test_free_gpu_is_safe_with_spare_reported():
    r = evaluate([state(0, free_gib=78)], Settings(), PLAN)
    assert r.ok and r.problems == ()
    v = r.tightest
    # spare = F - R = (78 - 0.5) GiB - int(0.92 x T)
    assert v.spare_bytes == int(77.5 * GIB) - int(0.92 * T)
    assert v.takes_bytes == 78 * GIB - v.spare_bytes
    assert r.to_dict()["ok"] is True


def test_headroom_margin_makes_a_tight_gpu_unsafe():
    gpu = state(0, free_gib=74)                      # spare 0.65 GiB
    assert evaluate([gpu], Settings(), PLAN).ok
    r = evaluate([gpu], Settings(), PLAN, margins=Margins(headroom_bytes=GIB))
    assert not r.ok and r.problems[0].kind == "headroom"
    assert "--headroom-gib" in r.problems[0].message


def test_min_free_margin():
    r = evaluate([state(0, free_gib=78)], Settings(), PLAN,
                 margins=Margins(min_free_bytes=79 * GIB))
    assert [p.kind for p in r.problems] == ["min_free"]


def test_busy_gpu_fix_names_the_pid_and_the_utilization():
    gpu = state(0, free_gib=20, procs=((4242, "python", 55), (7, "small", 1)))
    r = evaluate([gpu], Settings(), PLAN)
    assert not r.ok
    p = r.problems[0]
    assert p.kind == failures.FREE_MEMORY_BELOW_REQUEST and p.gpu_index == 0
    # 19.5 - u x 79.19 >= 0.5  ->  u <= 0.2399: 0.23, where K = 0.21 GiB < 16 GiB for 128k
    assert "--gpu-memory-utilization 0.23 would fit the free memory, but then vLLM fails " \
           "(kv_below_max_model_len)" in p.fix
    assert "stop PID 4242 python, 55.00 GiB" in p.fix and "PID 7" not in p.fix
    # and the settings that do pass: u 0.23 and max_model_len <= 1750 tokens -> 1536
    assert r.suggested == {"gpu_memory_utilization": 0.23, "max_model_len": 1536}


def test_partly_busy_gpu_gets_a_utilization_that_passes():
    r = evaluate([state(0, free_gib=40, procs=((1, "x", 38),))], Settings(), PLAN)
    # 39.5 - u x 79.19 >= 0.5  ->  u <= 0.4925: 0.49
    assert "lower --gpu-memory-utilization to 0.49" in r.problems[0].fix
    assert r.suggested == {"gpu_memory_utilization": 0.49}


def test_highest_utilization_none_when_nothing_fits():
    assert highest_utilization(state(0, free_gib=0.6), Settings(), PLAN, Margins()) is None


def test_processes_to_stop_largest_first():
    gpu = state(0, procs=((1, "a", 5), (2, "b", 30), (3, "c", None)))
    chosen, enough = processes_to_stop(gpu, 32 * GIB)
    assert [p.pid for p in chosen] == [2, 1] and enough
    chosen, enough = processes_to_stop(gpu, 50 * GIB)
    assert not enough


def test_tightest_gpu_decides_for_tensor_parallel():
    gpus = [state(0, free_gib=78), state(1, free_gib=20, procs=((9, "p", 55),)),
            state(2, free_gib=10)]
    r = evaluate(gpus, Settings(tensor_parallel_size=2), PLAN)
    assert not r.ok
    assert [v.gpu.index for v in r.verdicts] == [0, 1]          # GPU 2 is not used
    assert r.tightest.gpu.index == 1
    assert r.verdicts[0].ok and not r.verdicts[1].ok
    d = r.to_dict()
    assert d["tightest_index"] == 1
    assert [g["selected"] for g in d["gpus"]] == [True, True, False]
    assert d["problems"][0]["gpu_index"] == 1


def test_not_enough_gpus():
    r = evaluate([state(0)], Settings(tensor_parallel_size=4), PLAN)
    assert not r.ok and r.problems[0].kind == "not_enough_gpus"
    assert "needs 4 GPUs" in r.problems[0].message


def test_no_gpu_at_all():
    r = evaluate([], Settings(), PLAN)
    assert not r.ok and r.problems[0].kind == "no_gpu"


def test_plan_failure_other_than_free_memory():
    r = evaluate([state(0, free_gib=78)], Settings(gpu_memory_utilization=0.3), PLAN)
    # K = 0.3 x 79.19 - 18 = 5.76 GiB < 16 GiB for one 131072-token request
    assert [p.kind for p in r.problems] == [failures.KV_BELOW_MAX_MODEL_LEN]
    assert r.suggested["max_model_len"] == 47104   # 5.757 GiB / 128 KiB = 47,162 -> 46 x 1024


def test_host_problems_join_and_warnings_do_not_fail():
    warn = Problem("host_ram", "tight", severity="warning")
    assert evaluate([state(0, free_gib=78)], Settings(), PLAN, host_problems=[warn]).ok
    err = Problem("shm_too_small", "64 MiB")
    r = evaluate([state(0, free_gib=78)], Settings(), PLAN, host_problems=[err])
    assert not r.ok and r.problems[-1].kind == "shm_too_small"


def test_adjust_lowers_utilization_then_max_model_len():
    gpu = state(0, free_gib=20)
    s, changes = adjust([gpu], Settings(), PLAN)
    assert [(c.flag, c.old, c.new) for c in changes] == [
        ("--gpu-memory-utilization", 0.92, 0.23), ("--max-model-len", 131072, 1536)]
    assert s.gpu_memory_utilization == 0.23 and s.max_model_len == 1536
    assert evaluate([gpu], s, PLAN).ok


def test_adjust_nothing_when_safe_and_gives_up_when_hopeless():
    assert adjust([state(0, free_gib=78)], Settings(), PLAN) == (Settings(), ())
    s, changes = adjust([state(0, free_gib=0.6)], Settings(), PLAN)
    assert changes == ()


@pytest.mark.parametrize("free_gib", [78, 40, 20])
def test_real_planner_agrees_on_llama_8b(free_gib):
    """The same gate with the real planner (catalog config of Llama-3.1-8B, vLLM 0.33)."""
    from vramguard.core.planner import plan
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("meta-llama/Llama-3.1-8B-Instruct", offline=True)

    def plan_for(settings, gpu, cuda_ordinal=0):
        return plan(spec, settings, gpu.spec, vllm_version="0.33.0",
                    other_used_bytes=max(0, gpu.spec.total_bytes - gpu.free_bytes),
                    cuda_ordinal=cuda_ordinal)
    from vramguard.core.gpu_catalog import lookup_gpu
    from dataclasses import replace
    gpu = replace(state(0, free_gib=free_gib, procs=((5, "p", 79 - free_gib),)),
                  spec=lookup_gpu("H100-80GB"))
    r = evaluate([gpu], Settings(max_model_len=8192), plan_for)
    assert r.ok == (free_gib == 78)
    if free_gib == 40:                 # fits with a lower utilization
        assert 0.40 <= r.suggested["gpu_memory_utilization"] <= 0.50
        assert evaluate([gpu], Settings(max_model_len=8192).with_(**r.suggested), plan_for).ok


def test_adjust_keeps_max_model_len_useful():
    # 16.6 GiB free: u = 0.2 leaves K = 15.84 - 18 < 0 and no max_model_len helps
    s, changes = adjust([state(0, free_gib=17.1)], Settings(), PLAN)
    assert all(c.field != "max_model_len" or c.new >= 1024 for c in changes)
    r = evaluate([state(0, free_gib=17.1)], Settings(), PLAN)
    assert r.adjustments == () and r.suggested == {}


def test_fix_mentions_a_process_that_left_during_the_window():
    from vramguard.probe.window import fold
    idle, busy = state(0, free_gib=78), state(0, free_gib=20, procs=((4242, "python", 58),))
    w = fold([(0.0, [idle]), (1.0, [busy]), (2.0, [idle])], interval_s=1, duration_s=3)
    r = evaluate(list(w.gpus), Settings(), PLAN, window=w)
    assert not r.ok                                   # planned on the lowest free memory
    assert "PID 4242 python, 58.00 GiB held memory during the window and has left" \
        in r.problems[0].fix
