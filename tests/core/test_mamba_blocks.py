"""Mamba / linear-attention blocks per request and block sizes by release, read in vLLM's
MambaSpec.max_memory_usage_bytes, mamba_mixer2.py, qwen_gdn_linear_attn.py and
platforms/interface.py (0.10.2-0.33). Qwen3-Next-80B-A3B at TP 2 (core_specs): per rank a
GDN state of 4,096 x 3 conv + 16 x 128 x 128 SSM elements = 548,864 B (bf16), attention
1,024 B per token per layer; 12 full-attention layers and 36 GDN layers, so one attention
group and three GDN groups of 12."""

from core_specs import qwen3_next_kv_only
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.model import MambaState
from vramguard.core.planner import plan
from vramguard.core.settings import Settings

H200, B200 = lookup_gpu("H200"), lookup_gpu("B200")
TP2 = Settings(tensor_parallel_size=2, max_model_len=32768,
               user_set=frozenset({"tensor_parallel_size", "max_model_len"}))


def kv(version, gpu=H200, s=TP2):
    p = plan(qwen3_next_kv_only(), s, gpu, vllm_version=version)
    return p.kv.block_size, p.kv.max_concurrency, p


def blocks_per_request(p):
    return round(p.kv.num_blocks / p.kv.max_concurrency)


def test_gdn_checkpoint_block_and_64_token_alignment_on_hopper_from_0_33():
    """0.33 in align mode (prefix caching on by default for hybrids since 0.28): FlashInfer's
    GDN prefill (Hopper) adds a checkpoint block per GDN group and aligns the block to 64:
    64 x cdiv(548,864, 64 x 1,024) = 576 tokens, cdiv(32,768, 576) + 3 x (2 + 1) = 66 blocks.
    0.32 and Blackwell (Triton prefill here): 16 x cdiv(548,864, 16,384) = 544 tokens,
    cdiv(32,768, 544) + 3 x 2 = 67."""
    b, _, p = kv("0.33.0")
    assert (b, blocks_per_request(p)) == (576, 57 + 9)
    for version, gpu in (("0.32.0", H200), ("0.33.0", B200)):
        b, _, p = kv(version, gpu)
        assert (b, blocks_per_request(p)) == (544, 61 + 6), (version, gpu.name)


