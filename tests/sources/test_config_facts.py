"""Architecture facts spec_from_config derives: KV kinds, MoE, MLA, hybrids, quant, lengths."""
import pytest

from vramguard.core.model import CHUNKED, FULL, MAMBA, MLA, NONE, SLIDING
from vramguard.core.provenance import Source
from vramguard.errors import SourceError
from vramguard.sources.config import spec_from_config


def spec(config, folder):
    return spec_from_config(config(folder), name=folder)


# ---- KV bytes per token (bf16, TP=1), checked against vLLM logs in the corpus -------------
@pytest.mark.parametrize("folder,kv", [
    ("meta-llama__Llama-3.1-8B-Instruct", 131072),
    ("Qwen__Qwen2.5-7B-Instruct", 57344),
    ("deepseek-ai__DeepSeek-V3", 70272),                  # 61 x (512 + 64) x 2
    ("moonshotai__Kimi-VL-A3B-Instruct", 31104),           # 27 x 576 x 2
    ("Qwen__Qwen3-Next-80B-A3B-Instruct", 12 * 2048),      # 12 full-attention layers
    ("google__gemma-4-E2B-it", 18432),                     # 15 cache-owning layers
    ("google__gemma-3-27b-it", 62 * 16 * 128 * 4),
    ("openai__gpt-oss-120b", 36 * 8 * 64 * 4),
    ("zai-org__GLM-5.3", 78 * 576 * 2 + 21 * 132),         # + DSA indexer (fp8) on 21 layers
])
def test_kv_bytes_per_token(config, folder, kv):
    assert spec(config, folder).kv_bytes_per_token() == kv


def test_glm5_dsa_kv_matches_vllm_log(config):
    # corpus case (vLLM 0.30, fp8 KV): 649,152 tokens in 28.84 GiB = 47,700 B/token
    s = spec(config, "zai-org__GLM-5.3")
    assert s.kv_bytes_per_token(dtype_bytes=1) == 47700
    assert sum(l.attention.indexer_bytes_per_token == 132 for l in s.layers) == 21


def test_mla_v_head_dim_defaults_to_transformers_default(config):
    # The GLM-5.3 configs leave v_head_dim out; transformers' GlmMoeDsaConfig (what vLLM
    # loads) defaults it to 256, which zai-org/GLM-5.2's config (same attention) states.
    from vramguard.sources.resolve import load_model_spec
    stated = load_model_spec("zai-org/GLM-5.2", offline=True)
    for folder in ("nvidia__GLM-5.3-NVFP4", "zai-org__GLM-5.3"):
        assert "v_head_dim" not in config(folder)
        s = spec(config, folder)
        assert s.layers[0].params.attn_o == s.num_attention_heads * 256 * s.hidden_size
        assert s.layers[0].params.attn_o == stated.layers[0].params.attn_o
        assert s.layers[0].params.attn_kv == stated.layers[0].params.attn_kv


def test_kv_tp_replication(config):
    s = spec(config, "meta-llama__Llama-3.1-8B-Instruct")
    assert s.kv_bytes_per_token(tp=2) == 65536
    assert s.kv_bytes_per_token(tp=16) == 16384
    assert s.kv_bytes_per_token(dtype_bytes=1) == 65536


def test_gpt_oss_alternates_sliding_and_full(config):
    s = spec(config, "openai__gpt-oss-120b")
    kinds = [l.attention.kind for l in s.layers]
    assert kinds[:4] == [SLIDING, FULL, SLIDING, FULL]
    assert s.layers[0].attention.sliding_window_tokens == 128
    assert s.layers[1].attention.sliding_window_tokens is None
    assert s.moe.num_experts == 128 and s.moe.num_experts_per_tok == 4


def test_gemma2_and_gemma3_patterns(config):
    g2 = spec(config, "google__gemma-2-9b-it")
    assert [l.attention.kind for l in g2.layers[:2]] == [SLIDING, FULL]
    g3 = spec(config, "google__gemma-3-27b-it")
    kinds = [l.attention.kind for l in g3.layers]
    assert kinds[:6] == [SLIDING] * 5 + [FULL] and kinds.count(FULL) == 10
    assert g3.layers[0].attention.sliding_window_tokens == 1024
    assert g3.vocab_size == 262208                          # Gemma3TextConfig default
    assert g3.provenance["num_layers"] == Source.CONFIG


