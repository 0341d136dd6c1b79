"""Parsing recorded vLLM /metrics scrapes of several versions (tests/data/metrics)."""

import pytest

from monitor_helpers import fixture_text, timeline_ticks
from vramguard.errors import MonitorError
from vramguard.monitor.metrics import (KV_USAGE_NEW, KV_USAGE_OLD, metrics_url, parse_metrics,
                                       scrape)


def test_real_032_cpu_idle():
    (e,) = parse_metrics(fixture_text("vllm-0.32-cpu/metrics.txt"))
    assert (e.engine, e.model_name) == ("0", "tiny")
    assert e.kv_cache_usage == 0.0 and e.kv_usage_metric == KV_USAGE_NEW
    assert (e.num_requests_running, e.num_requests_waiting) == (0, 0)
    assert e.waiting_by_reason == {"capacity": 0, "deferred": 0}
    assert e.num_preemptions_total == 0
    # cache_config_info, as §13 quotes it
    assert (e.block_size, e.num_gpu_blocks) == (128, 16384)
    assert e.kv_pool_tokens == 2_097_152 == e.kv_cache_size_tokens
    assert e.kv_cache_memory_bytes == 1 << 30
    assert e.gpu_memory_utilization == 0.92
    assert e.kv_cache_max_concurrency == 8192.0
    assert e.cache_dtype == "auto"


def test_real_032_cpu_under_load_and_smallkv():
    (load,) = parse_metrics(fixture_text("vllm-0.32-cpu/metrics_during_load.txt"))
    assert load.num_requests_running == 4
    assert load.prompt_tokens_total == 246 and load.generation_tokens_total == 3048
    assert 0 < load.kv_cache_usage < 0.001
    (small,) = parse_metrics(fixture_text("vllm-0.32-cpu/metrics_smallkv.txt"))
    assert small.num_preemptions_total == 7
    assert (small.num_gpu_blocks, small.block_size, small.kv_pool_tokens) == (3, 128, 384)
    assert small.cache_config["num_gpu_blocks_override"] == "3"
    assert small.kv_cache_max_concurrency == 1.5


def test_real_pressure_timeline_untyped_blocks():
    ticks = [parse_metrics(t)[0] for t in timeline_ticks()]
    assert len(ticks) == 12
    first = ticks[0]
    # the §13 observation: full KV, 2 running, 4 waiting for capacity
    assert first.kv_cache_usage == 1.0
    assert (first.num_requests_running, first.num_requests_waiting) == (2, 4)
    assert first.waiting_by_reason["capacity"] == 4
    assert first.num_preemptions_total == 2 and ticks[-1].num_preemptions_total == 7


def test_constructed_v0_066():
    (e,) = parse_metrics(fixture_text("constructed/vllm-0.6.6-v0.txt"))
    assert e.engine == "0"                      # v0: no engine label
    assert e.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert e.kv_usage_metric == KV_USAGE_OLD and e.kv_cache_usage == pytest.approx(0.97316, 1e-4)
    assert e.num_requests_swapped == 2 and e.num_requests_waiting == 11
    assert e.num_preemptions_total == 41
    assert e.generation_tokens_total == 902113
    # v0's cache_config_info has no engine/model label: it applies to the engine
    assert (e.num_gpu_blocks, e.block_size, e.kv_pool_tokens) == (27945, 16, 447120)
    assert e.kv_cache_memory_bytes is None and e.kv_cache_size_tokens is None
    assert e.waiting_by_reason == {}


def test_constructed_v1_092_prefers_kv_cache_usage_perc():
    (e,) = parse_metrics(fixture_text("constructed/vllm-0.9.2-v1.txt"))
    assert e.kv_usage_metric == KV_USAGE_NEW and e.kv_cache_usage == 0.9125
    assert e.num_preemptions_total == 12
    assert e.kv_pool_tokens == 59416 * 16


@pytest.mark.parametrize("order", ["old_first", "new_first"])
def test_new_kv_gauge_wins_whatever_the_order(order):
    old = 'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
    new = 'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75\n'
    text = old + new if order == "old_first" else new + old
    (e,) = parse_metrics(text)
    assert (e.kv_cache_usage, e.kv_usage_metric) == (0.75, KV_USAGE_NEW)


def test_constructed_v1_011_data_parallel_engines():
    engines = parse_metrics(fixture_text("constructed/vllm-0.11.0-v1-dp2.txt"))
    assert [e.engine for e in engines] == ["0", "1"]
    e0, e1 = engines
    assert (e0.kv_cache_usage, e1.kv_cache_usage) == (0.9687, 0.4122)
    assert (e0.num_preemptions_total, e1.num_preemptions_total) == (230, 4)
    assert (e0.num_gpu_blocks, e1.num_gpu_blocks) == (16384, 16402)
    assert e0.cache_dtype == "fp8"
    assert e0.kv_cache_memory_bytes is None           # label present, value "None"


def test_endpoint_aggregates_over_engines():
    from vramguard.monitor.metrics import EndpointScrape
    engines = parse_metrics(fixture_text("constructed/vllm-0.11.0-v1-dp2.txt"))
    d = EndpointScrape(url="u", ok=True, engines=engines).to_dict()
    assert d["kv_cache_usage"] == 0.9687                       # the fullest engine
    assert d["num_preemptions_total"] == 234
    assert d["num_requests_running"] == 175 and d["num_requests_waiting"] == 21
    assert d["kv_pool_tokens"] == (16384 + 16402) * 16
    assert len(d["engines"]) == 2


@pytest.mark.parametrize("name", ["constructed/garbage-html.txt",
                                  "constructed/garbage-truncated.txt"])
def test_garbage_raises_monitor_error(name):
    with pytest.raises(MonitorError):
        parse_metrics(fixture_text(name))


def test_no_vllm_series_is_an_error():
    with pytest.raises(MonitorError, match="no vllm"):
        parse_metrics("# TYPE up gauge\nup 1\n")
    with pytest.raises(MonitorError):
        parse_metrics('{"detail": "Not Found"}')


def test_metrics_url():
    assert metrics_url("http://h:8000") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000/") == "http://h:8000/metrics"
    assert metrics_url("h:8000") == "http://h:8000/metrics"
    assert metrics_url("http://h/custom/metrics") == "http://h/custom/metrics"


def test_scrape_never_raises_on_a_closed_port():
    from monitor_helpers import free_port
    result = scrape(f"http://127.0.0.1:{free_port()}", timeout_s=1.0)
    assert not result.ok and "cannot connect" in result.error
    assert result.to_dict()["kv_cache_usage"] is None
