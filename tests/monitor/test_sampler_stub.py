"""The sampler against a stub HTTP server on 127.0.0.1 serving recorded scrapes in sequence."""

import threading
import time
from dataclasses import replace

import pytest

from monitor_helpers import StubMetricsServer, fake_gpus, fixture_text, free_port
from vramguard.errors import ProbeError, UsageError
from vramguard.monitor import sampler as sampler_mod
from vramguard.durations import parse_duration
from vramguard.monitor.sampler import Sampler, next_tick

IDLE = fixture_text("vllm-0.32-cpu/metrics.txt")
SMALLKV = fixture_text("vllm-0.32-cpu/metrics_smallkv.txt")


def test_sequence_of_failures_never_raises():
    steps = [("text", SMALLKV), ("status", 500), ("bytes", b"<html>oops</html>"),
             ("bytes", b"\x00\xff garbage {{{"), ("sleep", 1.0, SMALLKV),
             ("text", IDLE), ("text", IDLE)]
    with StubMetricsServer(steps) as stub:
        s = Sampler([stub.url], interval_s=1.0, timeout_s=0.3, gpus=False)
        got = [s.sample_once().endpoints[0] for _ in range(7)]
        s.close()
    ok = [e.ok for e in got]
    assert ok == [True, False, False, False, False, True, True]
    assert "HTTP 500" in got[1].error
    assert "not Prometheus" in got[2].error
    assert got[3].error and got[4].error and "0.3 s" in got[4].error   # timeout
    # 7 preemptions, then the idle scrape's 0: a counter reset (vLLM restarted)
    assert got[0].engines[0].num_preemptions_total == 7
    assert any("counter reset" in n for n in got[5].notes)
    assert any("changed from 384 to 2,097,152 tokens" in n for n in got[5].notes)
    assert not got[6].notes


def test_two_endpoints_scraped_together_one_down():
    with StubMetricsServer([("text", IDLE)]) as stub:
        down = f"http://127.0.0.1:{free_port()}"
        s = Sampler([stub.url, down], interval_s=1.0, gpus=False)
        sample = s.sample_once()
        s.close()
    assert [e.url for e in sample.endpoints] == [stub.url, down]
    assert [e.ok for e in sample.endpoints] == [True, False]
    assert sample.gpu_error == "GPU sampling off (--no-gpu)"


def test_gpus_sampled_with_a_reader():
    s = Sampler([], interval_s=1.0, gpu_reader=fake_gpus(8))
    sample = s.sample_once()
    assert len(sample.gpus) == 8 and sample.gpu_error is None
    assert sample.to_dict()["gpus"][0]["processes"][0]["name"] == "vllm"


def test_nvml_failure_degrades_to_endpoints_only():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] > 1:
            raise ProbeError("GPU has fallen off the bus", fix="reset it")
        return fake_gpus(1)()

    s = Sampler([], interval_s=1.0, gpu_reader=flaky)
    first, second, third = (s.sample_once() for _ in range(3))
    assert len(first.gpus) == 1 and first.gpu_error is None
    assert second.gpus == () and "fallen off the bus" in second.gpu_error
    assert "watching endpoints only" in third.gpu_error and calls["n"] == 2


def test_missing_nvml_module_degrades(monkeypatch):
    def boom():
        raise ImportError("No module named 'pynvml'")
    monkeypatch.setattr(sampler_mod, "default_gpu_reader", boom)
    s = Sampler([], interval_s=1.0)
    assert "NVML unavailable" in s.sample_once().gpu_error


def test_next_tick_keeps_the_grid():
    assert next_tick(0.0, 0, 1.0, 0.3) == (1, 0)        # on time
    assert next_tick(0.0, 0, 1.0, 1.3) == (1, 0)        # late: tick 1 runs at once, not lost
    assert next_tick(0.0, 0, 1.0, 2.5) == (2, 1)        # tick 1 skipped: gap marker
    assert next_tick(10.0, 4, 0.5, 13.1) == (6, 1)


def test_run_records_a_gap_when_a_tick_is_overrun():
    slow = {"tick": 0}
    base = fake_gpus(1)

    def reader():
        slow["tick"] += 1
        if slow["tick"] == 2:
            time.sleep(0.45)               # overruns ~4 ticks of 0.1 s
        return base()

    s = Sampler([], interval_s=0.1, gpu_reader=reader)
    got = []
    s.run(got.append, max_ticks=5)
    missed = [x.missed_ticks for x in got]
    assert missed[0] == 0 and missed[2] >= 3        # 0.45 s overrun at 0.1 s: ticks skipped
    assert [x.tick for x in got] == [0, 1, 2, 3, 4]


def test_run_stops_on_event():
    stop = threading.Event()
    got = []

    def on(sample):
        got.append(sample)
        if len(got) == 3:
            stop.set()

    Sampler([], interval_s=0.01, gpu_reader=fake_gpus(1)).run(on, stop=stop)
    assert len(got) == 3


def test_parse_duration():
    assert parse_duration("1s", flag="--interval") == 1.0
    assert parse_duration("500ms", flag="--interval") == 0.5
    assert parse_duration("7d", flag="--retention") == 7 * 86400
    assert parse_duration("2", flag="--interval") == 2.0
    assert parse_duration("1.5m", flag="--window") == 90.0
    for bad in ("", "fast", "-1s", "0"):
        with pytest.raises(UsageError):
            parse_duration(bad, flag="--interval")
    with pytest.raises(UsageError):
        Sampler([], interval_s=0)


def test_pressure_timeline_through_sampler_and_rules():
    """The real 0.32 pressure run, served tick by tick: the alerts fire and clear in order."""
    from monitor_helpers import timeline_ticks
    from vramguard.monitor.rules import RuleConfig
    from vramguard.monitor.watcher import Watcher

    steps = [("text", IDLE)] + [("text", t) for t in timeline_ticks()]
    with StubMetricsServer(steps) as stub:
        s = Sampler([stub.url], interval_s=1.0, gpus=False)
        w = Watcher(config=RuleConfig(kv_sustained_s=0, window_s=5))
        fired = []
        for _ in range(len(steps)):
            sample = s.sample_once()
            # the sampler's clock is real; space the samples 1 s apart for the rules
            fired.append({a.rule for a in w.on_sample(replace(sample, ts=float(sample.tick)))})
        s.close()
    assert fired[0] == set()
    assert fired[1] == {"kv_usage_high", "queue_growing_kv_full", "preemptions_rising"}
    assert fired[2] == {"preemptions_rising"}            # drained; 2 -> 7 preemptions
    assert fired[-1] == set()                            # flat for longer than the window


def test_nvml_is_retried_after_a_failure():
    now = {"t": 0.0}
    state = {"fail": True}

    def reader():
        if state["fail"]:
            raise ProbeError("NVML: Driver Not Loaded")
        return fake_gpus(2)()

    calls = {"n": 0}

    def counted():
        calls["n"] += 1
        return reader()

    s = Sampler([], interval_s=1.0, gpu_reader=counted, clock=lambda: now["t"])
    assert "Driver Not Loaded" in s.sample_once().gpu_error
    now["t"] = 30.0
    assert s.sample_once().gpu_error and calls["n"] == 1          # not retried yet
    state["fail"] = False
    now["t"] = 61.0
    back = s.sample_once()
    assert back.gpu_error is None and len(back.gpus) == 2 and calls["n"] == 2
