"""vLLM's command-line flags, as data: which ones set memory-relevant Settings (and how their
values parse), their aliases, and the vLLM flags vramguard accepts and ignores.

Read from vLLM's `vllm/engine/arg_utils.py` and the OpenAI server's CLI args across releases
0.4 to 0.33 (flags that exist in any of them are accepted). Used by `sources.vllm_args`.
"""

from __future__ import annotations

POS_INT, HUMAN_INT, FLOAT_FRAC, FLOAT_NONNEG, CHOICE, STR, BOOL, TRIBOOL, JSON, MAXLEN = (
    "pos_int", "human_int", "frac", "float>=0", "choice", "str", "bool", "tribool", "json",
    "max_model_len")
COMPILE, INT_LIST = "compile", "int_list"      # sources/vllm_compile.py
STR_LIST = "str_list"                            # nargs="+" strings
MM_LIMITS = "mm_limits"                          # sources/vllm_values.py mm_limits

DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
MAMBA_DTYPES = ("auto", "float32", "float16", "bfloat16")     # by release: core/validation.py
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "half", "float32", "fp8", "fp8_e4m3",
                   "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4", "int8",
                   # 0.20+ (which release accepts which: core/kv_quant.py, by version)
                   "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
                   "turboquant_3bit_nc", "int8_per_token_head", "fp8_per_token_head",
                   "int4_per_token_head", "nvfp4_4over6", "nvfp4_ds_mla")
# Quantization methods across vLLM versions; an unlisted method is accepted with a note
# (plugins register their own), only the shape of the value is checked.
QUANT_METHODS = (
    "aqlm", "awq", "awq_marlin", "auto_awq", "auto_gptq", "bitblas", "bitsandbytes",
    "compressed-tensors", "cpu_awq", "deepseek_v4_fp8", "deepspeedfp", "experts_int8",
    "fbgemm_fp8", "fp8", "fp8_per_block", "fp8_per_channel", "fp8_per_tensor", "fp_quant",
    "gguf", "gptq", "gptq_bitblas", "gptq_marlin", "gptq_marlin_24", "gpt_oss_mxfp4", "hqq",
    "humming", "inc", "int8_per_channel_weight_only", "ipex", "marlin", "modelopt",
    "modelopt_fp4", "modelopt_mixed", "modelopt_mxfp8", "moe_wna16", "mxfp4", "mxfp8",
    "neuron_quant", "nvfp4_per_token", "online", "petit_nvfp4", "ptpc_fp8", "qqq", "quark",
    "rtn", "squeezellm", "torchao", "tpu_int8", "fp6", "eetq", "deepgemm")


class Flag:
    """One memory flag: the Settings field it sets, how its value parses, its range."""

    __slots__ = ("field", "kind", "lo", "hi", "choices")

    def __init__(self, field: str, kind: str, lo: float | None = None, hi: float | None = None,
                 choices: tuple[str, ...] = ()):
        self.field = field          # Settings field ("" for --config, handled apart)
        self.kind = kind
        self.lo = lo                # inclusive lower bound
        self.hi = hi                # inclusive upper bound
        self.choices = choices

    def __repr__(self) -> str:
        return f"Flag({self.field!r}, {self.kind!r})"


