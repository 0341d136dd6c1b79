"""Architectures found mis-read by a sweep of recent models' real configs (tenth session):
Hunyuan's per-layer MoE lists and cross-layer attention, Falcon-H1's parallel hybrid layers,
LFM2's short-convolution layers. Counts are computed by hand from the configs."""
import pytest

from vramguard.core.model import FULL, NONE
from vramguard.errors import SourceError
from vramguard.sources.config import spec_from_config

L = 32
# tencent/Hunyuan-A13B-Instruct config.json (the fields vLLM's hunyuan_v1.py reads)
HUNYUAN_A13B = {
    "architectures": ["HunYuanMoEV1ForCausalLM"], "model_type": "hunyuan_v1_moe",
    "attention_bias": False, "attention_head_dim": 128, "hidden_size": 4096,
    "intermediate_size": 3072, "moe_intermediate_size": [3072] * L, "moe_topk": [8] * L,
    "num_attention_heads": 32, "num_experts": 64, "num_hidden_layers": L,
    "num_key_value_heads": 8, "num_shared_expert": [1] * L, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": True, "use_cla": False, "use_mixed_mlp_moe": True,
    "use_qk_norm": True, "vocab_size": 128167, "torch_dtype": "bfloat16",
    "max_position_embeddings": 32768}


def test_hunyuan_a13b_per_layer_lists_and_shared_mlp():
    s = spec_from_config(dict(HUNYUAN_A13B), name="tencent/Hunyuan-A13B-Instruct")
    h, i, e = 4096, 3072, 64
    attn = h * 32 * 128 + 2 * h * 8 * 128 + 32 * 128 * h
    # 64 routed experts + one shared MLP of intermediate_size x num_shared_expert + router
    ffn = e * 3 * h * i + 3 * h * i + e * h
    norms = 2 * h + 2 * 128                       # input/post norms + q/k norms (head_dim)
    total = 128167 * h + L * (attn + ffn + norms) + h       # tied LM head
    assert s.num_params() == total == 80_393_183_232      # the model card: 80B total
    active = 128167 * h + L * (attn + 8 * 3 * h * i + 3 * h * i + e * h + norms) + h
    assert s.num_active_params() == active                # 13B active (12.7B by this count)
    assert s.kv_bytes_per_token() == L * 2 * 8 * 128 * 2


def test_hunyuan_cross_layer_attention_halves_the_cache():
    cfg = dict(HUNYUAN_A13B, use_cla=True, cla_share_factor=2)
    s = spec_from_config(cfg, name="cla")
    kinds = [l.attention.kind for l in s.layers]
    assert kinds[:4] == [FULL, NONE, FULL, NONE]
    assert s.kv_bytes_per_token() == L // 2 * 2 * 8 * 128 * 2
    assert s.layers[1].params.attn_kv == 0 and s.layers[0].params.attn_kv == 2 * 4096 * 8 * 128


def test_hunyuan_per_layer_values_that_differ_are_refused():
    topk = [8] * L
    topk[3] = 2
    with pytest.raises(SourceError, match="moe_topk differs between layers"):
        spec_from_config(dict(HUNYUAN_A13B, moe_topk=topk), name="x")


# tiiuae/Falcon-H1-7B-Instruct (the fields vLLM's falcon_h1.py reads; transformers' defaults
# for mamba_conv_bias=True, mamba_proj_bias=False, mamba_rms_norm=False)
FALCON_H1_7B = {
    "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 3072,
    "num_hidden_layers": 44, "num_attention_heads": 12, "num_key_value_heads": 2,
    "head_dim": 128, "intermediate_size": 12288, "vocab_size": 130048,
    "tie_word_embeddings": False, "mamba_d_state": 256, "mamba_n_groups": 1,
    "mamba_n_heads": 24, "mamba_d_head": 128, "mamba_d_ssm": 3072, "mamba_expand": 2,
    "mamba_d_conv": 4, "mamba_chunk_size": 128, "max_position_embeddings": 262144,
    "torch_dtype": "bfloat16"}


