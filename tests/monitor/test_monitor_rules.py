"""Rules on synthetic windows (hand-made samples) and on the real 0.32 pressure timeline."""

from monitor_helpers import GIB, engine, fixture_text, gpu, sample, timeline_ticks
from vramguard.monitor import rules
from vramguard.monitor.metrics import EndpointScrape, parse_metrics
from vramguard.monitor.sampler import Sample


def kv_window(values, step=10):
    return [sample(i * step, [engine(kv=v)]) for i, v in enumerate(values)]


def test_kv_usage_high_needs_it_sustained():
    assert rules.kv_usage_high(kv_window([0.95] * 6), sustained_s=60) == []      # 50 s only
    (a,) = rules.kv_usage_high(kv_window([0.95] * 7), sustained_s=60)            # 60 s
    assert (a.rule, a.severity, a.subject) == ("kv_usage_high", "warning", "http://vllm:8000 engine 0")
    assert "95% full for 60 s" in a.message and "--max-num-seqs" in a.message
    assert "--kv-cache-dtype fp8" in a.message and "--gpu-memory-utilization" in a.message


def test_kv_usage_high_run_is_broken_by_a_dip_and_critical_when_saturated():
    assert rules.kv_usage_high(kv_window([0.95] * 5 + [0.5] + [0.95] * 3), sustained_s=60) == []
    (a,) = rules.kv_usage_high(kv_window([1.0] * 10), sustained_s=60)
    assert a.severity == "critical" and a.value == 1.0


def test_counter_increase_counts_through_resets():
    assert rules.counter_increase([0, 2, 7, 7]) == 7
    assert rules.counter_increase([5, 7, 1, 3]) == 2 + 1 + 2      # restart: 7 -> 1 counts 1


def test_preemptions_rising():
    win = [sample(t, [engine(preempt=p)]) for t, p in [(0, 0), (30, 2), (60, 7)]]
    (a,) = rules.preemptions_rising(win)
    assert a.value == 7 and "7 preemptions in the last 60 s (7.0/min)" in a.message
    assert "evicted running requests" in a.message
    flat = [sample(t, [engine(preempt=7)]) for t in (0, 30, 60)]
    assert rules.preemptions_rising(flat) == []


def test_preemptions_after_a_restart_are_not_negative():
    win = [sample(t, [engine(preempt=p)]) for t, p in [(0, 40), (1, 0), (2, 0)]]
    assert rules.preemptions_rising(win) == []


def test_queue_growing_while_kv_full():
    win = [sample(t, [engine(kv=kv, waiting=w)]) for t, kv, w in
           [(0, 0.80, 0), (10, 0.93, 2), (20, 0.97, 6)]]
    (a,) = rules.queue_growing_kv_full(win)
    assert a.severity == "critical" and a.value == 6
    assert "6 requests waiting (+6)" in a.message and "KV memory, not compute" in a.message


def test_queue_growing_with_kv_not_full_is_compute_bound_no_alert():
    win = [sample(t, [engine(kv=0.5, waiting=w)]) for t, w in [(0, 0), (10, 3), (20, 9)]]
    assert rules.queue_growing_kv_full(win) == []


def test_queue_shrinking_no_alert():
    win = [sample(t, [engine(kv=0.99, waiting=w)]) for t, w in [(0, 9), (10, 5), (20, 3)]]
    assert rules.queue_growing_kv_full(win) == []


def test_foreign_process_named_with_pid():
    before = [gpu(0, free_gib=8.0, processes=[(100, "vllm", 70.0)])]
    after = [gpu(0, free_gib=2.5, processes=[(100, "vllm", 70.0), (4242, "python3", 5.5)])]
    (a,) = rules.foreign_process([sample(0, gpus=before), sample(5, gpus=after)])
    assert a.subject == "GPU 0" and a.value == 5.5 * GIB
    assert "python3 (PID 4242, 5.5 GiB)" in a.message
    assert "fell 5.5 GiB to 2.5 GiB" in a.message and "--gpu-memory-utilization" in a.message


def test_foreign_process_ignored_pid_and_small_drops():
    before = [gpu(0, free_gib=8.0, processes=[(100, "vllm", 70.0)])]
    after = [gpu(0, free_gib=7.5, processes=[(100, "vllm", 70.0), (7, "x", 0.5)])]
    assert rules.foreign_process([sample(0, gpus=before), sample(5, gpus=after)]) == []
    big = [gpu(0, free_gib=2.0, processes=[(100, "vllm", 70.0), (7, "x", 6.0)])]
    (a,) = rules.foreign_process([sample(0, gpus=before), sample(5, gpus=big)])
    (b,) = rules.foreign_process([sample(0, gpus=before), sample(5, gpus=big)], ignore_pids=[7])
    assert "x (PID 7" in a.message and "no new process visible" in b.message


