"""The version table's data: from which vLLM release on, for which engine, which fields of
`rules.VllmRules` change, and why (the reference section or vLLM file that says so).

`rules._build_table` folds these changes, in order, into one row per release range and
engine. Pure data; kept apart from the rules' code (`core/rules.py`) so each stays short.
"""

from __future__ import annotations

# Model types whose tower a limit of 0 on every input skips (the model files that call
# `get_limit_per_prompt`), and whose encoder --mm-encoder-tp-mode data replicates
# (`supports_encoder_tp_data`), as each release grew them.
_MM_ZERO_0101 = frozenset({"llava", "mistral3", "llama4", "qwen2_vl", "qwen2_5_vl",
                           "qwen2_5_omni", "step3_vl"})
_MM_ZERO_011 = _MM_ZERO_0101 | {"qwen3_vl", "qwen3_vl_moe"}
_MM_ZERO_012 = _MM_ZERO_011 | {"pixtral"}

_KVQ_020 = frozenset({"turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
                      "turboquant_3bit_nc", "int8_per_token_head", "fp8_per_token_head", "nvfp4"})
_KVQ_025 = _KVQ_020 | {"int4_per_token_head"}
_KVQ_028 = _KVQ_025 | {"nvfp4_4over6"}

# The architectures pipeline parallelism ran on before the SupportsPP interface, in
# config.py's `_PP_SUPPORTED_MODELS` order (the refusal prints the list).
_PP_051 = ("AquilaModel", "AquilaForCausalLM", "InternLMForCausalLM", "LlamaForCausalLM",
           "LLaMAForCausalLM", "MistralForCausalLM", "Phi3ForCausalLM", "GPT2LMHeadModel")
_PP_053 = _PP_051 + ("MixtralForCausalLM",)
_PP_054 = ("AquilaModel", "AquilaForCausalLM", "DeepseekV2ForCausalLM", "InternLMForCausalLM",
           "LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM", "Phi3ForCausalLM",
           "GPT2LMHeadModel", "MixtralForCausalLM", "NemotronForCausalLM", "Qwen2ForCausalLM",
           "Qwen2MoeForCausalLM", "QWenLMHeadModel")
_PP_055 = _PP_054[:4] + ("JAISLMHeadModel",) + _PP_054[4:]
_PP_061 = ("AquilaForCausalLM", "AquilaModel", "DeepseekV2ForCausalLM", "GPT2LMHeadModel",
           "InternLM2ForCausalLM", "InternLMForCausalLM", "InternVLChatModel", "JAISLMHeadModel",
           "LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM", "MixtralForCausalLM",
           "NemotronForCausalLM", "Phi3ForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM",
           "QWenLMHeadModel")
_PP_062 = _PP_061 + ("Qwen2VLForConditionalGeneration",)

