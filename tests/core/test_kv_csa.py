"""DeepSeek-V4's KV layout (core/kv_csa.py), hand-computed from vLLM 0.26-0.33's code.

Pages (fp8_ds_mla: 584 B per entry, pages rounded up to 576 B): sliding-window cache 64 x 584
= 37,376 -> 37,440; ratio-4 latent 256/4 x 584 -> 37,440; ratio-128 latent 2 x 584 -> 1,728;
compressor states (fp32) 4 x 2·2·512 x 4 = 32,768 -> 32,832 (ratio 4) and 8 x 2·512 x 4 ->
32,832 (ratio 128); indexer keys 64 x (128 + 4) = 8,448 -> 8,640; indexer state 4 x 512 x 4
= 8,192 -> 8,640. DeepSeek-V4-Flash: 43 layers (2 sliding-only, 21 ratio 4, 20 ratio 128)
+ 1 MTP layer (sliding only) with speculative decoding.
"""

from __future__ import annotations

import pytest

from vramguard.core import kv, kv_csa
from vramguard.core.model import CSA, AttentionSpec
from vramguard.core.rules import resolve_rules
from vramguard.core.settings import Settings
from vramguard.sources.resolve import load_model_spec

GIB = 1 << 30


def att(ratio: int, idx: int = 0) -> AttentionSpec:
    return AttentionSpec(kind=CSA, num_kv_heads=1, head_dim=512, sliding_window_tokens=128,
                         compress_ratio=ratio, indexer_head_dim=idx)


def test_pages_per_layer_kind():
    caches = lambda a: kv_csa.layer_caches(a, block=256, kv_dtype_name="fp8",  # noqa: E731
                                           kv_bytes=1)
    assert caches(att(0)) == [((64, 128), 37440)]
    assert caches(att(128)) == [((64, 128), 37440), (None, 1728), ((8, 128), 32832)]
    assert caches(att(4, 128)) == [((64, 128), 37440), (None, 37440), ((4, 8), 32832),
                                   (None, 8640), ((4, 8), 8640)]
    # plain bf16 rows (FlashInfer on SM10x): 512 x 2 B per entry, pages rounded up to 512 B
    assert kv_csa.layer_caches(att(4, 128), block=256, kv_dtype_name="bfloat16",
                               kv_bytes=2)[:2] == [((64, 128), 65536), (None, 65536)]


def test_group_size_is_vllms_approximate_gcd():
    # most common page counts: full 21, sliding-window 44 (43 + MTP), states 21 and 20
    assert kv_csa.approximate_gcd([21, 44, 21, 20], 21) == 22
    assert kv_csa.approximate_gcd([44, 21, 20], 21) == 22
    assert kv_csa.approximate_gcd([3], 5) == 5


@pytest.fixture(scope="module")
def flash():
    return load_model_spec("deepseek-ai/DeepSeek-V4-Flash", offline=True)


def layout(spec, version, *, mtp=1, tokens=16384):
    s = Settings(kv_cache_dtype="fp8", num_speculative_tokens=mtp)
    return kv.build_layout(spec, s, resolve_rules(version, "v1"), (0, spec.num_layers),
                           kv_bytes=1, mamba_bytes=2, block_size=16, engine="v1",
                           max_num_batched_tokens=tokens, kv_dtype_name="fp8")


def logged(spec, version, pool, L, **kw):
    lay = layout(spec, version, **kw)
    rules = resolve_rules(version, "v1")
    blocks = kv.num_blocks_for(lay, pool)
    conc = kv.concurrency(rules, lay, blocks, L, "v1")
    return lay, blocks, kv.tokens(rules, lay, blocks, conc, L, "v1")


@pytest.mark.parametrize("version,per_block,blocks,tokens_1m,tokens_128k", [
    # 0.26: states padded to 37,440: 37,440 x 22 + 8,640 x 21 + 1,728 x 20 per block;
    # concurrency weighs each group's blocks by its page
    ("0.26.0", 1_039_680, 41_310, 4_321_727, 840_904),
    # 0.27+: the widest group, the full one: 21 x 37,440 + 20 x 1,728 + 21 x 8,640
    ("0.27.1", 1_002_240, 42_853, 4_169_106, 780_765),
    ("0.29.0", 1_002_240, 42_853, 4_169_106, 780_765),
    ("0.33.0", 1_002_240, 42_853, 4_169_106, 780_765),
])
def test_flash_at_40_gib(flash, version, per_block, blocks, tokens_1m, tokens_128k):
    # I = 16,384 in-flight tokens; blocks per request [full, 2 x sliding, 2 states]:
    # [4,096 or 512, 259, 259, 4,099, 2,065]
    lay, n, tok = logged(flash, version, 40 * GIB, 1_048_576)
    assert (lay.page_size_bytes, n, tok) == (per_block, blocks, tokens_1m)
    assert len(lay.groups) == 5
    assert logged(flash, version, 40 * GIB, 131_072)[2] == tokens_128k
    assert lay.blocks_per_request(1_048_576) == 4096 + 259 + 259 + 4099 + 2065


def test_mtp_layer_moves_only_the_padded_grouping(flash):
    assert logged(flash, "0.26.0", 40 * GIB, 1_048_576, mtp=0)[2] == 4_326_043
    assert logged(flash, "0.33.0", 40 * GIB, 1_048_576, mtp=0)[2] == 4_169_106


def test_one_request_check_per_version(flash):
    # 0.26-0.28: 22 x (37,440 + 1,728 + 8,640) B per block of every group; 0.29+: the pool's
    # block (and the null block, `null_block_in_check`)
    for version, gib in (("0.26.0", 10.558), ("0.27.1", 10.558), ("0.29.0", 10.060)):
        assert layout(flash, version).needed_bytes(1_048_576) / GIB == pytest.approx(gib, abs=1e-3)
    assert resolve_rules("0.29.0").null_block_in_check


def test_preview_case_log_reproduced_at_8192_inflight(flash):
    # 2xh20-deepseek-v4-flash-preview (0.26.0): 1,009,661 tokens, 1.11x at L = 912,128 with
    # 7,236 blocks when I = 8,192 (one batch of 8,192: the released defaults give 16,384)
    lay = layout(flash, "0.26.0", tokens=8192)
    rules = resolve_rules("0.26.0", "v1")
    conc = kv.concurrency(rules, lay, 7236, 912_128, "v1")
    assert kv.tokens(rules, lay, 7236, conc, 912_128, "v1") == 1_009_661
    assert round(conc, 2) == 1.11


def test_pro(flash):
    pro = load_model_spec("deepseek-ai/DeepSeek-V4-Pro", offline=True)
    assert logged(pro, "0.26.0", 40 * GIB, 1_048_576)[1:] == (29_149, 3_017_269)
    assert logged(pro, "0.33.0", 40 * GIB, 1_048_576)[1:] == (29_909, 2_909_803)
