"""Data parallelism's MoE all-to-all, by release (V1): the backend vLLM runs
(`--all2all-backend`, `VLLM_ALL2ALL_BACKEND`, the release's default), whether each rank's MoE
layers see the tokens of every DP rank in the profile run, the batched-DP scheduler default
(0.20+) and DeepEP's communication buffers. Pure; read by the stage terms and the settings.

Read in vLLM 0.9.0-0.33.0: `distributed/device_communicators/all2all.py` and
`cuda_communicator.py`, `config/parallel.py`, `envs.py`, `fused_moe/layer.py` and
`all2all_utils.py`, `engine/arg_utils.py`; DeepEP's `LowLatencyLayout` (csrc config.hpp).
"""

from __future__ import annotations

from typing import NamedTuple

from .model import ModelSpec
from .rules import VllmRules
from .settings import Settings

__all__ = ["all2all_backend", "dp_moe", "DpMoe", "batched_dp_moe", "deepep_buffer_mb",
           "deepep_nvl_bytes", "uses_deepep", "low_latency_rdma_bytes"]

# NOTE: the backends whose dispatch gathers every DP rank's hidden states (naive multicast,
# all-gather + reduce-scatter); without expert parallelism vLLM gathers whatever the backend
# (its all-to-all kernels need EP: `use_all2all_kernels = dp_size > 1 and use_ep`).
GATHER_BACKENDS = frozenset({"naive", "allgather_reducescatter"})
DEEPEP_BACKENDS = ("deepep_high_throughput", "deepep_low_latency")
BATCHED_DP_BACKENDS = ("deepep_low_latency", "nixl_ep")
# VLLM_MOE_DP_CHUNK_SIZE's default: the tokens per DP rank a low-latency dispatch holds
# (fused_moe/layer.py `max_num_tokens`) up to 0.19; from 0.20 max_num_batched_tokens
MOE_DP_CHUNK_TOKENS = 256
# DeepEP's NVLink buffer: 1 GiB (hard-coded up to 0.10.x, VLLM_DEEPEP_BUFFER_SIZE_MB's default)
DEEPEP_NVL_BYTES = 1 << 30


def all2all_backend(s: Settings, rules: VllmRules) -> str | None:
    """The backend a release runs: VLLM_ALL2ALL_BACKEND where it is the only way (0.9.0-0.11.0)
    or overrides the flag (0.14.x, deprecated), else `--all2all-backend` (0.11.1+), else the
    variable as a fallback (0.11.1-0.13), else the default (naive up to 0.10.x,
    allgather_reducescatter from 0.11.0; None before 0.9.0)."""
    env, mode = rules.all2all_env_value, rules.all2all_env
    if env is not None and mode == "override":
        return env
    if s.all2all_backend is not None and rules.all2all_choices:
        return s.all2all_backend
    if env is not None and mode in ("only", "fallback"):
        return env
    return rules.all2all_default


def _all2all_kernels(spec: ModelSpec, s: Settings, rules: VllmRules) -> bool:
    return (rules.engine == "v1" and spec.moe is not None and s.data_parallel_size > 1
            and s.enable_expert_parallel)


class DpMoe(NamedTuple):
    """What data parallelism does to a MoE model's profile run and buffers (`dp_moe`)."""

    backend: str | None        # `all2all_backend`
    gather_ranks: int          # DP ranks whose tokens each MoE layer runs on (`_gather_ranks`)
    deepep_bytes: int          # DeepEP's buffers per rank (`_deepep_bytes`)
    combine_copy: bool         # the naive all-to-all's all-reduce of the gathered rows


def dp_moe(spec: ModelSpec, s: Settings, rules: VllmRules, tokens: int) -> DpMoe:
    """The DP terms of one launch at `tokens` batched tokens, the backend resolved once."""
    backend = all2all_backend(s, rules)
    ranks = _gather_ranks(spec, s, rules, backend)
    # NOTE: the naive all-to-all (0.8-0.19) combines with an all-reduce of the gathered rows
    combine = ranks > 1 and rules.naive_all2all and backend in (None, "naive")
    return DpMoe(backend, ranks, _deepep_bytes(spec, s, rules, tokens, backend), combine)


