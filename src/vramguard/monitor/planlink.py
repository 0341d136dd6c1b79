"""The planned KV pool for a running server, from vramguard's planner (engineer B's core).

`planned_pool(model, gpu, cache_config=...)` re-plans the same launch: the settings vLLM
reports in `vllm:cache_config_info` (gpu_memory_utilization, block_size, cache_dtype,
num_gpu_blocks_override, kv_cache_memory_bytes) + any extra vLLM flags, on the given GPU.
It returns `PlannedPool(tokens=num_blocks * block_size, ...)`, comparable with the live
`EngineMetrics.kv_pool_tokens` by `rules.kv_pool_mismatch`.

The GPU: `gpu` (a catalog name) if given, else `gpu_spec` (the live GPU's spec from NVML),
else the catalog's H100-80GB. Imports of the planner happen here, lazily, so `watch` works
without it (`--planned-kv-tokens N` gives the planned pool directly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..errors import MonitorError, VramguardError

# cache_config_info label -> vLLM flag (only values that were really set)
_FLAGS = {
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "block_size": "--block-size",
    "cache_dtype": "--kv-cache-dtype",
    "num_gpu_blocks_override": "--num-gpu-blocks-override",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
}


@dataclass(frozen=True)
class PlannedPool:
    tokens: int                 # num_blocks x block_size, like the live pool
    num_blocks: int
    block_size: int
    plan_ok: bool
    note: str = ""
    gpu_name: str = ""


def flags_from_cache_config(cache_config: Mapping[str, str]) -> list[str]:
    """vLLM flags equivalent to what cache_config_info reports (skips None/auto)."""
    tokens: list[str] = []
    for label, flag in _FLAGS.items():
        value = cache_config.get(label)
        if value in (None, "", "None", "auto"):
            continue
        tokens += [flag, str(value)]
    return tokens


def planned_pool(model: str, gpu: str | None = None, *,
                 cache_config: Mapping[str, str] | None = None,
                 extra_args: Sequence[str] = (), vllm_version: str | None = None,
                 gpu_spec=None, offline: bool = False) -> PlannedPool:
    """Plan `model` with the live settings. Raises MonitorError when the planner is absent."""
    try:
        from ..core.gpu_catalog import lookup_gpu
        from ..core.planner import plan as run_planner
        from ..sources.draft import load_with_draft
        from ..sources.vllm_args import parse_vllm_args
    except ImportError as exc:
        raise MonitorError(f"the planner is not available in this build ({exc})",
                           where="--model", fix="Pass --planned-kv-tokens N instead.") from None
    tokens = [model] + flags_from_cache_config(cache_config or {}) + list(extra_args)
    try:
        cmd = parse_vllm_args(tokens, strict=False)
        spec, _ = load_with_draft(cmd.model or model, cmd.settings, offline=offline)
        gpu_obj = gpu_spec if gpu_spec is not None and not gpu else lookup_gpu(gpu or "H100-80GB")
        result = run_planner(spec, cmd.settings, gpu_obj, vllm_version=vllm_version)
    except VramguardError:
        raise
    except Exception as exc:   # NOTE: a planner bug must not kill a running watch
        raise MonitorError(f"planning {model} failed ({type(exc).__name__}: {exc})",
                           where="--model", fix="Pass --planned-kv-tokens N instead.") from None
    name = getattr(gpu_obj, "name", "?")
    if result.kv is None:
        return PlannedPool(0, 0, 0, False, result.outcome.message or "plan predicts no KV pool",
                           name)
    kv = result.kv
    return PlannedPool(kv.num_blocks * kv.block_size, kv.num_blocks, kv.block_size,
                       result.outcome.ok, result.outcome.message or "", name)