# Long names with dashes (underscores are folded to dashes before lookup).
FLAGS: dict[str, Flag] = {
    "--tensor-parallel-size": Flag("tensor_parallel_size", POS_INT, 1, 4096),
    "--pipeline-parallel-size": Flag("pipeline_parallel_size", POS_INT, 1, 4096),
    "--data-parallel-size": Flag("data_parallel_size", POS_INT, 1, 65536),
    "--decode-context-parallel-size": Flag("decode_context_parallel_size", POS_INT, 1, 4096),
    "--gpu-memory-utilization": Flag("gpu_memory_utilization", FLOAT_FRAC, 0, 1),
    # vLLM 0.31+: a device-neutral alias (the same `dest`, CacheConfig.device_memory_utilization)
    "--device-memory-utilization": Flag("gpu_memory_utilization", FLOAT_FRAC, 0, 1),
    "--max-model-len": Flag("max_model_len", MAXLEN, 1),
    "--max-num-seqs": Flag("max_num_seqs", POS_INT, 1),
    "--max-num-batched-tokens": Flag("max_num_batched_tokens", HUMAN_INT, 1),
    "--dtype": Flag("dtype", CHOICE, choices=DTYPES),
    "--quantization": Flag("quantization", STR),
    "--allow-deprecated-quantization": Flag("allow_deprecated_quantization", BOOL),
    "--kv-cache-dtype": Flag("kv_cache_dtype", CHOICE, choices=KV_CACHE_DTYPES),
    "--block-size": Flag("block_size", POS_INT, 1, 65536),
    "--enforce-eager": Flag("enforce_eager", BOOL),
    "--kv-cache-memory-bytes": Flag("kv_cache_memory_bytes", HUMAN_INT, 1),
    "--num-gpu-blocks-override": Flag("num_gpu_blocks_override", POS_INT, 1),
    "--forced-num-gpu-blocks": Flag("num_gpu_blocks_override", POS_INT, 1),   # 0.4.0's
    "--cpu-offload-gb": Flag("cpu_offload_gb", FLOAT_NONNEG, 0),
    "--swap-space": Flag("swap_space", FLOAT_NONNEG, 0),
    "--enable-chunked-prefill": Flag("enable_chunked_prefill", TRIBOOL),
    "--enable-prefix-caching": Flag("enable_prefix_caching", TRIBOOL),
    "--async-scheduling": Flag("async_scheduling", TRIBOOL),
    "--enable-expert-parallel": Flag("enable_expert_parallel", BOOL),
    # its choices by release are checked in core/validation.py
    "--all2all-backend": Flag("all2all_backend", STR),
    "--disable-custom-all-reduce": Flag("disable_custom_all_reduce", BOOL),
    "--language-model-only": Flag("language_model_only", BOOL),
    "--runner": Flag("runner", CHOICE, choices=("auto", "generate", "pooling", "draft")),
    "--convert": Flag("convert", CHOICE, choices=("auto", "none", "embed", "classify",
                                                  "reward", "mm_encoder_only")),
    "--task": Flag("task", CHOICE, choices=("auto", "generate", "embedding", "embed",
                                            "classify", "score", "reward", "transcription",
                                            "draft")),
    "--limit-mm-per-prompt": Flag("limit_mm_per_prompt", MM_LIMITS),
    "--mm-encoder-tp-mode": Flag("mm_encoder_tp_mode", CHOICE, choices=("weights", "data")),
    # host memory only (vramguard check's host need; the GPU pool does not change)
    "--kv-offloading-size": Flag("kv_offloading_size", FLOAT_NONNEG, 0, 1 << 20),
    "--kv-offloading-backend": Flag("kv_offloading_backend", CHOICE, choices=("native", "lmcache")),
    # vLLM 0.9.1-0.12.0 (deprecated from 0.10.2): the same as --mm-encoder-tp-mode data
    "--enable-multimodal-encoder-data-parallel": Flag("enable_multimodal_encoder_data_parallel",
                                                      BOOL),
    "--skip-mm-profiling": Flag("skip_mm_profiling", BOOL),
    "--mm-ipc-gpu-memory-gb": Flag("mm_ipc_gpu_memory_gb", FLOAT_NONNEG, 0, 1 << 20),
    "--enable-lora": Flag("enable_lora", BOOL),
    "--max-loras": Flag("max_loras", POS_INT, 1),
    "--max-lora-rank": Flag("max_lora_rank", POS_INT, 1),
    "--max-cpu-loras": Flag("max_cpu_loras", POS_INT, 1),
    # argparse's choices by release are checked in core/validation.py (float32 up to 0.6.4)
    "--lora-dtype": Flag("lora_dtype", CHOICE, choices=("auto", "float16", "bfloat16", "float32")),
    "--lora-extra-vocab-size": Flag("lora_extra_vocab_size", POS_INT, 0, 1 << 20),
    "--fully-sharded-loras": Flag("fully_sharded_loras", BOOL),
    "--specialize-active-lora": Flag("specialize_active_lora", BOOL),
    "--enable-eplb": Flag("enable_eplb", BOOL),
    "--num-redundant-experts": Flag("num_redundant_experts", POS_INT, 0, 1 << 16),
    "--eplb-config": Flag("num_redundant_experts", JSON),
    "--disable-sliding-window": Flag("disable_sliding_window", BOOL),
    "--disable-hybrid-kv-cache-manager": Flag("disable_hybrid_kv_cache_manager", BOOL),
    "--mamba-cache-mode": Flag("mamba_cache_mode", CHOICE, choices=("none", "align", "all")),
    "--mamba-cache-dtype": Flag("mamba_cache_dtype", CHOICE, choices=MAMBA_DTYPES),
    "--mamba-ssm-cache-dtype": Flag("mamba_ssm_cache_dtype", CHOICE, choices=MAMBA_DTYPES),
    "--max-cudagraph-capture-size": Flag("max_cudagraph_capture_size", POS_INT, 1, 1 << 20),
    "--cudagraph-capture-sizes": Flag("cudagraph_capture_sizes", INT_LIST),
    "--cuda-graph-sizes": Flag("cuda_graph_sizes", INT_LIST),           # vLLM 0.9-0.12
    "--kv-cache-dtype-skip-layers": Flag("kv_cache_dtype_skip_layers", STR_LIST),  # 0.20+
    "--optimization-level": Flag("optimization_level", POS_INT, 0, 3),  # -O N from 0.12
    "--compilation-config": Flag("compilation_mode", COMPILE),           # and -O JSON (<= 0.12)
    "--performance-mode": Flag("performance_mode", CHOICE,               # vLLM 0.17+
                               choices=("balanced", "interactivity", "throughput")),
    # Speculative decoding, by release (rules_changes.SPELLING_RELEASES): the JSON
    # 0.8.2+; --num-speculative-tokens / --speculative-model up to 0.8.2; --spec-* 0.22+.
    "--speculative-config": Flag("num_speculative_tokens", JSON),
    "--num-speculative-tokens": Flag("num_speculative_tokens", POS_INT, 0, 1024),
    "--spec-tokens": Flag("num_speculative_tokens", POS_INT, 0, 1024),
    "--speculative-model": Flag("speculative_model", STR),
    "--spec-model": Flag("speculative_model", STR),
    "--spec-method": Flag("speculative_method", STR),
    "--model": Flag("model", STR),
    "--config": Flag("", STR),
}
# Short options (their releases: core/engine_flags.py; -ep and -sc are judged by
# rules_changes.SPELLING_RELEASES, the others as typed by core/parser_flags.py).
ALIASES = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size",
           "-dp": "--data-parallel-size", "-q": "--quantization", "-cc": "--compilation-config",
           "-dcp": "--decode-context-parallel-size", "-ep": "--enable-expert-parallel",
           "-sc": "--speculative-config", "-pcp": "--prefill-context-parallel-size",
           "-ac": "--attention-config", "-dc": "--diffusion-config",
           "-asc": "--api-server-count", "-dpa": "--data-parallel-address",
           "-dpb": "--data-parallel-backend", "-dpe": "--data-parallel-external-lb",
           "-dph": "--data-parallel-hybrid-lb", "-dpl": "--data-parallel-size-local",
           "-dpm": "--data-parallel-multi-port-external-lb", "-dpn": "--data-parallel-rank",
           "-dpp": "--data-parallel-rpc-port", "-dpr": "--data-parallel-start-rank",
           "-n": "--nnodes", "-r": "--node-rank",
           "-spec-draft-tp": "--speculative-draft-tensor-parallel-size"}