def _gather_ranks(spec: ModelSpec, s: Settings, rules: VllmRules, backend: str | None) -> int:
    """DP ranks whose tokens each rank's MoE layers run on in the profile run: all of them
    with a gathering dispatch (V1, DP > 1; 1 otherwise, and with an all-to-all kernel
    backend, whose buffers hold a rank's own tokens)."""
    if rules.engine != "v1" or spec.moe is None or s.data_parallel_size <= 1:
        return 1
    if _all2all_kernels(spec, s, rules) and backend not in GATHER_BACKENDS:
        return 1
    return s.data_parallel_size


def batched_dp_moe(s: Settings, rules: VllmRules) -> bool:
    """0.20+ `ParallelConfig.use_batched_dp_moe`: DeepEP low-latency or NIXL-EP with expert
    parallelism and DP > 1; max_num_batched_tokens then defaults to 256
    (SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP), whatever the model."""
    return (rules.batched_dp_moe_tokens is not None and s.enable_expert_parallel
            and s.data_parallel_size > 1 and all2all_backend(s, rules) in BATCHED_DP_BACKENDS)


def low_latency_rdma_bytes(tokens_per_rank: int, hidden: int, num_experts: int) -> int:
    """DeepEP's `get_low_latency_rdma_size_hint` (csrc config.hpp `LowLatencyLayout`, the same
    in its 2025 and 2026 sources): two send buffers of the larger of a dispatch (tokens x
    message) and a combine (experts x tokens x message), two receive buffers of experts x
    tokens x the larger message, two signalling buffers of an int per expert (128-aligned);
    the total plus 128 bytes, rounded down to 128."""
    scales = hidden // 128
    dispatch_msg = 16 + max(hidden * 2, hidden + scales * 4)
    combine_msg = scales * 4 + hidden * 2
    send = max(tokens_per_rank * dispatch_msg, num_experts * tokens_per_rank * combine_msg)
    recv = num_experts * tokens_per_rank * max(dispatch_msg, combine_msg)
    signal = -(-(num_experts * 4) // 128) * 128
    total = 2 * (send + recv + signal)
    return (total + 128) // 128 * 128


def deepep_buffer_mb(rules: VllmRules) -> int | None:
    """VLLM_DEEPEP_BUFFER_SIZE_MB as vLLM's int() reads it, where the release reads it (None:
    not given, or not an integer, which `validation` refuses where DeepEP reads it)."""
    raw = rules.deepep_buffer_mb
    if raw is None or not raw.strip().lstrip("+-").isdigit():
        return None
    return int(raw)


def deepep_nvl_bytes(rules: VllmRules) -> int:
    """DeepEP's NVLink buffer: VLLM_DEEPEP_BUFFER_SIZE_MB MiB where given, else 1 GiB."""
    mb = deepep_buffer_mb(rules)
    return DEEPEP_NVL_BYTES if mb is None else max(0, mb) << 20


def uses_deepep(spec: ModelSpec, s: Settings, rules: VllmRules,
                backend: str | None = None) -> bool:
    """Whether the launch creates DeepEP's managers (0.9.1+, EP and DP > 1, a DeepEP backend;
    `backend`: `all2all_backend`, when the caller has it)."""
    if not (rules.deepep and _all2all_kernels(spec, s, rules)):
        return False
    return (backend or all2all_backend(s, rules)) in DEEPEP_BACKENDS


def _deepep_bytes(spec: ModelSpec, s: Settings, rules: VllmRules, tokens: int,
                  backend: str | None) -> int:
    """DeepEP's buffers per rank (0.9.1+, expert parallelism and DP > 1), allocated by its
    runtime outside torch's allocator after the weights are measured (non-torch memory): the
    NVLink buffer (1 GiB; VLLM_DEEPEP_BUFFER_SIZE_MB from 0.11) and, for low latency, the RDMA
    buffer sized for `MOE_DP_CHUNK_TOKENS` tokens per rank (up to 0.19) or the batched tokens
    (0.20+). High throughput across nodes adds an RDMA buffer of the NVLink size, which a
    plan (one node's GPUs) leaves out."""
    if not uses_deepep(spec, s, rules, backend):
        return 0
    nvl = deepep_nvl_bytes(rules)
    if backend == "deepep_high_throughput":
        return nvl
    per_rank = tokens if rules.batched_dp_moe_tokens is not None else MOE_DP_CHUNK_TOKENS
    experts = spec.moe.num_experts + (s.num_redundant_experts if s.enable_eplb else 0)
    return nvl + low_latency_rdma_bytes(per_rank, spec.hidden_size, experts)
