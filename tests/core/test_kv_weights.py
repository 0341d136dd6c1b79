"""KV layouts, page sizes, PP splits and weights per rank, computed by hand."""

import pytest

from core_specs import deepseek_v3_kv_only, dense, llama31_8b, qwen3_next_kv_only, tiny_cpu_llama
from vramguard.core import kv
from vramguard.core.gpu import GpuSpec
from vramguard.core.model import CheckpointInfo, QuantSpec
from vramguard.core.planner import PlanHooks, plan
from vramguard.core.provenance import GIB
from vramguard.core.rules import resolve_rules
from vramguard.core.settings import Settings
from vramguard.core.weights import pp_layer_split, weights_per_rank


def layout(spec, version="0.33.0", tp=1, rng=None, block=16, **kw):
    rules = resolve_rules(version)
    s = Settings(tensor_parallel_size=tp, **kw)
    return kv.build_layout(spec, s, rules, rng or (0, spec.num_layers), kv_bytes=2,
                           mamba_bytes=2, block_size=block, engine=rules.engine,
                           max_num_batched_tokens=8192)


# ---- PP splits (§4.1) ------------------------------------------------------------------
@pytest.mark.parametrize("n,pp,sizes", [(32, 3, [11, 11, 10]), (61, 4, [15, 15, 16, 15]),
                                        (32, 2, [16, 16]), (32, 1, [32]), (80, 3, [27, 27, 26])])
def test_pp_layer_split(n, pp, sizes):
    split = pp_layer_split(n, pp)
    assert [e - s for s, e in split] == sizes
    assert split[0][0] == 0 and split[-1][1] == n


@pytest.mark.parametrize("version, env, sizes", [
    ("0.7.3", None, [10, 10, 12]),            # 0.5.1-0.7.3: the remainder on the last stage
    ("0.8.0", None, [11, 11, 10]),
    ("0.7.3", {"VLLM_PP_LAYER_PARTITION": "8,12,12"}, [8, 12, 12]),
    ("0.33.0", {"VLLM_PP_LAYER_PARTITION": " 4,14 ,14"}, [4, 14, 14]),
])
def test_pp_layout_by_release_and_env(version, env, sizes):
    """The planned stages hold the layers vLLM's `get_pp_indices` gives them: Llama-3.1-8B's
    32 layers over 3 stages (each stage's KV layer count and weights follow)."""
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.core.rules_env import apply_env
    spec = llama31_8b()
    s = Settings(pipeline_parallel_size=3, max_model_len=4096)
    rules = apply_env(resolve_rules(version), env)
    assert [e - b for b, e in pp_layer_split(32, 3, rules.pp_layout)] == sizes
    p = plan(spec, s, lookup_gpu("A100-80GB"), vllm_version=version, env=env)
    assert [b - a for a, b in (lg.layers for lg in p.ledgers)] == sizes
    assert [lg.kv_bytes_per_token for lg in p.ledgers] == [4096 * n for n in sizes]
    head = 128256 * 4096 * 2
    w = [lg.weights.value_bytes for lg in p.ledgers]      # 2 x 218,112,000 B per layer
    assert w[2] - w[1] == 2 * 218_112_000 * (sizes[2] - sizes[1]) + head + 4096 * 2


# ---- bytes per token (§4) --------------------------------------------------------------
@pytest.mark.parametrize("tp,bpt", [(1, 131072), (2, 65536), (8, 16384), (16, 16384)])
def test_llama_bytes_per_token_with_tp_replication(tp, bpt):
    assert layout(llama31_8b(), tp=tp).bytes_per_token == bpt


@pytest.mark.parametrize("tp", [1, 2, 8, 16])
def test_deepseek_v3_mla_70272_at_any_tp(tp):
    lay = layout(deepseek_v3_kv_only(), tp=tp, block=64)
    assert lay.bytes_per_token == 70272
    assert lay.page_size_bytes == 64 * 70272


def test_mla_block_size_by_version_and_gpu_family():
    """The block size of the MLA backend vLLM picks (platforms/cuda.py, the backends' kernel
    block sizes): Hopper FlashMLA 64 (0.8-0.17, v0 too), FLASH_ATTN_MLA 16 from 0.18 (an fp8
    KV cache FlashMLA's 64); Blackwell FlashMLA unsupported (16) up to 0.10.0, CUTLASS_MLA 128
    (0.10.1-0.14; 10.0 only until 0.12), FLASHINFER_MLA for qk_nope_head_dim 128 (64,
    0.15-0.17), 64/128 (32, 0.18) and 192 (0.19+), else CUTLASS 128; Ampere Triton 16; sparse
    (indexer) MLA 64 from 0.11."""
    from dataclasses import replace
    spec = deepseek_v3_kv_only()

    def b(version, cc, model=spec):
        return kv.default_block_size(model, Settings(), resolve_rules(version),
                                     compute_capability=cc)
    hopper, blackwell, ampere = (9, 0), (10, 0), (8, 0)
    assert [b(v, hopper) for v in ("0.9.2", "0.11.0", "0.17.0", "0.18.0", "0.31.0",
                                   "0.33.0")] == [64, 64, 64, 16, 16, 16]
    assert [b(v, blackwell) for v in ("0.10.0", "0.10.1", "0.11.0", "0.14.0", "0.15.0",
                                      "0.18.0", "0.33.0")] == [16, 128, 128, 128, 64, 32, 32]
    assert kv.default_block_size(spec, Settings(), resolve_rules("0.9.2", "v0"),
                                 compute_capability=hopper) == 64          # v0 FlashMLA too
    fp8 = Settings(kv_cache_dtype="fp8")
    assert kv.default_block_size(spec, fp8, resolve_rules("0.33.0"),
                                 compute_capability=hopper) == 64          # FLASHMLA's fp8
    b300 = (10, 3)
    assert [b(v, b300) for v in ("0.11.0", "0.12.0", "0.13.0")] == [16, 16, 128]
    assert [b(v, ampere) for v in ("0.9.2", "0.18.0", "0.33.0")] == [16, 16, 16]
    other = replace(spec, layers=tuple(
        replace(l, attention=replace(l.attention, mla_qk_nope_head_dim=96))
        for l in spec.layers))
    assert b("0.15.0", blackwell, other) == b("0.33.0", blackwell, other) == 128
    nope192 = replace(spec, layers=tuple(
        replace(l, attention=replace(l.attention, mla_qk_nope_head_dim=192))
        for l in spec.layers))
    assert (b("0.18.0", blackwell, nope192), b("0.19.0", blackwell, nope192)) == (128, 32)
    sparse = replace(spec, layers=tuple(
        replace(l, attention=replace(l.attention, indexer_bytes_per_token=132))
        for l in spec.layers))
    assert b("0.33.0", blackwell, sparse) == b("0.33.0", hopper, sparse) == 64
    def user(version, size, cc=hopper):
        return kv.default_block_size(spec, Settings(block_size=size), resolve_rules(version),
                                     compute_capability=cc)
    assert [user("0.9.2", 16), user("0.9.2", 128)] == [64, 64]               # replaced
    assert [user("0.12.0", 16), user("0.12.0", 128)] == [64, 128]            # multiples kept
    assert [user("0.15.0", 32, blackwell), user("0.15.0", 48, blackwell)] == [32, 64]
    assert [user("0.18.0", 16), user("0.8.5", 16, ampere)] == [16, 16]       # kept
    rules = resolve_rules("0.33.0")
    assert kv.default_block_size(llama31_8b(), Settings(), rules) == 16
    assert kv.default_block_size(llama31_8b(), Settings(), rules, device="cpu") == 128
    assert kv.default_block_size(llama31_8b(), Settings(), resolve_rules("0.11.0"),
                                 device="cpu") == 16