# (version, engines, changes, why). "both" applies to v0 and v1 rows alike.
CHANGES: tuple[tuple[str, str, dict, str], ...] = (
    ("0.4.0", "v0", {"override_log_forced": True},
     "oldest examined release (§1a); --forced-num-gpu-blocks, 'Replacing profiled "
     "num_gpu_blocks=... with forced_num_gpu_blocks=...' (executor/gpu_executor.py)"),
    ("0.4.1", "v0", {"override_log_forced": False},
     "--num-gpu-blocks-override: 'Overriding num_gpu_blocks=... with num_gpu_blocks_override="
     "...' (engine/llm_engine.py)"),
    ("0.4.1", "both", {"block_size_choices": (8, 16, 32)},
     "--block-size choices (engine/arg_utils.py)"),
    ("0.4.1", "v0", {"v0_chunked_tokens": 768}, "chunked prefill: 768 batched tokens (config.py)"),
    ("0.4.2", "v0", {"v0_chunked_tokens": 512}, "chunked prefill: 512 batched tokens (config.py)"),
    ("0.4.3", "v0", {"v0_pooling_min_tokens": 32768},
     "'Loading model weights took %.4f GB' (§1b); embedding models: at least 32768 batched "
     "tokens (config.py _EMBEDDING_MODEL_MAX_NUM_BATCHED_TOKENS)"),
    ("0.5.1", "both", {"lora_no_chunked": True},
     "'LoRA is not supported with chunked prefill yet.' (config.py LoRAConfig)"),
    ("0.5.1", "v0", {"v0_mm_profile_seqs": True},
     "multimodal profile run: sequences = tokens // max mm tokens (model_runner.profile_run)"),
    ("0.5.1", "both", {"interleaved_swa_off": "always", "msg_interleaved_swa": "gemma2",
                       "interleaved_swa_types": frozenset({"gemma2"})},
     "Gemma 2: sliding window turned off, length capped at the window (config.py ModelConfig)"),
    ("0.5.1", "both", {"pp_archs": _PP_051, "pp_layout": "last"},
     "pipeline parallelism for the listed architectures (config.py _PP_SUPPORTED_MODELS); "
     "the last stage takes the remainder of the layers (distributed/utils.py get_pp_indices)"),
    ("0.5.3", "both", {"pp_archs": _PP_053}, "... + Mixtral"),
    ("0.5.3", "v0", {"v0_chunked_prefill_auto": True, "v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "prefix_caching"})},
     "chunked prefill turned on for L > 32768 (engine/arg_utils.py use_long_context; §9)"),
    ("0.5.4", "v0", {"v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "prefix_caching", "mamba"})},
     "... not with seqlen-agnostic (Mamba) layers"),
    ("0.5.4", "both", {"allow_long_env": True, "msg_max_len": "v054", "pp_partition_env": True},
     "VLLM_ALLOW_LONG_MAX_MODEL_LEN (envs.py); the too-long error names it (config.py); "
     "VLLM_PP_LAYER_PARTITION (distributed/utils.py)"),
    ("0.5.4", "both", {"pp_archs": _PP_054}, "... + DeepSeek-V2, Nemotron, Qwen, Qwen2(-MoE)"),
    ("0.5.5", "both", {"lora_ranks": (8, 16, 32, 64, 128, 256), "lora_max_batched_tokens": None},
     "LoRA ranks up to 256; no batched-token cap (config.py)"),
    ("0.5.5", "both", {"pp_archs": _PP_055}, "... + JAIS"),
    ("0.5.5", "both", {"block_size_choices": (8, 16, 32, 128, 256, 512, 1024, 2048)},
     "--block-size choices (engine/arg_utils.py; 0.6.0 goes back to 8, 16, 32)"),
    ("0.5.5", "both", {"gguf_loader": True},
     "GGUF checkpoints (model_loader GGUFModelLoader, layers/quantization/gguf.py)"),
    ("0.6.0", "both", {"block_size_prog": "vllm serve", "block_size_choices": (8, 16, 32)},
     "the `vllm serve` entry point; --block-size choices (engine/arg_utils.py)"),
    ("0.6.0", "v0", {"v0_mm_min_tokens": 4096},
     "multimodal models: at least 4096 batched tokens (config.py)"),
    ("0.6.1", "both", {"pp_archs": _PP_061}, "... + InternLM2, InternVL"),
    ("0.6.1", "v0", {"v0_auto_chunk_blockers": frozenset({"sliding", "lora", "spec", "mamba"})},
     "auto chunked prefill: prefix caching no longer blocks it"),
    ("0.6.2", "both", {"pp_archs": _PP_062}, "... + Qwen2-VL"),
    ("0.6.2", "v0", {"v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "mamba", "multimodal"})},
     "... nor for multimodal models (0.6.1.post1; engine/arg_utils.py)"),
    ("0.6.3", "both", {"pp_archs": None},
     "pipeline parallelism for every model class with the SupportsPP interface (not modelled)"),
    ("0.6.3", "v0", {"v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "multimodal"}), "v0_mm_min_tokens": 5120},
     "Mamba layers no longer block auto chunked prefill; multimodal at least 5120 tokens"),
    ("0.6.3", "v0", {"v0_concurrency_log": True}, "'Maximum concurrency' line (§1b)"),
    ("0.6.4", "both", {"block_size_choices": (8, 16, 32, 64, 128)},
     "--block-size choices (engine/arg_utils.py)"),
    ("0.6.4", "both", {"encoder_max_seq_length": True},
     "a sentence-transformers config's max_seq_length replaces the derived length (config.py)"),
    ("0.6.4", "both", {"msg_interleaved_swa": "vllm"},
     "'{model_type} has interleaved attention, which is currently not supported by vLLM' "
     "(0.6.3.post1; config.py)"),
    ("0.6.4", "v0", {"whole_gpu": True, "log_available": "v0_064"},
     "0.6.4 charges everything on the GPU (§1a)"),
    ("0.6.5", "both", {"lora_no_chunked": False}, "LoRA with chunked prefill (config.py)"),
    ("0.6.5", "both", {"block_size_choices": (8, 16, 32)},
     "--block-size choices (engine/arg_utils.py; 64 and 128 again in 0.6.6)"),
    ("0.6.5", "both", {"rocm_quant_platform": "rocm"},
     "ROCm's quantization list moves to platforms/rocm.py (device_name 'rocm')"),
    ("0.6.5", "both", {"interleaved_swa_off": "backend", "msg_interleaved_swa": "backend",
                       "interleaved_swa_backends": ("XFORMERS",)},
     "interleaved attention capped only with VLLM_ATTENTION_BACKEND=XFORMERS (config.py)"),
    ("0.6.5", "v0", {"v0_chunked_tokens": 2048, "v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "multimodal", "pooling", "rocm"})},
     "chunked prefill: 2048 batched tokens; auto chunked prefill not for pooling models or on "
     "ROCm (config.py, engine/arg_utils.py)"),
    ("0.6.5", "v0", {"whole_gpu": False, "log_available": "v0_profile"},
     "u*T - (W + A + N), per instance (§1a)"),
    ("0.6.5", "v0", {"v0_mamba_slots": "eager_8194"},
     "Mamba state: 8192 + 2 slots with --enforce-eager (models/mamba_cache.py)"),
    ("0.6.6", "both", {"fp8_moe_block_check": True},
     "block-FP8 MoE: the per-rank expert size must divide by the quantization blocks "
     "(quantization/fp8.py Fp8MoEMethod.create_weights)"),
    ("0.6.6", "both", {"block_size_choices": (8, 16, 32, 64, 128)},
     "--block-size choices (engine/arg_utils.py)"),
    ("0.7.0", "both", {"lora_no_cpu_offload": "any"},
     "'CPU offload is not supported with LoRA yet.' (config.py)"),
    ("0.7.0", "both", {"mla_full_head_pad": False},
     "without MLA, DeepSeek's KV heads are qk_nope + qk_rope (192) wide: the 256 padding for "
     "FlashAttention ended with 0.6 (config.py get_head_size)"),
    ("0.7.0", "v1", {"whole_gpu": True, "mla_supported": False, "hybrid_kv_manager": False,
                     "msg_fit": "v1_070", "log_capacity": "v1_blocks",
                     "concurrency_formula": "blocks_b_over_len", "log_available": "none"},
     "v1 opt-in; whole-GPU budget (§1a)"),
    ("0.7.0", "v1", {"block_size_16": "fa"},
     "v1 FlashAttention: 'Block size must be a multiple of 16.' (v1/attention/backends)"),
    ("0.7.0", "v1", {"kv_group_max_ratio": 1.0},
     "hybrid / mixed-attention group size: the smallest layer count (kv_cache_utils.py "
     "_get_kv_cache_groups_uniform_page_size, checked in 0.9.2-0.11.0)"),
    ("0.7.0", "v1", {"kv_fit_check": "layers"},
     "the fit check sums every layer's own spec before grouping (check_enough_kv_cache_memory)"),
    ("0.7.0", "v1", {"v1_forced_chunked": "all", "kv_memory_log": "v1_0102"},
     "'V1 always uses chunked prefills' (engine/arg_utils.py)"),
    ("0.7.0", "v1", {"mm_items_formula": "cdiv"},
     "the encoder's dummy batch: cdiv(budget, T) images, at most max_num_seqs x the limit "
     "(v1/worker/gpu_model_runner.py profile_run)"),
    ("0.7.0", "v1", {"sched_defaults": "v1_080", "profile_sampler_copies": 2.1,
                     "v1_profile_logits": "tokens"},
     "v1 scheduler defaults (§9); the profile run's logits for every batched token, no "
     "sampler (v1/worker/gpu_model_runner.py profile_run)"),
    ("0.7.0", "v0", {"log_capacity": "v0_cuda_blocks"}, "'# CUDA blocks' (§1b)"),
    ("0.7.0", "v0", {"lora_outside_budget": True},
     "LoRA slots created after 'Loading model weights took' and outside the profiled peak "
     "(worker/model_runner.py load_model, utils.py memory_profiling)"),
    ("0.7.0", "v0", {"draft_model": "v0_outside"},
     "non-KV memory = the target runner's weights + peak + non-torch: the draft worker's "
     "weights, loaded before profiling, are not deducted (worker/worker.py, spec_decode)"),
    ("0.7.0", "v1", {"v1_spec_methods": frozenset({"ngram", "[ngram]", "medusa", "eagle", "eagle3", "deepseek_mtp"})},
     "speculative methods V1 runs (0.9.2's list; V1 is opt-in)"),
    ("0.7.0", "v1", {"draft_model": "v1_fallback"},
     "speculative decoding other than ngram/EAGLE/Medusa/MTP falls back to v0 "
     "(engine/arg_utils.py _is_v1_supported_oracle, 0.9.2)"),
    ("0.7.0", "v0", {"v0_mm_dropped_when_long": True},
     "profiling.py: mm dummy data dropped when longer than the profiling sequence"),
    ("0.7.0", "both", {"interleaved_swa_types": frozenset({"gemma2", "cohere2"})},
     "interleaved attention models: gemma2, cohere2 (config.py)"),
    ("0.7.1", "both", {"interleaved_swa_backends": ("XFORMERS", "FLASHINFER")},
     "... or VLLM_ATTENTION_BACKEND=FLASHINFER (config.py)"),
    ("0.7.1", "v1", {"log_capacity": "v1_070"},
     "'Maximum concurrency' line added (v1/core/kv_cache_utils.py; 0.7.0 logs the blocks only)"),
    ("0.7.1", "v0", {"mla_supported": True}, "v0 MLA from 0.7.1 (§4)"),
    ("0.7.2", "v0", {"v0_mla_align_bytes": 256},
     "MLA cache entries padded to 256 bytes on CUDA (worker/cache_engine.py align_to_256bytes)"),
    ("0.7.2", "both", {"transformers_fallback": True},
     "an architecture outside the registry falls back to the Transformers backend "
     "(model_executor/models/registry.py _normalize_archs; model_loader/utils.py)"),
    ("0.7.3", "both", {"usage_metric": "vllm:gpu_cache_usage_perc"}, "v1 metrics (§12)"),
    ("0.7.3", "v1", {"v1_profile_logits": "seqs"},
     "the profile run's logits for max_num_seqs dummy requests only (profile_run)"),
    ("0.7.3", "v0", {"v0_mamba_slots": "capture"},
     "Mamba state: max_num_seqs slots with --enforce-eager"),
    ("0.7.3", "v0", {"log_capacity": "v0_cuda_lower"}, "'# cuda blocks' (§1b)"),
    ("0.8.0", "v1", {"v1_spec_methods": frozenset()},
     "any speculative decoding falls back to V0 ('ngram is experimental on VLLM_USE_V1=1. "
     "Falling back to V0 Engine.', engine/arg_utils.py)"),
    ("0.8.0", "v0", {"lora_outside_budget": False},
     "LoRA slots loaded inside the weights measurement"),
    ("0.8.0", "both", {"lora_ranks": (8, 16, 32, 64, 128, 256, 320, 512),
                       "lora_extra_vocab_choices": (256, 512)},
     "LoRA ranks up to 512; extra vocabulary 256 or 512 (config.py)"),
    ("0.8.0", "both", {"pp_layout": None},
     "the remainder of the layers on the stages before the last (get_pp_indices)"),
    ("0.8.0", "both", {"bf16_msg_space": True},
     "'setting the `dtype` flag' (worker/worker.py _check_if_gpu_supports_dtype)"),
    ("0.8.0", "v0", {"v0_fit_divides_pp": True},
     "the max-seq-len check counts one PP virtual engine's blocks (worker.py)"),
    ("0.8.0", "v0", {"v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "multimodal", "pooling", "rocm", "mla"})},
     "auto chunked prefill not for MLA models (_set_default_args_v0)"),
    ("0.8.0", "v0", {"v0_mla_align_bytes": 0},
     "auto chunked prefill ends (§9: 0.5.5-0.7.3); MLA entry padding removed"),
    ("0.8.0", "both", {"interleaved_swa_types": frozenset({"gemma2", "gemma3", "gemma3_text",
                                                           "cohere2"})},
     "interleaved_attn_models adds gemma3_text (config.py; gemma3's text config)"),
    ("0.8.0", "both", {"default_engine": "v1", "v1_falls_back_below_cc80": True,
                       "log_weights": "model_gb"}, "v1 default from 0.8.0 (§1a)"),
    ("0.8.0", "v1", {"log_capacity": "two_lines", "tokens_formula": "blocks_x_b",
                     "sched_defaults": "v1_080"},
     "two capacity lines (§1b), defaults (§9)"),
    ("0.8.0", "both", {"mla_block_hopper": 64, "mla_user_block": "replace"},
     "FlashMLA forces 64-token blocks on Hopper, whatever --block-size says, for either engine "
     "(§4; platforms/cuda.py check_and_update_config, is_flashmla_supported: Hopper only)"),
    ("0.8.0", "v1", {"v1_profile_logits": None},
     "dummy sampler run in the profile run and a sampler warm-up (gpu_worker.py "
     "compile_or_warm_up_model)"),
    ("0.8.0", "v1", {"mla_supported": True},
     "V1 MLA latent cache (kv_cache_interface.py use_mla; V1 0.7 ran full heads)"),
    ("0.8.0", "v1", {"dp_forces_eager": True},
     "'Data Parallel: Forcing enforce eager to be True' (platforms/cuda.py)"),
    ("0.8.0", "v1", {"v1_falls_back_for_lora": True},
     "LoRA falls back to V0 (engine/arg_utils.py _is_v1_supported_oracle)"),
    ("0.8.0", "v1", {"v1_falls_back_for_pooling": True},
     "a task other than generate (embedding models) falls back to V0 (_is_v1_supported_oracle)"),
    ("0.8.0", "v1", {"v1_falls_back_for_mamba": True},
     "Mamba/hybrid models fall back to v0 (arg_utils.py _is_v1_supported_oracle)"),

    ("0.8.1", "v1", {"spec_sampler_copies": 7.0},
     "dummy rejection sampler in the profile run (PR 14930)"),
    ("0.8.3", "v1", {"v1_spec_methods": frozenset({"ngram", "[ngram]", "eagle"})},
     "V1 runs n-gram and EAGLE (_is_v1_supported_oracle)"),
    ("0.8.3", "both", {"lora_no_cpu_offload": "v0"},
     "'V0 LoRA does not support CPU offload, please use V1.' (config.py)"),
    ("0.8.3", "both", {"log_weights": "model_gib"}, "GiB in the weights line (§1b)"),
    ("0.8.3", "both", {"cfg_model_max_length_wins": True},
     "a config's model_max_length replaces the derived length (Command-R; config.py)"),
    ("0.8.3", "v0", {"v0_mm_dropped_when_long": False},
     "profiling.py keeps the mm dummy data (warning only)"),
    ("0.8.3", "v1", {"v1_falls_back_for_lora": False}, "LoRA runs on V1"),
    ("0.8.3", "v1", {"msg_fit": "v1_083", "sliding_inflight": "batched"}, "§10, §4"),
    ("0.8.4", "v1", {"msg_fit": "v1_084", "estimate_max_len": "lost"}, "estimate bug (§6, §10)"),
    ("0.8.4", "v1", {"mm_default_limit": 999},
     "V1's default per-prompt limit of each modality (config.py get_limit_per_prompt)"),
    ("0.8.4", "v1", {"sched_defaults": "v1_081"},
     "§9: 256 sequences on GPUs other than H100/H200 (engine/arg_utils.py; 0.8.1-0.8.3: 1024)"),
    ("0.8.5", "v1", {"v1_spec_methods": frozenset({"ngram", "[ngram]", "eagle", "eagle3"})},
     "... and EAGLE-3"),
    ("0.8.5", "both", {"block_size_choices": (1, 8, 16, 32, 64, 128)},
     "--block-size choices from BlockSize = Literal[...] (config.py)"),
    ("0.8.5", "v1", {"sched_defaults": "v1_085"}, "§9"),
    ("0.9.0", "v1", {"v1_spec_methods": frozenset({"ngram", "[ngram]", "medusa", "eagle", "eagle3", "deepseek_mtp"})},
     "... and Medusa, DeepSeek MTP"),
    ("0.9.0", "v1", {"cuda_graph_sizes_flag": "max"},
     "--cuda-graph-sizes: one value N captures 1, 2, 4 and multiples of 8 up to N, several "
     "are the list (config.py SchedulerConfig, VllmConfig._set_cudagraph_sizes)"),
    ("0.9.0", "v1", {"sched_defaults": "v1_090"}, "§9"),
    ("0.9.0", "both", {"interleaved_swa_types": None},
     "interleaved: a sliding_window_pattern or a list of windows (config.py), i.e. layers "
     "that mix sliding-window and full attention"),
    ("0.9.1", "v1", {"hybrid_kv_manager": True},
     "the hybrid KV cache manager (0.9.0 unifies sliding windows into full attention: "
     "unify_hybrid_kv_cache_specs)"),
    ("0.9.1", "v1", {"dp_forces_eager": False},
     "data parallelism keeps CUDA graphs (eager only with DeepEP high-throughput kernels)"),
    ("0.9.1", "both", {"auto_dtype_fallback": True},
     "--dtype auto: a bfloat16 config falls back to float16 where the GPU lacks bf16 "
     "(config.py _resolve_auto_dtype)"),
    ("0.9.1", "v1", {"cudagraph_control": "use_cudagraph"},
     "compilation config `use_cudagraph: false` captures no graphs (level still forced to 3)"),
    ("0.9.1", "v1", {"whole_gpu": False, "free_memory_check": True, "msg_free_memory": "no_device",
                     "msg_fit": "v1_091", "estimate_max_len": "yes", "log_available": "avail_2f",
                     "concurrency_formula": "blocks_over_per_request",
                     "log_capacity_per_worker": True}, "per-instance budget (§1a)"),
    ("0.9.1", "both", {"tokenizer_cap": "all"},
     "the tokenizer's model_max_length caps every model's length, after its check "
     "(config.py get_and_verify_max_len)"),
    ("0.9.2", "v1", {"mamba_spec_refused": "mamba2", "mamba_pc_refused": "mamba2"},
     "'Mamba with speculative decoding is not supported yet.' (Mamba2 layers; "
     "v1/worker/gpu_model_runner.py get_kv_cache_spec)"),
    ("0.9.2", "both", {"tokenizer_cap": "encoder"},
     "... pooling models only ('for generative models, this can be incorrect and unduly limit "
     "the context window (e.g., DeepSeek-R1)'); 0.10.0: with absolute position embeddings"),
    ("0.9.2", "v1", {"usage_metric": "vllm:kv_cache_usage_perc"}, "§12"),
    ("0.9.2", "v1", {"v1_forced_chunked": "non_pooling", "v1_falls_back_for_pooling": False},
     "pooling models run on V1, chunked prefill off by default (_set_default_args_v1)"),
    ("0.10.0", "v1", {"v1_spec_methods": None}, "no V0 to fall back to for speculation"),
    ("0.10.0", "v1", {"mamba_spec_refused": "any", "mamba_pc_refused": "any"},
     "... any Mamba / linear-attention layer; 'Prefix caching is not supported for Mamba yet.'"),
    ("0.10.0", "v0", {"v0_spec_refused": True},
     "'Speculative decoding is not supported on vLLM V0.' (platforms/cuda.py)"),
    ("0.10.0", "v1", {"mm_items_formula": "floor"}, "... budget // T images, at least one"),
    ("0.10.0", "v1", {"hybrid_page_unification": True}, "§4.2"),
    ("0.10.0", "v1", {"chunked_local_spec": True},
     "ChunkedLocalAttentionSpec (v1/kv_cache_interface.py; before, chunked layers are full)"),
    ("0.10.0", "both", {"draft_model": "none_0100"},
     "'Speculative decoding with draft model is not supported yet' (config.py "
     "SpeculativeConfig, engine/arg_utils.py); vllm/spec_decode (v0) removed"),
    ("0.10.0", "v1", {"mm_dummy_at_max_len": True},
     "dummy multimodal item built at its maximum size (gpu_model_runner.py profile_run)"),
    ("0.10.1", "v1", {"pooling_decoder_chunked": True},
     "pooling decoders keep chunked prefill (LAST pooling; config/__init__.py)"),
    ("0.10.1", "both", {"mla_block_blackwell": 128, "mla_blackwell_cc100_only": True},
     "MLA on Blackwell: CUTLASS_MLA, block size forced to 128 (platforms/cuda.py: "
     "is_device_capability(100), 10.0 only)"),
    ("0.10.1", "both", {"interleaved_swa_off": "backend_v0"},
     "... and only without V1 (`not envs.VLLM_USE_V1`; config/__init__.py)"),
    ("0.10.1", "both", {"mamba_dtype_choices": ("auto", "float32")},
     "--mamba-cache-dtype / --mamba-ssm-cache-dtype (config/cache.py MambaDType; "
     "mamba_utils.py MambaStateDtypeCalculator)"),
    ("0.10.1", "v1", {"mm_items_formula": "per_prompt"},
     "... MultiModalBudget.get_max_items (v1/worker/utils.py)"),
    ("0.10.1", "v1", {"gpt_oss_capture_override": True},
     "gpt-oss capture list up to 992 (models/config.py GptOssForCausalLMConfig, PR 25508)"),
    ("0.10.1", "v1", {"chunked_disables_hybrid": True},
     "'There is a latency regression when using chunked local attention with the hybrid KV "
     "cache manager. Disabling it, by default.' (config/__init__.py)"),
    ("0.10.1", "v1", {"v1_unchunked_tokens": "l", "sched_clamp_seqs": True},
     "without chunked prefill the batched tokens are max_model_len; default sequences at most "
     "the batched tokens (engine/arg_utils.py)"),
    ("0.10.1", "v1", {"cudagraph_control": "level", "piecewise_assert": "level"},
     "cudagraph_mode (config/compilation.py): unset, NONE unless the compilation level is 3 "
     "(-O0/1/2 capture no graphs; config/__init__.py VllmConfig.__post_init__); a piecewise "
     "mode given without level 3 fails an assert"),
    ("0.10.1", "v1", {"mm_dummy_at_max_len": False},
     "dummy multimodal item built at max_num_batched_tokens again (_get_mm_dummy_batch)"),
    ("0.10.1", "both", {"init_token_buffers": True},
     "per-layer-embedding input buffer of multimodal Gemma-3n (gemma3n_mm.py)"),
    ("0.10.1", "both", {"mm_zero_skips_tower": _MM_ZERO_0101},
     "a tower whose modalities are all limited to 0 is not built (llava.py, mistral3.py, "
     "mllama4.py, qwen2_vl.py, qwen2_5_vl.py, qwen2_5_omni_thinker.py, step3_vl.py)"),
    ("0.10.2", "v1", {"mamba_spec_refused": "not_qwen3_next", "mamba_pc_refused": None},
     "... Qwen3-Next aside; prefix caching turned off on Mamba models (models/config.py)"),
    ("0.10.2", "both", {"kv_cache_memory_flag": True}, "§3"),
    ("0.10.2", "both", {"msg_max_len": "v0102"},
     "the too-long error adds VLLM_ALLOW_LONG_MAX_MODEL_LEN's caution (config.py)"),
    ("0.10.2", "v0", {"v0_auto_chunk_blockers": frozenset(
        {"sliding", "lora", "spec", "multimodal", "rocm", "mla"})},
     "auto chunked prefill: the pooling condition dropped (engine/arg_utils.py)"),
    ("0.10.2", "v1", {"dcp": "mla", "dcp_log": "dcp"},
     "--decode-context-parallel-size: MLA only (GQA: 'DCP requires attention impls to return "
     "the softmax lse for decode'); capacity x dcp (v1/core/kv_cache_utils.py)"),
    ("0.10.2", "v1", {"conv_spec_kinds": frozenset({"gdn"})},
     "GDN conv state with the speculative tokens' columns (mamba_utils.py)"),
    ("0.10.2", "both", {"v1_falls_back_below_cc80": False},
     "no compute-capability fallback to V0 any more (engine/arg_utils.py)"),
    ("0.10.2", "v1", {"graph_mamba_full": True},
     "'Hybrid or mamba-based model detected: setting cudagraph mode to FULL_AND_PIECEWISE' "
     "(models/config.py; not Lfm2, MiniMaxText01)"),
    ("0.10.2", "v1", {"v1_falls_back_for_mamba": False},
     "Mamba/hybrid models run on v1 by default (the 'V1 mamba models are unoptimized' "
     "fallback removed)"),
    ("0.11.0", "v1", {"mm_outputs_padded": True},
     "each dummy encoder output padded to the encoder budget's rows and kept through the text "
     "forward (profile_run; 0.12 pads to the largest item)"),
    ("0.11.0", "v1", {"snapshot_after_nccl": True, "default_engine": "v1", "mla_block_size": 16,
                      "v1_falls_back_below_cc80": False, "profile_sampler_copies": 8.0},
     "v0 removed (§1a); heavier dummy sampler (fitted)"),
    ("0.11.0", "v1", {"mla_block_sparse": 64}, "sparse MLA 64 (platforms/cuda.py)"),
    ("0.11.0", "v1", {"graph_mamba_full": False, "graph_pooling_piecewise": "default"},
     "pooling models default to PIECEWISE (config/__init__.py)"),
    ("0.11.0", "v1", {"cudagraph_default": "FULL_AND_PIECEWISE"},
     "default cudagraph_mode FULL_AND_PIECEWISE (config/__init__.py)"),
    ("0.11.0", "v1", {"mm_zero_skips_tower": _MM_ZERO_011},
     "qwen3_vl.py, qwen3_vl_moe.py check the limit too"),
    ("0.11.0", "v1", {"draft_model": "none"},
     "'Draft model speculative decoding is not supported yet' (engine/arg_utils.py; the "
     "inferred method: config/speculative.py)"),
    ("0.11.0", "v1", {"allreduce_in_n": "none"},
     "all-reduce buffers before the snapshot (§1a): TP>1 N 0.55 GiB in 0.11.0 logs"),
    ("0.11.0", "v1", {"mm_dummy_at_max_len": True},
     "dummy multimodal item built at max_model_len (gpu_model_runner.py seq_len=max_model_len)"),
    ("0.11.1", "both", {"lora_ranks": (1, 8, 16, 32, 64, 128, 256, 320, 512),
                        "lora_rank_argparse": True},
     "--max-lora-rank choices from LoRAConfig's Literal (config/lora.py MaxLoRARanks)"),
    ("0.11.1", "both", {"lora_tied_double": True},
     "a tied LM head is wrapped as a second LoRA embedding (lora/models.py "
     "named_modules(remove_duplicate=False))"),
    ("0.11.1", "v1", {"log_weights": "model_gib_memory", "log_capacity_per_worker": False}, "§1b"),
    ("0.11.1", "v1", {"graph_pooling_piecewise": "any", "graph_dcp_piecewise": True},
     "'Pooling models do not support full cudagraphs' / DCP 'incompatible with full CUDA "
     "graphs. Overriding cudagraph_mode to PIECEWISE' (config/vllm.py)"),
    ("0.11.1", "v1", {"piecewise_assert": "mode"},
     "... the assert names CompilationMode.VLLM_COMPILE (config/vllm.py)"),
    ("0.11.1", "v1", {"lora_moe": True},
     "FusedMoE layers take LoRA: slots per routed expert (lora/layers/fused_moe.py)"),
    ("0.11.1", "v1", {"uma_free_is_host_ram": True},
     "integrated GPUs (compute capability 8.7, 11.0, 12.1): free memory is psutil's available "
     "host RAM (utils/mem_utils.py; the reference says 0.20)"),
    ("0.11.1", "v1", {"kv_memory_log": "v1_0111"},
     "the --kv-cache-memory-bytes line: both figures %.2f, 'This does not' (gpu_worker.py)"),
    ("0.11.1", "v1", {"longrope_default_original": True},
     "LongRoPE: the default length is the config's original_max_position_embeddings "
     "(config/model.py)"),
    ("0.11.1", "v1", {"interleaved_swa_off": None},
     "sliding windows of interleaved models no longer turned off (config/model.py)"),
    ("0.11.1", "v1", {"v1_forced_chunked": None, "v1_unchunked_tokens": "max_l_default",
                      "sched_clamp_by_len": True},
     "--no-enable-chunked-prefill honoured; default tokens <= seqs x L, seqs <= tokens "
     "(engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args)"),
    ("0.11.1", "v1", {"capture_max_flag": True, "cuda_graph_sizes_flag": "list"},
     "--max-cudagraph-capture-size and --cudagraph-capture-sizes (a user list keeps the sizes "
     "<= max_num_batched_tokens); --cuda-graph-sizes their deprecated alias "
     "(config/vllm.py _set_cudagraph_sizes)"),
    ("0.11.1", "v1", {"lora_graph_specialize": True},
     "LoRA graphs captured with and without active LoRA (cudagraph_specialize_lora, PR 25914)"),
    ("0.11.1", "v1", {"block_size_choices": (1, 8, 16, 32, 64, 128, 256)},
     "BlockSize gains 256 (config/cache.py)"),
    ("0.11.1", "v1", {"mla_hybrid_align": 64, "hybrid_align_256_blackwell": "cc100"},
     "hybrid page alignment: MLA 64; head size 256 on Blackwell 32 (FlashInfer; "
     "is_device_capability(100)) (model_executor/models/config.py)"),
    ("0.11.2", "v1", {"mla_user_block": "modulo"},
     "a --block-size that is a multiple of the MLA backend's is kept (platforms/cuda.py)"),
    ("0.11.2", "v1", {"dcp": "gqa"},
     "DCP for GQA/MQA on FlashAttention / FlashInfer: tp > KV heads, dcp <= tp // KV heads "
     "(config/model.py)"),
    ("0.12.0", "both", {"lora_extra_vocab": 0}, "--lora-extra-vocab-size removed"),
    ("0.12.0", "v1", {"mm_outputs_padded": False}, "... padded to one item's tokens"),
    ("0.12.0", "v1", {"cudagraph_control": "opt", "piecewise_assert": None},
     "-O N is --optimization-level (O0: no graphs); any graph mode without compilation mode 3 "
     "becomes NONE (config/vllm.py __post_init__, OPTIMIZATION_LEVEL_00-03)"),
    ("0.12.0", "v1", {"dcp_log": "cp"},
     "'Multiplying the GPU KV cache size by the cp_world_size N (pcp_world_size 1 * "
     "dcp_world_size N).'"),
    ("0.12.0", "v1", {"cpu_block_size": 128}, "§9"),
    ("0.12.0", "v1", {"mm_zero_skips_tower": _MM_ZERO_012}, "pixtral.py checks the limit too"),
    ("0.12.0", "v1", {"block_size_choices": (1, 8, 16, 32, 64, 128, 256), "block_size_16": None},
     "BlockSize gains 256; the selector falls back to FlexAttention (config/cache.py)"),
    ("0.12.0", "v1", {"model_runner_v2": "off", "log_weights_v2": "model_gib"},
     "Model Runner V2 with VLLM_USE_V2_MODEL_RUNNER=1 only (envs.py); its weights line "
     "'Model loading took %.4f GiB and %.6f seconds' (gpu/model_runner.py)"),
    ("0.12.0", "v1", {"max_len_float_rope": True},
     "rope_parameters: the derived length times the factor (1.0 by default) for every RoPE "
     "model (config/model.py)"),
    ("0.12.0", "v1", {"kv_group_max_ratio": 1.25},
     "hybrid group size: the largest count below 1.25x the smallest (kv_cache_utils.py)"),
    ("0.13.0", "v1", {"mamba_dtype_choices": ("auto", "float32", "float16"),
                      "nemotron_ssm_default": "float16"},
     "MambaDType gains float16; NemotronH's hook sets the SSM dtype from its config, else "
     "float16 (models/config.py NemotronHForCausalLMConfig)"),
    ("0.13.0", "v1", {"cudagraph_control": "opt_piecewise", "cuda_graph_sizes_flag": None},
     "only graph modes that need piecewise compilation become NONE without it; "
     "--cuda-graph-sizes removed (config/vllm.py, engine/arg_utils.py)"),
    ("0.13.0", "v1", {"graph_dcp_piecewise": False}, "DCP keeps full graphs (config/vllm.py)"),
    ("0.13.0", "v1", {"capture_scales_with_spec": True},
     "capture sizes scaled by the decode query length 1 + k (config/vllm.py decode_query_len)"),
    ("0.13.0", "v1", {"hybrid_align_256_blackwell": "family"},
     "... on the whole Blackwell family (is_device_capability_family(100))"),
    ("0.13.0", "v1", {"mla_blackwell_cc100_only": False},
     "CUTLASS_MLA on the whole Blackwell family (is_device_capability_family(100))"),
    ("0.13.0", "v1", {"block_size_16": "no_common"},
     "'No common block size for N. ' (v1/worker/gpu_model_runner.py, later v1/worker/utils.py)"),
    ("0.13.0", "v1", {"msg_no_kv": "docs", "msg_fit": "v1_013", "msg_load_failure": True},
     "§10"),
    ("0.14.0", "both", {"msg_cpu_loras_dot": True}, "max_cpu_loras message ends in '.'"),
    ("0.14.0", "v1", {"chunked_disables_hybrid": False},
     "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 (envs.py)"),
    ("0.14.0", "v1", {"kv_fit_check": "first_group", "kv_fit_whole_model": True},
     "the fit check on the groups: group_size x page x the first group's blocks "
     "(kv_cache_utils.py _max_memory_usage_bytes_from_groups), the whole model's groups "
     "against the smallest worker's memory with PP (get_kv_cache_configs)"),
    ("0.14.0", "v1", {"allow_deprecated_quant_flag": True},
     "DEPRECATED_QUANTIZATION_METHODS refused without --allow-deprecated-quantization "
     "(config/model.py _verify_quantization)"),
    ("0.14.0", "v1", {"request_ceil": True,
                      "msg_free_memory": "device", "msg_fit": "v1_014",
                      "group_aware_check": True, "auto_fit": True, "msg_autofit": True,
                      "log_weights": "model_s", "log_available": "avail_s",
                      "gib_two_decimals": False}, "ceil(u*T); messages via round() (§1a, §10)"),
    ("0.14.0", "v1", {"log_weights_v2": "model_s_v2"},
     "V2's weights line 'Model loading took %s GiB and %.6f seconds' (gpu/model_runner.py)"),
    ("0.14.0", "v1", {"async_scheduling_default": True},
     "async scheduling on by default when compatible (config/vllm.py)"),
    ("0.15.0", "both", {"lora_embedding_archs": frozenset({
        "LlamaForCausalLM", "MixtralForCausalLM", "GraniteForCausalLM"})},
     "Mistral's own class, without embedding_modules (models/mistral.py)"),
    ("0.15.0", "v1", {"msg_mamba_chunked": "align", "mamba_align_refuses_spec": True},
     "align mode asserts chunked prefill and no speculative decoding (MambaModelConfig)"),
    ("0.15.0", "v1", {"mamba_spec_block_modes": frozenset({"none", "align"})},
     "speculative blocks per Mamba group in modes none / align (MambaSpec)"),
    ("0.15.0", "v1", {"mamba_cache_modes": True, "mamba_all_mode": True,
                      "mamba_mode_choices": ("align", "all", "none")},
     "prefix caching on Mamba/linear-attention models: mamba_cache_mode align/all by model "
     "(config/cache.py, models/config.py MambaModelConfig)"),
    ("0.15.0", "v1", {"mm_zero_skips_tower": frozenset({"*"})},
     "every multimodal model: SupportsMultiModal._mark_tower_model skips a tower whose "
     "modalities are all limited to 0 (model_executor/models/interfaces.py)"),
    ("0.15.0", "v1", {"draft_model": "explicit"},
     "v1 draft models (v1/spec_decode/draft_model.py), with \"method\": \"draft_model\" "
     "only: else 'Unsupported speculative method: 'None'' (config/speculative.py)"),
    ("0.15.0", "v1", {"mla_flashinfer_nope": (128,), "mla_block_flashinfer": 64},
     "MLA on Blackwell: FLASHINFER_MLA when qk_nope_head_dim is 128, block size forced to 64 "
     "(platforms/cuda.py)"),
    ("0.16.0", "both", {"lora_embedding_archs": frozenset({
        "LlamaForCausalLM", "MixtralForCausalLM", "GraniteForCausalLM", "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM"})}, "Qwen3 / Qwen3-MoE embedding_modules (models/qwen3*.py)"),
    ("0.16.0", "v1", {"online_fp8_bf16_load_peak": "layer"},
     "online FP8 weights on the meta device, materialized in 16-bit layer by layer just in "
     "time (quantization/fp8.py; up to 0.15 every layer is allocated in 16-bit at init)"),
    ("0.16.0", "v1", {"profile_assert_ge": True},
     "the profiling assert allows equality: init free >= free after profiling (gpu_worker.py)"),
    ("0.17.0", "v1", {"mamba_spec_refused": None, "mamba_align_refuses_spec": False},
     "Mamba layers with speculative decoding (mamba/abstract.py)"),
    ("0.17.0", "v1", {"kv_fit_whole_model": False},
     "the fit check per worker, on the groups projected to its layers (get_kv_cache_configs)"),
    ("0.17.0", "v1", {"v2_kernel_warmup": True},
     "Model Runner V2 warms up with min(max_num_seqs, batched tokens // 2) two-token prompts "
     "and no sampler wrapper: torch's OOM (v1/worker/gpu/warmup.py)"),
    ("0.17.0", "v1", {"conv_spec_kinds": frozenset({"gdn", "mamba2"})},
     "Mamba2's conv state with the speculative tokens' columns (mamba_mixer2.py)"),
    ("0.17.0", "v1", {"quant_flag_any_text": True},
     "--quantization: QuantizationMethods | str (engine/arg_utils.py): no argparse choices"),
    ("0.17.0", "v1", {"draft_model": "inferred"},
     "a drafter that is no EAGLE/Medusa/MTP model is inferred as draft_model "
     "(config/speculative.py SpeculativeConfig.__post_init__)"),
    ("0.17.0", "v1", {"gdn_ssm_flag": True},
     "Gated DeltaNet's SSM state follows --mamba-ssm-cache-dtype; Qwen3.5's hook passes its "
     "config's mamba_ssm_dtype (qwen3_5.py, models/config.py)"),
    ("0.17.0", "v1", {"performance_mode_flag": True},
     "--performance-mode: throughput doubles the default batched tokens and sequences "
     "(engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args); interactivity "
     "captures sizes 1-32 one by one (config/vllm.py _set_cudagraph_sizes)"),
    ("0.17.0", "v1", {"profile_sampler_copies": 2.1},
     "in-place Triton top-k/top-p in the dummy sampler (v1/sample/ops/topk_topp_triton.py)"),
    ("0.18.0", "v1", {"mla_flashinfer_nope": (64, 128), "mla_block_flashinfer": 32,
                      "mla_block_hopper": 16, "mla_block_hopper_fp8": 64,
                      "mla_user_block": None},
     "MLA block size from the chosen backend's kernel sizes (update_block_size_for_backend): "
     "FLASHINFER_MLA [32, 64] -> 32 on Blackwell, FLASH_ATTN_MLA MultipleOf(16) on Hopper "
     "(no fp8 KV: FLASHMLA's 64 then); a user's --block-size kept"),
    ("0.18.0", "v1", {"hybrid_align_256_blackwell": None},
     "the head-size-256 Blackwell alignment removed (model_executor/models/config.py)"),
    ("0.18.0", "v1", {"block_size_choices": None, "block_size_16": None},
     "block_size: SkipValidation[int] (config/cache.py); 0.18 backends not checked"),
    ("0.18.0", "v1", {"kv_group_max_ratio": 1.5}, "hybrid group-size threshold 1.5 "
     "(kv_cache_utils.py, checked in the 0.18-0.33 wheels)"),
    ("0.18.0", "v1", {"graph_budget": "estimated",
                      "allreduce_in_n": "graph_probe"},
     "§1a; graph-memory probe in the profiling window (PR 30515, IPC leak: PR 46515)"),
    ("0.19.0", "v1", {"online_fp8_bf16_load_peak": None}, "layer-wise online FP8 (§8)"),
    ("0.19.0", "v1", {"kv_fit_check": "groups"},
     "... every group's blocks summed (kv_cache_utils.py)"),
    ("0.19.0", "v1", {"mla_flashinfer_nope": (64, 128, 192)},
     "FlashInfer MLA takes qk_nope_head_dim 192 (v1/attention/backends/mla/flashinfer_mla.py)"),
    ("0.19.0", "v1", {"kv_skip_layers": True},
     "--kv-cache-dtype-skip-layers: the layers it lists keep the model dtype "
     "(layers/attention/attention.py; config/cache.py)"),
    ("0.20.0", "v1", {"mamba_spec_prefers_align": True},
     "'Mamba cache mode is set to 'align' ... when prefix caching and speculative decoding are "
     "enabled' (models/config.py)"),
    ("0.20.0", "v1", {"kv_quant_dtypes": _KVQ_020, "tq_layer_buffers": True},
     "TurboQuant, per-token-head int8/fp8 and nvfp4 KV caches (config/cache.py CacheDType); "
     "TurboQuant layers register decode buffers at init (attention.py)"),
    ("0.20.0", "v1", {"hybrid_align_from_block": True},
     "hybrid alignment: the attention backend's smallest kernel block size, or the block size "
     "if larger (platforms/interface.py)"),
    ("0.20.0", "v1", {"kv_offload_in_shm": True},
     "native KV offloading: one /dev/shm mmap file of --kv-offloading-size for all TP ranks "
     "('Insufficient space in /dev/shm' otherwise; v1/kv_offload/cpu/shared_offload_region.py)"),
    ("0.20.0", "v1", {"nemotron_ssm_default": "float32"},
     "NemotronH's default SSM dtype float32 (DEFAULT_MAMBA_SSM_CACHE_DTYPE)"),
    ("0.20.0", "v1", {"graph_budget": "subtracted", "default_util": 0.92,
                      "mamba_blocks_check": True}, "§1a, §10"),
    ("0.20.1", "v1", {"dcp_log": None},
     "the token count is concurrency x length: no 'Multiplying' line (v1/core/kv_cache_utils.py)"),
    ("0.20.1", "v1", {"override_before_check": True, "tokens_formula": "conc_x_len"},
     "§3, §1b: the override becomes available memory before the checks; tokens = "
     "int(max_concurrency x max_model_len) (v1/core/kv_cache_utils.py, 0.20.1)"),
    ("0.21.0", "v1", {"tq_hybrid": "unprotected", "tq_layer_buffers": False,
                      "nvfp4_kv": "buffer"},
     "TurboQuant: hybrids without boundary layers, buffers in the shared workspace; nvfp4 "
     "usable, an FP8 output buffer per FlashInfer layer (flashinfer.py)"),
    ("0.21.0", "v1", {"block_size_16": "none"},
     "FlexAttention MultipleOf(16): 'No valid attention backend found' (platforms/cuda.py)"),
    ("0.22.0", "v1", {"mamba_spec_prefers_align": False}, "... dropped"),
    ("0.22.0", "v1", {"mamba_spec_block_modes": frozenset({"none", "align", "all"})},
     "... and in mode all (MambaSpec.max_memory_usage_bytes)"),
    ("0.22.0", "v1", {"mamba_dtype_choices": ("auto", "float32", "float16", "bfloat16")},
     "MambaDType gains bfloat16"),
    ("0.22.0", "v1", {"msg_no_kv": "cpu", "msg_fit": "v1_022"}, "§10"),
    ("0.22.0", "v1", {"model_runner_v2": "archs", "v2_archs": frozenset({"Qwen3ForCausalLM"}),
                      "v2_dense_unquantized_only": True},
     "Model Runner V2 by default for Qwen3 (not MoE, not quantized; config/vllm.py)"),
    ("0.23.0", "v1", {"v2_archs": frozenset({"LlamaForCausalLM", "MistralForCausalLM",
                                             "Qwen3ForCausalLM"})},
     "Model Runner V2 by default for Llama, Mistral, Qwen3 (config/vllm.py)"),
    ("0.23.0", "v1", {"block_size_positive": True},
     "block_size: int = Field(gt=0) (config/cache.py)"),
    ("0.24.0", "v1", {"gguf_loader": False},
     "GGUF removed: no `gguf` method, loader or config patching in 0.24's sources"),
    ("0.24.0", "v1", {"v2_dense_unquantized_only": False, "v2_archs": frozenset({
        "LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM", "DeepseekV2ForCausalLM",
        "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})},
     "Model Runner V2 by default for six architectures, MoE and quantized too (config/vllm.py)"),
    ("0.25.0", "v1", {"mm_ipc_reserve": "0.25"},
     "--mm-ipc-gpu-memory-gb: the frontend's multimodal GPU decoding budget comes out of the KV "
     "cache budget (gpu_worker.py _reserve_mm_ipc_gpu_memory)"),
    ("0.25.0", "v1", {"kv_quant_dtypes": _KVQ_025, "kv_skip_align": True},
     "int4_per_token_head; skipped layers align the block size "
     "(platforms/interface.py _align_heterogeneous_kv_block_size)"),
    ("0.25.0", "v1", {"model_runner_v2": "dense", "v2_archs": frozenset({
        "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})},
     "Model Runner V2 default for dense models and three MoE architectures (PR 44443)"),
    ("0.26.0", "v1", {"v2_archs": frozenset({
        "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM",
        "InklingForCausalLM", "InklingForConditionalGeneration",
        "LongcatFlashNgramForCausalLM"})}, "two more V2 architectures (config/vllm.py)"),
    ("0.26.0", "v1", {"sliding_inflight": "batched_x_batches"}, "§4"),
    ("0.26.0", "v1", {"dcp_messages": "v026", "dcp_hybrid": True},
     "'tp_size=T must be divisible by dcp_size=D.' (config/parallel.py); 'DCP not support "
     "hybrid attn now.' removed"),
    ("0.26.0", "v1", {"graph_probe_rocm": True},
     "CUDA-graph memory probe on ROCm too (gpu_worker.py is_cuda_alike, PR 44825)"),
    ("0.27.0", "v1", {"mm_ipc_reserve": "0.27"},
     "the reservation moved to multimodal/gpu_ipc_memory.py (hw_decoders in its refusal)"),
    ("0.27.0", "v1", {"consumed_model": True}, "K = ceil(uT) - (C + H) - G (§1a)"),
    ("0.27.0", "v1", {"v2_profiles_encoder": True},
     "Model Runner V2 profiles the multimodal encoder (v1/worker/gpu/model_runner.py "
     "profile_run; 0.12-0.26: text forward and sampler only)"),
    ("0.27.0", "v1", {"dcp_messages": "v027"},
     "DCP's GQA/MQA checks raise ValueErrors with new words (config/model.py)"),
    ("0.27.0", "v1", {"csa_grouping": "packed"},
     "DeepSeek-V4: sliding pages no longer padded; unweighted concurrency (kv_cache_utils.py)"),
    ("0.28.0", "v1", {"kv_quant_dtypes": _KVQ_028}, "nvfp4_4over6 (config/cache.py)"),
    ("0.28.0", "v1", {"log_weights_v2": None}, "V2 prints 'GiB memory' like V1"),
    ("0.28.0", "v1", {"log_capacity": "one_line", "sched_defaults": "v1_028"}, "§1b, §9"),
    ("0.28.0", "v1", {"hybrid_prefix_caching_default": True},
     "prefix caching on for hybrid models: mamba_cache_mode 'align' (arg_utils.py)"),
    ("0.28.0", "v1", {"mamba_all_mode": False},
     "prefix caching puts every Mamba/linear-attention model in mamba_cache_mode 'align' "
     "(models/config.py MambaModelConfig; 0.27 still chose 'all' where supported)"),
    ("0.29.0", "v1", {"fp8_moe_block_check": False},
     "block-FP8 MoE block shapes refined to the per-rank size (fused_moe/oracle/fp8.py)"),
    ("0.29.0", "v1", {"conv_spec_kinds": frozenset({"gdn", "mamba2", "short_conv"})},
     "short_conv's too (short_conv.py)"),
    ("0.29.0", "v1", {"csa_grouping": "balanced"},
     "DeepSeek-V4: bucket grouping (_get_packed_kv_cache_groups)"),
    ("0.29.0", "v1", {"null_block_in_check": True, "model_runner_v2": "all"},
     "avail = K - P (§6); Model Runner V2 for every model (PR 53183)"),
    ("0.30.0", "v1", {"cudagraph_control": "opt_decode"},
     "without compilation mode 3: PIECEWISE -> NONE, FULL_AND_PIECEWISE -> FULL_DECODE_ONLY "
     "(config/vllm.py _normalize_piecewise_cudagraph_mode)"),
    ("0.30.0", "v1", {"log_capacity": "device_line", "rope_yarn_excluded": True}, "§1b, §7"),
    ("0.30.0", "v1", {"kv_quant_dtypes": _KVQ_028 | {"nvfp4_ds_mla"}},
     "nvfp4_ds_mla for sparse MLA (config/cache.py)"),
    ("0.30.0", "v1", {"csa_auto_kv_ok": True},
     "DeepSeek-V4: kv_cache_dtype auto maps to fp8_ds_mla (models/deepseek_v4/attention.py)"),
    ("0.31.0", "v1", {"v1_runner_spec_methods": frozenset({
        "ngram", "ngram_gpu", "suffix", "medusa", "mlp_speculator", "custom_class"})},
     "draft models run on Model Runner V2 (config/vllm.py)"),
    ("0.32.0", "v1", {"v1_runner_spec_methods": frozenset({
        "suffix", "medusa", "mlp_speculator", "custom_class"})}, "... n-gram too"),
    ("0.32.0", "v1", {"mamba_ckpt_kinds": frozenset({"mamba2"})},
     "a prefill-checkpoint block per Mamba2 group in align mode (mamba_mixer2.py)"),
    ("0.32.0", "v1", {"mamba_mode_choices": ("align", "none")},
     "MambaCacheMode = Literal['align', 'none'] (config/cache.py)"),
    ("0.32.0", "v1", {"msg_autofit_kv": True},
     "auto-fit lines name the KV cache memory and its device (kv_cache_utils.py)"),
    ("0.32.0", "v1", {}, "external-weights messages (§10)"),
    ("0.33.0", "v1", {"v1_runner_spec_methods": frozenset({"suffix", "custom_class"})},
     "... Medusa and MLP speculators too"),
    ("0.33.0", "v1", {"msg_mamba_chunked": "prefix"},
     "'Chunked prefill is required for Mamba prefix caching.' (models/config.py)"),
    ("0.33.0", "v1", {"mamba_ckpt_kinds": frozenset({"mamba2", "gdn"})},
     "... and per Gated DeltaNet group with FlashInfer's GDN prefill (qwen_gdn_linear_attn.py)"),
    ("0.33.0", "v1", {"cublas_before_snapshot": True, "modelopt_kv_auto_fp8": True,
                      "sched_defaults": "v1_033"}, "§1a, §4, §9"),
)

# `vllm serve` flags that came or went, by the Settings field each sets: (the flag, the first
# release that has it, the last one or None). Read from each release's engine/arg_utils.py
# (0.4.1-0.33.0; "0.4.0": the oldest examined). Argparse refuses them elsewhere, before
# anything else. The flags whose releases other checks follow (quantization, CUDA-graph,
# Mamba, DCP, multimodal-encoder, KV-format, config-override flags) are not listed.
FLAG_RELEASES: dict[str, tuple[str, str, str | None]] = {
    "swap_space": ("--swap-space", "0.4.0", "0.17.1"),
    "disable_sliding_window": ("--disable-sliding-window", "0.4.3", None),
    "cpu_offload_gb": ("--cpu-offload-gb", "0.5.3", None),
    "limit_mm_per_prompt": ("--limit-mm-per-prompt", "0.5.5", None),
    "enable_expert_parallel": ("--enable-expert-parallel", "0.8.0", None),
    "data_parallel_size": ("--data-parallel-size", "0.8.3", None),
    "disable_hybrid_kv_cache_manager": ("--disable-hybrid-kv-cache-manager", "0.9.1", None),
    "async_scheduling": ("--async-scheduling", "0.10.0", None),
    "skip_mm_profiling": ("--skip-mm-profiling", "0.10.1", None),
    "kv_offloading_size": ("--kv-offloading-size", "0.11.1", None),
    "kv_offloading_backend": ("--kv-offloading-backend", "0.11.1", None),
    "language_model_only": ("--language-model-only", "0.17.0", None),
    "enable_multimodal_encoder_data_parallel": ("--enable-multimodal-encoder-data-parallel",
                                                "0.9.1", "0.12.0"),
    "mm_encoder_tp_mode": ("--mm-encoder-tp-mode", "0.10.2", None),
    "kv_cache_dtype_skip_layers": ("--kv-cache-dtype-skip-layers", "0.19.0", None),
    "kv_cache_memory_bytes": ("--kv-cache-memory-bytes", "0.10.2", None),
    "task": ("--task", "0.6.4", "0.12.0"),
    "lora_extra_vocab_size": ("--lora-extra-vocab-size", "0.4.0", "0.11.2"),
    "fully_sharded_loras": ("--fully-sharded-loras", "0.4.2", None),
    "runner": ("--runner", "0.10.1", None),
    "convert": ("--convert", "0.10.1", None),
}
# Flags whose spelling depends on the release (`Settings.flag_spellings`), the same way:
# speculative decoding's --speculative-model / --num-speculative-tokens 0.4.1-0.8.2 (V0's;
# not in 0.4.0's engine/arg_utils.py, core/engine_flags.py), the --speculative-config JSON
# from 0.8.2, and --spec-method / --spec-model / --spec-tokens, which fill the JSON's keys,
# from 0.22.0; --device-memory-utilization, a second name of --gpu-memory-utilization, from
# 0.31.0; the compilation flags: the --compilation-config JSON and its short form -O from
# 0.6.5 (-O N is the compilation level up to 0.11, the optimization level from 0.12),
# --optimization-level and -cc from 0.12.0; the blocks override, --forced-num-gpu-blocks in
# 0.4.0, --num-gpu-blocks-override from 0.4.1; the short options -ep (--enable-expert-parallel)
# from 0.14.0 and -sc (--speculative-config) from 0.19.0.
SPELLING_RELEASES: dict[str, tuple[str, str | None]] = {
    "--speculative-model": ("0.4.1", "0.8.2"),
    "--num-speculative-tokens": ("0.4.1", "0.8.2"),
    "--speculative-config": ("0.8.2", None),
    "--spec-method": ("0.22.0", None),
    "--spec-model": ("0.22.0", None),
    "--spec-tokens": ("0.22.0", None),
    "--device-memory-utilization": ("0.31.0", None),
    "--compilation-config": ("0.6.5", None),
    "-O": ("0.6.5", None),
    "-cc": ("0.12.0", None),
    "--optimization-level": ("0.12.0", None),
    "--forced-num-gpu-blocks": ("0.4.0", "0.4.0"),
    "-ep": ("0.14.0", None),
    "-sc": ("0.19.0", None),
    "--num-gpu-blocks-override": ("0.4.1", None),
}
# The model-config flags (`Settings.config_overrides`), the same way: flag -> (first, last).
# 0.11.1 removed --rope-scaling and --rope-theta: --hf-overrides sets the same config keys.
OVERRIDE_FLAG_RELEASES: dict[str, tuple[str, str | None]] = {
    "--rope-scaling": ("0.4.3", "0.11.0"),
    "--rope-theta": ("0.5.0", "0.11.0"),
    "--hf-overrides": ("0.6.4", None),
}