def test_falcon_h1_parallel_hybrid_by_hand():
    s = spec_from_config(dict(FALCON_H1_7B), name="tiiuae/Falcon-H1-7B-Instruct")
    h, n, heads, hd, st = 3072, 44, 24, 128, 256
    inner, conv_dim = heads * hd, heads * hd + 2 * st
    mixer = h * (inner + conv_dim + heads) + conv_dim * 4 + conv_dim + 3 * heads + inner * h
    attn = h * 12 * 128 + 2 * h * 2 * 128 + 12 * 128 * h
    layer = attn + mixer + 3 * h * 12288 + 2 * h
    assert s.num_params() == 2 * 130048 * h + n * layer + h
    assert round(s.num_params() / 1e9, 2) == 7.59        # MLX 4-bit weights: 4.27 GB
    a = s.layers[0].attention
    assert a.kind == FULL and a.parallel_mamba and s.is_hybrid
    assert s.kv_bytes_per_token() == n * 2 * 2 * 128 * 2
    assert a.mamba.conv_shape == (conv_dim, 3) and a.mamba.ssm_shape == (heads, hd, st)


def test_falcon_h1_plan_has_both_caches_per_layer():
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.core.planner import plan
    from vramguard.core.settings import Settings
    s = spec_from_config(dict(FALCON_H1_7B), name="falcon")
    p = plan(s, Settings(max_model_len=32768), lookup_gpu("L40S"), vllm_version="0.33.0")
    # attention: 2 heads x 128 x 2 (K, V) x 2 B = 1,024 B/token per layer; Mamba state per
    # layer: (3584 x 3 + 24 x 128 x 256) x 2 B = 1,594,368 B -> block 16 x cdiv(1594368,
    # 16 x 1024) = 1,568 tokens; 44 attention + 44 Mamba layers: two groups of 44
    assert p.kv.block_size == 1568
    assert p.kv.page_size_bytes == 44 * 1568 * 1024
    # a request: cdiv(32768, 1568) = 21 attention blocks + the Mamba group's state block and,
    # with 0.33's prefix caching on hybrids ("align"), one more, and (0.32+) Mamba2's
    # prefill-checkpoint block
    assert p.kv.blocks_per_request == 21 + 3
    assert abs(p.kv.max_concurrency - p.kv.num_blocks / 24) < 1e-9


def test_falcon_h1_auto_head_dim():
    cfg = dict(FALCON_H1_7B, mamba_d_head="auto")
    assert spec_from_config(cfg, name="x").layers[0].attention.mamba.ssm_shape == (24, 128, 256)


# LiquidAI/LFM2-1.2B config.json
LFM2_12B = {
    "architectures": ["Lfm2ForCausalLM"], "block_auto_adjust_ff_dim": True, "block_dim": 2048,
    "block_ff_dim": 12288, "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256,
    "conv_L_cache": 3, "conv_bias": False, "conv_dim": 2048, "conv_dim_out": 2048,
    "full_attn_idxs": [2, 5, 8, 10, 12, 14], "hidden_size": 2048,
    "max_position_embeddings": 128000, "model_type": "lfm2", "norm_eps": 1e-05,
    "num_attention_heads": 32, "num_heads": 32, "num_hidden_layers": 16,
    "num_key_value_heads": 8, "rope_theta": 1000000.0, "torch_dtype": "bfloat16",
    "vocab_size": 65536}


def test_lfm2_short_conv_layers_by_hand():
    s = spec_from_config(dict(LFM2_12B), name="LiquidAI/LFM2-1.2B")
    h, d = 2048, 64
    ff = 8192                         # int(2 x 12288 / 3) = 8192, x 1.0, a multiple of 256
    mlp = 3 * h * ff
    attn = h * 32 * d + 2 * h * 8 * d + 32 * d * h + 2 * h + 2 * d
    conv = h * 3 + 3 * h * h + h * h + 2 * h
    assert s.num_params() == 65536 * h + 6 * (attn + mlp) + 10 * (conv + mlp) + h
    assert s.num_params() == 1_170_340_608            # tied embeddings (Lfm2Config default)
    kinds = [l.attention.kind for l in s.layers]
    assert kinds.count(FULL) == 6 and kinds[2] == FULL and s.is_hybrid
    assert s.kv_bytes_per_token() == 6 * 2 * 8 * d * 2
    st = s.layers[0].attention.mamba
    assert st.kind == "short_conv" and st.conv_shape == (2048, 2) and st.ssm_shape == ()


