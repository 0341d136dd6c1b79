"""Scheduler defaults whose release boundaries were read in the released code (0.4.0-0.33.0):
v0's chunked-prefill tokens and its automatic chunked prefill with the conditions that block
it, v1's forced chunked prefill, the 0.8.1-0.8.3 sequences, the clamps and SchedulerConfig's
tokens >= sequences check. Hand-built specs."""

from dataclasses import replace

import pytest

from core_specs import dense, llama31_8b
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

A100 = lookup_gpu("A100-80GB")
H100 = lookup_gpu("H100-80GB")
L4 = lookup_gpu("L4")


def pinned(**flags):
    return Settings(**flags, user_set=frozenset(flags))


def sched(spec, s, gpu, version, engine=None):
    p = plan(spec, s, gpu, vllm_version=version, engine=engine)
    return (p.settings["max_num_batched_tokens"], p.settings["max_num_seqs"],
            p.settings["enable_chunked_prefill"])


@pytest.mark.parametrize("version,tokens", [("0.4.0", 8192), ("0.4.1", 768), ("0.4.2", 512),
                                            ("0.6.4", 512), ("0.6.5", 2048), ("0.10.2", 2048)])
def test_v0_chunked_prefill_tokens_by_release(version, tokens):
    s = pinned(enable_chunked_prefill=True, max_model_len=8192)
    assert sched(llama31_8b(), s, A100, version, "v0")[0] == tokens


def test_v0_turns_chunked_prefill_on_for_long_contexts_from_0_5_3_to_0_10_2():
    assert sched(llama31_8b(), Settings(), A100, "0.5.2")[:2] == (131072, 256)
    assert sched(llama31_8b(), Settings(), A100, "0.5.3") == (512, 256, True)
    assert sched(llama31_8b(), Settings(), A100, "0.7.3") == (2048, 256, True)
    assert sched(llama31_8b(), Settings(), A100, "0.10.2", "v0") == (2048, 256, True)
    assert sched(llama31_8b(), pinned(max_model_len=32768), A100, "0.7.3")[2] is False


@pytest.mark.parametrize("what,version,spec,s,gpu", [
    ("lora", "0.6.4", llama31_8b(), pinned(enable_lora=True), A100),
    ("all-sliding window", "0.6.4", dense(window=65536, max_pos=131072), Settings(), A100),
    ("prefix caching", "0.5.5", llama31_8b(), pinned(enable_prefix_caching=True), A100),
    ("ROCm", "0.7.3", llama31_8b(), Settings(), lookup_gpu("MI300X")),
])
def test_what_keeps_v0_from_chunking_a_long_context(what, version, spec, s, gpu):
    tokens, _, chunked = sched(spec, s, gpu, version)
    assert chunked is False and tokens == 131072, what


def test_prefix_caching_stops_blocking_in_0_6_1_and_interleaved_windows_never_block():
    assert sched(llama31_8b(), pinned(enable_prefix_caching=True), A100, "0.6.1")[2] is True
    interleaved = dense(window=4096, window_every=2, max_pos=131072, model_type="olmo3")
    assert sched(interleaved, Settings(), A100, "0.6.5")[2] is True


def test_v1_sequences_1024_on_every_gpu_until_0_8_4():
    assert sched(llama31_8b(), Settings(), L4, "0.8.3")[1] == 1024
    assert sched(llama31_8b(), Settings(), L4, "0.8.4")[1] == 256


def test_v1_forces_chunked_prefill_until_0_11_1():
    off = pinned(enable_chunked_prefill=False, max_model_len=8192)
    assert sched(llama31_8b(), off, L4, "0.9.2") == (2048, 256, True)
    assert sched(llama31_8b(), off, L4, "0.11.0") == (2048, 256, True)
    assert sched(llama31_8b(), off, L4, "0.11.1") == (8192, 256, False)


def test_the_clamps_by_release():
    s = pinned(max_num_seqs=1, max_model_len=4096)
    assert sched(llama31_8b(), s, H100, "0.11.0")[0] == 8192
    assert sched(llama31_8b(), s, H100, "0.11.1")[0] == 4096
    few = pinned(max_num_batched_tokens=512)
    with pytest.raises(UsageError, match=r"max_num_batched_tokens \(512\) must be greater than "
                                         r"or equal to max_num_seqs \(1024\)"):
        plan(llama31_8b(), few, H100, vllm_version="0.10.0")
    assert sched(llama31_8b(), few, H100, "0.10.1")[:2] == (512, 512)


def test_embedding_models_by_release():
    encoder = replace(dense(max_pos=8192, layers=4), is_encoder_only=True)
    p = plan(encoder, Settings(), L4, vllm_version="0.9.1")
    assert p.engine == "v0"                                   # V0 for non-generate tasks
    assert p.settings["max_num_batched_tokens"] == 32768     # v0's embedding floor
    assert sched(encoder, Settings(), L4, "0.9.2") == (8192, 256, False)
    assert sched(encoder, pinned(max_model_len=1024), L4, "0.9.2")[0] == 2048
    assert sched(encoder, pinned(max_model_len=1024), L4, "0.10.1")[0] == 1024
    assert sched(encoder, pinned(max_model_len=1024), L4, "0.12.0")[0] == 2048