# vLLM flags before BooleanOptionalAction had a --disable- twin of these (<= 0.9)
NEGATIONS = {"--disable-prefix-caching": "--enable-prefix-caching",
             "--disable-chunked-prefill": "--enable-chunked-prefill"}

# vLLM flags that do not change startup memory: accepted and ignored. Value-taking ones
# (from vLLM's engine and OpenAI-server args, 0.4 -> 0.33; removed flags stay accepted):
IGNORED_VALUE = frozenset("""
--host --port --uds --uvicorn-log-level --allowed-origins --allowed-methods --allowed-headers
--anthropic-disabled-thinking-effort --reasoning-effort-map --tool-strict-level
--sse-keep-alive-interval --grpc-port --cohere-format --chat-template-text-format
--image-input-type --image-token-id --image-input-shape --image-feature-size
--image-processor --image-processor-revision
--api-key --lora-modules --prompt-adapters --chat-template --chat-template-content-format
--response-role --ssl-keyfile --ssl-certfile --ssl-ca-certs --ssl-cert-reqs --ssl-ciphers
--root-path --middleware --tool-call-parser --tool-parser-plugin --tool-server
--log-config-file --max-log-len --served-model-name --tokenizer --hf-config-path
--tokenizer-mode --seed --allowed-local-media-path --allowed-media-domains
--revision --code-revision --tokenizer-revision --max-logprobs --logprobs-mode
--config-format --hf-token --pooler-config --override-pooler-config
--logits-processor-pattern --generation-config --override-generation-config --model-impl
--override-attention-dtype --logits-processors --io-processor-plugin --load-format
--download-dir --safetensors-load-strategy --safetensors-prefetch-block-size
--safetensors-prefetch-num-threads --model-loader-extra-config --ignore-patterns
--pt-load-map-location --reasoning-parser --reasoning-parser-plugin --reasoning-config
--guided-decoding-backend --distributed-executor-backend --data-parallel-rank
--data-parallel-start-rank --data-parallel-size-local --data-parallel-address
--data-parallel-rpc-port --data-parallel-backend --data-parallel-supervisor-port
--dbo-decode-token-threshold --dbo-prefill-token-threshold
--expert-placement-strategy --eplb-window-size --eplb-step-interval
--max-parallel-loading-workers --worker-cls --worker-extension-cls --prefix-caching-hash-algo
--media-io-kwargs --mm-processor-kwargs --mm-processor-cache-gb --mm-processor-cache-type
--mm-shm-cache-max-object-size-mb --mm-encoder-attn-backend
--mm-encoder-attn-dtype --video-pruning-rate --default-mm-loras
--lora-target-modules --show-hidden-metrics-for-version --otlp-traces-endpoint
--collect-detailed-traces --max-num-partial-prefills --max-long-partial-prefills
--long-prefill-token-threshold --num-lookahead-slots --scheduling-policy --scheduler-cls
--kv-transfer-config --kv-events-config --ec-transfer-config --weight-transfer-config
--additional-config --structured-outputs-config --device --device-ids --preemption-mode
--scheduler-delay-factor --tokenizer-pool-size --tokenizer-pool-type
--tokenizer-pool-extra-config --num-scheduler-steps --max-prompt-adapters
--max-prompt-adapter-token --qlora-adapter-name-or-path --spec-decoding-acceptance-method
--typical-acceptance-sampler-posterior-threshold --typical-acceptance-sampler-posterior-alpha
--speculative-draft-tensor-parallel-size --speculative-disable-by-batch-size
--api-server-count --attention-backend --profiler-config --h11-max-incomplete-event-size
--h11-max-header-count --default-chat-template-kwargs --disable-access-log-for-endpoints
--distributed-timeout-seconds --cpu-distributed-timeout-seconds --shutdown-timeout
--master-addr --master-port --nnodes --node-rank --numa-bind-cpus --numa-bind-nodes
--renderer-num-workers --stream-interval --fingerprint-mode --fingerprint-value
--jit-monitor-mode --kv-cache-metrics-sample --dcp-comm-backend --dcp-kv-cache-interleave-size
--cp-kv-cache-interleave-size --dp-supervisor-probe-failure-threshold
--dp-supervisor-probe-interval-s --dp-supervisor-probe-timeout-s
--prefill-schedule-interval --prefix-match-unit --mamba-backend
--moe-backend --linear-backend --gdn-prefill-backend --ir-op-priority --kernel-config
--model-class-overrides --ubatch-size --mm-tensor-ipc
--max-num-active-seqs --max-num-queued-reqs --max-num-queued-tokens --dp-sync-interval
--elastic-ep-max-dp-size --ec-manager-config --fault-tolerance-config --watchdog-config
--custom-histogram-buckets --per-request-spec-decode-metrics --log-level --logging-config
--kda-decode-backend --kda-prefill-backend --mamba-ssu-algorithm --sparse-indexer-topk-backend
--mm-hasher-algorithm --video-pruning-method --watermark-config --max-lora-cls-labels
--prefix-cache-retention-interval --sleep-mode-backend --sleep-preserve-parameter-names
--override-neuron-config
""".split())
# Switches (no value); their `--no-` forms are accepted too.
IGNORED_BOOL = frozenset("""
--trust-remote-code --disable-log-requests --enable-log-requests --enable-log-outputs
--trust-request-mm-kwargs --enable-scale-out --cohere-is-reasoning-model
--use-gpu-for-pooling-score --engine-use-ray --disable-image-processor --mm-cache-preprocessor
--enable-log-deltas --disable-log-stats --aggregate-engine-logging --log-error-stack
--disable-frontend-multiprocessing --enable-auto-tool-choice --enable-prompt-tokens-details
--enable-server-load-tracking --enable-force-include-usage --enable-tokenizer-info-endpoint
--return-tokens-as-token-ids --disable-fastapi-docs --enable-offline-docs
--disable-uvicorn-access-log --enable-ssl-refresh --enable-request-id-headers --headless
--trust-request-chat-template --exclude-tools-when-tool-choice-none --skip-tokenizer-init
--enable-prompt-embeds --disable-cascade-attn --enable-sleep-mode --use-tqdm-on-load
--data-parallel-hybrid-lb --data-parallel-external-lb --data-parallel-multi-port-external-lb
--enable-dbo --disable-nccl-for-dp-synchronization --eplb-log-balancedness
--ray-workers-use-nsight
--calculate-kv-scales --kv-sharing-fast-prefill
--enable-mm-embeds --interleave-mm-strings --disable-mm-preprocessor-cache --enable-lora-bias
--disable-chunked-mm-input --guided-decoding-disable-fallback
--guided-decoding-disable-any-whitespace --guided-decoding-disable-additional-properties
--use-v2-block-manager --disable-async-output-proc --multi-step-stream-outputs
--speculative-disable-mqa-scorer --disable-logprobs-during-spec-decoding
--enable-prompt-adapter --worker-use-ray --tokens-only --enable-return-routed-experts
--enable-layerwise-nvtx-tracing --enable-logging-iteration-details --enable-mfu-metrics
--enable-mm-processor-stats --enable-per-request-metrics --cudagraph-metrics
--kv-cache-metrics --fail-on-environ-validation --allow-credentials
--enable-flashinfer-autotune --enable-elastic-ep
--enable-ep-weight-filter --enable-bf16x3-router-gemm --enable-flash-late-interaction
--enable-mamba-cache-stochastic-rounding --enable-mixed-moe-lora-format
--enable-moe-shared-loras --enable-tower-connector-lora
--jit-monitor-verbose --numa-bind --scheduler-reserve-full-isl --use-fp64-gumbel --grpc
--enable-reasoning
--enable-fault-tolerance --enable-trace-replay --return-sampling-mask --monokernel
--long-prefill-token-threshold-adaptive --mm-device-do-normalize --enable-shm-tensor-arena
--sleep-mode-offload-cudagraph --enable-nccl-comm-suspend
--enable-mamba-shared-prefix-checkpoint --enable-mamba-fine-grained-prefix-cache
--expand-tools-even-if-tool-choice-none
""".split())
# nargs="+" flags among the ignored ones: they swallow every following non-flag token.
IGNORED_MULTI = frozenset("""
--allowed-origins --allowed-methods --allowed-headers --lora-modules --prompt-adapters
--middleware --served-model-name
--allowed-media-domains --logits-processors --collect-detailed-traces --ignore-patterns
--tool-server --api-key --lora-target-modules --device-ids --sleep-preserve-parameter-names
""".split())
# vLLM flags that DO change startup memory but that vramguard does not model yet: accepted,
# and the plan says so in its assumptions (value-taking; switches are in UNMODELED_BOOL).
UNMODELED_VALUE = frozenset("""
--max-seq-len-to-capture
--max-context-len-to-capture
--mamba-block-size --mamba-config
--cpu-offload-params --offload-backend --offload-group-size --offload-num-in-group
--offload-params --offload-prefetch-step
--max-num-scheduled-tokens --prefill-context-parallel-size
--long-lora-scaling-factors
--speculative-model-quantization --speculative-max-model-len --ngram-prompt-lookup-max
--ngram-prompt-lookup-min --quantization-config
--attention-config --model-weights --mamba-cache-philox-rounds
--watermark --diffusion-config --mm-encoder-fp8-scale-path --mm-encoder-fp8-scale-save-margin
--mm-encoder-fp8-scale-save-path --quantization-param-path
--replayssm-buffer-len --engram-config --aux-output-config --mm-processor-device
""".split())
# Flags that change the model's config before vLLM reads it (vLLM applies them to the HF
# config): kept in Settings.config_overrides (VllmCommand.config_overrides merges them) and
# applied by sources/resolve.py.
CONFIG_OVERRIDE_FLAGS = {"--hf-overrides": None, "--rope-scaling": "rope_scaling",
                         "--rope-theta": "rope_theta"}
UNMODELED_BOOL = frozenset("""
--mm-encoder-only
--enable-cumem-allocator
--use-replayssm --swa-bounded-replay --enable-batch-sharded-sampling --dcp-q-replicate
--enable-hc-sp
""".split())
# Environment variables of a pasted line that change vLLM's startup memory but that the plan
# does not take into account (VLLM_USE_V1 selects the engine; the planner reads
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, VLLM_USE_V2_MODEL_RUNNER and
# VLLM_CUDA_MEM_ALIGN_KV_CACHE, VLLM_ALLOW_LONG_MAX_MODEL_LEN, VLLM_PP_LAYER_PARTITION,
# VLLM_ALL2ALL_BACKEND and VLLM_DEEPEP_BUFFER_SIZE_MB through plan(env=...)).
UNMODELED_ENV = ("VLLM_CPU_KVCACHE_SPACE",)