# meituan-longcat/LongCat-Flash-Chat config.json (the published one, whole)
LONGCAT_FLASH = {
    "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash",
    "attention_method": "MLA", "vocab_size": 131072, "hidden_size": 6144,
    "ffn_hidden_size": 12288, "expert_ffn_hidden_size": 2048, "num_layers": 28,
    "num_attention_heads": 64, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 512, "moe_topk": 12,
    "zero_expert_num": 256, "zero_expert_type": "identity", "routed_scaling_factor": 6.0,
    "max_position_embeddings": 131072, "rope_theta": 10000000.0, "rms_norm_eps": 1e-05,
    "mla_scale_q_lora": True, "mla_scale_kv_lora": True, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16"}


def test_longcat_flash_two_attentions_two_mlps_and_a_shortcut_moe():
    """vLLM longcat_flash.py: per decoder layer 2 x DeepseekV2MLAAttention, 2 x FlashMLP
    (ffn_hidden_size) and one MoE of 512 experts (expert_ffn_hidden_size) whose fp32 router
    also scores 256 weightless zero experts (+ an e_score_correction_bias)."""
    s = spec_from_config(dict(LONGCAT_FLASH), name="meituan-longcat/LongCat-Flash-Chat")
    h, n, v = 6144, 28, 131072
    mla = (h * (1536 + 512 + 64) + 1536 * 64 * 192 + 512 * 64 * (128 + 128) + 64 * 128 * h)
    norms = 2 * (2 * h + 1536 + 512)
    mlps = 2 * 3 * h * 12288
    experts = 512 * 3 * h * 2048
    router = h * 768 + 768
    total = 2 * v * h + n * (2 * mla + norms + mlps + experts + router) + h
    assert s.num_params() == total == 560_664_980_480     # "560B total" (model card)
    active = 2 * v * h + n * (2 * mla + norms + mlps + 12 * 3 * h * 2048 + router) + h
    assert s.num_active_params() == active                 # 31.3B + the input embedding
    # 56 MLA cache layers (self_attn.0 / .1 of each decoder layer) of 512 + 64 elements
    assert s.kv_bytes_per_token(dtype_bytes=2) == 56 * 576 * 2 == 64_512
    assert s.num_layers == 28 and s.layers[0].params.router_fp32


def test_longcat_flash_plan_counts_56_cache_layers_and_the_fp32_router():
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.core.planner import plan
    from vramguard.core.settings import Settings
    s = spec_from_config(dict(LONGCAT_FLASH), name="longcat")
    p = plan(s, Settings(tensor_parallel_size=8, max_model_len=32768,
                         user_set=frozenset({"tensor_parallel_size", "max_model_len"})),
             lookup_gpu("B200"), vllm_version="0.30.0")
    kv = p.to_dict()["kv_cache"]
    assert kv["bytes_per_token"] == 64_512                  # the latent is not split over TP
    g = p.to_dict()["per_gpu"]
    # the blocks: the pool over 56 layers' pages of block_size x 1,152 bytes
    assert kv["num_blocks"] == g["kv_cache_bytes"] // (56 * kv["block_size"] * 1152)
    assert p.to_dict()["startup"]["ok"]


def test_longcat_flash_router_weights_are_fp32():
    """The router is replicated on every rank in fp32: 28 x 4,719,360 x (4 - 2) bytes more
    than the same parameters at bf16."""
    from dataclasses import replace

    from vramguard.core.settings import Settings
    from vramguard.core.weights import weights_per_rank
    s = spec_from_config(dict(LONGCAT_FLASH), name="longcat")
    assert s.layers[0].params.router == 6144 * 768 + 768 == 4_719_360
    as_bf16 = replace(s, layers=tuple(replace(l, params=replace(l.params, router_fp32=False))
                                      for l in s.layers))
    st = Settings(tensor_parallel_size=8)
    fp32 = weights_per_rank(s, st)[0].derived_bytes
    bf16 = weights_per_rank(as_bf16, st)[0].derived_bytes
    assert fp32 - bf16 == 28 * 4_719_360 * 2


def test_longcat_flash_lite_ngram_is_refused_with_the_reason():
    cfg = dict(LONGCAT_FLASH, model_type="longcat_flash_ngram", num_hidden_layers=56)
    with pytest.raises(SourceError, match="n-gram embedding tables are not modelled"):
        spec_from_config(cfg, name="meituan-longcat/LongCat-Flash-Lite")


# google/gemma-3n-E4B-it: the text config (the fields vLLM's gemma3n.py reads) and the towers
_E4B_TYPES = ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(35)]
GEMMA3N_E4B = {
    "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
    "torch_dtype": "bfloat16",
    "text_config": {
        "model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35,
        "intermediate_size": [16384] * 35, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 256, "vocab_size": 262400, "vocab_size_per_layer_input": 262144,
        "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 15, "laurel_rank": 64,
        "altup_num_inputs": 4, "sliding_window": 512, "layer_types": _E4B_TYPES,
        "max_position_embeddings": 32768},
    "vision_config": {"architecture": "mobilenetv5_300m_enc", "hidden_size": 2048,
                      "model_type": "gemma3n_vision", "vocab_size": 128,
                      "vocab_offset": 262144},
    "audio_config": {"conf_num_hidden_layers": 12, "conf_num_attention_heads": 8,
                     "conf_conv_kernel_size": 5, "hidden_size": 1536,
                     "model_type": "gemma3n_audio", "vocab_size": 128}}