def test_gemma4_shared_kv_and_global_heads(config):
    s = spec(config, "google__gemma-4-E2B-it")
    assert sum(l.attention.kind == NONE for l in s.layers) == 20
    full = [l.attention for l in s.layers if l.attention.kind == FULL]
    assert full[0].head_dim == 512 and full[0].num_kv_heads == 1


def test_llama4_chunked_and_nope_layers(config):
    s = spec(config, "meta-llama__Llama-4-Scout-17B-16E-Instruct")
    kinds = [l.attention.kind for l in s.layers]
    assert kinds[:4] == [CHUNKED, CHUNKED, CHUNKED, FULL]
    assert s.layers[0].attention.chunk_size_tokens == 8192
    assert s.moe.num_experts == 16 and s.moe.num_shared_experts == 1
    assert s.vision is not None


def test_qwen2_use_sliding_window_false_is_full(config):
    s = spec(config, "Qwen__Qwen2.5-7B-Instruct")
    assert s.attention_kinds() == {FULL}


def test_deepseek_mla_and_moe(config):
    s = spec(config, "deepseek-ai__DeepSeek-V3")
    assert s.uses_mla and s.attention_kinds() == {MLA}
    a = s.layers[0].attention
    assert (a.mla_kv_lora_rank, a.mla_rope_head_dim) == (512, 64)
    assert s.kv_bytes_per_token(tp=8) == s.kv_bytes_per_token(tp=1)
    assert s.moe.first_dense_layers == 3 and s.moe.num_shared_experts == 1
    assert s.layers[0].params.experts == 0 and s.layers[3].params.experts > 0
    p = s.layers[3].params
    assert p.attn_replicated == 7168 * 1536 + 7168 * 576   # q_a + kv_a (replicated)
    assert p.router == 7168 * 256 + 256                    # gate + e_score_correction_bias


def test_qwen3_next_hybrid_gdn_state(config):
    s = spec(config, "Qwen__Qwen3-Next-80B-A3B-Instruct")
    assert s.is_hybrid
    kinds = [l.attention.kind for l in s.layers]
    assert kinds[:4] == [MAMBA, MAMBA, MAMBA, FULL]
    state = s.layers[0].attention.mamba
    assert state.page_bytes(tp=1, conv_bytes=2) == 49152 + 1048576    # reference §4.2


def test_qwen3_5_nested_text_config_and_ssm_dtype(config):
    s = spec(config, "Qwen__Qwen3.8-27B-FP8")
    assert s.model_type == "qwen3_5" and s.num_layers == 64 and s.hidden_size == 5120
    assert s.layers[0].attention.mamba.ssm_dtype == "float32"
    assert s.quant.method == "fp8"
    assert s.quant.linear_bytes_per_param == 1 + 4 / (128 * 128)      # + fp32 block scales
    assert s.rope_scaling["rope_type"] == "default"            # from rope_parameters
    assert any("text_config" in n for n in s.notes)


def test_bge_m3_is_encoder_only(config):
    s = spec(config, "BAAI__bge-m3")
    assert s.is_encoder_only and s.kv_bytes_per_token() == 0
    assert s.torch_dtype == "float32"


# ---- quantization -----------------------------------------------------------------------
def test_quant_specs(config):
    oss = spec(config, "openai__gpt-oss-120b").quant
    assert oss.method == "mxfp4" and oss.expert_bytes_per_param == pytest.approx(4.25 / 8)
    assert oss.linear_bytes_per_param == 2.0
    ct = spec(config, "RedHatAI__Llama-3.3-70B-Instruct-FP8-dynamic").quant
    assert ct.method == "compressed-tensors" and ct.linear_bytes_per_param == 1.0
    assert "lm_head" in ct.unquantized_modules
    w4 = spec(config, "RedHatAI__Qwen3.8-27B-INT4").quant
    assert w4.bits == 4 and w4.linear_bytes_per_param == pytest.approx(0.5 + 2 / 128)
    nv = spec(config, "nvidia__GLM-5.3-NVFP4").quant
    assert nv.method == "modelopt_mixed" and nv.expert_bytes_per_param == pytest.approx(0.5625)
    mm = spec(config, "MiniMaxAI__MiniMax-M2.7").quant
    assert "gate" in mm.unquantized_modules


