"""The model runner's per-request token buffers (core/runner.py `token_buffer_bytes`): V1's
InputBatch keeps max_num_seqs x max_model_len token ids in host memory (gpu_input_batch.py:
int32, from 0.11.1 also a bool mask); Model Runner V2 keeps them pinned (gpu/states.py), an
M-RoPE model's prefill positions too (gpu/mm/rope.py), and torch's pinned allocator rounds
each up to a power of two. Both are built after vLLM's memory snapshot: on unified memory
(GB10) the host bytes are device memory and land in the profile's non-torch figure. From
0.32, n-gram speculation on Model Runner V2 keeps the token ids on the GPU."""

from vramguard.core.gpu import GpuSpec
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.rules import resolve_rules
from vramguard.core.runner import token_buffer_bytes
from vramguard.core.settings import Settings
from vramguard.sources.resolve import load_model_spec

MIB = 1 << 20
GB10 = lookup_gpu("GB10")
NOT_UMA = GpuSpec(name="GB10 (as discrete)", total_bytes=GB10.total_bytes,
                  compute_capability=GB10.compute_capability)


def _spec(ref):
    return load_model_spec(ref, offline=True)


def test_v1_runner_host_bytes_by_release():
    """256 requests x 32,768 positions: int32 ids (32 MiB) up to 0.11.0, + a bool mask
    (8 MiB) from 0.11.1; v0 has no such buffers."""
    qwen, s = _spec("Qwen/Qwen3-8B"), Settings()
    args = (qwen, s)
    assert token_buffer_bytes(*args, resolve_rules("0.6.5"), False, 256, 32768) == (0, 0)
    assert token_buffer_bytes(*args, resolve_rules("0.7.0", "v1"), False, 256, 32768) == (
        0, 32 * MIB)
    assert token_buffer_bytes(*args, resolve_rules("0.11.0"), False, 256, 32768) == (
        0, 32 * MIB)
    assert token_buffer_bytes(*args, resolve_rules("0.11.1"), False, 256, 32768) == (
        0, 40 * MIB)


def test_v2_runner_pins_and_rounds_to_a_power_of_two():
    """Model Runner V2: 256 x 40,960 int32 = 40 MiB pinned -> 64 MiB; Qwen2.5-VL's M-RoPE
    positions, 3 per token (120 MiB) -> 128 MiB more."""
    rules = resolve_rules("0.27.1")
    s = Settings()
    assert token_buffer_bytes(_spec("Qwen/Qwen3-8B"), s, rules, True, 256, 40960) == (
        0, 64 * MIB)
    assert token_buffer_bytes(_spec("Qwen/Qwen2.5-VL-7B-Instruct"), s, rules, True, 256,
                              40960) == (0, 64 * MIB + 128 * MIB)


def test_ngram_on_model_runner_v2_keeps_the_token_ids_on_the_gpu_from_0_32():
    """1,024 x 8,192 int32 = 32 MiB on the device, not rounded; 0.31 keeps them pinned."""
    s = Settings(num_speculative_tokens=3, speculative_method="ngram")
    qwen = _spec("Qwen/Qwen3-8B")
    assert token_buffer_bytes(qwen, s, resolve_rules("0.32.0"), True, 1024, 8192) == (
        32 * MIB, 0)
    assert token_buffer_bytes(qwen, s, resolve_rules("0.31.0"), True, 1024, 8192) == (
        0, 32 * MIB)
    eagle = s.with_(speculative_method="eagle")
    assert token_buffer_bytes(qwen, eagle, resolve_rules("0.32.0"), True, 1024, 8192) == (
        0, 32 * MIB)


def _non_torch(gpu, version, s, ref="meta-llama/Llama-3.1-8B-Instruct"):
    p = plan(_spec(ref), s, gpu, vllm_version=version)
    return p.tightest.non_torch


def test_unified_memory_counts_the_host_buffers_as_non_torch():
    """Llama-3.1-8B (dense: Model Runner V2 on 0.27) on a GB10 (256 sequences by default) at
    131,072 positions: 128 MiB pinned -> non-torch grows by exactly that; the same card
    without unified memory does not count them."""
    s = Settings(max_model_len=131072)
    uma, discrete = _non_torch(GB10, "0.27.1", s), _non_torch(NOT_UMA, "0.27.1", s)
    assert uma.value_bytes - discrete.value_bytes == 128 * MIB
    assert "token buffers (256 x 131072, in host memory" in uma.note
    assert "token buffers" not in discrete.note


def test_v1_runner_on_unified_memory_at_a_long_context():
    """Up to 0.21 every model runs on the V1 runner: 256 x 131,072 x 5 B = 160 MiB."""
    s = Settings(max_model_len=131072)
    diff = (_non_torch(GB10, "0.21.0", s).value_bytes
            - _non_torch(NOT_UMA, "0.21.0", s).value_bytes)
    assert diff == 256 * 131072 * 5


def test_ngram_buffer_on_a_discrete_gpu_from_0_32():
    """H100 (1,024 sequences by default), 8,192 positions, n-gram on Model Runner V2
    (0.32): 32 MiB of token ids on the GPU."""
    h100 = lookup_gpu("H100-80GB")
    s = Settings(max_model_len=8192, num_speculative_tokens=3, speculative_method="ngram")
    nt = _non_torch(h100, "0.32.0", s)
    assert "token buffers (1024 x 8192, on the GPU)" in nt.note
    assert nt.value_bytes - _non_torch(h100, "0.32.0", Settings(max_model_len=8192)
                                       ).value_bytes == 32 * MIB