def _gemma3n_text_params(widths, shared=15, h=2048, n=35):
    """By module, as vLLM gemma3n.py (0.30+) / transformers build them."""
    ple, v, vp, a, r, d = 256, 262400, 262144, 4, 64, 256
    top = (v * h + vp * n * ple + h * n * ple + ple + 2 * (a - 1) * h * h + h)
    attn = h * 8 * d + 2 * h * 2 * d + 8 * d * h + 2 * d        # q, k+v, o, q/k norms
    shared_attn = h * 8 * d + 8 * d * h + d                     # q, o, q norm
    per = (4 * h + 2 * h * ple + h + 2 * h * r + h + a * a + a ** 3 + h * a + 2 * h)
    return top + sum(3 * h * w + per + (shared_attn if i >= n - shared else attn)
                     for i, w in enumerate(widths))


def test_gemma3n_text_altup_laurel_ple_and_shared_kv():
    text = dict(GEMMA3N_E4B["text_config"])
    s = spec_from_config({"architectures": ["Gemma3nForCausalLM"], **text}, name="e4b-text")
    assert s.num_params() == _gemma3n_text_params([16384] * 35) == 6_835_235_568
    assert s.tie_word_embeddings and s.lm_head_params == 0
    kinds = [l.attention.kind for l in s.layers]
    # layers 20-34 read layer 18's (sliding) or 19's (full) cache: none of their own
    assert kinds[20:] == [NONE] * 15 and kinds[:20].count(FULL) == 4
    assert s.kv_bytes_per_token(dtype_bytes=2) == 20 * 2 * 2 * 256 * 2 == 40_960