@pytest.mark.parametrize("qc,method,per", [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "gptq", 0.5 + 2 / 128 + 0.5 / 128),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, "awq",
     0.5 + 2 / 128 + 0.5 / 128),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "gptq", 1.0),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bitsandbytes", 1.0),
    ({"quant_method": "auto-round", "bits": 4, "group_size": 128}, "auto_round",
     0.5 + 2 / 128 + 0.5 / 128),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"},
     "modelopt_fp4", 0.5625),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 8, "type": "int", "strategy": "channel"}}}}, "compressed-tensors", 1.0),
])
def test_quant_methods(config, qc, method, per):
    cfg = dict(config("meta-llama__Llama-3.1-8B-Instruct"), quantization_config=qc)
    q = spec_from_config(cfg, name="x").quant
    assert q.method == method and q.linear_bytes_per_param == pytest.approx(per)


def test_modelopt_kv_scheme_and_hf_quant_layout(config):
    qc = {"producer": {"name": "modelopt"},
          "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
    cfg = dict(config("meta-llama__Llama-3.1-8B-Instruct"), quantization_config=qc)
    q = spec_from_config(cfg, name="x").quant
    assert q.method == "modelopt" and q.kv_cache_scheme == "fp8"


# ---- max length keys, provenance, notes ---------------------------------------------------
def test_max_len_keys(config):
    q = spec(config, "Qwen__Qwen-7B")
    assert q.max_len_keys == {"max_position_embeddings": 32768, "seq_length": 8192}
    g = spec(config, "THUDM__glm-4-9b-chat")
    assert g.max_len_keys["seq_length"] == 131072
    l = spec(config, "meta-llama__Llama-3.1-8B-Instruct")
    assert l.rope_scaling["rope_type"] == "llama3"


def test_provenance(config):
    s = spec(config, "meta-llama__Llama-3.1-8B-Instruct")
    assert s.provenance["hidden_size"] == Source.CONFIG
    assert s.provenance["head_dim"] == Source.DERIVED             # no head_dim key
    assert s.provenance["num_kv_heads"] == Source.CONFIG
    assert s.provenance["layers"] == Source.DERIVED
    cat = spec_from_config(config("meta-llama__Llama-3.1-8B-Instruct"), name="x",
                           origin=Source.CATALOG)
    assert cat.provenance["hidden_size"] == Source.CATALOG


def test_qwen_remote_code_halves_intermediate(config):
    s = spec(config, "Qwen__Qwen-7B")
    assert s.intermediate_size == 11008 and s.head_dim == 128
    assert s.provenance["intermediate_size"] == Source.DERIVED
    assert s.torch_dtype == "float32" and any("torch_dtype" in n for n in s.notes)


def test_unknown_architecture_with_standard_fields_is_llama_like():
    cfg = {"model_type": "brand_new", "hidden_size": 1024, "num_hidden_layers": 4,
           "num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 4096}
    s = spec_from_config(cfg, name="x")
    assert any("unknown architecture" in n for n in s.notes)
    assert s.num_params() == 4 * (4 * 1024 * 1024 + 3 * 1024 * 4096 + 2048) + 1000 * 1024 * 2 + 1024


def test_unknown_architecture_missing_fields_names_them():
    with pytest.raises(SourceError, match="intermediate_size"):
        spec_from_config({"model_type": "brand_new", "hidden_size": 8, "num_hidden_layers": 1,
                          "num_attention_heads": 1, "vocab_size": 10}, name="x")


@pytest.mark.parametrize("change", [
    {"num_hidden_layers": 0}, {"num_hidden_layers": 10 ** 9}, {"hidden_size": -4096},
    {"hidden_size": "4096x"}, {"num_attention_heads": True}, {"vocab_size": 1.5},
    {"num_key_value_heads": 64}, {"layer_types": "full"}, {"rope_scaling": [1, 2]},
    {"quantization_config": "fp8"}, {"text_config": 3}, {"hidden_size": None},
    {"num_key_value_heads": 5},                        # 32 query heads: not whole groups
    {"quantization_config": {"quant_method": "gptq", "bits": 0, "group_size": 128}},
    {"quantization_config": {"quant_method": "awq", "w_bit": "x", "q_group_size": 128}},
    {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}},
    {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 2.5}},
])
def test_bad_values_are_source_errors(config, change):
    cfg = dict(config("meta-llama__Llama-3.1-8B-Instruct"), **change)
    with pytest.raises(SourceError) as info:
        spec_from_config(cfg, name="x", source_ref="/m/config.json")
    assert info.value.where == "/m/config.json" and info.value.fix


