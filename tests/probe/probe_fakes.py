"""Pure-Python fakes for the probe unit tests: a stand-in for the pynvml module (the subset
NvmlSession calls, same names and error objects with `.value`), and a hand-built planner."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from vramguard.core import failures
from vramguard.core.gpu import GpuProcess, GpuSpec, GpuState
from vramguard.core.plan import KvCapacity, Ledger, Outcome, Plan
from vramguard.core.provenance import Estimate, Source

GIB = 1 << 30
MIB = 1 << 20


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value


@dataclass
class FDev:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-0"
    total: int = 81559 * MIB
    reserved: int = 470 * MIB
    free: int = 70 * GIB
    util: int | None = 5              # None: NOT_SUPPORTED
    cc: tuple[int, int] | None = (9, 0)
    procs: list[tuple[int, int | None]] = field(default_factory=list)
    mig: list["FDev"] | None = None   # MIG instances when MIG mode is on
    gi_ci: tuple[int, int] | None = None
    errors: dict[str, int] = field(default_factory=dict)   # function name -> NVML code
    memory_v2: bool = True


class NVMLLibraryMismatchError(Exception):
    """pynvml raises this (not an NVMLError) when the driver lacks a versioned call."""


class FakePynvml:
    """The pynvml calls NvmlSession makes, over a list of FDev."""

    NVMLError = NVMLError
    NVMLLibraryMismatchError = NVMLLibraryMismatchError
    nvmlMemory_v2 = 0x02000028

    def __init__(self, devices: list[FDev], *, init_error: int | None = None):
        self.devices = devices
        self.init_error = init_error
        self.calls: list[str] = []

    def _dev(self, h, fn: str) -> FDev:
        self.calls.append(fn)
        code = h.errors.get(fn) or h.errors.get("*")
        if code:
            raise NVMLError(code)
        return h

    def nvmlInit(self):
        self.calls.append("nvmlInit")
        if self.init_error:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlDeviceGetCount(self):
        self.calls.append("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        self.calls.append("nvmlDeviceGetHandleByIndex")
        d = self.devices[i]
        if "handle" in d.errors:
            raise NVMLError(d.errors["handle"])
        return d

    def nvmlDeviceGetName(self, h):
        return self._dev(h, "name").name

    def nvmlDeviceGetUUID(self, h):
        return self._dev(h, "uuid").uuid

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        d = self._dev(h, "memory")
        if version:
            if not d.memory_v2:
                raise NVMLError(3)
            return SimpleNamespace(total=d.total, reserved=d.reserved, free=d.free,
                                   used=d.total - d.reserved - d.free)
        return SimpleNamespace(total=d.total, free=d.free, used=d.total - d.free)

    def nvmlDeviceGetUtilizationRates(self, h):
        d = self._dev(h, "util")
        if d.util is None:
            raise NVMLError(3)
        return SimpleNamespace(gpu=d.util, memory=0)

    def nvmlDeviceGetCudaComputeCapability(self, h):
        d = self._dev(h, "cc")
        if d.cc is None:
            raise NVMLError(3)
        return d.cc

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        if h.errors.get("procs_v3") == "mismatch":          # a pre-R510 driver
            raise NVMLLibraryMismatchError("use nvmlDeviceGetComputeRunningProcesses_v2")
        d = self._dev(h, "procs")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in d.procs]

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h):
        self.calls.append("procs_v2")
        d = self._dev(h, "procs")
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in d.procs]

    def nvmlDeviceGetMigMode(self, h):
        d = self._dev(h, "mig_mode")
        if d.mig is None:
            raise NVMLError(3)
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, j):
        if j >= len(h.mig):
            raise NVMLError(6)
        return h.mig[j]

    def nvmlDeviceGetGpuInstanceId(self, h):
        return h.gi_ci[0]

    def nvmlDeviceGetComputeInstanceId(self, h):
        return h.gi_ci[1]


def state(index: int = 0, free_gib: float = 70, total_gib: float = 79.19,
          procs: tuple = (), uuid: str | None = None, name: str = "H100-80GB") -> GpuState:
    """A GpuState by hand."""
    spec = GpuSpec(name=name, total_bytes=int(total_gib * GIB), full_name=f"NVIDIA {name}")
    return GpuState(index=index, spec=spec, free_bytes=int(free_gib * GIB),
                    uuid=uuid or f"GPU-{index}", processes=tuple(
                        GpuProcess(pid, pname, int(used * GIB) if used is not None else None)
                        for pid, pname, used in procs))


def toy_planner(*, weights_gib: float = 16, other_gib: float = 2, ctx_gib: float = 0.5,
                kv_per_token: int = 128 * 1024, version: str = "0.33.0"):
    """plan_for(settings, gpu) with vLLM's v1 rules in miniature, numbers by hand:
    R = u x T; F = free - ctx; fail when F < R (free check), when W > F, or when one
    request of max_model_len does not fit K = R - W - other."""
    def plan_for(settings, gpu: GpuState, cuda_ordinal: int = 0) -> Plan:
        u = settings.gpu_memory_utilization or 0.92
        L = settings.max_model_len or 131072
        seqs = settings.max_num_seqs or 1024
        T = gpu.spec.total_bytes
        R = int(u * T)
        F = gpu.free_bytes - int(ctx_gib * GIB)
        W = int(weights_gib * GIB)
        K = R - W - int(other_gib * GIB)
        outcome = Outcome(ok=True)
        if F < R:
            outcome = Outcome(False, failures.FREE_MEMORY_BELOW_REQUEST,
                              f"Free memory on device cuda:{cuda_ordinal} ({F / GIB:.2f}/{T / GIB:.2f} GiB) "
                              f"on startup is less than desired GPU memory utilization "
                              f"({u}, {R / GIB:.2f} GiB).")
        elif W > F:
            outcome = Outcome(False, failures.WEIGHTS_OOM, "CUDA out of memory")
        elif K <= 0:
            outcome = Outcome(False, failures.NO_KV_MEMORY, "No available memory")
        elif K < L * kv_per_token:
            outcome = Outcome(False, failures.KV_BELOW_MAX_MODEL_LEN,
                              f"To serve at least one request with the model's max seq len "
                              f"({L}) ...")
        e = lambda b: Estimate.exact(b, Source.DERIVED)  # noqa: E731
        ledger = Ledger(rank=0, tp_rank=0, pp_rank=0, total=e(T), free_at_start=e(F),
                        requested=e(R), weights=e(W), activation=e(int(other_gib * GIB)),
                        non_torch=e(0), cuda_graph=e(0), kv_cache=e(K))
        blocks = max(K, 0) // (16 * kv_per_token)
        kv = KvCapacity(bytes_per_token=kv_per_token, block_size=16,
                        page_size_bytes=16 * kv_per_token, num_blocks=blocks, tokens=blocks * 16,
                        max_concurrency=blocks * 16 / L, max_model_len=L,
                        blocks_per_request=-(-L // 16))
        return Plan(model="toy", gpu=gpu.spec.name, vllm_version=version, engine="v1",
                    outcome=outcome, ledgers=(ledger,), kv=kv,
                    settings={"gpu_memory_utilization": u, "max_model_len": L,
                              "max_num_seqs": seqs, "tensor_parallel_size":
                              settings.tensor_parallel_size, "pipeline_parallel_size": 1})
    return plan_for