def test_fp8_kv_is_one_byte():
    rules = resolve_rules("0.33.0")
    spec = llama31_8b()
    for d in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        assert kv.kv_dtype_bytes(spec, Settings(kv_cache_dtype=d), rules, 2)[0] == 1
    assert kv.kv_dtype_bytes(spec, Settings(), rules, 2) == (2, "auto")


def test_modelopt_kv_scheme_becomes_fp8_in_033_only():
    from dataclasses import replace
    spec = replace(llama31_8b(), quant=QuantSpec("modelopt", linear_bytes_per_param=1.0,
                                                 kv_cache_scheme="FP8"))
    assert kv.kv_dtype_bytes(spec, Settings(), resolve_rules("0.33.0"), 2) == (1, "fp8")
    assert kv.kv_dtype_bytes(spec, Settings(), resolve_rules("0.32.0"), 2) == (2, "auto")


# ---- hybrid page unification (§4.2) ----------------------------------------------------
def test_qwen3_next_block_size_544():
    lay = layout(qwen3_next_kv_only())
    assert lay.attn_page_per_token_layer == 2048
    assert lay.block_size == 544
    assert lay.block_size_enlarged
    assert round(lay.mamba_padding_pct, 2) == 1.49
    # 12 full + 36 GDN: group size 12 -> 1 attention group + 3 mamba groups
    assert len(lay.groups) == 4
    assert lay.page_size_bytes == 544 * 2048 * 12
    # per request: cdiv(L, 544) for attention + 1 per mamba group
    assert lay.blocks_per_request(262144) == -(-262144 // 544) + 3


def test_hybrid_unification_absent_before_010():
    lay = layout(qwen3_next_kv_only(), version="0.9.2")
    assert lay.block_size == 16 and not lay.block_size_enlarged


def test_mamba_speculative_blocks():
    lay = layout(qwen3_next_kv_only(), num_speculative_tokens=2)
    assert lay.blocks_per_request(544) == 1 + 3 * 3


# ---- sliding-window groups (§4, §6) ----------------------------------------------------
def test_sliding_window_groups_and_per_request_blocks():
    # 5 sliding : 1 full over 12 layers (Gemma-3 style), window 1024
    spec = dense(layers=12, window=1024, window_every=6, rope={"rope_type": "default"})
    lay = layout(spec, version="0.22.0")
    kinds = sorted(g.kind for g in lay.groups)
    # 2 full + 10 sliding: group size min(2, 10) = 2 -> 1 full group + 5 sliding groups
    assert kinds == ["full"] + ["sliding"] * 5
    assert lay.page_size_bytes == 16 * 4096 * 2     # 4096 B/token/layer x 2 layers per group
    # I = 8192 (0.8.3-0.25): sliding group: cdiv(min(1023 + 8192, L), 16) + 1
    L = 32768
    per = -(-L // 16) + 5 * (-(-min(1023 + 8192, L) // 16) + 1)
    assert lay.blocks_per_request(L) == per


def test_hybrid_manager_disabled_treats_sliding_as_full():
    spec = dense(layers=12, window=1024, window_every=6, rope={"rope_type": "default"})
    lay = layout(spec, disable_hybrid_kv_cache_manager=True)
    assert len(lay.groups) == 1 and lay.groups[0].kind == "full"
    assert lay.page_size_bytes == 16 * 12 * 4096


def test_sliding_inflight_doubles_with_pp_from_026():
    spec = dense(layers=12, window=1024, window_every=6, rope={"rope_type": "default"})
    assert layout(spec, version="0.25.0").inflight_tokens == 8192
    rules = resolve_rules("0.26.0")
    s = Settings(pipeline_parallel_size=2)
    assert kv.inflight_tokens(rules, s, 8192) == 16384
    assert kv.inflight_tokens(rules, Settings(), 8192, async_scheduling=True) == 16384


# ---- estimated max length (§6) ---------------------------------------------------------
def test_estimate_max_len_uniform():
    lay = layout(llama31_8b())
    P = lay.page_size_bytes
    assert kv.estimate_max_len(lay, 100 * P, 131072) == 1600
    assert kv.estimate_max_len(lay, 100 * P + P // 2, 131072) == 1600
    assert kv.estimate_max_len(lay, P - 1, 131072) == 0
    assert kv.estimate_max_len(lay, 10**15, 131072) == 131072


def test_concurrency_and_tokens_formulas():
    lay = layout(llama31_8b())
    r091, r022, r080 = resolve_rules("0.9.1"), resolve_rules("0.22.0"), resolve_rules("0.8.0")
    # L not a multiple of b: the forms differ
    assert kv.concurrency(r091, lay, 1000, 1000, "v1") == 1000 / 63
    assert kv.concurrency(r080, lay, 1000, 1000, "v1") == 16.0
    assert kv.tokens(r091, lay, 1000, 1000 / 63, 1000, "v1") == 16000
    assert kv.tokens(r022, lay, 1000, 1000 / 63, 1000, "v1") == int(1000 / 63 * 1000)


# ---- CPU (§13) -------------------------------------------------------------------------
CPU = GpuSpec(name="cpu", total_bytes=64 * GIB, vendor="cpu")


def test_cpu_example_section_13():
    spec = tiny_cpu_llama()
    p = plan(spec, Settings(max_model_len=256, kv_cache_memory_bytes=GIB), CPU,
             vllm_version="0.32.0")
    assert p.outcome.ok
    assert p.kv.block_size == 128
    assert p.kv.page_size_bytes == 65536
    assert p.kv.num_blocks == 16384
    assert p.kv.tokens == 2097152
    assert ("CPU KV cache size: 2,097,152 tokens, Maximum concurrency for 256 tokens per "
            "request: 8192.00x") in p.log_lines


def test_cpu_override_3_blocks_includes_null_block():
    p = plan(tiny_cpu_llama(), Settings(max_model_len=256, kv_cache_memory_bytes=GIB,
                                        num_gpu_blocks_override=3), CPU, vllm_version="0.32.0")
    assert p.outcome.ok
    assert "Overriding num_gpu_blocks=16384 with num_gpu_blocks_override=3" in p.log_lines
    assert p.kv.tokens == 384 and p.kv.max_concurrency == 1.5
    assert ("CPU KV cache size: 384 tokens, Maximum concurrency for 256 tokens per request: "
            "1.50x") in p.log_lines


def test_cpu_defaults_scale_with_world_size():
    p = plan(tiny_cpu_llama(), Settings(max_model_len=256, kv_cache_memory_bytes=GIB), CPU,
             vllm_version="0.32.0")
    assert p.settings["max_num_batched_tokens"] == 2048
    assert p.settings["max_num_seqs"] == 128


# ---- overrides (§3) --------------------------------------------------------------------
def test_override_too_small_fails_check_from_022():
    spec = llama31_8b()
    h100 = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB), compute_capability=(9, 0))
    s = Settings(max_model_len=34048, num_gpu_blocks_override=2048)
    p = plan(spec, s, h100, vllm_version="0.22.0")
    assert p.outcome.failure == "kv_below_max_model_len"
    assert "(4.16 GiB KV cache is needed" in p.outcome.message
    assert "available KV cache memory (4.0 GiB)" in p.outcome.message
    p = plan(spec, s, h100, vllm_version="0.20.0")      # applied after the check
    assert p.outcome.ok and p.kv.num_blocks == 2048


# ---- weights per rank (§8) -------------------------------------------------------------
def test_llama_weights_bf16():
    (w,) = weights_per_rank(llama31_8b(), Settings())
    assert w.params == 8_030_261_248
    assert w.rope_cache_bytes == 131072 * 128 * 2
    assert round(w.bytes / GIB, 2) == 14.99


def test_weights_tp2_vocab_parallel_and_kv_split():
    spec = llama31_8b()
    (w1,) = weights_per_rank(spec, Settings())
    (w2,) = weights_per_rank(spec, Settings(tensor_parallel_size=2))
    norms = 65 * 4096                                # 2 per layer + final norm: replicated
    assert w2.params == (w1.params - norms) // 2 + norms
    assert abs(w2.bytes - (w1.bytes - w1.rope_cache_bytes - 2 * norms) / 2
               - w2.rope_cache_bytes - 2 * norms) <= 4


def test_weights_pp_embedding_first_head_last():
    spec = llama31_8b()
    ws = weights_per_rank(spec, Settings(pipeline_parallel_size=2))
    layer = 218_112_000
    vocab_h = 128256 * 4096
    assert ws[0].params == 16 * layer + vocab_h
    assert ws[1].params == 16 * layer + vocab_h + 4096


def test_vocab_padded_to_64():
    spec = dense(vocab=1000, layers=1, hidden=64, heads=1, kv_heads=1, head_dim=64, inter=64,
                 rope={"rope_type": "default"})
    (w,) = weights_per_rank(spec, Settings())
    assert w.params == 1 * (64 * 64 * 2 + 2 * 64 * 64 + 3 * 64 * 64 + 128) + 2 * 1024 * 64 + 64


def test_dtype_auto_fp32_checkpoint_runs_fp16_and_explicit_fp32():
    spec = dense(dtype="float32")
    (w16,) = weights_per_rank(spec, Settings())
    (w32,) = weights_per_rank(spec, Settings(dtype="float32"))
    assert round(w16.bytes / GIB, 2) == 14.99
    assert round(w32.bytes / GIB, 2) == 29.98


def test_quantized_linear_keeps_16bit_embeddings():
    from dataclasses import replace
    spec = replace(llama31_8b(), quant=QuantSpec("fp8", linear_bytes_per_param=1.0))
    (w,) = weights_per_rank(spec, Settings())
    linear = 32 * (218_112_000 - 8192)
    expect = linear * 1 + 32 * 8192 * 2 + 2 * 128256 * 4096 * 2 + 4096 * 2 + 131072 * 128 * 2
    assert w.bytes == expect


def test_checkpoint_total_wins_and_offload_subtracts():
    from dataclasses import replace
    spec = replace(llama31_8b(), checkpoint=CheckpointInfo("safetensors", total_bytes=16 * 10**9))
    (w,) = weights_per_rank(spec, Settings())
    assert w.from_checkpoint and abs(w.bytes - (16 * 10**9 + w.rope_cache_bytes)) < 64
    (w_off,) = weights_per_rank(spec, Settings(cpu_offload_gb=4))
    assert w.bytes - w_off.bytes == 4 * GIB


def test_pp_ledgers_tightest_rank_decides():
    h100 = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB), compute_capability=(9, 0))
    p = plan(llama31_8b(), Settings(pipeline_parallel_size=3), h100, vllm_version="0.33.0",
             hooks=PlanHooks(activation_bytes=GIB, non_torch_bytes=0, cuda_graph_bytes=0))
    assert [l.layers for l in p.ledgers] == [(0, 11), (11, 22), (22, 32)]
    assert p.kv.num_blocks == min(l.num_blocks for l in p.ledgers)


