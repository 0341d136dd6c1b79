"""What the launch's environment and the GPU's vendor change in a version row (`apply_env`,
`apply_device`): the rows themselves are `rules.VllmRules`. Split out of `rules`."""

from __future__ import annotations

from dataclasses import replace

from .rules import VllmRules

__all__ = ["apply_env", "apply_device"]


ENV_GRAPH_ESTIMATE = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
ENV_MODEL_RUNNER_V2 = "VLLM_USE_V2_MODEL_RUNNER"
ENV_ALIGN_KV_CACHE = "VLLM_CUDA_MEM_ALIGN_KV_CACHE"
ENV_ALLOW_LONG = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
ENV_CHUNKED_HYBRID = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"
ENV_PP_PARTITION = "VLLM_PP_LAYER_PARTITION"
ENV_ALL2ALL = "VLLM_ALL2ALL_BACKEND"
ENV_DEEPEP_MB = "VLLM_DEEPEP_BUFFER_SIZE_MB"


def apply_env(rules: VllmRules, env: dict[str, str] | None) -> VllmRules:
    """The row as the launch's environment changes it.

    `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` (§1a; 0.18+ where the estimate exists): `1`
    subtracts the CUDA-graph estimate from the budget, `0` only logs it (the default is 0 in
    0.18-0.19 and 1 from 0.20). `VLLM_USE_V2_MODEL_RUNNER` (rows with Model Runner V2,
    0.12+): `1` for every model, `0` for none. `VLLM_CUDA_MEM_ALIGN_KV_CACHE=0`
    (v0 0.7.2-0.7.3): MLA cache entries not padded. `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` (every
    row): a `--max-model-len` above the derived maximum is accepted.
    `VLLM_PP_LAYER_PARTITION` (0.5.4+): the layers per pipeline stage.
    `VLLM_ALL2ALL_BACKEND` (0.9.0-0.14): DP's MoE all-to-all where the release reads it
    (`all2all.all2all_backend`); `VLLM_DEEPEP_BUFFER_SIZE_MB` (0.11+): DeepEP's NVLink buffer.
    Older rows and other variables are unchanged.
    """
    if not env:                           # NOTE: every screened candidate of a search
        return rules
    if (_truthy(env.get(ENV_ALLOW_LONG, "0")) and rules.allow_long_env
            and not rules.allow_long_max_model_len):
        rules = replace(rules, allow_long_max_model_len=True)
    if rules.chunked_disables_hybrid and _truthy(env.get(ENV_CHUNKED_HYBRID, "0")):
        rules = replace(rules, chunked_disables_hybrid=False)
    if rules.pp_partition_env and env.get(ENV_PP_PARTITION) is not None:
        rules = _with_partition(rules, env[ENV_PP_PARTITION])
    if rules.engine != "v1":
        val = env.get(ENV_ALIGN_KV_CACHE)
        if val is not None and rules.v0_mla_align_bytes and not _truthy(val):
            rules = replace(rules, v0_mla_align_bytes=0)
        return rules
    rules = _with_all2all(rules, env)
    val = env.get(ENV_GRAPH_ESTIMATE)
    if val is not None and rules.graph_budget != "headroom":
        rules = replace(rules, graph_budget="subtracted" if _truthy(val) else "estimated")
    val = env.get(ENV_MODEL_RUNNER_V2)
    if val is not None and rules.model_runner_v2 != "none":        # NOTE: 0.20+
        rules = replace(rules, model_runner_v2="all" if _truthy(val) else "off")
    return rules


_ON_DEVICE: dict = {}


def apply_device(rules: VllmRules, vendor: str) -> VllmRules:
    """The row as the GPU's vendor changes it: on AMD before 0.26 no CUDA-graph estimate
    (`gpu_worker.py` probed only on CUDA), so graphs live in the headroom as before 0.18."""
    if vendor != "amd" or rules.graph_probe_rocm or rules.graph_budget == "headroom":
        return rules
    hit = _ON_DEVICE.get(id(rules))       # NOTE: one object per row: the memo keys on identity
    if hit is None or hit[0] is not rules:
        if len(_ON_DEVICE) > 64:          # NOTE: rows changed by `env` are new objects each time
            _ON_DEVICE.clear()
        hit = _ON_DEVICE[id(rules)] = (rules, replace(rules, graph_budget="headroom"))
    return hit[1]


def _with_partition(rules: VllmRules, value: str) -> VllmRules:
    """The row with VLLM_PP_LAYER_PARTITION's layer counts (distributed/utils.py
    `get_pp_indices`); a value that is not a comma list of integers keeps the row's split
    and is refused by validation."""
    try:
        sizes = tuple(int(p) for p in value.split(","))
    except ValueError:
        return replace(rules, pp_partition=value)
    return replace(rules, pp_partition=value, pp_layout=sizes)


def _with_all2all(rules: VllmRules, env: dict[str, str]) -> VllmRules:
    """The all-to-all variables where the row reads them (a buffer size that is not an integer
    is kept as given: `validation` refuses it where DeepEP reads it, as vLLM's int() would)."""
    backend = env.get(ENV_ALL2ALL)
    if backend is not None and rules.all2all_env:
        rules = replace(rules, all2all_env_value=backend.strip())
    mb = env.get(ENV_DEEPEP_MB)
    if mb is not None and rules.deepep_buffer_env:
        rules = replace(rules, deepep_buffer_mb=mb)
    return rules


def _truthy(val: str) -> bool:
    return val.strip().lower() in ("1", "true", "yes", "on")
