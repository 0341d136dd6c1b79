"""A causal decoder served as a pooling model (--runner pooling / --convert / --task, or a
pooling architecture): no LM head, no dummy sampler or sampler warm-up, vLLM's pooling
defaults (V0 fallback 0.8.0-0.9.1, chunked prefill, PIECEWISE graphs); the KV cache stays.
Llama-3.1-8B by hand: LM head 128,256 x 4,096 x 2 B."""

from dataclasses import replace

import pytest

from core_specs import llama31_8b
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings, is_pooling

H100 = lookup_gpu("H100-80GB")
BASE = Settings(max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=8192,
                user_set=frozenset({"max_num_seqs", "max_num_batched_tokens"}))
HEAD = 128256 * 4096 * 2


@pytest.mark.parametrize("flags, pooled", [
    ({"runner": "pooling"}, True), ({"convert": "embed"}, True), ({"task": "embed"}, True),
    ({"task": "score"}, True), ({"task": "generate"}, False), ({"convert": "none"}, False),
    ({}, False)])
def test_flags_that_make_a_pooling_model(flags, pooled):
    assert is_pooling(llama31_8b(), BASE.with_(**flags)) is pooled


def test_pooling_architectures_pool_unless_runner_generate():
    cls = replace(llama31_8b(), architecture="LlamaForSequenceClassification")
    assert is_pooling(cls, BASE) and not is_pooling(cls, BASE.with_(runner="generate"))


def test_no_lm_head_and_no_sampler_but_the_kv_cache_stays():
    gen = plan(llama31_8b(), BASE, H100, vllm_version="0.11.0").tightest
    pool = plan(llama31_8b(), BASE.with_(runner="pooling"), H100,
                vllm_version="0.11.0")
    t = pool.tightest
    assert gen.weights.value_bytes - t.weights.value_bytes == HEAD
    # the fp32 logits of min(256, 8192) dummy requests x the release's copies are gone
    from vramguard.core.rules import resolve_rules
    copies = resolve_rules("0.11.0").profile_sampler_copies
    assert gen.activation.value_bytes - t.activation.value_bytes == int(
        256 * 128256 * 4 * copies)
    assert pool.kv.bytes_per_token == 131072 and pool.outcome.ok
    assert pool.settings["enable_chunked_prefill"] is True        # LAST pooling (0.10.1+)


def test_pooling_defaults_by_release():
    """0.8.0-0.9.1: V1 falls back to V0 for pooling; 0.9.2-0.10.0: chunked prefill off; 0.11.1+
    full CUDA graphs become PIECEWISE for pooling models."""
    emb = BASE.with_(task="embed")
    assert plan(llama31_8b(), emb, H100, vllm_version="0.8.5").engine == "v0"
    assert plan(llama31_8b(), BASE, H100, vllm_version="0.8.5").engine == "v1"
    p = plan(llama31_8b(), emb, H100, vllm_version="0.10.0")
    assert p.settings["enable_chunked_prefill"] is False
    from vramguard.core.rules import resolve_rules
    from vramguard.core.stage_terms import cudagraph_mode
    rules = resolve_rules("0.12.0")
    assert cudagraph_mode(emb, rules, "cuda", llama31_8b()) == "PIECEWISE"
    assert cudagraph_mode(BASE, rules, "cuda", llama31_8b()) == "FULL_AND_PIECEWISE"


def test_pooling_model_runs_no_sampler_warmup():
    from vramguard.core.planner import PlanHooks
    from vramguard.core.provenance import GIB
    s = BASE.with_(max_num_seqs=1024, gpu_memory_utilization=0.99)
    hooks = PlanHooks(weights_bytes=40 * GIB, activation_bytes=GIB, non_torch_bytes=GIB,
                      cuda_graph_bytes=0)
    gen = plan(llama31_8b(), s, H100, vllm_version="0.11.0", hooks=hooks)
    pool = plan(llama31_8b(), s.with_(runner="pooling"), H100, vllm_version="0.11.0",
                hooks=hooks)
    assert gen.outcome.failure == "sampler_warmup_oom" and pool.outcome.ok


def test_v0_allocates_a_kv_cache_for_an_encoder_model():
    """v0's cache engine counts every attention layer (worker/cache_engine.py), an encoder's
    too: bge-m3 (24 layers x 16 heads x 64 x K/V x 2 B = 98,304 B per token) gets blocks and
    the max-length check; V1 keeps no KV cache for encoder-only attention."""
    from vramguard.sources.resolve import load_model_spec
    bge = load_model_spec("BAAI/bge-m3", offline=True)
    l4 = lookup_gpu("L4")
    v0 = plan(bge, Settings(), l4, vllm_version="0.8.5", engine="v0")
    assert v0.kv.bytes_per_token == 24 * 16 * 64 * 2 * 2 and v0.kv.num_blocks > 0
    v1 = plan(bge, Settings(), l4, vllm_version="0.30.0")
    assert v1.kv is None or not v1.kv.num_blocks
