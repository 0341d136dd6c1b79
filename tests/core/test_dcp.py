"""--decode-context-parallel-size (DCP): each token's KV on one rank of the DCP group, so the
per-GPU pool (blocks, pages) is unchanged and a request needs cdiv(L, block x dcp) blocks;
vLLM's own checks and log lines by release."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core_specs import deepseek_v3_kv_only, dense, qwen3_next_kv_only
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

H200 = lookup_gpu("H200")
MLA = deepseek_v3_kv_only()
L = 32768


def cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("version, block", [("0.11.0", 64), ("0.20.0", 64), ("0.30.0", 64)])
def test_mla_capacity_times_dcp(version, block):
    """DeepSeek-V3's latent (one KV head per TP rank) at TP 8: the same blocks per GPU with
    and without DCP 8; 512 -> 64 blocks per request of 32,768 tokens (block 64), so 8x the
    concurrency; the logged tokens as each release computes them."""
    base = Settings(tensor_parallel_size=8, max_model_len=L, block_size=block)
    one = plan(MLA, base, H200, vllm_version=version)
    dcp = plan(MLA, base.with_(decode_context_parallel_size=8), H200, vllm_version=version)
    nb = one.kv.num_blocks
    assert dcp.kv.num_blocks == nb and dcp.kv.page_size_bytes == one.kv.page_size_bytes
    assert (one.kv.blocks_per_request, dcp.kv.blocks_per_request) == \
        (cdiv(L, block), cdiv(L, block * 8))
    assert dcp.kv.max_concurrency == pytest.approx(nb / cdiv(L, block * 8))
    if version == "0.30.0":
        assert dcp.kv.tokens == int(dcp.kv.max_concurrency * L)
    else:                                    # 0.11-0.20: blocks // groups x block x dcp
        assert dcp.kv.tokens == nb * block * 8
    assert dcp.settings["decode_context_parallel_size"] == 8


def test_the_multiplying_line_by_release():
    s = Settings(tensor_parallel_size=8, max_model_len=L, decode_context_parallel_size=8)
    logs = {v: plan(MLA, s, H200, vllm_version=v).log_lines
            for v in ("0.11.0", "0.12.0", "0.30.0")}
    assert "Multiplying the GPU KV cache size by the dcp_world_size 8." in logs["0.11.0"]
    assert ("Multiplying the GPU KV cache size by the cp_world_size 8 (pcp_world_size 1 * "
            "dcp_world_size 8).") in logs["0.12.0"]
    assert not any("Multiplying" in line for line in logs["0.30.0"])


def test_mamba_state_is_not_sharded():
    """Qwen3-Next (0.26+: hybrid models take DCP): the attention group's blocks per request
    shrink 8x, the Gated DeltaNet group's fixed blocks do not."""
    s = Settings(tensor_parallel_size=4, max_model_len=L)
    spec = qwen3_next_kv_only()
    one = plan(spec, s, H200, vllm_version="0.30.0")
    two = plan(spec, s.with_(decode_context_parallel_size=2), H200, vllm_version="0.30.0")
    b = one.kv.block_size
    mamba = one.kv.blocks_per_request - cdiv(L, b)     # the GDN groups' fixed blocks
    assert mamba > 0
    assert two.kv.blocks_per_request == cdiv(L, b * 2) + mamba


@pytest.mark.parametrize("spec, settings, version, message", [
    (MLA, dict(decode_context_parallel_size=3), "0.20.0",
     "tp_size=8 must be divisible bydcp_size=3."),
    (MLA, dict(decode_context_parallel_size=3), "0.30.0",
     "tp_size=8 must be divisible by dcp_size=3."),
    (MLA, dict(decode_context_parallel_size=2), "0.10.1",
     "vllm serve: error: unrecognized arguments: --decode-context-parallel-size 2"),
    (MLA, dict(decode_context_parallel_size=3), "0.10.2",
     "tp_size=8 must be divisible bydcp_size=3."),
    (dense(window=4096, window_every=2, max_pos=32768), dict(decode_context_parallel_size=2),
     "0.30.0", "DCP not support sliding window."),
    (qwen3_next_kv_only(), dict(decode_context_parallel_size=2, tensor_parallel_size=2),
     "0.25.0", "DCP not support hybrid attn now."),
    (dense(max_pos=32768), dict(decode_context_parallel_size=2), "0.11.0",
     "DCP requires attention impls to return the softmax lse for decode, but the impl "
     "FlashAttentionImpl does not return the softmax lse for decode."),
    (dense(max_pos=32768), dict(decode_context_parallel_size=2), "0.20.0",
     "tensor parallel size 8 must be greater than total num kv heads 8 when enable decode "
     "context parallel for GQA/MQA"),
    (dense(max_pos=32768), dict(decode_context_parallel_size=2), "0.30.0",
     "Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` (8) to be "
     "greater than the model's total number of KV heads (8). Increase "
     "`--tensor-parallel-size` or set `--decode-context-parallel-size 1`."),
    (dense(kv_heads=2, max_pos=32768), dict(decode_context_parallel_size=8), "0.30.0",
     "`--decode-context-parallel-size` (8) exceeds the maximum supported value (4) for "
     "`--tensor-parallel-size` (8) and 2 model KV heads."),
    (dense(heads=24, kv_heads=8, head_dim=128, max_pos=32768),
     dict(decode_context_parallel_size=2, tensor_parallel_size=24), "0.20.0",
     "Total number of q per kv attn heads (3) must be divisible by dcp world size when "
     "enable decode context parallel for GQA (2)."),
])
def test_vllm_refuses(spec, settings, version, message):
    s = Settings(tensor_parallel_size=8, max_model_len=8192).with_(**settings)
    with pytest.raises(UsageError) as exc:
        plan(spec, s, H200, vllm_version=version)
    assert str(exc.value.what) == message


def test_gqa_with_enough_tp_ranks():
    """Llama-style GQA with 2 KV heads at TP 8: 4 ranks hold each head; DCP 4 spreads the
    tokens over them (0.11.2+)."""
    spec = dense(kv_heads=2, max_pos=32768)
    s = Settings(tensor_parallel_size=8, max_model_len=L)
    one = plan(spec, s, H200, vllm_version="0.30.0")
    four = plan(spec, s.with_(decode_context_parallel_size=4), H200, vllm_version="0.30.0")
    assert four.kv.num_blocks == one.kv.num_blocks
    assert four.kv.blocks_per_request == cdiv(L, 16 * 4)
    assert replace(four.kv, tokens=0, max_concurrency=0, blocks_per_request=0) == \
        replace(one.kv, tokens=0, max_concurrency=0, blocks_per_request=0)


def test_mamba_all_mode_state_is_not_sharded_either():
    """A per-block Mamba group (mamba_cache_mode "all": no fixed count) keeps cdiv(L, block)
    whatever the DCP size (MambaSpec has no context-parallel term); attention shrinks."""
    from vramguard.core.kv import KvGroup, KvLayout
    groups = (KvGroup("mamba", 12, 12, extra_blocks=2), KvGroup("full", 12, 12))
    lay = KvLayout(block_size=64, page_size_bytes=1, bytes_per_token=1, groups=groups,
                   attn_page_per_token_layer=1)
    assert lay.blocks_per_request(L) == (512 + 2) + 512
    assert replace(lay, cp_shard=4).blocks_per_request(L) == (512 + 2) + 128
