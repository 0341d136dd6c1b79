"""Calibration: the activation, non-torch and CUDA-graph terms measured on a user's own startups.

Learned by `vramguard calibrate` from vLLM logs (vramguard.logs), stored by an adapter,
and handed to the planner, which uses a matching calibration instead of its estimates.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CalibrationKey:
    """What must match for measured terms to apply to a new plan."""

    gpu_name: str                 # catalog short name, e.g. "H100-80GB"
    vllm_version: str             # "0.11.0"
    model_family: str             # model_type, e.g. "llama", "qwen3_moe"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1


@dataclass(frozen=True)
class Calibration:
    """Measured terms for one key. None = not measured (the estimate stays)."""

    key: CalibrationKey
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    weights_bytes: int | None = None
    # settings the activation was measured at; activation scales with these
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    model: str | None = None      # the exact model it came from, if known
    source: str | None = None     # the log file it came from

    def matches(self, key: CalibrationKey) -> bool:
        return self.key == key
