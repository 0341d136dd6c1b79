"""The failure vocabulary shared by plan, check, tune and diagnose."""

FREE_MEMORY_BELOW_REQUEST = "free_memory_below_request"
WEIGHTS_OOM = "weights_oom"
PROFILE_RUN_OOM = "profile_run_oom"
NO_KV_MEMORY = "no_kv_memory"
KV_BELOW_MAX_MODEL_LEN = "kv_below_max_model_len"
MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS = "mamba_blocks_below_max_num_seqs"
CUDA_GRAPH_OOM = "cuda_graph_oom"
SAMPLER_WARMUP_OOM = "sampler_warmup_oom"
# diagnose only
RUNTIME_OOM = "runtime_oom"
DISTRIBUTED = "distributed"

STARTUP_FAILURES = (
    FREE_MEMORY_BELOW_REQUEST, WEIGHTS_OOM, PROFILE_RUN_OOM, NO_KV_MEMORY,
    KV_BELOW_MAX_MODEL_LEN, MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS, CUDA_GRAPH_OOM,
    SAMPLER_WARMUP_OOM,
)
ALL_FAILURES = STARTUP_FAILURES + (RUNTIME_OOM, DISTRIBUTED)
