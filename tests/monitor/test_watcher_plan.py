"""Watcher: window, rates, snapshot, and the planner link (planner stubbed: a pure seam)."""

import pytest

from monitor_helpers import engine, fixture_text, sample
from vramguard.errors import MonitorError
from vramguard.monitor import planlink
from vramguard.monitor.metrics import parse_metrics
from vramguard.monitor.rules import RuleConfig
from vramguard.monitor.watcher import PlanRequest, Watcher


def test_flags_from_cache_config_real_smallkv():
    (e,) = parse_metrics(fixture_text("vllm-0.32-cpu/metrics_smallkv.txt"))
    assert planlink.flags_from_cache_config(e.cache_config) == [
        "--gpu-memory-utilization", "0.92", "--block-size", "128",
        "--num-gpu-blocks-override", "3", "--kv-cache-memory-bytes", "1073741824"]
    (v0,) = parse_metrics(fixture_text("constructed/vllm-0.6.6-v0.txt"))
    assert planlink.flags_from_cache_config(v0.cache_config) == [
        "--gpu-memory-utilization", "0.9", "--block-size", "16"]


def test_plan_request_feeds_kv_pool_mismatch(monkeypatch):
    seen = {}

    def fake_pool(model, gpu, **kw):
        seen.update(model=model, gpu=gpu, config=kw["cache_config"])
        return planlink.PlannedPool(tokens=512, num_blocks=4, block_size=128, plan_ok=True)

    monkeypatch.setattr(planlink, "planned_pool", fake_pool)
    w = Watcher(plan_request=PlanRequest("tiny-llama", "H100"))
    alerts = w.on_sample(sample(0, [engine(kv=0.1, blocks=3, block_size=128)]))
    assert seen["model"] == "tiny-llama" and seen["config"]["num_gpu_blocks"] == "3"
    assert [a.rule for a in alerts] == ["kv_pool_mismatch"]
    assert w.snapshot()["endpoints"][0]["planned_kv_pool_tokens"] == 512


def test_plan_failure_is_a_note_not_a_crash(monkeypatch):
    def broken(*a, **kw):
        raise MonitorError("the planner is not available in this build", where="--model")

    monkeypatch.setattr(planlink, "planned_pool", broken)
    w = Watcher(plan_request=PlanRequest("m"))
    assert w.on_sample(sample(0, [engine(kv=0.1, blocks=3)])) == []
    w.on_sample(sample(1, [engine(kv=0.1, blocks=3)]))
    assert len(w.notes) == 1 and "not available" in w.notes[0]   # tried once per endpoint


def test_window_rates_and_missed_ticks():
    w = Watcher(config=RuleConfig(window_s=100))
    for t in range(0, 200, 10):
        s = sample(t, [engine(kv=0.2, preempt=t // 10)])
        w.on_sample(s)
    assert w.window[0].ts >= 90
    assert w.rates()["http://vllm:8000"] == pytest.approx(6.0)     # 1 per 10 s
    from dataclasses import replace
    w.on_sample(replace(sample(200, [engine(kv=0.2)]), missed_ticks=2))
    assert w.missed_total == 2


def test_planned_pool_without_planner_raises_monitor_error(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_planner(name, *args, **kw):
        if "planner" in name:
            raise ImportError("No module named 'vramguard.core.planner'")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_planner)
    with pytest.raises(MonitorError, match="planner is not available"):
        planlink.planned_pool("m", "H100-80GB")


def test_watch_model_flag_uses_the_real_planner(capsys):
    """--model plans the live settings (cache_config_info) with engineer B's planner."""
    import json

    from monitor_helpers import StubMetricsServer
    from vramguard.cli import main
    pytest.importorskip("vramguard.core.planner")
    steps = [("text", fixture_text("constructed/vllm-0.9.2-v1.txt"))]
    with StubMetricsServer(steps) as stub:
        rc = main(["watch", "--url", stub.url, "--once", "--json", "--no-gpu", "--offline",
                   "--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100-80GB",
                   "--vllm-version", "0.9.2"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    (ep,) = doc["endpoints"]
    planned = ep["planned_kv_pool_tokens"]
    assert planned and planned % 16 == 0                      # blocks x block_size 16
    assert any("Qwen/Qwen2.5-7B-Instruct on H100-80GB" in n for n in doc["notes"])
    mismatch = [a for a in doc["alerts"] if a["rule"] == "kv_pool_mismatch"]
    live = ep["kv_pool_tokens"]
    assert bool(mismatch) == (abs(live - planned) / planned > 0.10)


def test_history_failure_stops_recording_not_watching(tmp_path):
    from vramguard.monitor.history import History
    h = History(tmp_path / "h.sqlite3")
    w = Watcher(history=h)
    w.on_sample(sample(0, [engine(kv=0.1)]))
    h._conn.close()                                    # the database goes away under us
    w.on_sample(sample(1, [engine(kv=0.1)]))
    assert w.history is None and "recording stopped" in w.notes[0]
    w.on_sample(sample(2, [engine(kv=0.1)]))
    assert w.latest[0].ts == 2.0