def test_packed_mla_layouts():
    spec = deepseek_v3_kv_only()
    rules = resolve_rules("0.33.0")
    s = Settings(kv_cache_dtype="fp8_ds_mla")
    lay = kv.build_layout(spec, s, rules, (0, 61), kv_bytes=1, mamba_bytes=2, block_size=64,
                          engine="v1", max_num_batched_tokens=8192, kv_dtype_name="fp8_ds_mla")
    assert lay.bytes_per_token == 61 * 656


def test_v0_before_mla_support_uses_full_heads_padded_to_256():
    spec = deepseek_v3_kv_only()
    rules = resolve_rules("0.6.5")
    lay = kv.build_layout(spec, Settings(tensor_parallel_size=8), rules, (0, 61), kv_bytes=2,
                          mamba_bytes=2, block_size=16, engine="v0", max_num_batched_tokens=8192)
    assert lay.bytes_per_token == 61 * (128 // 8) * 2 * 256 * 2


# ---- speculative decoding (§4.2, MTP drafter) -------------------------------------------
def test_gdn_conv_state_grows_with_speculative_tokens():
    """conv (8192, 3 + 2) x 2 B + ssm 1,048,576 B = 1,130,496 B -> 16 x cdiv(., 16 x 2048) = 560
    (544 without speculation); Mamba1 states do not grow."""
    assert layout(qwen3_next_kv_only(), num_speculative_tokens=2).block_size == 560
    from vramguard.core.model import MambaState
    m1 = MambaState(kind="mamba1", conv_shape=(64, 3), ssm_shape=(64, 16))
    assert kv.mamba_page_bytes(m1, 1, (2, 2), 2) == m1.page_bytes(1, 2) == (64 * 3 + 64 * 16) * 2


def test_mtp_drafter_layer_joins_the_kv_groups_on_the_last_stage():
    """12 full + 36 GDN, plus the MTP layer: 13 attention layers -> group size 13, the GDN
    layers take 3 groups of 13 (3 padding layers), page = 560 x 2048 x 13."""
    from dataclasses import replace
    spec = replace(qwen3_next_kv_only(), mtp_params=10**8)
    lay = layout(spec, num_speculative_tokens=2)
    assert lay.padding_layers == 3 and len(lay.groups) == 4
    assert lay.page_size_bytes == 560 * 2048 * 13
    assert layout(spec).page_size_bytes == 544 * 2048 * 12           # no speculation: no drafter
    assert layout(spec, num_speculative_tokens=2, rng=(0, 24)).padding_layers == 0  # not last PP
    assert layout(spec, num_speculative_tokens=2, version="0.10.2").block_size == 560


def test_every_mtp_layer_joins_the_kv_groups():
    """Two MTP layers (e.g. `num_nextn_predict_layers: 2`): 12 + 2 = 14 attention layers in
    the group; the 36 GDN layers take 3 groups of 14 (6 padding layers)."""
    from dataclasses import replace
    spec = replace(qwen3_next_kv_only(), mtp_params=10**8, mtp_layers=2)
    lay = layout(spec, num_speculative_tokens=2)
    assert lay.padding_layers == 6 and len(lay.groups) == 4
    assert lay.page_size_bytes % 14 == 0


def test_mtp_drafter_weights_on_the_last_stage():
    """An MTP layer is a copy of the model's largest decoder layer (sharded and quantized as
    the model is) + eh_proj (2H x H, replicated) + 3 norms; its embedding copy is freed for
    the target's at PP 1, its LM-head copy from 0.16 (`head_shared`). Llama-3.1-8B-sized MTP
    layer at TP 2, bf16: (218,112,000 - 8,192) / 2 x 2 B + 8,192 x 2 B = 218,120,192 B, plus
    (2 x 4,096² + 3 x 4,096) x 2 B = 67,133,440 B."""
    from dataclasses import replace
    from vramguard.core.weights import mtp_draft_bytes
    vocab_h = 128256 * 4096
    spec = replace(llama31_8b(), mtp_params=218_112_000 + 2 * 4096 ** 2 + 3 * 4096 + 2 * vocab_h,
                   mtp_layers=1, mtp_embed_params=vocab_h, mtp_head_params=vocab_h)
    tp2 = Settings(num_speculative_tokens=3, tensor_parallel_size=2)
    layer = 218_120_192 + 67_133_440
    assert mtp_draft_bytes(spec, tp2, 2, "v1") == layer
    assert mtp_draft_bytes(spec, tp2, 2, "v1", head_shared=False) == layer + vocab_h
    assert mtp_draft_bytes(spec, tp2.with_(pipeline_parallel_size=2), 2, "v1") == layer + vocab_h
    assert mtp_draft_bytes(spec, Settings(), 2, "v1") == 0
    assert mtp_draft_bytes(spec, Settings(num_speculative_tokens=3), 2, "v0") == 0
    fp8 = replace(spec, quant=QuantSpec(method="fp8", linear_bytes_per_param=1.0))
    assert mtp_draft_bytes(fp8, tp2, 2, "v1") < layer
    ignored = replace(fp8, quant=replace(fp8.quant, unquantized_modules=("model.layers.32",)))
    assert mtp_draft_bytes(ignored, tp2, 2, "v1") == layer
    h100 = GpuSpec(name="H100", total_bytes=80 * GIB)
    base = plan(spec, Settings(max_model_len=8192), h100, vllm_version="0.30.0")
    mtp = plan(spec, Settings(max_model_len=8192, num_speculative_tokens=3,
                              speculative_method="mtp"), h100, vllm_version="0.30.0")
    assert mtp.tightest.weights.value_bytes - base.tightest.weights.value_bytes == \
        218_112_000 * 2 + 67_133_440


# ---- layout rules read from vLLM's releases (this round) --------------------------------
def test_mamba_align_mode_holds_one_more_block_per_group():
    """mamba_cache_mode 'align' (prefix caching on a hybrid model, 0.28+): 2 + k pages per
    Mamba group per request (MambaSpec.max_memory_usage_bytes); 12 full + 36 GDN -> 1 full
    group + 3 GDN groups of 12."""
    rules = resolve_rules("0.33.0")
    spec = qwen3_next_kv_only()
    for k, per_group in ((0, 2), (2, 4)):
        lay = kv.build_layout(spec, Settings(num_speculative_tokens=k), rules, (0, 48),
                              kv_bytes=2, mamba_bytes=2, block_size=16, engine="v1",
                              max_num_batched_tokens=8192, mamba_mode="align")
        L = 544 * 10
        assert lay.blocks_per_request(L) == 10 + 3 * per_group


def test_hybrid_prefix_caching_default_by_version():
    """Qwen3-Next-like hybrid at 544 tokens per block: 0.27 keeps 1 block per GDN group,
    0.28 (prefix caching on by default) 2, and 1 again with prefix caching off."""
    from dataclasses import replace
    from core_specs import qwen3_next_kv_only as q
    spec = replace(q(), hidden_size=2048, num_attention_heads=16, num_kv_heads=2, head_dim=256,
                   vocab_size=151936, embed_params=151936 * 2048, lm_head_params=151936 * 2048,
                   torch_dtype="bfloat16", max_len_keys={"max_position_embeddings": 65536})
    gpu = GpuSpec("H100", 80 * GIB)
    per = {}
    for version, pc in (("0.27.0", None), ("0.28.0", None), ("0.28.0", False)):
        p = plan(spec, Settings(max_model_len=5440, enable_prefix_caching=pc), gpu,
                 vllm_version=version)
        per[(version, pc)] = p.kv.blocks_per_request
    assert per == {("0.27.0", None): 10 + 3, ("0.28.0", None): 10 + 6, ("0.28.0", False): 13}


def test_unified_pages_enlarge_the_smaller_layers_block_size():
    """Gemma-4-style: full layers 2 x 512 x 2 B = 2048 B/token, sliding layers 1024 B/token:
    the sliding layers' block holds 32 tokens (unify_kv_cache_spec_page_size); 0.30 with
    async scheduling keeps 2 x 16384 in-flight tokens, capped at L:
    full cdiv(32768, 16) + 4 sliding groups x (cdiv(min(511 + 32768, 32768), 32) + 1)."""
    from vramguard.core.model import AttentionSpec, LayerParams, LayerSpec, ModelSpec
    full = AttentionSpec(kind="full", num_kv_heads=1, head_dim=512)
    sw = AttentionSpec(kind="sliding", num_kv_heads=1, head_dim=256, sliding_window_tokens=512)
    layers = tuple(LayerSpec(full if (i + 1) % 5 == 0 else sw, LayerParams(attn_q=1, mlp=1))
                   for i in range(15))
    spec = ModelSpec(name="g4", architecture="Gemma4ForCausalLM", model_type="gemma4",
                     num_layers=15, hidden_size=1536, num_attention_heads=8, num_kv_heads=1,
                     head_dim=256, vocab_size=262144, torch_dtype="bfloat16", layers=layers,
                     embed_params=1, lm_head_params=1,
                     max_len_keys={"max_position_embeddings": 131072})
    rules = resolve_rules("0.30.0")
    s = Settings()

    def lay(async_on):
        return kv.build_layout(spec, s, rules, (0, 15), kv_bytes=2, mamba_bytes=2,
                               block_size=16, engine="v1", max_num_batched_tokens=16384,
                               async_scheduling=async_on)
    on = lay(True)
    assert on.page_size_bytes == 3 * 16 * 2048        # 3 layers per group, 32 KiB pages
    assert sorted({g.block_size for g in on.groups if g.kind == "sliding"}) == [32]
    assert on.blocks_per_request(32768) == 2048 + 4 * (32768 // 32 + 1)
    # without async scheduling one batch is in flight: cdiv(511 + 16384, 32) + 1 = 529
    assert lay(False).blocks_per_request(32768) == 2048 + 4 * 529


def test_inflight_batches_under_model_runner_v2():
    rules = resolve_rules("0.30.0")
    pp2 = Settings(pipeline_parallel_size=2)
    assert kv.inflight_tokens(rules, pp2, 8192, async_scheduling=True, v2_runner=True) == 3 * 8192
    assert kv.inflight_tokens(rules, pp2, 8192, async_scheduling=True) == 2 * 8192
    assert kv.inflight_tokens(rules, Settings(), 8192, async_scheduling=True,
                              v2_runner=True) == 2 * 8192


def test_v0_072_073_pad_mla_entries_to_256_bytes_on_cuda():
    """DeepSeek-R1 TP8 on 0.7.3 (v0): 576 -> 640 elements; 61 x 640 x 2 B x 16 = 1,249,280 B
    per block (18,418 blocks = 21.43 GiB logged); 0.7.1 and 0.8.0 unpadded; ROCm unpadded;
    VLLM_CUDA_MEM_ALIGN_KV_CACHE=0 unpadded."""
    from core_specs import deepseek_v3_kv_only
    from dataclasses import replace
    spec = replace(deepseek_v3_kv_only(), embed_params=1000, lm_head_params=1000)
    h200 = GpuSpec("H200", 140 * GIB)
    mi = GpuSpec("MI300X", 192 * GIB, vendor="amd")
    s = Settings(tensor_parallel_size=8, max_model_len=4096)
    page = {}
    for version, gpu, env in (("0.7.3", h200, None), ("0.7.2", h200, None), ("0.7.1", h200, None),
                              ("0.8.0", h200, None), ("0.7.3", mi, None),
                              ("0.7.3", h200, {"VLLM_CUDA_MEM_ALIGN_KV_CACHE": "0"})):
        p = plan(spec, s, gpu, vllm_version=version, engine="v0", env=env)
        page[(version, gpu.vendor, bool(env))] = p.kv.page_size_bytes
    padded, plain = 61 * 640 * 2 * 16, 61 * 576 * 2 * 16
    assert page == {("0.7.3", "nvidia", False): padded, ("0.7.2", "nvidia", False): padded,
                    ("0.7.1", "nvidia", False): plain, ("0.8.0", "nvidia", False): plain,
                    ("0.7.3", "amd", False): plain, ("0.7.3", "nvidia", True): plain}


# ---- Mamba models on v0 (0.6-0.10.1; read in the released wheels) ------------------------
def test_v0_mamba_slots_by_version():
    from vramguard.core.stage_terms import v0_mamba_slots
    r063, r070, r073 = (resolve_rules(v, "v0") for v in ("0.6.3", "0.7.0", "0.7.3"))
    # rounded up to a CUDA-graph batch size: 1, 2, 4, then multiples of 8, at most 8192
    assert [v0_mamba_slots(r073, n, False) for n in (1, 3, 5, 256, 257, 9000)] == \
        [1, 4, 8, 256, 264, 8192]
    assert v0_mamba_slots(r063, 5, True) == 8          # up to 0.6.4: rounded even when eager
    assert v0_mamba_slots(r070, 256, True) == 8194     # 0.6.5-0.7.2: 8192 + 2 when eager
    assert v0_mamba_slots(r073, 5, True) == 5          # 0.7.3+: max_num_seqs when eager


def test_v0_hybrid_kv_cache_counts_only_attention_layers():
    """12 full-attention layers (2 KV heads x 256) of Qwen3-Next's 48: v0 keeps the GDN state
    outside the KV cache, so the page is 16 x 12 x 2 x 2 x 256 x 2 B."""
    spec = qwen3_next_kv_only()
    rules = resolve_rules("0.9.2", "v0")
    lay = kv.build_layout(spec, Settings(), rules, (0, 48), kv_bytes=2, mamba_bytes=2,
                          block_size=16, engine="v0", max_num_batched_tokens=8192)
    assert [g.kind for g in lay.groups] == ["full"]
    assert lay.bytes_per_token == 12 * 2 * 2 * 256 * 2
    assert lay.page_size_bytes == 16 * lay.bytes_per_token


def test_mamba_models_fall_back_to_v0_until_0_10_2():
    """`vllm serve` (no VLLM_USE_V1) runs Mamba models on v0 in 0.8.0-0.10.1 and on v1 from
    0.10.2; v0 allocates the state for the padded max_num_seqs in the profile run."""
    from dataclasses import replace
    from vramguard.core.model import LayerParams, LayerSpec, MambaState, ModelSpec
    from vramguard.core.model import AttentionSpec
    state = MambaState(kind="mamba1", conv_shape=(8192, 3), ssm_shape=(8192, 16))
    layers = tuple(LayerSpec(AttentionSpec(kind="mamba", mamba=state),
                             LayerParams(attn_q=10**6, mlp=10**7)) for _ in range(64))
    spec = ModelSpec(name="m", architecture="FalconMambaForCausalLM", model_type="falcon_mamba",
                     num_layers=64, hidden_size=4096, num_attention_heads=0, num_kv_heads=0,
                     head_dim=0, vocab_size=65024, torch_dtype="bfloat16", layers=layers,
                     embed_params=65024 * 4096, lm_head_params=0,
                     max_len_keys={"max_position_embeddings": 2048})
    gpu = GpuSpec("A100-80GB", 80 * GIB)
    s = Settings(max_num_seqs=250)
    old = plan(spec, s, gpu, vllm_version="0.9.2")
    assert old.engine == "v0" and old.kv is None
    assert "falls back from its default V1 engine to V0" in old.assumptions[0]
    forced = plan(spec, s, gpu, vllm_version="0.9.2", engine="v0", detail=False)
    no_state = plan(replace(spec, layers=tuple(replace(l, attention=AttentionSpec(kind="none"))
                                               for l in layers)), s, gpu, vllm_version="0.9.2",
                    engine="v0", detail=False)
    slot = 64 * (8192 * 3 + 8192 * 16) * 2                     # conv + SSM state, bf16
    assert (forced.tightest.activation.value_bytes
            - no_state.tightest.activation.value_bytes) == slot * 256   # 250 -> 256 slots
    assert plan(spec, s, gpu, vllm_version="0.10.2", detail=False).engine == "v1"
    assert plan(spec, s, gpu, vllm_version="0.9.2", engine="v1", detail=False).engine == "v1"


def test_nvfp4_kv_cache_is_nine_sixteenths_of_a_byte_per_element():
    """vLLM's nvfp4 KV cache keeps, per head and side, head/2 bytes of packed 4-bit values and
    head/16 fp8 block scales (`nvfp4_kv_cache_full_dim`): Qwen3-8B (36 layers x 8 KV heads x
    (128 + 128)) is 73,728 B/token in fp8 and 73,728 x 9/16 = 41,472 in nvfp4."""
    from vramguard.core import kv
    from vramguard.core.rules import resolve_rules
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("Qwen/Qwen3-8B", offline=True)
    rules = resolve_rules("0.33.0")
    b, name = kv.kv_dtype_bytes(spec, Settings(kv_cache_dtype="nvfp4"), rules, 2)
    assert (b, name) == (0.5625, "nvfp4")
    assert spec.kv_bytes_per_token(dtype_bytes=b) == 41_472
    assert spec.kv_bytes_per_token(dtype_bytes=1) == 73_728


def test_mamba_cache_mode_by_model_and_version():
    """Prefix caching on a Mamba/linear-attention model (0.15+; on by default for hybrids
    from 0.28): up to 0.27 'align' for Gated DeltaNet & co, 'all' for the Mamba family
    (NemotronH, Jamba, Falcon-H1, ...), whose requests then hold cdiv(L, block) Mamba blocks
    per group; from 0.28 'align' for every model (models/config.py MambaModelConfig)."""
    from dataclasses import replace
    from vramguard.core.stage_terms import mamba_cache_mode
    gdn = qwen3_next_kv_only()
    nemo = replace(gdn, architecture="NemotronHForCausalLM")
    on, off, unset = (Settings(enable_prefix_caching=v) for v in (True, False, None))
    R = resolve_rules
    assert [mamba_cache_mode(gdn, s, R("0.24.0")) for s in (on, off, unset)] == [
        "align", "none", "none"]
    assert [mamba_cache_mode(gdn, s, R("0.28.0")) for s in (on, off, unset)] == [
        "align", "none", "align"]
    assert mamba_cache_mode(gdn, on, R("0.14.0")) == "none"
    assert mamba_cache_mode(nemo, on, R("0.27.0")) == "all"
    assert mamba_cache_mode(nemo, unset, R("0.27.0")) == "none"      # not on by default yet
    assert mamba_cache_mode(nemo, unset, R("0.28.0")) == "align"     # 0.28+: align for all
    assert mamba_cache_mode(nemo, on, R("0.33.0")) == "align"
    from vramguard.sources.resolve import load_model_spec
    pure = load_model_spec("tiiuae/falcon-mamba-7b", offline=True)     # attention-free
    assert mamba_cache_mode(pure, unset, R("0.30.0")) == "none"
    rules = R("0.30.0")
    lay = kv.build_layout(nemo, unset, rules, (0, 48), kv_bytes=2, mamba_bytes=2, block_size=16,
                          engine="v1", max_num_batched_tokens=8192, mamba_mode="all")
    L = lay.block_size * 10
    # 1 full-attention group + 3 Mamba groups, each cdiv(L, block) = 10 blocks
    assert lay.blocks_per_request(L) == 10 + 3 * 10


def test_init_buffers_sized_by_the_batched_tokens_count_as_weights():
    """From 0.10.1 the multimodal Gemma-3n/4 classes allocate their per-layer-embedding input
    buffer at init, (max_num_batched_tokens, layers, per-layer dim) in the model dtype, and
    DSA models (DeepSeek-V3.2, GLM-5) a (max_num_batched_tokens, index_topk) int32 top-k
    buffer: both inside vLLM's weights measurement, on every rank."""
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.sources.resolve import load_model_spec
    gemma = load_model_spec("google/gemma-4-E2B-it", offline=True)      # 35 layers x 256
    glm = load_model_spec("zai-org/GLM-5.2", offline=True)              # index_topk 2048
    h100, b200 = lookup_gpu("H100-80GB"), lookup_gpu("B200")

    def w(spec, gpu, tokens, version="0.30.0", **kw):
        s = Settings(max_num_batched_tokens=tokens, max_model_len=4096, **kw)
        return plan(spec, s, gpu, vllm_version=version).tightest.weights.value_bytes

    assert w(gemma, h100, 16384) - w(gemma, h100, 8192) == 8192 * 35 * 256 * 2
    assert w(glm, b200, 8192, tensor_parallel_size=8) - w(glm, b200, 2048,
                                                          tensor_parallel_size=8) == 6144 * 2048 * 4
    assert w(gemma, h100, 16384, "0.10.0") == w(gemma, h100, 8192, "0.10.0")
    # NOTE: 0.10.1's gemma3n_mm.py already allocates it (the wheel, read in the eleventh session)
    assert w(gemma, h100, 16384, "0.10.1") - w(gemma, h100, 8192, "0.10.1") == 8192 * 35 * 256 * 2


def test_hybrid_group_size_rule_by_version():
    """Mixed attention (sliding + full): vLLM's group size is the smallest layer count up to
    0.11, the largest when below 1.25x the smallest in 0.12-0.17 and below 1.5x from 0.18
    (kv_cache_utils.py); the other kind is padded to whole groups."""
    from dataclasses import replace
    from vramguard.core.model import FULL, SLIDING, AttentionSpec, LayerParams, LayerSpec

    def mixed(n_sliding, n_full):
        sw = AttentionSpec(kind=SLIDING, num_kv_heads=8, head_dim=64, sliding_window_tokens=128)
        full = AttentionSpec(kind=FULL, num_kv_heads=8, head_dim=64)
        lay = tuple(LayerSpec(a, LayerParams(attn_q=1000, mlp=1000))
                    for a in [sw] * n_sliding + [full] * n_full)
        return replace(dense(), layers=lay, num_layers=len(lay))

    def groups(spec, version):
        """(group size, number of groups, padding layers)"""
        lay = layout(spec, version=version)
        return lay.groups[0].padded_layers, len(lay.groups), lay.padding_layers
    spec = mixed(12, 14)                     # ratio 1.17
    assert groups(spec, "0.11.0") == (12, 3, 10)     # 12 sliding; 14 full in 2 groups of 12
    assert groups(spec, "0.14.0") == groups(spec, "0.18.0") == (14, 2, 2)
    spec = mixed(12, 16)                     # ratio 1.33
    assert groups(spec, "0.14.0") == (12, 3, 8)
    assert groups(spec, "0.18.0") == groups(spec, "0.33.0") == (16, 2, 4)


# ---- a forced pool larger than the GPU holds: torch's OOM at the KV allocation -----------
_PINNED = PlanHooks(weights_bytes=15 * GIB, activation_bytes=GIB, non_torch_bytes=GIB,
                    cuda_graph_bytes=0, context_bytes=GIB)
_GPU80 = GpuSpec(name="GPU-80", total_bytes=80 * GIB, compute_capability=(9, 0))


@pytest.mark.parametrize("flags", [{"kv_cache_memory_bytes": 64 * GIB},
                                   {"num_gpu_blocks_override": 32768}])
def test_forced_pool_beyond_free_memory_is_an_oom_at_allocation(flags):
    # free 79 GiB - weights 15 - non-torch 1 = 63 GiB for 32 layer tensors of 32768 blocks x
    # 64 KiB (2 GiB each): 31 are allocated (62 GiB), the 32nd fails with 1 GiB free.
    s = Settings(max_model_len=8192, max_num_seqs=8, enforce_eager=True, **flags)
    p = plan(llama31_8b(), s, _GPU80, vllm_version="0.33.0", hooks=_PINNED)
    assert p.kv.num_blocks == 32768 and p.kv.page_size_bytes == 2 << 20
    assert p.outcome.failure == "no_kv_memory"
    assert p.outcome.message == ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                                 "total capacity of 80.00 GiB of which 1.00 GiB is free.")
    (name, value), = p.fixes[0].flags.items()
    assert name == "--" + next(iter(flags)).replace("_", "-")
    fixed = Settings(max_model_len=8192, max_num_seqs=8, enforce_eager=True,
                     **{next(iter(flags)): int(value)})
    assert plan(llama31_8b(), fixed, _GPU80, vllm_version="0.33.0", hooks=_PINNED).outcome.ok
    assert p.fixes[1].flags == {} and p.fixes[1].summary.startswith("drop --")


def test_forced_pool_that_fits_starts():
    s = Settings(max_model_len=8192, max_num_seqs=8, enforce_eager=True,
                 kv_cache_memory_bytes=62 * GIB)
    p = plan(llama31_8b(), s, _GPU80, vllm_version="0.33.0", hooks=_PINNED)
    assert p.outcome.ok and p.kv.num_blocks == 31744


def test_explicit_mamba_cache_mode():
    """--mamba-cache-mode (0.15+) replaces the default mode while prefix caching is on; off,
    vLLM resets it to 'none'; 'all' on a model without Mamba prefix caching falls back to
    'align'; 'all' is no choice from 0.32 (models/config.py MambaModelConfig, cache.py)."""
    from dataclasses import replace
    from vramguard.core.stage_terms import mamba_cache_mode
    from vramguard.errors import UsageError
    gdn = qwen3_next_kv_only()
    nemo = replace(gdn, architecture="NemotronHForCausalLM")
    R = resolve_rules

    def mode(spec, version, **kw):
        return mamba_cache_mode(spec, Settings(**kw), R(version))
    assert mode(nemo, "0.30.0", enable_prefix_caching=True, mamba_cache_mode="all") == "all"
    assert mode(nemo, "0.30.0", enable_prefix_caching=True) == "align"          # the default
    assert mode(nemo, "0.24.0", enable_prefix_caching=True, mamba_cache_mode="align") == "align"
    assert mode(gdn, "0.30.0", enable_prefix_caching=True, mamba_cache_mode="all") == "align"
    assert mode(nemo, "0.30.0", enable_prefix_caching=False, mamba_cache_mode="all") == "none"
    h100 = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB), compute_capability=(9, 0))
    s = Settings(max_model_len=4096, enable_prefix_caching=True, mamba_cache_mode="all")
    with pytest.raises(UsageError, match="invalid choice: 'all' \\(choose from 'align', 'none'\\)"):
        plan(nemo, s, h100, vllm_version="0.32.0")
    with pytest.raises(UsageError, match="unrecognized arguments: --mamba-cache-mode all"):
        plan(nemo, s, h100, vllm_version="0.14.0")
    blocks = {(v, m): plan(nemo, replace(s, mamba_cache_mode=m), h100,
                           vllm_version=v).kv.blocks_per_request
              for v, m in (("0.30.0", "all"), ("0.30.0", None), ("0.27.0", None))}
    # NOTE: "all" aligns the block to lcm(chunk size 2048 (vLLM's default), 16): 2,048
    # tokens, so cdiv(4096, 2048) = 2 blocks per group; "align": 16 x cdiv(1,097,728 B,
    # 16 x 2,048 B) = 544 tokens, 8 attention blocks + 2 per GDN group
    assert blocks["0.30.0", "all"] == blocks["0.27.0", None] == 2 + 3 * 2
    assert blocks["0.30.0", None] == 8 + 3 * 2