def test_not_a_dict():
    with pytest.raises(SourceError):
        spec_from_config([1, 2], name="x")


def test_experts_only_int4_keeps_attention_and_dense_16bit(config):
    q = spec(config, "moonshotai__Kimi-K2.5").quant
    assert q.expert_bytes_per_param == pytest.approx(0.5 + 2 / 32)     # int4 g32, symmetric
    assert q.linear_bytes_per_param == 2.0 and q.attention_bytes_per_param == 2.0


def test_fp8_block_scales_and_gpt_oss_attention_skip(config):
    q = spec(config, "deepseek-ai__DeepSeek-V3").quant
    assert q.linear_bytes_per_param == pytest.approx(1 + 4 / 128 ** 2)
    assert q.attention_bytes_per_param is None


def test_modelopt_mixed_precision_layer_map(config):
    qc = {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.3.mlp.experts.0.down_proj": {"quant_algo": "NVFP4", "group_size": 16},
        "model.layers.3.self_attn.q_b_proj": {"quant_algo": "FP8"},
        "model.layers.0.mlp.down_proj": {"quant_algo": "FP8"}}}}
    cfg = dict(config("zai-org__GLM-5.3"), quantization_config=qc)
    q = spec_from_config(cfg, name="g").quant
    assert q.method == "modelopt_mixed" and q.expert_bytes_per_param == pytest.approx(0.5625)
    assert q.attention_bytes_per_param == 1.0 and q.linear_bytes_per_param == 1.0


def test_compressed_tensors_groups_per_component(config):
    qc = {"quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": {
        "experts": {"targets": ["re:.*mlp.experts.*"], "weights": {
            "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}},
        "rest": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                    "strategy": "channel"}}}}
    cfg = dict(config("Qwen__Qwen3-30B-A3B"), quantization_config=qc)
    q = spec_from_config(cfg, name="q").quant
    assert q.linear_bytes_per_param == 1.0
    assert q.expert_bytes_per_param == pytest.approx(0.5 + 2 / 128)


def test_more_experts_per_token_than_experts_is_a_source_error(config):
    cfg = dict(config("Qwen__Qwen3-30B-A3B"), num_experts_per_tok=200)
    with pytest.raises(SourceError, match="num_experts_per_tok 200 exceeds the 128 experts"):
        spec_from_config(cfg, name="x")


@pytest.mark.parametrize("declared", ["int8", "float8_e4m3fn", "float128"])
def test_a_non_float_torch_dtype_runs_in_16_bit_with_a_note(config, declared):
    # vLLM's `_resolve_auto_dtype`: a dtype the platform does not support falls back to the
    # preferred 16-bit one; the KV cache and activations are 2 bytes, not the declared size.
    from vramguard.core.settings import Settings
    from vramguard.core.weights import runtime_dtype_bytes
    cfg = dict(config("Qwen__Qwen2.5-7B-Instruct"), torch_dtype=declared)
    s = spec_from_config(cfg, name="x")
    assert runtime_dtype_bytes(Settings()) == 2
    assert any(f"torch_dtype '{declared}', not a dtype vLLM runs" in n for n in s.notes)


@pytest.mark.parametrize("extra, want", [
    ({"vision_config": {"hidden_size": 1152, "num_hidden_layers": 27}}, ("image",)),
    ({"vision_config": {"hidden_size": 1280, "depth": 32}, "video_token_id": 151656},
     ("image", "video")),
    ({"vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
      "audio_config": {"hidden_size": 1536, "num_hidden_layers": 12}}, ("image", "audio")),
])
def test_encoder_modalities_from_the_config(extra, want):
    """What --limit-mm-per-prompt counts: image with a vision tower, video where the config
    names a video token, audio with an audio tower."""
    cfg = {"architectures": ["X"], "model_type": "x", "hidden_size": 2048,
           "num_attention_heads": 16, "num_key_value_heads": 8, "num_hidden_layers": 4,
           "intermediate_size": 8192, "vocab_size": 32000, **extra}
    assert spec_from_config(cfg, name="x").vision.modalities == want


