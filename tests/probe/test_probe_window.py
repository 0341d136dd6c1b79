"""The sampling window (probe/window.py), with a fake clock: no real sleeping."""

from __future__ import annotations

from dataclasses import replace

import pytest

from probe_fakes import GIB, state
from vramguard.errors import UsageError
from vramguard.durations import parse_duration
from vramguard.probe.window import fold, sample_window


class Clock:
    def __init__(self):
        self.t = 100.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def test_samples_on_a_fixed_schedule():
    clock = Clock()
    reads = []

    def read():
        reads.append(clock.t)
        clock.t += 0.25                    # a slow read does not shift the schedule
        return [state(0, free_gib=50)]
    w = sample_window(read, window_s=5, interval_s=1, clock=clock.now, sleep=clock.sleep)
    assert w.samples == 5                  # like nvidia-smi dmon -c 5
    assert [r - 100 for r in reads] == [0, 1, 2, 3, 4]
    assert w.interval_s == 1


def test_zero_window_is_one_sample():
    clock = Clock()
    w = sample_window(lambda: [state(0)], window_s=0, interval_s=1, clock=clock.now,
                      sleep=clock.sleep)
    assert w.samples == 1 and clock.sleeps == []


def test_min_median_max_and_lowest_free_is_used():
    frees = [70, 68, 20, 69, 70]           # a co-tenant spikes in the middle
    samples = [(float(i), [state(0, free_gib=f)]) for i, f in enumerate(frees)]
    w = fold(samples, interval_s=1, duration_s=5)
    g, = w.gpus
    assert g.free_bytes == 20 * GIB == g.free_min_bytes
    assert g.free_median_bytes == 69 * GIB
    assert g.free_max_bytes == 70 * GIB


def test_process_that_came_and_went():
    idle = state(0, free_gib=70)
    busy = state(0, free_gib=40, procs=((4242, "python", 30),))
    busier = replace(busy, processes=(replace(busy.processes[0], used_bytes=32 * GIB),))
    samples = [(0.0, [idle]), (1.0, [busy]), (2.0, [busier]), (3.0, [idle]), (4.0, [idle])]
    w = fold(samples, interval_s=1, duration_s=5)
    kinds = [(e.kind, e.pid, e.at_s) for e in w.events]
    assert kinds == [("appeared", 4242, 1.0), ("left", 4242, 3.0)]
    assert all(e.used_bytes == 32 * GIB for e in w.events)   # the most it used
    g, = w.gpus
    assert g.processes == ()                # gone at the end
    assert g.free_bytes == 40 * GIB         # but its memory counted
    assert any("PID 4242 (python) appeared at +1s" in n for n in g.notes)
    assert w.to_dict()["events"][0]["kind"] == "appeared"


def test_gpus_keyed_by_uuid_across_samples():
    a, b = state(0, uuid="GPU-a", free_gib=10), state(1, uuid="GPU-b", free_gib=60)
    w = fold([(0.0, [a, b]), (1.0, [replace(a, free_bytes=5 * GIB), b])], interval_s=1,
             duration_s=2)
    assert [g.uuid for g in w.gpus] == ["GPU-a", "GPU-b"]
    assert w.gpus[0].free_min_bytes == 5 * GIB and w.gpus[1].free_min_bytes == 60 * GIB


@pytest.mark.parametrize("text, seconds", [("60s", 60), ("60", 60), ("1.5s", 1.5),
                                           ("500ms", 0.5), ("5m", 300), ("1h", 3600), (2, 2)])
def test_parse_duration(text, seconds):
    assert parse_duration(text, flag="--window", allow_zero=True) == seconds


def test_bad_duration_and_interval():
    with pytest.raises(UsageError, match="duration"):
        parse_duration("soon", flag="--window", allow_zero=True)
    with pytest.raises(UsageError):
        sample_window(lambda: [], window_s=1, interval_s=0)


def test_durations_bounds():
    assert parse_duration("2d", flag="--window") == 172800
    assert parse_duration("0", flag="--window", allow_zero=True) == 0.0   # check: no window
    with pytest.raises(UsageError, match="duration must be positive"):
        parse_duration("0", flag="--interval")
    with pytest.raises(UsageError, match="longer than ten years"):
        parse_duration("99999999999d", flag="--window", allow_zero=True)