def test_mm_ipc_reservation_comes_out_of_the_kv_budget():
    """--mm-ipc-gpu-memory-gb (0.25+, gpu_worker.py / multimodal/gpu_ipc_memory.py): a
    multimodal model's KV budget shrinks by the raw-frame budget after vLLM has logged it; a
    text-only model drops the flag; the refusal when nothing is left, in each release's words."""
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.errors import UsageError
    from vramguard.sources.resolve import load_model_spec
    vl = load_model_spec("Qwen/Qwen2.5-VL-3B-Instruct", offline=True)
    text = load_model_spec("Qwen/Qwen2.5-7B-Instruct", offline=True)
    l4 = lookup_gpu("L4")

    def p(spec, gb, version="0.30.0", **kw):
        return plan(spec, Settings(max_model_len=8192, mm_ipc_gpu_memory_gb=gb, **kw), l4,
                    vllm_version=version, detail=True)
    base, cut = p(vl, 0.0), p(vl, 2.0)
    k0 = base.tightest.kv_cache.value_bytes
    assert k0 - cut.tightest.kv_cache.value_bytes == 2 * GIB
    assert cut.kv.num_blocks < base.kv.num_blocks
    logs = cut.log_lines
    assert f"Available KV cache memory: {k0 / GIB:.2f} GiB" in logs      # before the cut
    assert any(l.startswith("Reserving 2.0 GiB of GPU memory for frontend multimodal decoding")
               and l.endswith(f"KV cache memory reduced to {round((k0 - 2 * GIB) / GIB, 2)} GiB.")
               for l in logs)
    assert p(text, 2.0).kv.num_blocks == p(text, 0.0).kv.num_blocks
    forced = p(vl, 2.0, kv_cache_memory_bytes=6 * GIB)
    assert forced.tightest.kv_cache.value_bytes == 4 * GIB
    with pytest.raises(UsageError, match="unrecognized arguments: --mm-ipc-gpu-memory-gb 2"):
        p(vl, 2.0, "0.24.0")
    for version, words in (("0.26.0", "Reduce mm_ipc_gpu_memory_gb, use a different"),
                           ("0.27.0", "Reduce mm_ipc_gpu_memory_gb or hw_decoders, use")):
        out = p(vl, 40.0, version)
        assert out.outcome.failure == "no_kv_memory"
        assert out.outcome.message.startswith("frontend multimodal GPU decoding reserves 40.0 GiB "
                                              "(40.0 GiB raw-frame budget, 0.0 GiB decoder")
        assert words in out.outcome.message