def _ct(weights, acts=None, targets=("Linear",), **extra):
    return {"quant_method": "compressed-tensors", "config_groups": {"g": {
        "targets": list(targets), "weights": weights, "input_activations": acts}}, **extra}


FP8_W = {"num_bits": 8, "type": "float", "strategy": "channel"}
FP4_W = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
INT4_W = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}
INT8_W = {"num_bits": 8, "type": "int", "strategy": "channel"}


@pytest.mark.parametrize("qc,schemes", [
    (_ct(FP8_W, {"num_bits": 8, "type": "float", "dynamic": True}), ("W8A8-FP8",)),
    (_ct(FP8_W), ("W8A16-FP8",)),
    (_ct(INT8_W, {"num_bits": 8, "type": "int", "dynamic": True}), ("W8A8-INT8",)),
    (_ct(INT4_W), ("WNA16",)),
    (_ct(INT8_W), ("WNA16",)),
    (_ct(FP4_W, {"num_bits": 4, "type": "float", "strategy": "tensor_group"}), ("W4A4-FP4",)),
    (_ct(FP4_W), ("W4A16-FP4",)),
    (_ct(INT4_W, {"num_bits": 8, "type": "float"}), ()),          # W4A8: not checked
    (_ct(INT4_W, targets=("re:.*mlp.experts.*",)), ()),           # experts: the MoE method
    (_ct(INT4_W, ignore=["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                         "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]), ()),   # experts only
    (_ct(INT4_W, ignore=["lm_head", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]),
     ("WNA16",)),                                                # attention still quantized
])
def test_compressed_tensors_linear_schemes(config, qc, schemes):
    """The scheme vLLM picks for a config group that quantizes Linear layers (the GPU checks
    of core/quant_schemes.py read them)."""
    cfg = dict(config("Qwen__Qwen3-30B-A3B"), quantization_config=qc)
    assert spec_from_config(cfg, name="q").quant.linear_schemes == schemes


def test_modelopt_exclude_list_and_shared_expert_gate():
    """ModelOpt's exclude list keeps the matching layers 16-bit (`is_layer_excluded`, with
    wildcards); a skipped `mlp.shared_expert_gate` is not the shared expert."""
    from vramguard.sources.quant import NVFP4, quant_from_config
    q = quant_from_config({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                           "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]},
                          where="x")
    assert q.attention_bytes_per_param == 2.0 and q.linear_bytes_per_param == NVFP4
    fp8 = quant_from_config({"quant_method": "fp8", "weight_block_size": [128, 128],
                             "modules_to_not_convert": ["model.layers.0.mlp.shared_expert_gate",
                                                        "lm_head"]}, where="x")
    assert fp8.linear_bytes_per_param < 1.1 and fp8.expert_bytes_per_param is None
    dense = quant_from_config({"quant_method": "fp8", "weight_block_size": [128, 128],
                               "modules_to_not_convert": ["model.layers.0.mlp.shared_expert"]},
                              where="x")
    assert dense.linear_bytes_per_param == 2.0


def test_marlin_compatibility_read_as_vllm_reads_it():
    """gptq_marlin / awq_marlin `is_*_marlin_compatible`: the keys under vLLM's names, GPTQ
    4 / 8-bit symmetric with desc_act given, AWQ 4-bit with zero points, groups -1/32/64/128."""
    from vramguard.sources.quant import quant_from_config
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}
    assert quant_from_config(gptq, where="t").marlin_compatible is True
    assert quant_from_config({**gptq, "sym": False}, where="t").marlin_compatible is False
    assert quant_from_config({**gptq, "bits": 3}, where="t").marlin_compatible is False
    no_desc = {k: v for k, v in gptq.items() if k != "desc_act"}
    assert quant_from_config(no_desc, where="t").marlin_compatible is False
    marlin_format = {"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"}
    assert quant_from_config(marlin_format, where="t").marlin_compatible is True
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    assert quant_from_config(awq, where="t").marlin_compatible is True
    assert quant_from_config({**awq, "group_size": 256}, where="t").marlin_compatible is False
    assert quant_from_config({**awq, "bits": 8}, where="t").marlin_compatible is None  # 0.5.x
    old = {"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": True}
    assert quant_from_config(old, where="t").marlin_compatible is False
    fp8 = quant_from_config({"quant_method": "fp8", "activation_scheme": "dynamic"}, where="t")
    assert fp8.marlin_compatible is None