def test_speculative_blocks_by_release_and_mode():
    """MTP k = 2, prefix caching off (mode none): no speculative Mamba blocks in
    0.10.2-0.14 (one page per request), 1 + k per group from 0.15."""
    s = TP2.with_(num_speculative_tokens=2, speculative_method="mtp", enable_prefix_caching=False)
    for version, per_group in (("0.14.0", 1), ("0.15.0", 3)):
        p = plan(qwen3_next_kv_only(), s, H200, vllm_version=version)
        full = -(-32768 // p.kv.block_size)
        assert blocks_per_request(p) == full + 3 * per_group, version


def test_mamba2_checkpoint_block_in_align_mode_from_0_32():
    """A Mamba2 hybrid in align mode holds 2 + 1 blocks per Mamba group from 0.32."""
    from dataclasses import replace

    from vramguard.core.model import MAMBA, AttentionSpec, LayerSpec
    base = qwen3_next_kv_only()
    m2 = MambaState(kind="mamba2", conv_shape=(8192 + 2 * 8 * 128, 3),
                    ssm_shape=(128, 64, 128), groups=8, group_state=128)
    layers = tuple(l if l.attention.kind != MAMBA else
                   LayerSpec(AttentionSpec(kind=MAMBA, mamba=m2), l.params) for l in base.layers)
    spec = replace(base, layers=layers, model_type="nemotron_h",
                   architecture="NemotronHForCausalLM")
    s = TP2.with_(mamba_cache_mode="align", enable_prefix_caching=True)
    per = {}
    for version in ("0.31.0", "0.32.0"):
        p = plan(spec, s, H200, vllm_version=version)
        per[version] = blocks_per_request(p) - -(-32768 // p.kv.block_size)
    assert per == {"0.31.0": 3 * 2, "0.32.0": 3 * 3}


def test_mamba2_groups_that_do_not_divide_tp_are_replicated():
    """mamba_utils.py `extra_groups_for_head_shards`: 1 group at TP 2 becomes 2, so each
    rank's conv state is (inner + 2 x 2 x state) / 2 wide, not (inner + 2 x state) / 2."""
    one = MambaState(kind="mamba2", conv_shape=(4096 + 2 * 128, 3), ssm_shape=(64, 64, 128),
                     groups=1, group_state=128)
    ssm = 32 * 64 * 128 * 2
    assert one.page_bytes(1, 2) == (4096 + 256) * 3 * 2 + 2 * ssm
    assert one.page_bytes(2, 2) == (4096 + 512) // 2 * 3 * 2 + ssm
    eight = MambaState(kind="mamba2", conv_shape=(4096 + 2 * 8 * 128, 3),
                       ssm_shape=(64, 64, 128), groups=8, group_state=128)
    assert eight.page_bytes(2, 2) == (4096 + 2048) // 2 * 3 * 2 + ssm


def test_prefix_caching_refusals_on_mamba_layers():
    """V1 0.10.0-0.10.1 (forced): prefix caching, on by default, "is not supported for Mamba
    yet"; from 0.15 align mode asserts chunked prefill (reworded in 0.33) and, in 0.15-0.16,
    no speculative decoding (models/config.py MambaModelConfig)."""
    import pytest

    from vramguard.errors import UsageError
    spec = qwen3_next_kv_only()

    def refusal(version, s):
        with pytest.raises(UsageError) as exc:
            plan(spec, s, H200, vllm_version=version, engine="v1")
        return str(exc.value)
    assert "Prefix caching is not supported for Mamba yet." in refusal("0.10.1", TP2)
    plan(spec, TP2.with_(enable_prefix_caching=False), H200, vllm_version="0.10.1",
         engine="v1")
    plan(spec, TP2, H200, vllm_version="0.10.2")
    no_chunk = TP2.with_(enable_prefix_caching=True, enable_chunked_prefill=False)
    assert "Chunked prefill is required for mamba cache mode 'align'." in refusal(
        "0.15.0", no_chunk)
    assert "Chunked prefill is required for Mamba prefix caching." in refusal(
        "0.33.0", no_chunk.with_(enable_prefix_caching=None))
    plan(spec, no_chunk.with_(enable_prefix_caching=False), H200, vllm_version="0.33.0")
    mtp = TP2.with_(enable_prefix_caching=True, num_speculative_tokens=2,
                    speculative_method="mtp")
    assert "not compatible with speculative decoding" in refusal("0.16.0", mtp)
    plan(spec, mtp, H200, vllm_version="0.17.0")
    # 0.16 only: an explicit --async-scheduling with a Mamba cache mode (VllmConfig); without
    # the flag async scheduling is turned off there, with a warning
    pc_async = TP2.with_(enable_prefix_caching=True, async_scheduling=True)
    assert ("Currently, async scheduling is not compatible with prefix caching for Mamba "
            "models.") in refusal("0.16.0", pc_async)
    plan(spec, pc_async.with_(async_scheduling=None), H200, vllm_version="0.16.0")
    plan(spec, pc_async, H200, vllm_version="0.17.0")
    plan(spec, pc_async.with_(enable_prefix_caching=False), H200, vllm_version="0.16.0")


def test_all_mode_aligns_the_block_to_the_mamba_chunk_size():
    """Mode "all" (0.15-0.27 default with prefix caching for models with per-block Mamba
    state): block = lcm(chunk, 16) x cdiv(cdiv(Mamba page, attention bytes per token), lcm).
    A Mamba2 state of (8192 + 2 x 8 x 128) / 2 x 3 conv + 64 x 64 x 128 SSM elements at TP 2
    = (15,360 + 524,288) x 2 B = 1,079,296 B over 1,024 B per token: 1,054 tokens -> 1,152
    with chunk 128, 2,048 with no chunk size in the config (vLLM's default); "align"
    16 x 66 = 1,056."""
    from dataclasses import replace

    from vramguard.core.model import MAMBA, AttentionSpec, LayerSpec

    def hybrid(chunk):
        m2 = MambaState(kind="mamba2", conv_shape=(8192 + 2 * 8 * 128, 3),
                        ssm_shape=(128, 64, 128), groups=8, group_state=128, chunk_size=chunk)
        base = qwen3_next_kv_only()
        layers = tuple(l if l.attention.kind != MAMBA else
                       LayerSpec(AttentionSpec(kind=MAMBA, mamba=m2), l.params)
                       for l in base.layers)
        return replace(base, layers=layers, model_type="nemotron_h",
                       architecture="NemotronHForCausalLM")
    pc = TP2.with_(enable_prefix_caching=True)
    block = {c: plan(hybrid(c), pc, H200, vllm_version="0.27.0").kv.block_size
             for c in (128, 0)}
    assert block == {128: 1152, 0: 2048}
    assert plan(hybrid(128), pc.with_(mamba_cache_mode="align"), H200,
                vllm_version="0.27.0").kv.block_size == 1056


def test_prefix_caching_with_speculative_decoding_defaults_to_align_in_0_20():
    """0.20-0.21: a model with per-block Mamba state gets "align", not "all", when
    speculative decoding is on too."""
    from dataclasses import replace

    from vramguard.core.rules import resolve_rules
    from vramguard.core.stage_terms import mamba_cache_mode
    nemo = replace(qwen3_next_kv_only(), architecture="NemotronHForCausalLM")
    s = Settings(enable_prefix_caching=True)
    mtp = s.with_(num_speculative_tokens=2, speculative_method="mtp")
    got = {v: (mamba_cache_mode(nemo, s, resolve_rules(v)),
               mamba_cache_mode(nemo, mtp, resolve_rules(v)))
           for v in ("0.19.0", "0.20.0", "0.21.0", "0.22.0")}
    assert got == {"0.19.0": ("all", "all"), "0.20.0": ("all", "align"),
                   "0.21.0": ("all", "align"), "0.22.0": ("all", "all")}


def test_prefix_caching_before_mamba_cache_modes():
    """0.11.1-0.14: --enable-prefix-caching keeps a Mamba state per chunk-aligned block for
    the models with Mamba prefix caching (the later mode "all", without speculative blocks);
    other hybrids (Gated DeltaNet) have it turned off."""
    from dataclasses import replace

    from vramguard.core.rules import resolve_rules
    from vramguard.core.stage_terms import mamba_cache_mode
    nemo = replace(qwen3_next_kv_only(), architecture="NemotronHForCausalLM")
    pc = Settings(enable_prefix_caching=True)
    assert mamba_cache_mode(nemo, pc, resolve_rules("0.12.0")) == "all"
    assert mamba_cache_mode(nemo, pc, resolve_rules("0.11.0")) == "none"
    assert mamba_cache_mode(qwen3_next_kv_only(), pc, resolve_rules("0.12.0")) == "none"
    assert mamba_cache_mode(nemo, Settings(), resolve_rules("0.12.0")) == "none"
    p = plan(qwen3_next_kv_only(), TP2.with_(enable_prefix_caching=True), H200,
             vllm_version="0.12.0")
    assert any("turned off" in a for a in p.assumptions)