def test_hybrid_page_alignment_by_release_and_gpu():
    """models/config.py (0.11.1-0.19) and platforms/interface.py (0.20+): Qwen3-Next (head
    size 256) on Blackwell aligns its attention block to 32 in 0.11.1-0.17 (10.0 only until
    0.12), 16 elsewhere; MLA hybrids 128 before 0.11.1, 64 in 0.11.1-0.19, then the MLA
    backend's block."""
    from core_specs import qwen3_next_kv_only
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.core.planner import plan
    spec = qwen3_next_kv_only()
    tp4 = Settings(tensor_parallel_size=4, user_set=frozenset({"tensor_parallel_size"}))

    def block(version, gpu):
        return plan(spec, tp4, lookup_gpu(gpu), vllm_version=version).kv.block_size
    assert [block(v, "B200") for v in ("0.11.0", "0.12.0", "0.17.0", "0.18.0", "0.33.0")] == \
        [272, 288, 288, 272, 272]
    assert block("0.17.0", "H100-80GB") == 272
    b300 = (10, 3)
    assert kv.hybrid_alignment(spec, resolve_rules("0.12.0"), b300, 16) == 16
    assert kv.hybrid_alignment(spec, resolve_rules("0.13.0"), b300, 16) == 32
    mla = deepseek_v3_kv_only()
    assert [kv.hybrid_alignment(mla, resolve_rules(v), (9, 0), 64)
            for v in ("0.11.0", "0.11.1", "0.19.0", "0.20.0")] == [128, 64, 64, 64]
    assert kv.hybrid_alignment(mla, resolve_rules("0.20.0"), (9, 0), 16) == 16


