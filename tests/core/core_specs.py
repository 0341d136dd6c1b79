"""Hand-built ModelSpecs for core tests (independent of vramguard.sources)."""

from __future__ import annotations

from vramguard.core.model import (FULL, MAMBA, MLA, SLIDING, AttentionSpec, LayerParams,
                                  LayerSpec, MambaState, ModelSpec)


def dense(name="meta-llama/Llama-3.1-8B-Instruct", *, layers=32, hidden=4096, heads=32,
          kv_heads=8, head_dim=128, inter=14336, vocab=128256, max_pos=131072, tie=False,
          dtype="bfloat16", rope=None, model_type="llama", window=None, window_every=0):
    """A Llama-style decoder: GQA attention, gated MLP, RMSNorm (no biases)."""
    q = hidden * heads * head_dim
    kv = 2 * hidden * kv_heads * head_dim
    o = heads * head_dim * hidden
    mlp = 3 * hidden * inter
    specs = []
    for i in range(layers):
        sliding = window is not None and (window_every == 0 or (i + 1) % window_every != 0)
        att = AttentionSpec(kind=SLIDING if sliding else FULL, num_kv_heads=kv_heads,
                            head_dim=head_dim,
                            sliding_window_tokens=window if sliding else None)
        specs.append(LayerSpec(att, LayerParams(attn_q=q, attn_kv=kv, attn_o=o, mlp=mlp,
                                                norms=2 * hidden)))
    return ModelSpec(name=name, architecture="LlamaForCausalLM", model_type=model_type,
                     num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                     num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=vocab,
                     torch_dtype=dtype, layers=tuple(specs), intermediate_size=inter,
                     tie_word_embeddings=tie, embed_params=vocab * hidden,
                     lm_head_params=0 if tie else vocab * hidden, final_norm_params=hidden,
                     max_len_keys={"max_position_embeddings": max_pos},
                     rope_scaling=rope or {"rope_type": "llama3", "factor": 8.0,
                                           "original_max_position_embeddings": 8192})


def llama31_8b(**kw):
    return dense(**kw)


def deepseek_v3_kv_only(layers=61):
    """DeepSeek-V3's KV facts (MLA 512 + 64); parameters are irrelevant for KV tests."""
    att = AttentionSpec(kind=MLA, mla_kv_lora_rank=512, mla_rope_head_dim=64,
                        mla_qk_nope_head_dim=128)
    lay = tuple(LayerSpec(att, LayerParams(attn_q=1000, mlp=1000)) for _ in range(layers))
    return ModelSpec(name="deepseek-ai/DeepSeek-V3", architecture="DeepseekV3ForCausalLM",
                     model_type="deepseek_v3", num_layers=layers, hidden_size=7168,
                     num_attention_heads=128, num_kv_heads=128, head_dim=192, vocab_size=129280,
                     torch_dtype="bfloat16", layers=lay, embed_params=129280 * 7168,
                     lm_head_params=129280 * 7168,
                     max_len_keys={"max_position_embeddings": 163840})


def qwen3_next_kv_only():
    """Qwen3-Next-80B-A3B's KV facts: 48 layers, every 4th full attention (2 KV heads x 256),
    the others Gated DeltaNet (16 k-heads x 128, 32 v-heads x 128, conv kernel 4)."""
    k_heads, v_heads, dk, dv, kernel = 16, 32, 128, 128, 4
    conv_dim = 2 * k_heads * dk + v_heads * dv
    gdn = MambaState(kind="gdn", conv_shape=(conv_dim, kernel - 1), ssm_shape=(v_heads, dv, dk))
    layers = []
    for i in range(48):
        if (i + 1) % 4 == 0:
            att = AttentionSpec(kind=FULL, num_kv_heads=2, head_dim=256)
        else:
            att = AttentionSpec(kind=MAMBA, mamba=gdn)
        layers.append(LayerSpec(att, LayerParams(attn_q=1000, mlp=1000)))
    return ModelSpec(name="Qwen/Qwen3-Next-80B-A3B-Instruct", architecture="Qwen3NextForCausalLM",
                     model_type="qwen3_next", num_layers=48, hidden_size=2048,
                     num_attention_heads=16, num_kv_heads=2, head_dim=256, vocab_size=151936,
                     torch_dtype="bfloat16", layers=tuple(layers), embed_params=151936 * 2048,
                     lm_head_params=151936 * 2048,
                     max_len_keys={"max_position_embeddings": 262144})


def tiny_cpu_llama():
    """§13: 2 layers, 2 KV heads, head_dim 32, bf16."""
    return dense(name="tiny-llama", layers=2, hidden=64, heads=2, kv_heads=2, head_dim=32,
                 inter=128, vocab=1024, max_pos=2048, rope={"rope_type": "default"})
