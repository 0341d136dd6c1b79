"""What the parser extracts from one vLLM startup log: frozen, JSON-ready.

GiB figures are kept as vLLM printed them (`_gib`, 2 decimals; vLLM's "GB" is GiB);
`vramguard calibrate` turns them into bytes. `None` means "not in the log".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Startup phases in vLLM's order (§2). `phase` is the one in progress at the end of the log.
STARTUP = "startup"
FREE_MEMORY_CHECK = "free_memory_check"
WEIGHT_LOADING = "weight_loading"
PROFILING = "profiling"
KV_ALLOCATION = "kv_allocation"
CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
SAMPLER_WARMUP = "sampler_warmup"
SERVING = "serving"
PHASES = (STARTUP, FREE_MEMORY_CHECK, WEIGHT_LOADING, PROFILING, KV_ALLOCATION,
          CUDA_GRAPH_CAPTURE, SAMPLER_WARMUP, SERVING)
PHASE_TEXT = {
    STARTUP: "start-up (before the engine)", FREE_MEMORY_CHECK: "the free-memory check",
    WEIGHT_LOADING: "weight loading", PROFILING: "the profile run",
    KV_ALLOCATION: "KV-cache sizing and allocation", CUDA_GRAPH_CAPTURE: "CUDA-graph capture",
    SAMPLER_WARMUP: "the sampler warm-up", SERVING: "serving",
}


def phase_index(phase: str | None) -> int:
    return PHASES.index(phase) if phase in PHASES else -1


@dataclass(frozen=True)
class TorchOom:
    """The numbers of a PyTorch / HIP out-of-memory message (GiB)."""

    device: str | None = None          # "CUDA", "HIP", ...
    gpu_index: int | None = None
    tried_gib: float | None = None
    total_gib: float | None = None
    free_gib: float | None = None
    process_in_use_gib: float | None = None
    allocated_gib: float | None = None
    reserved_unallocated_gib: float | None = None
    other_processes_gib: tuple[float, ...] = ()


@dataclass(frozen=True)
class LogError:
    """One error line. `kind` is the parser's own name for the message (see parser.py)."""

    kind: str
    message: str
    seq: int                           # order among the lines the parser was fed
    phase: str
    numbers: dict = field(default_factory=dict)
    oom: TorchOom | None = None


@dataclass(frozen=True)
class KvMemorySuggestion:
    """vLLM's `--kv-cache-memory` suggestion (0.10.2+), all GiB except the byte counts."""

    free_gib: float | None = None
    total_gib: float | None = None
    utilization: float | None = None
    requested_gib: float | None = None
    weights_gib: float | None = None          # up to 0.26
    non_torch_gib: float | None = None        # up to 0.26
    consumed_gib: float | None = None         # 0.27+: weights + non-torch
    activation_gib: float | None = None
    cuda_graph_gib: float | None = None
    fit_bytes: int | None = None              # --kv-cache-memory to fit into the request
    full_bytes: int | None = None             # --kv-cache-memory to use the whole GPU
    current_kv_gib: float | None = None


@dataclass(frozen=True)
class CpuKv:
    """CPU backend: `Auto set` / `Explicitly set (K/T) GiB for KV cache on node n`."""

    kv_gib: float
    node_total_gib: float
    explicit: bool
    node: int | None = None
    requested_gib: float | None = None
    non_kv_gib: float | None = None


@dataclass(frozen=True)
class ServingStats:
    """Periodic `Engine 000: … Running: … KV cache usage: …` lines."""

    samples: int = 0
    last_running: int | None = None
    last_waiting: int | None = None
    max_running: int | None = None
    max_waiting: int | None = None
    last_kv_usage_pct: float | None = None
    max_kv_usage_pct: float | None = None
    preemptions: int = 0                      # per-interval counts (0.12+) + v0 "is preempted" warnings
    max_swapped: int | None = None            # v0


@dataclass(frozen=True)
class Extracted:
    """Everything one parse found; `to_dict()` is the `--json` "extracted" object."""

    # identity and settings
    version: str | None = None
    engine: str | None = None                 # "v0" | "v1"
    device: str | None = None                 # "cuda" | "cpu" | "rocm" | ...
    model: str | None = None
    architecture: str | None = None
    non_default_args: dict | None = None
    engine_config: dict = field(default_factory=dict)   # from "Initializing … with config:"
    command_line: str | None = None
    gpu_name: str | None = None
    custom_all_reduce_off: bool = False       # "Custom allreduce is disabled because …"
    max_model_len: int | None = None
    block_size: int | None = None
    # weights and the v0 profiling block
    weights_gib: float | None = None
    total_gpu_gib: float | None = None
    gpu_memory_utilization: float | None = None
    requested_gib: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    profile_kv_gib: float | None = None       # v0: "the rest … reserved for KV Cache"
    initial_memory_usage_gib: float | None = None   # 0.6.4
    peak_torch_gib: float | None = None             # 0.6.4
    # v1 (DEBUG) profiling summary
    total_non_kv_gib: float | None = None
    torch_peak_increase_gib: float | None = None
    total_consumed_gib: float | None = None   # 0.27+
    # KV pool
    available_kv_gib: float | None = None     # v1, minimum over workers
    num_gpu_blocks: int | None = None
    num_cpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    concurrency_tokens_per_request: int | None = None
    blocks_override: tuple[int, int] | None = None   # (computed, override)
    auto_fit: tuple[int, int] | None = None          # (from, to); equal when it all fits
    cpu_kv: CpuKv | None = None
    # CUDA graphs
    cuda_graph_estimate_gib: float | None = None
    cuda_graph_gib: float | None = None       # captured (actual)
    suggestion: KvMemorySuggestion | None = None
    free_at_start_gib: float | None = None
    # outcome
    init_engine_seconds: float | None = None
    started: bool = False
    stopped: bool = False                     # a deliberate shutdown was logged
    errors: tuple[LogError, ...] = ()
    stats: ServingStats | None = None
    phase: str = STARTUP
    startups: int = 0
    # bookkeeping
    bytes_read: int = 0
    lines: int = 0
    recognized_lines: int = 0
    truncated_lines: int = 0                  # over-long lines the parser looked at

    @property
    def kv_pool_gib(self) -> float | None:
        """The KV pool vLLM sized (v1 available, v0 remainder, CPU KV space)."""
        if self.available_kv_gib is not None:
            return self.available_kv_gib
        if self.profile_kv_gib is not None:
            return self.profile_kv_gib
        if self.cpu_kv:
            return self.cpu_kv.kv_gib
        return self.suggestion.current_kv_gib if self.suggestion else None

    @property
    def settings(self) -> dict:
        """The settings the log carries: engine config, then non-default args on top."""
        out = dict(self.engine_config)
        if self.custom_all_reduce_off:
            out["disable_custom_all_reduce"] = True
        out.update(self.non_default_args or {})
        return out

    @property
    def empty(self) -> bool:
        return self.recognized_lines == 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kv_pool_gib"] = self.kv_pool_gib
        for key in ("blocks_override", "auto_fit"):
            if d[key] is not None:
                d[key] = list(d[key])
        return d