def test_routed_experts_split_over_tp_times_dp_with_or_without_expert_parallel():
    """fused_moe/layer.py (0.8+): without expert parallelism the MoE layer flattens TP x DP
    into one tensor-parallel group, so each rank holds 1/(TP x DP) of the experts either way;
    attention and dense layers stay split by TP."""
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("Qwen/Qwen3-30B-A3B", offline=True)

    def w(**flags):
        return weights_per_rank(spec, Settings(**flags))[0].bytes
    dp2 = w(data_parallel_size=2)
    assert dp2 == w(data_parallel_size=2, enable_expert_parallel=True)
    assert dp2 < 0.55 * w()


def test_mxfp4_kernel_layouts_by_gpu_and_release():
    """quantization/mxfp4.py, fused_moe/oracle/mxfp4.py: Marlin (before Hopper, SM12x, and
    Hopper before 0.12) rounds the per-rank expert intermediate size up to 128 and the
    hidden size to 256; Triton (Hopper 0.12+) to 64, keeping the scales twice; FlashInfer
    (B200) to 256 / 256, 128 / 256 from 0.27. gpt-oss-20b: 2,880 x 2,880."""
    from vramguard.core.rules import resolve_rules
    from vramguard.core.weights import _expert_padding, mxfp4_layout
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("openai/gpt-oss-20b", offline=True)

    def pad(version, cc):
        layout = mxfp4_layout(resolve_rules(version), cc)
        return _expert_padding(spec, spec.quant, 1, layout)
    marlin = (2944 / 2880) * (3072 / 2880)
    assert abs(pad("0.20.0", (8, 0)) - marlin) < 1e-9
    assert abs(pad("0.11.0", (9, 0)) - marlin) < 1e-9
    assert abs(pad("0.20.0", (12, 0)) - marlin) < 1e-9
    assert abs(pad("0.20.0", (9, 0)) - (2880 / 2880) * (0.5 + 2 / 32) / (0.5 + 1 / 32)) < 1e-9
    assert abs(pad("0.26.0", (10, 0)) - (3072 / 2880) * (3072 / 2880)) < 1e-9
    assert abs(pad("0.27.0", (10, 0)) - (2944 / 2880) * (3072 / 2880)) < 1e-9


