"""The exporter's custom Collector and its listen-address policy."""

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor_helpers import engine, fake_gpus, gpu, sample
from vramguard.errors import UsageError
from vramguard.monitor.exporter import exposition, make_registry, parse_listen, serve
from vramguard.monitor.rules import RULES, RuleConfig
from vramguard.monitor.watcher import Watcher


def _values(text: str) -> dict:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _by_name(values: dict, name: str) -> dict:
    return {labels: v for (n, labels), v in values.items() if n == name}


def _watcher_with_one_tick(planned=None):
    w = Watcher(config=RuleConfig(kv_sustained_s=0), planned_kv_tokens=planned)
    w.on_sample(sample(100.0, [engine(kv=0.95, running=2, waiting=4, preempt=7, blocks=3,
                                      block_size=128)],
                       gpus=[gpu(0, free_gib=4.0, processes=[(11, "vllm", 70.0)])]))
    return w


def test_collector_series_from_the_latest_tick():
    w = _watcher_with_one_tick(planned=512)
    values = _values(exposition(make_registry(w)).decode())
    key = (("engine", "0"), ("model_name", "m"), ("url", "http://vllm:8000"))
    assert _by_name(values, "vramguard_kv_cache_usage_ratio")[key] == 0.95
    assert _by_name(values, "vramguard_requests_waiting")[key] == 4
    assert _by_name(values, "vramguard_preemptions_total")[key] == 7
    assert _by_name(values, "vramguard_kv_pool_live_tokens")[key] == 384
    assert _by_name(values, "vramguard_kv_pool_planned_tokens")[key] == 512
    assert _by_name(values, "vramguard_kv_headroom_tokens")[key] == pytest.approx(0.05 * 384)
    gkey = (("gpu", "0"), ("name", "H100-80GB"), ("uuid", "GPU-0000"))
    assert _by_name(values, "vramguard_gpu_memory_free_bytes")[gkey] == 4 << 30
    procs = _by_name(values, "vramguard_gpu_process_memory_bytes")
    assert procs[(("gpu", "0"), ("pid", "11"), ("process", "vllm"))] == 70 << 30
    assert _by_name(values, "vramguard_endpoint_up")[(("url", "http://vllm:8000"),)] == 1
    firing = _by_name(values, "vramguard_alerts_firing")
    assert set(dict(k)["rule"] for k in firing) == set(RULES)
    assert firing[(("rule", "kv_usage_high"),)] == 1
    assert firing[(("rule", "kv_pool_mismatch"),)] == 1      # 384 live vs 512 planned
    assert firing[(("rule", "foreign_process"),)] == 0
    one = _by_name(values, "vramguard_alert_firing")
    assert any(dict(k)["rule"] == "kv_usage_high" for k in one)
    assert values[("vramguard_up", ())] == 1


def test_fresh_gpu_reading_per_scrape():
    calls = {"n": 0}
    base = fake_gpus(8)

    def reader():
        calls["n"] += 1
        return base()

    registry = make_registry(_watcher_with_one_tick(), reader)
    for _ in range(3):
        text = exposition(registry).decode()
    assert calls["n"] == 3
    assert len(_by_name(_values(text), "vramguard_gpu_memory_total_bytes")) == 8


def test_collector_before_the_first_tick():
    values = _values(exposition(make_registry(Watcher())).decode())
    assert values[("vramguard_up", ())] == 1 and values[("vramguard_nvml_up", ())] == 0


def test_serve_on_loopback_and_scrape():
    server, port = serve(make_registry(_watcher_with_one_tick()), "127.0.0.1", 0)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    finally:
        server.shutdown()
    assert b"vramguard_kv_cache_usage_ratio" in body


@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:9400", ("127.0.0.1", 9400)),
    ("localhost:9401", ("localhost", 9401)),
    ("[::1]:9400", ("::1", 9400)),
    ("9400", ("127.0.0.1", 9400)),
])
def test_parse_listen_loopback(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["0.0.0.0:9400", ":9400", "[::]:9400", "10.1.2.3:9400"])
def test_parse_listen_refuses_remote_without_flag(text):
    with pytest.raises(UsageError, match="--allow-remote"):
        parse_listen(text)
    assert parse_listen(text, allow_remote=True)[1] == 9400


def test_parse_listen_bad_port():
    with pytest.raises(UsageError):
        parse_listen("127.0.0.1:http")
    with pytest.raises(UsageError):
        parse_listen("127.0.0.1:70000")


def test_exporter_cli_refuses_all_interfaces(capsys):
    from vramguard.cli import main
    assert main(["exporter", "--url", "http://127.0.0.1:1", "--listen", "0.0.0.0:9400",
                 "--no-gpu"]) == 2
    err = capsys.readouterr().err
    assert "--allow-remote" in err and "0.0.0.0" in err
