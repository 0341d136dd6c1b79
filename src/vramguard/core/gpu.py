"""GPU facts (catalog) and live GPU state (from a probe)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSpec:
    """A GPU model as CUDA reports it: `total_bytes` is cudaMemGetInfo's total, not marketing."""

    name: str                         # short catalog name, e.g. "H100-80GB"
    total_bytes: int
    full_name: str | None = None      # as nvidia-smi prints it
    compute_capability: tuple[int, int] | None = None
    vendor: str = "nvidia"            # "nvidia" | "amd" | "cpu"
    uma: bool = False                 # unified memory (GH200, GB10, Jetson)
    aliases: tuple[str, ...] = ()
    source: str = "catalog"
    # How this GPU reaches the other GPUs of the launch, when measured (NVML, `vramguard check`):
    # "nvlink" (every pair over NVLink), "p2p" (every pair has peer access over PCIe), "none"
    # (a pair has neither); None when unknown: the planner then goes by the GPU's class.
    peer_link: str | None = None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str | None
    used_bytes: int | None


@dataclass(frozen=True)
class GpuState:
    """One GPU measured now (or over a window: `free_bytes` is the lowest seen)."""

    index: int
    spec: GpuSpec
    free_bytes: int
    used_bytes: int | None = None
    uuid: str | None = None
    utilization_pct: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    free_min_bytes: int | None = None
    free_median_bytes: int | None = None
    free_max_bytes: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