def test_mla_and_chunked_local_attention_by_release():
    """DeepSeek without MLA: full heads of qk_nope + qk_rope (192), padded to 256 only up to
    0.6 (config.py get_head_size); V1 has MLA from 0.8.0. Llama 4's chunked-local layers: full
    attention in V1 before 0.10.0 (no ChunkedLocalAttentionSpec), and again in 0.10.1-0.13
    where the hybrid manager is turned off for them unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1."""
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.sources.resolve import load_model_spec
    h100 = lookup_gpu("H100-80GB")
    ds = load_model_spec("deepseek-ai/DeepSeek-V2-Lite-Chat", offline=True)
    s = Settings(max_model_len=8192)

    def bpt(version, engine):
        return plan(ds, s, h100, vllm_version=version, engine=engine).kv.bytes_per_token
    heads = ds.num_attention_heads
    assert bpt("0.6.6", "v0") == heads * 2 * 256 * 2 * 27
    assert bpt("0.7.0", "v0") == bpt("0.7.0", "v1") == heads * 2 * 192 * 2 * 27
    assert bpt("0.7.3", "v1") == bpt("0.7.0", "v1") > bpt("0.8.0", "v1")
    scout = load_model_spec("meta-llama/Llama-4-Scout-17B-16E-Instruct", offline=True)
    tp4 = Settings(tensor_parallel_size=4, max_model_len=65536,
                   user_set=frozenset({"tensor_parallel_size", "max_model_len"}))

    def conc(version, env=None):
        return plan(scout, tp4, h100, vllm_version=version, env=env).kv.max_concurrency
    chunked = conc("0.14.0")
    assert conc("0.9.2") < chunked / 1.5 and conc("0.13.0") < chunked / 1.5
    assert conc("0.10.0") > conc("0.9.2")
    assert conc("0.13.0", {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "1"}) == chunked