def test_gemma3n_per_layer_embeddings_split_over_tp():
    """vLLM gemma3n.py: the per-layer embedding table (VocabParallelEmbedding), its input
    projection and the AltUp (un)embed projections (ColumnParallelLinear) are split over TP;
    only the projection's norm is replicated."""
    from vramguard.core.settings import Settings
    from vramguard.core.weights import weights_per_rank
    text = dict(GEMMA3N_E4B["text_config"])
    s = spec_from_config({"architectures": ["Gemma3nForCausalLM"], **text}, name="e4b-text")
    h, n, ple = 2048, 35, 256
    split = 262144 * n * ple + h * n * ple + 2 * 3 * h * h
    assert s.extra_tp_params == split and s.extra_params == ple
    from dataclasses import replace
    replicated = replace(s, extra_params=ple + split, extra_tp_params=0)
    for tp in (1, 2, 4):
        st = Settings(tensor_parallel_size=tp)
        got = weights_per_rank(s, st)[0]
        rep = weights_per_rank(replicated, st)[0]
        assert rep.params - got.params == split - split // tp
        assert rep.derived_bytes - got.derived_bytes == 2 * (split - split // tp)


def test_gemma3n_per_layer_mlp_widths():
    """MatFormer slices give each layer its own width (vLLM: intermediate_size[layer_idx])."""
    widths = [8192] * 20 + [16384] * 15
    text = dict(GEMMA3N_E4B["text_config"], intermediate_size=widths)
    s = spec_from_config({"architectures": ["Gemma3nForCausalLM"], **text}, name="slice")
    assert s.num_params() == _gemma3n_text_params(widths)
    assert s.intermediate_size == 16384
    with pytest.raises(SourceError, match="lists 3 widths for 35 layers"):
        spec_from_config(dict(text, intermediate_size=[8192] * 3), name="short")


def test_gemma3n_towers_mobilenet_and_audio():
    s = spec_from_config(dict(GEMMA3N_E4B), name="google/gemma-3n-E4B-it")
    vision = 294_284_096 + 128 * 2048 + 2 * 2048 + 2048 * 2048      # published tower + embedder
    audio = 12 * 24 * 1536 ** 2 + 1536 * 2048          # conformer estimate (hand count 684.7M)
    assert s.vision.num_params == vision + audio
    assert s.vision.modalities == ("image", "audio")
    assert (s.vision.image_size // s.vision.patch_size) ** 2 == 256      # tokens per image
    assert abs(s.num_params() - 7_818_674_256) / 7_818_674_256 < 0.001   # "8B raw"
    assert s.token_buffer_elems == 35 * 256          # the per-layer-embedding input buffer


# DeepSeek-OCR's language model: a DeepSeek-V2 MoE config whose `kv_lora_rank` is null and
# `use_mla` false (the fields vLLM reads; qk/v head dims 0 = unused). vLLM's `is_deepseek_mla`
# needs a kv_lora_rank: this is plain multi-head attention, head_dim = hidden / heads.
DEEPSEEK_V2_NO_MLA = {
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "hidden_size": 1280, "intermediate_size": 6848, "moe_intermediate_size": 896,
    "num_attention_heads": 10, "num_key_value_heads": 10, "num_hidden_layers": 12,
    "first_k_dense_replace": 1, "n_routed_experts": 64, "n_shared_experts": 2,
    "num_experts_per_tok": 6, "kv_lora_rank": None, "q_lora_rank": None,
    "qk_nope_head_dim": 0, "qk_rope_head_dim": 0, "v_head_dim": 0, "use_mla": False,
    "vocab_size": 129280, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def test_a_deepseek_v2_config_without_kv_lora_rank_is_plain_attention():
    s = spec_from_config(dict(DEEPSEEK_V2_NO_MLA), name="deepseek-v2-no-mla")
    assert not s.uses_mla
    att = s.layers[0].attention
    assert (att.kind, att.num_kv_heads, att.head_dim) == (FULL, 10, 128)
    assert att.v_head_dim in (None, 128)
    # KV per token: 12 layers x 2 (K, V) x 10 heads x 128 x 2 bytes
    assert sum(2 * l.attention.num_kv_heads * l.attention.head_dim * 2 for l in s.layers) \
        == 12 * 2 * 10 * 128 * 2


def test_tiling_towers_worst_case_image():
    """vLLM's worst-case image for tiling towers: InternVL max_dynamic_patch tiles + a
    thumbnail of (448/14)² patches, 256 tokens each after the 0.5 pixel shuffle; Llama 4 16
    tiles + a global one of (336/14)² patches, 144 tokens each (its processor's 16 tiles)."""
    cfg = {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat",
           "max_dynamic_patch": 12, "use_thumbnail": True, "downsample_ratio": 0.5,
           "torch_dtype": "bfloat16",
           "vision_config": {"model_type": "intern_vit_6b", "image_size": 448, "patch_size": 14,
                             "hidden_size": 1024, "num_hidden_layers": 24,
                             "intermediate_size": 4096, "num_attention_heads": 16},
           "llm_config": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                          "hidden_size": 3584, "num_hidden_layers": 28,
                          "num_attention_heads": 28, "num_key_value_heads": 4,
                          "intermediate_size": 18944, "vocab_size": 151674,
                          "max_position_embeddings": 32768}}
    v = spec_from_config(cfg, name="internvl3-8b").vision
    assert (v.tokens_per_item, v.patches_per_item) == (13 * 256, 13 * 1024)
    from vramguard.sources.resolve import load_model_spec
    v4 = load_model_spec("meta-llama/Llama-4-Scout-17B-16E-Instruct", offline=True).vision
    assert (v4.tokens_per_item, v4.patches_per_item) == (17 * 144, 17 * 576)
