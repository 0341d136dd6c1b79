"""What the tuner takes and returns: the request, the GPUs, the options; shared helpers.

`core.tuner` re-exports every name here; see it for the search itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ._frozen import replacer
from .gpu import GpuSpec
from .model import ModelSpec
from .plan import Plan
from .provenance import GIB, MIB
from .settings import Settings
from .workload import Workload

LEN_ALIGN_TOKENS = 256          # recommended max_model_len is rounded up to this
MAX_UTILIZATION = 0.95          # never recommend more (CUDA context, fragmentation)
TP_SIZES = (1, 2, 4, 8)
PP_SIZES = (2, 4)               # tried (with the largest TP) only when TP alone cannot start
LEN_LADDER = (131072, 65536, 32768, 16384, 8192, 4096, 2048)
TOKEN_LADDER = (4096, 2048, 1024, 512)      # max_num_batched_tokens when activation blocks
KV_BYTES_ALIGN = 16 * MIB

# limits on max_num_seqs, as shown to the user
LIMIT_MEMORY = "memory"             # the KV target at max_model_len
LIMIT_VLLM = "vllm_default"         # vLLM's own max_num_seqs default caps it, not memory
LIMIT_TARGET = "concurrency"        # the --concurrency asked for
LIMIT_PINNED = "pinned"             # the user's --max-num-seqs

SEARCHABLE_PINS = ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len",
                   "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
                   "kv_cache_dtype", "quantization", "kv_cache_memory_bytes", "enforce_eager",
                   "block_size", "num_gpu_blocks_override")


@dataclass(frozen=True)
class GpuTarget:
    """One GPU the server may use: its spec and the free memory now (None: assume idle)."""

    spec: GpuSpec
    free_bytes: int | None = None

    @property
    def free(self) -> int:
        return self.free_bytes if self.free_bytes is not None else self.spec.total_bytes

    @classmethod
    def from_state(cls, state) -> "GpuTarget":
        """From a live `core.gpu.GpuState` (`vramguard check`): the lowest free seen."""
        free = state.free_min_bytes if state.free_min_bytes is not None else state.free_bytes
        return cls(state.spec, free)


@dataclass(frozen=True)
class TuneRequest:
    """What the user asked for. `base.user_set` names the pinned flags."""

    spec: ModelSpec
    base: Settings
    gpus: tuple[GpuTarget, ...]
    workload: Workload | None = None
    concurrency: int | None = None          # target concurrent requests
    headroom_bytes: int | None = None       # left unallocated; None: from the GPU size
    target_kv_usage: float = 0.7
    vllm_version: str | None = None
    engine: str | None = None
    allow_quantization: bool = True         # offer fp8 weights as an alternative
    allow_more_gpus: bool = True            # offer TP/PP sizes beyond the GPUs given
    # the launch's environment, (name, value) pairs: the planner reads vLLM's variables
    # (VLLM_ALLOW_LONG_MAX_MODEL_LEN, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, ...)
    env: tuple[tuple[str, str], ...] = ()
    curve: bool = True                      # compute the max_model_len <-> concurrency curve
    explain: bool = True                    # blocking pins / larger GPUs when nothing fits


@dataclass(frozen=True)
class Option:
    """One candidate setting, planned."""

    settings: Settings
    plan: Plan
    gpu: GpuTarget
    supported_concurrency: int              # requests of max_model_len within the target
    meets_target: bool
    headroom_bytes: int                     # kept free on the deciding GPU
    gpus_given: int = 1
    limit: str = LIMIT_MEMORY               # what caps max_num_seqs
    notes: tuple[str, ...] = ()
    # NOTE: the search screens candidates without log lines, assumptions and fixes; `tune`
    # finishes the recommended option's plan and leaves here how to finish any other.
    finish: Callable[[], Plan] | None = field(default=None, compare=False, repr=False)

    def detailed(self) -> "Option":
        """This option with its full plan (vLLM's log lines, assumptions, fixes), finished
        from the same startup walk (the screened plan carries the numbers and outcome only)."""
        if self.finish is None:
            return self
        return with_fields(self, plan=self.finish(), finish=None)

    @property
    def starts(self) -> bool:
        return self.plan.outcome.ok and not self.plan.outcome.risks

    @property
    def gpus_needed(self) -> int:
        return self.settings.world_size

    @property
    def needs_more_gpus(self) -> int:
        """How many GPUs beyond those given this option needs (0 when it fits on them)."""
        return max(0, self.gpus_needed - self.gpus_given)

    @property
    def max_model_len(self) -> int:
        return int(self.plan.settings.get("max_model_len") or 0)

    @property
    def max_num_seqs(self) -> int:
        return int(self.plan.settings.get("max_num_seqs") or 0)

    @property
    def fixed_pool(self) -> bool:
        return self.settings.kv_cache_memory_bytes is not None

    def rank_key(self) -> tuple:
        """Smaller is better: starts, meets the target, no fp8 weights, fewer GPUs, bf16 KV,
        a utilization-sized pool, longer context, more concurrency."""
        s = self.settings
        # NOTE: quantizing changes the model; more GPUs of the same kind does not.
        return (not self.starts, not self.meets_target, s.quantization is not None,
                s.world_size, s.kv_cache_dtype not in ("auto", None), self.fixed_pool,
                -self.max_model_len, -self.supported_concurrency)


@dataclass(frozen=True)
class TuneResult:
    request: TuneRequest
    recommended: Option | None
    options: tuple[Option, ...]
    reason: str | None = None               # why nothing (or nothing meeting the target) fits
    nearest: str | None = None              # the nearest feasible target, in words
    blocking_pins: tuple[str, ...] = ()     # pinned flags that make the target impossible
    num_evaluated: int = 0                  # planner runs (distinct candidates)
    curve: tuple[tuple[int, float], ...] = field(default_factory=tuple)
    larger_gpus: tuple[str, ...] = ()       # catalog GPUs on which the target would fit
    notes: tuple[str, ...] = ()


# ---- helpers -----------------------------------------------------------------------------

def default_headroom_bytes(gpu: GpuSpec) -> int:
    """Headroom left unallocated on a shared GPU: 4% of the card, at least 512 MiB.

    NOTE: covers the CUDA context of a second process, allocator fragmentation and a
    neighbour's small growth; users on a dedicated card can pass --headroom-gib 0.
    """
    return max(512 * MIB, int(gpu.total_bytes * 0.04))


def is_shared(gpu: GpuTarget) -> bool:
    """Something else holds memory on this GPU (more than 3% of it)."""
    return gpu.free_bytes is not None and gpu.free_bytes < gpu.spec.total_bytes * 0.97


def headroom_for(req: TuneRequest, gpu: GpuTarget) -> int:
    if req.headroom_bytes is not None:
        return req.headroom_bytes
    return default_headroom_bytes(gpu.spec) if is_shared(gpu) else 0


def max_safe_utilization(gpu: GpuTarget, headroom_bytes: int) -> float:
    """The largest utilization (2 decimals, floored) whose request fits in free − headroom."""
    u = (gpu.free - headroom_bytes) / gpu.spec.total_bytes
    return max(0.0, min(MAX_UTILIZATION, math.floor(u * 100 + 1e-9) / 100))


_DEFAULTS = Settings()


def _pinned(base: Settings, name: str) -> bool:
    return name in base.user_set


def _align(tokens: int) -> int:
    return int(math.ceil(tokens / LEN_ALIGN_TOKENS) * LEN_ALIGN_TOKENS)


# NOTE: `dataclasses.replace` without re-running `__init__` (_frozen.py): hot paths.
_copy = replacer(Settings)      # Settings: the tuner's candidates
with_fields = replacer(Option)  # Option: most screened candidates


def _set(s: Settings, **changes) -> Settings:
    """A copy with `changes` applied and recorded as set (they go on the command line)."""
    return _copy(s, user_set=s.user_set | frozenset(changes), **changes)



def headroom_gib(opt: Option) -> float:
    """GiB left unallocated on the deciding GPU after vLLM takes u x total."""
    u = opt.plan.settings.get("gpu_memory_utilization") or 0
    return (opt.gpu.free - u * opt.gpu.spec.total_bytes) / GIB


def needs_more_gpus(opt: Option, req: TuneRequest) -> int:
    """How many GPUs beyond those given this option needs (0 when it fits on them)."""
    return max(0, opt.settings.world_size - len(req.gpus))