def test_lora_slots_by_tensor_parallel_layer_kind_and_moe():
    """lora/layers: a column-parallel layer keeps its A over the full input and splits B, a
    row-parallel one splits A and keeps B whole; from 0.11.1 every routed expert of a MoE
    layer has its slots (fused_moe.py). Qwen3-8B, 4 slots of rank 64, bf16."""
    from vramguard.core.weights import lora_bytes
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("Qwen/Qwen3-8B", offline=True)
    h, q, kv, inter, n = 4096, 32 * 128, 2 * 8 * 128, 12288, 36

    def expect(tp):
        per_layer = 7 * h + (2 * q + kv + 3 * inter) / tp
        return int(4 * 64 * per_layer * n * 2)
    for tp in (1, 2, 8):
        s = Settings(enable_lora=True, max_loras=4, max_lora_rank=64, tensor_parallel_size=tp)
        assert lora_bytes(spec, s, 2) == expect(tp)
    moe = load_model_spec("Qwen/Qwen3-30B-A3B", offline=True)
    one = Settings(enable_lora=True)
    from vramguard.core.weights import LoraRules
    assert lora_bytes(moe, one, 2, LoraRules(moe=True)) > 20 * lora_bytes(moe, one, 2)


def test_lora_embedding_and_lm_head_wrappers():
    """Models whose class lists `embedding_modules` adapt the embedding and LM head too, on
    the whole vocabulary on every rank (lora/layers/vocal_parallel_embedding.py,
    logits_processor.py). Llama-3.1-8B (untied), 4 slots of rank 64, bf16: 0.12+ embedding
    A 128,256 x 64 + B 4,096 x 64, logits A 64 x 4,096 + B 128,256 x 64 per slot; up to 0.11.2
    the 256 extra-vocabulary rows too (and the logits' rows padded to 256); Qwen3 only from
    0.16; a tied model (Qwen3-4B) wraps its head as a second embedding from 0.11.1."""
    from vramguard.core.rules import resolve_rules
    from vramguard.core.weights import LoraRules, lora_bytes, lora_vocab_elems
    from vramguard.sources.resolve import load_model_spec

    def rules_of(version):
        r = resolve_rules(version)
        return LoraRules(r.lora_moe, r.lora_extra_vocab, r.lora_tied_double,
                         r.lora_embedding_archs)
    llama = llama31_8b()
    v, h = 128256, 4096
    assert lora_vocab_elems(llama, 64, rules_of("0.27.1")) == 64 * (v + h) * 2
    old = lora_vocab_elems(llama, 64, rules_of("0.10.1"))
    rows = -(-(v + 256) // 256) * 256
    assert old == 64 * (v + 256 + h) + 256 * h + 64 * (h + rows) + 256 * h
    s = Settings(enable_lora=True, max_loras=4, max_lora_rank=64)
    with_vocab = lora_bytes(llama, s, 2, rules_of("0.27.1"))
    assert with_vocab - lora_bytes(llama, s, 2) == 4 * 64 * (v + h) * 2 * 2
    qwen3 = load_model_spec("Qwen/Qwen3-8B", offline=True)
    assert lora_vocab_elems(qwen3, 16, rules_of("0.15.0")) == 0
    assert lora_vocab_elems(qwen3, 16, rules_of("0.16.0")) > 0
    tied = load_model_spec("Qwen/Qwen3-4B", offline=True)
    assert tied.tie_word_embeddings
    e = 16 * (tied.vocab_size + tied.hidden_size)
    assert lora_vocab_elems(tied, 16, rules_of("0.27.1")) == 3 * e


def test_some_model_classes_hold_embedding_and_head_on_every_pp_stage():
    """models/*.py: Qwen3-MoE, gpt-oss, Gemma 2, Mixtral, ... build their embedding and LM
    head with no first/last-rank guard, so every stage holds them; Llama-style classes hold
    them on the first / last stage only."""
    from vramguard.sources.resolve import load_model_spec
    moe = load_model_spec("Qwen/Qwen3-30B-A3B", offline=True)
    pp2 = Settings(pipeline_parallel_size=2)
    first, last = weights_per_rank(moe, pp2)
    vocab_bytes = -(-moe.vocab_size // 64) * 64 * moe.hidden_size * 2
    one = weights_per_rank(moe, Settings())[0].derived_bytes
    extra = first.derived_bytes + last.derived_bytes - one      # one more embedding and head
    assert abs(extra - 2 * vocab_bytes) < 0.001 * one
    llama = llama31_8b()
    a, b = weights_per_rank(llama, pp2)
    assert abs(a.derived_bytes + b.derived_bytes
               - weights_per_rank(llama, Settings())[0].derived_bytes) < 1e6


def test_expert_parallel_places_whole_experts_and_pads_whole_experts():
    """fused_moe/layer.py: with expert parallelism the first E % EP ranks hold ceil(E / EP)
    experts (the heaviest rank's share is planned); without it every rank holds a 1 / (TP x
    DP) slice of each. MXFP4 pads the per-rank intermediate size (whole under EP: 2,880 ->
    3,072; 2,880 / 8 = 360 -> 512 without)."""
    from dataclasses import replace
    from vramguard.core.weights import _expert_padding, effective_quant, moe_partition
    from vramguard.sources.resolve import load_model_spec
    mix = load_model_spec("mistralai/Mixtral-8x7B-Instruct-v0.1", offline=True)
    experts = sum(l.params.experts for l in mix.layers)
    ep = Settings(tensor_parallel_size=2, data_parallel_size=3, enable_expert_parallel=True)
    no_ep = replace(ep, enable_expert_parallel=False)
    w_ep, w_tp = weights_per_rank(mix, ep)[0].params, weights_per_rank(mix, no_ep)[0].params
    assert w_ep - w_tp == experts * 2 // 8 - experts // 6
    gpt = load_model_spec("openai/gpt-oss-120b", offline=True)
    q = effective_quant(gpt, Settings())
    assert moe_partition(Settings(tensor_parallel_size=8, enable_expert_parallel=True)) == 1
    assert _expert_padding(gpt, q, 1, (128, 256, 1)) == 2944 / 2880 * 3072 / 2880
    assert _expert_padding(gpt, q, 8, (128, 256, 1)) == 384 / 360 * 3072 / 2880


def test_fused_moe_workspace_holds_one_chunk_of_tokens():
    """VLLM_FUSED_MOE_CHUNK_SIZE: the fused-MoE kernel sizes its workspace for at most 16,384
    tokens in 0.12-0.17 (32,768 in 0.6-0.11); from 0.18 for every batched token."""
    from vramguard.sources.resolve import load_model_spec
    moe = load_model_spec("Qwen/Qwen3-30B-A3B", offline=True)
    h100 = GpuSpec(name="H100", total_bytes=80 * GIB)

    def act(version, tokens):
        s = Settings(max_model_len=32768, max_num_batched_tokens=tokens, max_num_seqs=256,
                     user_set=frozenset({"max_num_batched_tokens", "max_num_seqs"}))
        return plan(moe, s, h100, vllm_version=version).tightest.activation.value_bytes
    m = moe.moe
    per_token = m.num_experts_per_tok * (3 * m.moe_intermediate_size + moe.hidden_size) * 2 * 1.6
    dense = 2048 * 30.0                      # hidden x bytes per token (v1)
    grow14 = act("0.14.0", 65536) - act("0.14.0", 32768)
    grow18 = act("0.18.0", 65536) - act("0.18.0", 32768)
    assert abs(grow14 - 32768 * dense) < 1e4
    assert abs(grow18 - 32768 * (dense + per_token)) < 1e4
