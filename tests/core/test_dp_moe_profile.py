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
    """Qwen3-30B-A3B (H 2048, 128 experts, top-8, moe_intermediate 768 over TP x DP = 4),
    8,192 tokens per rank, DP 4, no chunking (0.18+): the workspace of 32,768 tokens instead
    of 8,192, and 3 x 8,192 gathered rows of (2048 + 128) bf16 values."""
    spec = _qwen3_moe()
    one, four = act.activation_bytes(spec, _shape()), act.activation_bytes(spec, _shape(dp_ranks=4))
    per_token_ws = 8 * (3 * 192 + 2048) * 2
    want = int(32768 * per_token_ws * act.ACT_MOE_FACTOR) - int(8192 * per_token_ws
                                                                * act.ACT_MOE_FACTOR)
    want += 3 * 8192 * (2048 + 128) * 2
    assert four - one == want


def test_the_chunk_caps_the_workspace_but_not_the_gather():
    """Up to 0.17 the fused-MoE kernel runs at most one chunk of tokens at a time (32,768 up
    to 0.11, 16,384 in 0.12-0.17): at DP 8 x 8,192 tokens only the gathered rows grow past it."""
    spec = _qwen3_moe()
    capped = act.activation_bytes(spec, _shape(dp_ranks=8, moe_chunk=16384))
    at_chunk = act.activation_bytes(spec, _shape(batched_tokens=8192, dp_ranks=2,
                                                 moe_chunk=16384))
    assert capped - at_chunk == 6 * 8192 * (2048 + 128) * 2


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
