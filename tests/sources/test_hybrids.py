"""Mamba / linear-attention hybrids, pure Mamba, DeciLM, MTP, and catalog-era architectures."""
from vramguard.core.model import FULL, MAMBA, NONE, SLIDING
from vramguard.sources.config import spec_from_config

JAMBA = {"model_type": "jamba", "architectures": ["JambaForCausalLM"], "hidden_size": 4096,
         "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 65536, "num_experts": 16,
         "num_experts_per_tok": 2, "attn_layer_period": 8, "attn_layer_offset": 4,
         "expert_layer_period": 2, "expert_layer_offset": 1, "mamba_d_state": 16,
         "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256, "mamba_conv_bias": True,
         "mamba_proj_bias": False, "tie_word_embeddings": False,
         "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}


def test_jamba_matches_published_52b():
    s = spec_from_config(JAMBA, name="ai21labs/Jamba-v0.1")
    # HF dataset open-llm-leaderboard/requests,
    # ai21labs/Jamba-v0.1_eval_request_False_bfloat16_Original.json: "params": 51.57
    # (safetensors count; the AI21 card rounds to 52B). We compute 51.570B.
    assert abs(s.num_params() - 51.6e9) / 51.6e9 < 0.005
    assert abs(s.num_active_params() - 12e9) / 12e9 < 0.02         # "12B active"
    kinds = [l.attention.kind for l in s.layers]
    assert kinds.count(FULL) == 4 and kinds[4] == FULL and kinds[0] == MAMBA
    state = s.layers[0].attention.mamba
    assert state.kind == "mamba1" and state.conv_shape == (8192, 3) and state.ssm_shape == (8192, 16)
    assert s.kv_bytes_per_token() == 4 * 8 * 128 * 2 * 2
    assert s.is_hybrid


def test_granite4_hybrid_by_hand():
    h, heads, hd, st, g, k = 256, 8, 64, 16, 1, 4
    cfg = {"model_type": "granitemoehybrid", "hidden_size": h, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
           "intermediate_size": 128, "shared_intermediate_size": 512, "num_local_experts": 0,
           "layer_types": ["mamba", "mamba", "mamba", "attention"], "mamba_n_heads": heads,
           "mamba_d_head": hd, "mamba_d_state": st, "mamba_n_groups": g, "mamba_d_conv": k,
           "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    s = spec_from_config(cfg, name="granite4")
    inner, conv_dim = heads * hd, heads * hd + 2 * g * st
    mixer = h * (inner + conv_dim + heads) + conv_dim * k + conv_dim + 3 * heads + inner + inner * h
    assert s.layers[0].params.mixer == mixer
    assert s.layers[0].params.mlp == 3 * h * 512                   # shared MLP
    assert [l.attention.kind for l in s.layers] == [MAMBA] * 3 + [FULL]
    m = s.layers[0].attention.mamba
    assert m.kind == "mamba2" and m.conv_shape == (conv_dim, 3) and m.ssm_shape == (heads, hd, st)
    assert (m.groups, m.group_state, m.chunk_size) == (g, st, 0)
    assert s.lm_head_params == 0
    chunked = spec_from_config(dict(cfg, mamba_chunk_size=256), name="granite4")
    assert chunked.layers[0].attention.mamba.chunk_size == 256
    assert spec_from_config(dict(cfg, chunk_size=128), name="g").layers[0] \
        .attention.mamba.chunk_size == 128
    assert spec_from_config(JAMBA, name="j").layers[0].attention.mamba.chunk_size == 0


def test_nemotron_h_pattern_and_fp32_state(config):
    s = spec_from_config(config("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"), name="n")
    assert len(s.layers) == 52
    # HF safetensors total 31,577,937,344 (Hub API value as copied by third-party catalogues, e.g.
    # Fireworks paramCount); NVIDIA's card text says "30B parameters in total". We compute that.
    assert abs(s.num_params() - 31.6e9) / 31.6e9 < 0.005
    kinds = [l.attention.kind for l in s.layers]
    assert kinds[:3] == [MAMBA, NONE, MAMBA] and kinds.count(FULL) == 6
    assert s.layers[0].attention.mamba.ssm_dtype == "float32"


def test_nemotron_h_layers_block_type_list(config):
    s = spec_from_config(config("nvidia__Nemotron-H-56B-Base-8K"), name="n")
    # 56B is the model name (huggingface.co/nvidia/Nemotron-H-56B-Base-8K); we compute 56.32B
    # (published figure not verified against a fetched source)
    assert s.is_hybrid and abs(s.num_params() - 56e9) / 56e9 < 0.01


def test_falcon_mamba_is_attention_free(config):
    s = spec_from_config(config("tiiuae__falcon-mamba-7b"), name="f")
    assert s.attention_kinds() == {MAMBA} and s.kv_bytes_per_token() == 0
    # no exact count published; huggingface.co/tiiuae/falcon-mamba-7b/tree/main bf16 shards
    # 4.96 + 4.99 + 4.60 GB = 14.55 GB -> 7.27B params (derived). We compute 7.273B.
    assert abs(s.num_params() - 7.27e9) / 7.27e9 < 0.005


def test_decilm_nemotron_super(config):
    s = spec_from_config(config("nvidia__Llama-3_3-Nemotron-Super-49B-v1"), name="n")
    # NVIDIA names it 49B; 49.9B only from a third-party listing (github.com/jakemanger/whatmodel
    # pages/model/llama-3-3-nemotron-super-49b-v1.md). We compute 49.867B.
    # (published figure not verified against a fetched source)
    assert abs(s.num_params() - 49.9e9) / 49.9e9 < 0.005
    assert NONE in s.attention_kinds()                            # some attention blocks pruned


def test_mimo_v2_sliding_heads_and_moe_flags(config):
    s = spec_from_config(config("XiaomiMiMo__MiMo-V2-Flash"), name="m")
    full, swa = s.layers[0].attention, s.layers[1].attention
    assert (full.kind, full.num_kv_heads, full.head_dim, full.v_head_dim) == (FULL, 4, 192, 128)
    assert (swa.kind, swa.num_kv_heads, swa.sliding_window_tokens) == (SLIDING, 8, 128)
    assert s.layers[0].params.experts == 0 and s.layers[1].params.experts > 0
    # github.com/XiaomiMiMo/MiMo-V2-Flash README.md: "309B total parameters" (we compute 308.78B)
    assert abs(s.num_params() - 309e9) / 309e9 < 0.005


def test_mtp_params_explain_published_totals(config):
    glm = spec_from_config(config("zai-org__GLM-4.7-Flash"), name="g")
    assert abs(glm.num_params() + glm.mtp_params - 31.22e9) / 31.22e9 < 0.005
    ds = spec_from_config(config("deepseek-ai__DeepSeek-V3"), name="d")
    assert abs(ds.num_params() + ds.mtp_params - 685e9) / 685e9 < 0.005   # HF lists 685B
    assert spec_from_config(config("meta-llama__Llama-3.1-8B-Instruct"), name="l").mtp_params == 0
    assert (glm.mtp_layers, ds.mtp_layers) == (1, 1)
    two = dict(config("deepseek-ai__DeepSeek-V3"), num_nextn_predict_layers=2)
    d2 = spec_from_config(two, name="d2")
    assert d2.mtp_layers == 2 and d2.mtp_params == 2 * ds.mtp_params


def test_kimi_k25_vision_aliases(config):
    s = spec_from_config(config("moonshotai__Kimi-K2.5"), name="k")
    assert s.uses_mla and s.vision is not None and s.vision.num_params > 0.3e9


def test_gpt2_learned_positions(config):
    s = spec_from_config(config("openai-community__gpt2"), name="g")
    assert s.num_params() == 124_439_808 and s.tie_word_embeddings


def test_deepseek_v4_flash_total(config):
    s = spec_from_config(config("deepseek-ai__DeepSeek-V4-Flash"), name="v4")
    # DeepSeek's "284B total / 13B activated" (as quoted by openrouter.ai/deepseek/deepseek-v4-flash
    # and ollama.com); the HF size badge (291-292B) also counts MTP: 284.30B + 7.69B here.
    assert abs(s.num_params() - 284e9) / 284e9 < 0.005
    # compressed sparse attention: 2 sliding-only layers, 21 of ratio 4 (with the indexer),
    # 20 of ratio 128; the KV layout is core/kv_csa.py's
    from collections import Counter
    from vramguard.core.model import CSA
    atts = [l.attention for l in s.layers]
    assert {a.kind for a in atts} == {CSA}
    assert Counter(a.compress_ratio for a in atts) == {0: 2, 4: 21, 128: 20}
    assert {a.indexer_head_dim for a in atts if a.compress_ratio == 4} == {128}
    assert {a.indexer_head_dim for a in atts if a.compress_ratio != 4} == {0}
    assert {(a.head_dim, a.sliding_window_tokens) for a in atts} == {(512, 128)}


def test_bamba_auto_head_dim_and_attn_indices():
    cfg = {"model_type": "bamba", "hidden_size": 256, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
           "intermediate_size": 512, "attn_layer_indices": [2], "mamba_n_heads": 8,
           "mamba_d_head": "auto", "mamba_expand": 2, "mamba_d_state": 16, "mamba_n_groups": 1,
           "mamba_d_conv": 4}
    s = spec_from_config(cfg, name="bamba")
    assert [l.attention.kind for l in s.layers] == [MAMBA, MAMBA, FULL, MAMBA]
    assert s.layers[0].attention.mamba.ssm_shape == (8, 64, 16)


def test_qwen2_moe_shared_expert_and_gate():
    cfg = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 2048,
           "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
           "intermediate_size": 5632, "moe_intermediate_size": 1408, "num_experts": 60,
           "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632,
           "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    s = spec_from_config(cfg, name="Qwen/Qwen1.5-MoE-A2.7B")
    # huggingface.co/Qwen/Qwen1.5-MoE-A2.7B README: "14.3B parameters in total"; HF
    # open-llm-leaderboard/requests Qwen/Qwen1.5-MoE-A2.7B_eval_request_...json: "params": 14.316
    assert abs(s.num_params() - 14.3e9) / 14.3e9 < 0.005
    assert abs(s.num_active_params() - 2.7e9) / 2.7e9 < 0.01       # "A2.7B"
    p = s.layers[0].params
    assert p.shared_experts == 3 * 2048 * 5632 and p.router == 2048 * 60 + 2048


def test_qwen3_next_carries_one_mtp_layer_by_default():
    """vLLM qwen3_next_mtp.py: getattr(config, "num_nextn_predict_layers", 1); the config
    names none. With it the total is the checkpoint's 81.3B (the hub's safetensors count)."""
    from vramguard.sources.resolve import load_model_spec
    s = load_model_spec("Qwen/Qwen3-Next-80B-A3B-Instruct", offline=True)
    assert s.mtp_layers == 1
    assert abs(s.num_params() + s.mtp_params - 81.3e9) / 81.3e9 < 0.002
