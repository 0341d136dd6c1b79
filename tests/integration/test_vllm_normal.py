"""A real vLLM 0.32 CPU server (tiny Llama, 1 GiB KV pool): startup log, /metrics, watch."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import vllm_server

pytestmark = pytest.mark.integration

# §13 of the memory reference: P = 128 x 2 layers x (2 x 2 heads x 32 x 2 B) = 65,536 B,
# VLLM_CPU_KVCACHE_SPACE=1 -> K = 2^30 -> 16,384 blocks = 2,097,152 tokens = 8192 x 256.
BLOCKS = 16_384
BLOCK_SIZE = 128
KV_BYTES = 1 << 30
TOKENS = 2_097_152


def _log(handle) -> str:
    return handle.log_path.read_text(errors="replace")


def test_startup_log_matches_cpu_semantics(vllm_normal):
    text = _log(vllm_normal)
    assert re.search(r"version 0\.32\.0", text)
    assert re.search(r"Explicitly set \(1\.0/[\d.]+\) GiB for KV cache on node 0\.", text)
    assert ("CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 256 tokens per "
            "request: 8192.00x") in text
    assert re.search(r"init engine \(profile, create kv cache, warmup model\) took [\d.]+ s", text)
    assert re.search(r"Loading weights took [\d.]+ seconds", text)
    assert "'enforce_eager': True" in text
    # CPU differences (§13): no CUDA-only lines
    assert "Available KV cache memory" not in text
    assert "Model loading took" not in text
    assert "Graph capturing finished" not in text


def test_startup_log_parser(vllm_normal):
    from vramguard.logs.parser import parse

    ex = parse(str(vllm_normal.log_path))
    assert ex.version == "0.32.0"
    assert ex.device == "cpu"
    assert ex.max_model_len == 256
    assert ex.kv_cache_tokens == TOKENS
    assert ex.max_concurrency == pytest.approx(8192.0)
    assert ex.concurrency_tokens_per_request == 256
    assert ex.cpu_kv is not None and ex.cpu_kv.explicit and ex.cpu_kv.kv_gib == 1.0
    assert ex.available_kv_gib is None and ex.weights_gib is None   # no CUDA-only lines


def test_metrics_parse_cache_config(vllm_normal):
    from vramguard.monitor.metrics import scrape

    scraped = scrape(vllm_normal.url)
    assert scraped.ok, scraped.error
    (engine,) = scraped.engines
    assert engine.model_name == vllm_server.SERVED_NAME
    assert engine.kv_usage_metric == "vllm:kv_cache_usage_perc"
    assert engine.num_gpu_blocks == BLOCKS
    assert engine.block_size == BLOCK_SIZE
    assert engine.kv_cache_memory_bytes == KV_BYTES
    assert engine.kv_cache_size_tokens == TOKENS
    assert engine.kv_cache_max_concurrency == pytest.approx(8192.0)
    assert engine.kv_pool_tokens == TOKENS
    assert engine.num_preemptions_total == 0


def test_completion_serves_head_dim_32(vllm_normal):
    answer = vllm_server.post_json(vllm_normal.url + "/v1/completions", {
        "model": vllm_server.SERVED_NAME, "prompt": "memory cache block", "max_tokens": 8,
        "ignore_eos": True})
    assert answer["usage"]["completion_tokens"] == 8


def test_chat_template_serves(vllm_normal):
    answer = vllm_server.post_json(vllm_normal.url + "/v1/chat/completions", {
        "model": vllm_server.SERVED_NAME, "max_tokens": 4, "temperature": 0.0,
        "ignore_eos": True, "messages": [{"role": "user", "content": "memory cache block"}]})
    assert answer["usage"]["completion_tokens"] == 4
    # <s>user: memory cache block</s><s>assistant: -> more tokens than the bare text
    assert answer["usage"]["prompt_tokens"] > 3


def test_watch_once_json(vllm_normal):
    proc = subprocess.run(
        [sys.executable, "-m", "vramguard", "watch", "--once", "--json", "--no-gpu",
         "--url", vllm_normal.url],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    text = json.dumps(data)
    assert vllm_normal.url in text
    assert '"kv_cache_usage"' in text
    assert str(TOKENS) in text       # kv_pool_tokens of the live pool


def test_stress_no_preemption_with_large_pool(vllm_normal):
    from vramguard.monitor.stress import StressConfig, run_stress

    result = run_stress(StressConfig(url=vllm_normal.url, levels=(1, 4), prompt_tokens=64,
                                     max_tokens=16, requests_per_level=4,
                                     duration_per_level_s=60))
    assert [l.requests_ok for l in result.levels] == [4, 4]
    assert all(l.preemptions == 0 for l in result.levels)
    assert result.knee == 4 and result.first_preempting is None
    assert result.levels[-1].output_tokens == 4 * 16
