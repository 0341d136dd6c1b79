"""Quantized KV formats of vLLM 0.20+ (core/kv_quant.py): TurboQuant's packed slots and
boundary layers, per-token-head int8/fp8/int4, nvfp4's buffers, --kv-cache-dtype-skip-layers
and the block size that skipped layers force from 0.25; vLLM's refusals. Numbers by hand
from vLLM's code (turboquant/config.py `slot_size_aligned`; the per-token-head fp32 scales;
platforms/interface.py `_align_heterogeneous_kv_block_size`)."""

from __future__ import annotations

import pytest

from core_specs import deepseek_v3_kv_only, dense, qwen3_next_kv_only
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.kv_quant import aligned_block_size, packed_head_bytes
from vramguard.core.planner import plan
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

H100 = lookup_gpu("H100-80GB")
LLAMA = dense()                 # 32 layers, 8 KV heads of 128, bf16


@pytest.mark.parametrize("name, d128, d256", [
    # key: D bytes (FP8) or ceil(D x bits / 8) + 2 (fp16 norm); value: ceil(D x bits / 8) + 4
    ("turboquant_k8v4", 128 + 64 + 4, 256 + 128 + 4),
    ("turboquant_4bit_nc", 66 + 68, 130 + 132),
    ("turboquant_k3v4_nc", 50 + 68, 98 + 132),
    ("turboquant_3bit_nc", 50 + 52, 98 + 100),
    ("int8_per_token_head", 2 * (128 + 4), 2 * (256 + 4)),      # + one fp32 scale a side
    ("fp8_per_token_head", 2 * (128 + 4), 2 * (256 + 4)),
    ("int4_per_token_head", 2 * (64 + 4), 2 * (128 + 4)),
    ("fp8", None, None), ("nvfp4", None, None)])
def test_packed_bytes_per_head(name, d128, d256):
    assert packed_head_bytes(name, 128, 128) == d128
    assert packed_head_bytes(name, 256, 256) == d256


def test_turboquant_slot_is_rounded_to_even():
    # D = 96, 3 bits: key ceil(288/8) + 2 = 38, value 36 + 4 = 40 -> 78 (even); 4/4: 50 + 52
    assert packed_head_bytes("turboquant_3bit_nc", 96, 96) == 78
    assert packed_head_bytes("turboquant_k3v4_nc", 80, 80) == 32 + 44   # 30+2, 40+4 -> 76


def _kv(settings, version="0.33.0", spec=LLAMA):
    return plan(spec, settings, H100, vllm_version=version)


@pytest.mark.parametrize("version, block", [("0.24.0", 16), ("0.25.0", 32), ("0.33.0", 32)])
def test_turboquant_keeps_boundary_layers_and_bumps_the_block(version, block):
    """Llama-3.1-8B, turboquant_4bit_nc: layers 0, 1, 30, 31 stay bf16 (4,096 B/token each),
    28 layers of 8 x 134 = 1,072 B/token: 46,400 B/token in one group. From 0.25 the quantized
    page as a plain uint8 spec (8 x 256 = 2,048 B/token) must cover the bf16 page at block 16:
    16 x cdiv(4096, 2048) = 32."""
    p = _kv(Settings(kv_cache_dtype="turboquant_4bit_nc", max_model_len=8192), version)
    assert p.kv.bytes_per_token == 4 * 4096 + 28 * 1072 == 46_400
    assert p.kv.block_size == block
    assert p.kv.page_size_bytes == block * 46_400
    assert p.kv.num_blocks == p.tightest.kv_cache.value_bytes // (block * 46_400)


def test_skip_layers_flag_with_fp8_and_per_token_head():
    s = Settings(kv_cache_dtype="fp8", kv_cache_dtype_skip_layers=("0", "1"), max_model_len=8192)
    p = _kv(s)
    assert p.kv.bytes_per_token == 2 * 4096 + 30 * 2048
    assert p.kv.block_size == 32                       # 16 x cdiv(4096, 2048)
    # per-token-head int8 without skipped layers: 8 x 264 B per layer, block unchanged
    p = _kv(Settings(kv_cache_dtype="int8_per_token_head", max_model_len=8192))
    assert (p.kv.bytes_per_token, p.kv.block_size) == (32 * 8 * 264, 16)
    # int4 with a skipped layer: 16 x cdiv(4096, 8 x 136 = 1088) = 64
    p = _kv(Settings(kv_cache_dtype="int4_per_token_head", kv_cache_dtype_skip_layers=("31",),
                     max_model_len=8192))
    assert (p.kv.bytes_per_token, p.kv.block_size) == (31 * 1088 + 4096, 64)


def test_skip_sliding_window_layers():
    spec = dense(window=4096, window_every=2)          # odd layers full, even sliding
    s = Settings(kv_cache_dtype="fp8", kv_cache_dtype_skip_layers=("sliding_window",),
                 max_model_len=8192)
    p = _kv(s, spec=spec)
    assert p.kv.bytes_per_token == 16 * 4096 + 16 * 2048


def test_aligned_block_size_by_hand():
    assert aligned_block_size(16, 4096, 4096) == 16           # equal pages: unchanged
    assert aligned_block_size(16, 4096, 1152) == 64           # nvfp4: cdiv(4096, 1152) = 4
    assert aligned_block_size(32, 4096, 2048) == 32           # a larger --block-size aligns
    assert aligned_block_size(128, 4096, 2048) == 128