def test_kv_pool_mismatch_pure():
    assert rules.kv_pool_mismatch(456_000, 447_120) is None          # +2 %: within 10 %
    low = rules.kv_pool_mismatch(384, 512, subject="s")
    assert (low.rule, low.severity, low.subject, low.value) == ("kv_pool_mismatch", "warning", "s", -0.25)
    assert "384 tokens vs planned 512 (-25%" in low.message and "calibrate" in low.message
    high = rules.kv_pool_mismatch(600, 500, tolerance=0.1)
    assert high.severity == "info" and high.value == 0.2
    assert rules.kv_pool_mismatch(100, 0) is None


def test_kv_pool_vs_plan_on_the_real_smallkv_scrape():
    engines = parse_metrics(fixture_text("vllm-0.32-cpu/metrics_smallkv.txt"))
    s = Sample(ts=0.0, tick=0, endpoints=(EndpointScrape("http://x", True, engines),))
    (a,) = rules.kv_pool_vs_plan([s], 512)
    assert a.subject == "http://x engine 0" and "384 tokens" in a.message
    assert rules.kv_pool_vs_plan([s], {"http://x": 384}) == []
    assert rules.kv_pool_vs_plan([s], {"http://other": 9999}) == []


def test_endpoint_down_after_n_failures():
    bad = [sample(t, ok=False, error="cannot connect") for t in range(3)]
    assert rules.endpoint_down(bad[:2], min_failures=3) == []
    (a,) = rules.endpoint_down(bad, min_failures=3)
    assert a.severity == "critical" and "cannot connect" in a.message
    mixed = bad[:2] + [sample(3, [engine(kv=0.1)])]
    assert rules.endpoint_down(mixed, min_failures=2) == []


def test_evaluate_real_pressure_timeline():
    """Idle scrape, then the real KV-pressure run: every capacity rule explains it."""
    idle = parse_metrics(fixture_text("vllm-0.32-cpu/metrics.txt"))
    texts = timeline_ticks()
    window = [Sample(ts=0.0, tick=0, endpoints=(EndpointScrape("http://cpu", True, idle),))]
    for i, text in enumerate(texts[:2], start=1):
        window.append(Sample(ts=float(i), tick=i,
                             endpoints=(EndpointScrape("http://cpu", True, parse_metrics(text)),)))
    at_peak = rules.evaluate(window[:2], rules.RuleConfig(kv_sustained_s=0))
    assert {a.rule for a in at_peak} == {"kv_usage_high", "queue_growing_kv_full",
                                         "preemptions_rising"}
    assert at_peak[0].severity == "critical"                  # most severe first
    after = rules.evaluate(window, rules.RuleConfig(kv_sustained_s=0))
    assert {a.rule for a in after} == {"preemptions_rising"}  # KV drained, 7 preemptions seen
    assert rules.preemption_rate_per_min(window, "http://cpu") == 7 * 60 / 2


def test_evaluate_trims_to_the_window():
    old = [sample(0, [engine(preempt=0)]), sample(400, [engine(preempt=5)])]
    assert rules.evaluate(old, rules.RuleConfig(window_s=300)) == []


def test_active_alerts_transitions():
    tracker = rules.ActiveAlerts()
    a = rules.Alert("kv_usage_high", "warning", "m", "s")
    b = rules.Alert("endpoint_down", "critical", "m", "u")
    assert tracker.update([a]) == ([a], [])
    assert tracker.update([a, b]) == ([b], [])
    assert tracker.update([b]) == ([], [a])


def test_foreign_process_that_looks_like_vllm():
    before = [gpu(0, free_gib=40.0, processes=[(100, "python3", 30.0)])]
    after = [gpu(0, free_gib=5.0, processes=[(100, "python3", 30.0), (9, "VLLM::EngineCore", 35.0)])]
    (a,) = rules.foreign_process([sample(0, gpus=before), sample(5, gpus=after)])
    assert "VLLM::EngineCore (PID 9, 35.0 GiB)" in a.message and "second server" in a.message


def test_fp8_is_not_suggested_when_the_cache_is_fp8_already():
    from dataclasses import replace
    fp8 = replace(engine(kv=0.99), cache_config={"cache_dtype": "fp8"})
    win = [sample(t, [replace(fp8, num_preemptions_total=t)]) for t in (0, 30, 60)]
    alerts = rules.kv_usage_high(win, sustained_s=60) + rules.preemptions_rising(win)
    assert len(alerts) == 2
    assert all("fp8" not in a.message and "--max-num-seqs" in a.message for a in alerts)
    assert "fp8" in rules.capacity_fix("auto")
