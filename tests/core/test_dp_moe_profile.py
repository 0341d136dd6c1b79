"""Data parallelism and MoE in the profile run (V1, 0.8+): each rank's MoE layer runs on the
tokens of every DP rank (fused_moe/layer.py: `naive_multicast` up to 0.10, the all-gather +
reduce-scatter manager from 0.11), so the fused-MoE workspace is sized by DP x batched tokens
(capped by the kernel's chunk up to 0.17) and the other ranks' hidden states and router
logits are gathered next to it."""

from dataclasses import replace

from vramguard.core import activation as act
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings

H100 = lookup_gpu("H100-80GB")


def _qwen3_moe():
    from vramguard.sources.resolve import load_model_spec
    return load_model_spec("Qwen/Qwen3-30B-A3B", offline=True)


def _shape(**kw):
    base = dict(batched_tokens=8192, num_reqs=1, last_pp_rank=False, first_pp_rank=True, tp=1,
                moe_inter_divisor=4, dtype_bytes=2)
    base.update(kw)
    return act.ProfileShape(**base)


def test_the_workspace_and_the_gather_grow_with_the_dp_ranks():
    """Qwen3-30B-A3B (H 2048, 128 experts, top-8, moe_intermediate 768 over TP x DP = 4:
    N = 2 x 192), 8,192 tokens per rank, DP 4, no chunking, TritonExperts' workspaces (0.18+):
    24,576 more tokens x 8 slots x (max(192, 2048) + max(384, 2048)) bf16 values, and 3 x
    8,192 gathered rows of (2048 + 128) bf16 values."""
    spec = _qwen3_moe()
    base = _shape(moe_ws_layout="modular")
    one = act.activation_bytes(spec, base)
    four = act.activation_bytes(spec, replace(base, dp_ranks=4))
    assert four - one == 24576 * 8 * (2048 + 2048) * 2 + 3 * 8192 * (2048 + 128) * 2


def test_the_functional_kernel_and_the_naive_combine():
    """Up to 0.13 the functional kernel keeps (M, k, max(N, H)) and (M, k, N / 2); the naive
    all-to-all (0.8-0.10 by default) combines with an all-reduce of all M gathered rows."""
    spec = _qwen3_moe()
    base = _shape(moe_chunk=32768)
    one = act.activation_bytes(spec, base)
    naive = act.activation_bytes(spec, replace(base, dp_ranks=4, dp_combine_copy=True))
    assert naive - one == (24576 * 8 * (2048 + 192) * 2 + 3 * 8192 * (2048 + 128) * 2
                           + 32768 * 2048 * 2)


def test_the_chunk_caps_the_workspace_but_not_the_gather():
    """Up to 0.17 the fused-MoE kernel runs at most one chunk of tokens at a time (32,768 up
    to 0.11, 16,384 in 0.12-0.17): at DP 8 x 8,192 tokens only the gathered rows grow past it."""
    spec = _qwen3_moe()
    capped = act.activation_bytes(spec, _shape(dp_ranks=8, moe_chunk=16384))
    at_chunk = act.activation_bytes(spec, _shape(batched_tokens=8192, dp_ranks=2,
                                                 moe_chunk=16384))
    assert capped - at_chunk == 6 * 8192 * (2048 + 128) * 2


def test_a_public_dp8_startup():
    """vllm-project/recipes PR 12 (not in the corpus): Qwen3-Coder-480B-A35B-Instruct-FP8,
    -dp 8 --enable-expert-parallel, 0.10.1 (naive all-to-all), on GPUs whose two logged pools
    (48.66 GiB at 0.90, 55.65 at 0.95) put the total at 139.8 GiB; vLLM refused the model's
    262,144 tokens ("62.00 GiB KV cache is needed"). The plan: 48.09 and 55.08 GiB, the same
    refusal (the gather's kernel shapes; 43.9 with the DP-1 MoE factor extrapolated)."""
    from vramguard.core.gpu import GpuSpec
    from vramguard.core.model import QuantSpec
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("Qwen/Qwen3-Coder-480B-A35B-Instruct", offline=True)
    spec = replace(spec, quant=QuantSpec(method="fp8", linear_bytes_per_param=1.0 + 4 / 16384,
                                         block_shape=(128, 128)), checkpoint=None)
    gpu = GpuSpec(name="H20 141GB", total_bytes=int(139.81 * 2**30),
                  compute_capability=(9, 0))
    s = Settings(data_parallel_size=8, enable_expert_parallel=True)
    for util, logged in ((0.90, 48.66), (0.95, 55.65)):
        p = plan(spec, s.with_(gpu_memory_utilization=util), gpu, vllm_version="0.10.1")
        assert p.outcome.failure == "kv_below_max_model_len"
        assert "(62.00 GiB KV cache is needed" in p.outcome.message
        assert abs(p.tightest.kv_cache.value_bytes / 2**30 - logged) < 0.75


def test_a_dense_model_is_unchanged_and_the_plan_says_why():
    from vramguard.sources.resolve import load_model_spec
    llama = load_model_spec("meta-llama/Llama-3.1-8B-Instruct", offline=True)
    assert (act.activation_bytes(llama, _shape(dp_ranks=8))
            == act.activation_bytes(llama, _shape()))
    spec = _qwen3_moe()
    s = Settings(max_model_len=4096, data_parallel_size=4)
    p = plan(spec, s, H100, vllm_version="0.33.0")
    p1 = plan(spec, replace(s, data_parallel_size=1), H100, vllm_version="0.33.0")
    assert p.tightest.activation.value_bytes > p1.tightest.activation.value_bytes
    assert "4 DP ranks" in p.tightest.activation.note