def test_turboquant_020_decode_buffers_in_the_weights():
    """0.20 registers per TurboQuant layer (max_num_seqs x 32 query heads x 32 splits x 129)
    fp32 + (seqs x 32 x 128) fp32 + (seqs x 32) fp32 at init: 532.1 MiB per layer at 1,024
    sequences, on the 28 quantized layers."""
    base = _kv(Settings(max_model_len=8192, max_num_seqs=256), "0.20.0")
    tq = _kv(Settings(kv_cache_dtype="turboquant_4bit_nc", max_model_len=8192,
                      max_num_seqs=256), "0.20.0")
    per_layer = 256 * 32 * 32 * 129 * 4 + 256 * 32 * 128 * 4 + 256 * 32 * 4
    assert tq.tightest.weights.value_bytes - base.tightest.weights.value_bytes == 28 * per_layer
    later = _kv(Settings(kv_cache_dtype="turboquant_4bit_nc", max_model_len=8192,
                         max_num_seqs=256), "0.21.0")
    assert later.tightest.weights.value_bytes == base.tightest.weights.value_bytes


def test_nvfp4_fp8_output_buffer_from_021():
    s = Settings(kv_cache_dtype="nvfp4", max_model_len=8192, max_num_batched_tokens=8192)
    base = _kv(Settings(max_model_len=8192, max_num_batched_tokens=8192), "0.21.0")
    p = _kv(s, "0.21.0")
    assert p.tightest.weights.value_bytes - base.tightest.weights.value_bytes == \
        8192 * 32 * 128 * 32                           # tokens x query heads x head x layers
    assert p.kv.bytes_per_token == 32 * 2 * 8 * (64 + 8)       # 9/16 byte per element


@pytest.mark.parametrize("version, dtype, needle", [
    ("0.19.0", "turboquant_k8v4", "invalid choice: 'turboquant_k8v4'"),
    ("0.24.0", "int4_per_token_head", "invalid choice"),
    ("0.27.0", "nvfp4_4over6", "invalid choice"),
    ("0.20.0", "nvfp4", "nvfp4 KV cache is not yet supported"),
])
def test_dtype_by_release(version, dtype, needle):
    with pytest.raises(UsageError, match=needle):
        _kv(Settings(kv_cache_dtype=dtype, max_model_len=8192), version)


def test_skip_layers_flag_from_019():
    """0.19.0 added --kv-cache-dtype-skip-layers (engine/arg_utils.py; attention.py keeps the
    listed layers in the model dtype); the block size is aligned for them only from 0.25."""
    s = Settings(kv_cache_dtype="fp8", kv_cache_dtype_skip_layers=("0", "1"), max_model_len=8192,
                 user_set=frozenset({"kv_cache_dtype", "kv_cache_dtype_skip_layers",
                                     "max_model_len"}))
    p = _kv(s, "0.19.0")
    assert (p.kv.bytes_per_token, p.kv.block_size) == (2 * 4096 + 30 * 2048, 16)
    with pytest.raises(UsageError, match=r"unrecognized arguments: --kv-cache-dtype-skip-layers "
                                         r"0 1") as e:
        _kv(s, "0.18.1")
    assert "(0.19.0 on)" in e.value.fix
    # the LLM class has no argparse: EngineArgs refuses the keyword
    with pytest.raises(UsageError, match="unexpected keyword argument 'kv_cache_dtype_skip"):
        _kv(s.with_(entrypoint="llm"), "0.18.1")


def test_refusals_in_vllms_words():
    mla = deepseek_v3_kv_only()
    with pytest.raises(UsageError, match=r"not supported with MLA .*\(e\.g\., 'fp8' or 'auto'\)"):
        plan(mla, Settings(kv_cache_dtype="nvfp4", tensor_parallel_size=8), lookup_gpu("H200"),
             vllm_version="0.29.0")
    with pytest.raises(UsageError, match="'nvfp4_ds_mla' with a sparse MLA backend"):
        plan(mla, Settings(kv_cache_dtype="nvfp4", tensor_parallel_size=8), lookup_gpu("H200"),
             vllm_version="0.30.0")
    with pytest.raises(UsageError, match="No valid attention backend"):
        plan(mla, Settings(kv_cache_dtype="turboquant_4bit_nc", tensor_parallel_size=8),
             lookup_gpu("H200"))
    hybrid = qwen3_next_kv_only()
    with pytest.raises(UsageError, match="not supported for hybrid"):
        plan(hybrid, Settings(kv_cache_dtype="turboquant_4bit_nc"), lookup_gpu("H200"),
             vllm_version="0.20.0")
    with pytest.raises(UsageError, match="Requires power-of-2 dim, got 96"):
        _kv(Settings(kv_cache_dtype="int4_per_token_head"), spec=dense(head_dim=96))


def test_turboquant_on_a_hybrid_from_021_has_no_boundary_layers():
    hybrid = qwen3_next_kv_only()
    auto = plan(hybrid, Settings(max_model_len=8192), lookup_gpu("H200"), vllm_version="0.21.0")
    tq = plan(hybrid, Settings(kv_cache_dtype="turboquant_k8v4", max_model_len=8192),
              lookup_gpu("H200"), vllm_version="0.21.0")
    a = next(l.attention for l in hybrid.layers if l.attention.kind == "full")
    n_full = sum(l.attention.kind == "full" for l in hybrid.layers)
    slot = packed_head_bytes("turboquant_k8v4", a.head_dim, a.head_dim)
    assert tq.kv.bytes_per_token == n_full * a.num_kv_heads * slot
    assert auto.kv.bytes_per_token == n_full * a.num_kv_heads * 2 * a.head_dim * 2
