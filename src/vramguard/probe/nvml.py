"""NVML adapter: the live GPUs as `GpuState`s. The ONLY module that imports `pynvml`.

`read_gpus(indices=None)` is the public entry point (used by `check`, `run` and the monitor).
NVML is initialised once per process and device handles are reused, so calling it every
second is cheap. Every NVML failure becomes a `ProbeError` with a fix; a field the device
does not support (NVML_ERROR_NOT_SUPPORTED) becomes `None`, never a crash.

MIG: a GPU in MIG mode is listed as its MIG instances (one `GpuState` each, with the parent's
NVML index, the instance's `MIG-...` UUID and a note), as CUDA sees them.

Containers: NVML reports host PIDs. A PID that does not exist in our PID namespace gets no
name, and the GPU's `notes` say so.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ..core.gpu import GpuProcess, GpuSpec, GpuState
from ..errors import ProbeError

GIB = 1 << 30
# NVML return codes (nvml.h); kept here so this module can translate without the library.
NOT_SUPPORTED = 3
NO_PERMISSION = 4
NOT_FOUND = 6
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
GPU_IS_LOST = 15
RESET_REQUIRED = 16
LIB_RM_VERSION_MISMATCH = 18
ARGUMENT_VERSION_MISMATCH = 25
INVALID_ARGUMENT = 2
# Memory NVML shows in use that no listed process accounts for, above which we say so.
UNLISTED_NOTE_BYTES = 1 * GIB
# nvmlDeviceGetP2PStatus: capability indices and the one status that means "yes" (nvml.h).
# NOTE: literal values: pynvml's NVML_P2P_CAPS_INDEX_READ is a tuple (a stray comma).
P2P_CAPS_READ = 0
P2P_CAPS_NVLINK = 2
P2P_STATUS_OK = 0
# A catalog spec is used only when its CUDA total is within this fraction of NVML's.
CATALOG_TOTAL_TOLERANCE = 0.03

_NO_DRIVER_FIX = ("Install the NVIDIA driver; in a container run with `--gpus all` (Docker) or "
                  "request nvidia.com/gpu (Kubernetes); or use `vramguard plan` for an offline "
                  "estimate")


class GpuLostError(ProbeError):
    """A GPU fell off the bus or needs a reset (NVML_ERROR_GPU_IS_LOST / RESET_REQUIRED)."""


# GpuSpec.source of the stand-in `read_gpus(skip_lost=True)` returns for a lost GPU.
LOST_SOURCE = "nvml: GPU lost"


def lost_state(index: int, error: ProbeError) -> GpuState:
    """A stand-in GpuState for a lost GPU (total and free 0; the error in `notes[0]`)."""
    spec = GpuSpec(name=f"GPU {index} (lost)", total_bytes=0, source=LOST_SOURCE)
    return GpuState(index=index, spec=spec, free_bytes=0, notes=(error.line(),))


def is_lost(state: GpuState) -> bool:
    return state.spec.source == LOST_SOURCE


def _error_for(code: int, what: str, where: str | None) -> ProbeError:
    """The ProbeError (with its fix) for an NVML return code."""
    if code == LIBRARY_NOT_FOUND:
        return ProbeError("no NVIDIA driver found: libnvidia-ml.so.1 could not be loaded "
                          "(NVML library not found)", where=where, fix=_NO_DRIVER_FIX)
    if code == DRIVER_NOT_LOADED:
        return ProbeError("the NVIDIA driver is not loaded (NVML: Driver Not Loaded)",
                          where=where,
                          fix="Check `nvidia-smi`; load the kernel module (`sudo modprobe "
                              "nvidia`) or reboot after a driver install; in a container run "
                              "with `--gpus all`; or use `vramguard plan` for an offline estimate")
    if code == NO_PERMISSION:
        return ProbeError(f"no permission to {what} (NVML: Insufficient Permissions)",
                          where=where,
                          fix="Check the permissions of /dev/nvidia* (the `video` group) or run "
                              "with the GPU device mounted (`--gpus all`, nvidia.com/gpu)")
    if code in (GPU_IS_LOST, RESET_REQUIRED):
        return GpuLostError(f"cannot {what}: the GPU has fallen off the bus or needs a reset "
                          f"(NVML error {code})", where=where,
                          fix="Check `nvidia-smi` and `dmesg` (Xid 79); the GPU needs a reset "
                              "(`nvidia-smi -r`) or a reboot, or exclude it with "
                              "CUDA_VISIBLE_DEVICES")
    if code == LIB_RM_VERSION_MISMATCH:
        return ProbeError("the NVIDIA driver and libnvidia-ml.so versions do not match "
                          "(NVML: RM version mismatch)", where=where,
                          fix="Reboot, or reload the nvidia kernel module after the driver "
                              "upgrade")
    return ProbeError(f"cannot {what} (NVML error {code})", where=where,
                      fix="Check `nvidia-smi`; if it fails too, fix the driver first")


@dataclass(frozen=True)
class _Device:
    """One CUDA-visible device: a whole GPU, or one MIG instance of it."""

    index: int                 # NVML index of the physical GPU
    handle: Any
    mig: tuple[int, int] | None = None   # (GPU instance id, compute instance id)
    # static facts, read once when the handle is opened
    name: str = ""
    uuid: str | None = None
    compute_capability: tuple[int, int] | None = None

    @property
    def where(self) -> str:
        return f"GPU {self.index}" + (f" MIG {self.mig[0]}.{self.mig[1]}" if self.mig else "")


class NvmlSession:
    """An initialised NVML with cached device handles. `lib` is the pynvml module (default)
    or any object with the same functions and `NVMLError` (tests pass a pure-Python fake)."""

    def __init__(self, lib: Any = None, *, process_info: Callable[[int], tuple[str | None, bool]]
                 | None = None, host_memory: Callable[[], tuple[int, int]] | None = None):
        self._lib = lib
        self._process_info = process_info or _psutil_process_info
        self._host_memory = host_memory or _psutil_host_memory
        self._lock = threading.Lock()
        self._devices: dict[int, tuple[_Device, ...]] | None = None
        self._count = 0
        self.driver_version: str | None = None

    # ---- life cycle ---------------------------------------------------------------------
    def _start(self) -> None:
        if self._lib is None:
            import pynvml                   # NOTE: the project's only pynvml import
            self._lib = pynvml
        lib = self._lib
        try:
            lib.nvmlInit()
        except lib.NVMLError as exc:
            raise _error_for(_code(exc), "initialise NVML", "NVML") from None
        except OSError as exc:              # a broken library file
            raise ProbeError(f"libnvidia-ml.so.1 could not be loaded: {exc}", where="NVML",
                             fix=_NO_DRIVER_FIX) from None
        try:
            self._count = int(lib.nvmlDeviceGetCount())
        except lib.NVMLError as exc:
            self._shutdown()
            raise _error_for(_code(exc), "count the GPUs", "NVML") from None
        self.driver_version = _text(self._optional(lib.nvmlSystemGetDriverVersion))
        self._devices = {}

    def _shutdown(self) -> None:
        try:
            self._lib.nvmlShutdown()
        except Exception:                   # NOTE: best effort; nothing to report
            pass
        self._devices = None

    def close(self) -> None:
        """Shut NVML down (the next read initialises it again)."""
        with self._lock:
            if self._devices is not None:
                self._shutdown()

    # ---- reading --------------------------------------------------------------------------
    def count(self) -> int:
        """The number of physical GPUs NVML sees."""
        with self._lock:
            if self._devices is None:
                self._start()
            return self._count

    def read(self, indices: Sequence[int] | None = None, *,
             skip_lost: bool = False) -> list[GpuState]:
        """The GPUs with NVML `indices` (all when None), MIG instances expanded. A lost GPU
        raises GpuLostError, or with `skip_lost` becomes a `lost_state` stand-in."""
        with self._lock:
            if self._devices is None:
                self._start()
            wanted = range(self._count) if indices is None else list(indices)
            out: list[GpuState] = []
            try:
                for i in wanted:
                    if not 0 <= i < self._count:
                        raise ProbeError(f"there is no GPU {i}: NVML sees {self._count}",
                                         where="NVML", fix="Use an index from `nvidia-smi -L`")
                    try:
                        out += [self._state(d) for d in self._devices_of(i)]
                    except GpuLostError as exc:
                        self._devices.pop(i, None)      # NOTE: try its handle again next time
                        if not skip_lost:
                            raise
                        out.append(lost_state(i, exc))
            except ProbeError:
                self._devices = {}          # NOTE: re-fetch handles after a failure
                raise
            return out

    def _devices_of(self, index: int) -> tuple[_Device, ...]:
        if index not in self._devices:
            lib = self._lib
            where = f"GPU {index}"
            handle = self._call(lib.nvmlDeviceGetHandleByIndex, index, what="open the GPU",
                                where=where)
            mode = self._optional(lib.nvmlDeviceGetMigMode, handle, where=where)
            if mode and mode[0] == 1:
                devices = self._mig_devices(index, handle)
            else:
                devices = (_Device(index, handle),)
            self._devices[index] = tuple(self._with_static(d) for d in devices)
        return self._devices[index]

    def _with_static(self, dev: _Device) -> _Device:
        lib, where = self._lib, dev.where
        name = _text(self._optional(lib.nvmlDeviceGetName, dev.handle, where=where))
        uuid = _text(self._optional(lib.nvmlDeviceGetUUID, dev.handle, where=where))
        cc = self._optional(lib.nvmlDeviceGetCudaComputeCapability, dev.handle, where=where)
        return replace(dev, name=name or f"GPU {dev.index}", uuid=uuid,
                       compute_capability=(int(cc[0]), int(cc[1])) if cc else None)

    def _mig_devices(self, index: int, parent: Any) -> tuple[_Device, ...]:
        lib, where = self._lib, f"GPU {index}"
        count = self._call(lib.nvmlDeviceGetMaxMigDeviceCount, parent,
                           what="list MIG instances", where=where)
        found = []
        for j in range(int(count)):
            try:
                h = lib.nvmlDeviceGetMigDeviceHandleByIndex(parent, j)
            except lib.NVMLError as exc:
                if _code(exc) in (NOT_FOUND, INVALID_ARGUMENT, NOT_SUPPORTED):
                    continue
                raise _error_for(_code(exc), "list MIG instances", where) from None
            gi = self._optional(lib.nvmlDeviceGetGpuInstanceId, h, where=where)
            ci = self._optional(lib.nvmlDeviceGetComputeInstanceId, h, where=where)
            found.append(_Device(index, h, (gi if gi is not None else -1,
                                            ci if ci is not None else -1)))
        return tuple(found)

    def _state(self, dev: _Device) -> GpuState:
        lib, where, h = self._lib, dev.where, dev.handle
        notes: list[str] = []
        if dev.mig:
            notes.append(f"MIG instance (GPU instance {dev.mig[0]}, compute instance "
                         f"{dev.mig[1]}) of GPU {dev.index}")
        total, free, used, reserved, uma = self._memory(h, where, notes)
        util = self._optional(lib.nvmlDeviceGetUtilizationRates, h, where=where)
        procs = self._processes(h, where, notes)
        listed = sum(p.used_bytes or 0 for p in procs)
        if used is not None and used - listed > UNLISTED_NOTE_BYTES:
            notes.append(f"{(used - listed) / GIB:.1f} GiB in use is not accounted for by the "
                         "processes NVML lists (other containers, or no permission to see them)")
        spec = gpu_spec_for(dev.name, total - reserved, dev.compute_capability, uma)
        return GpuState(index=dev.index, spec=spec, free_bytes=free, used_bytes=used,
                        uuid=dev.uuid,
                        utilization_pct=float(util.gpu) if util is not None else None,
                        processes=procs, notes=tuple(notes))

    def _memory(self, h: Any, where: str,
                notes: list[str]) -> tuple[int, int, int | None, int, bool]:
        """(total, free, used, reserved, uma): bytes, v2 when the driver has it (it splits out
        the driver's reservation, which CUDA's total excludes); uma for unified memory."""
        lib = self._lib
        version = getattr(lib, "nvmlMemory_v2", None)
        if version is not None:
            try:
                m = lib.nvmlDeviceGetMemoryInfo(h, version=version)
                return int(m.total), int(m.free), int(m.used), int(m.reserved), False
            except lib.NVMLError as exc:
                if _code(exc) not in (NOT_SUPPORTED, FUNCTION_NOT_FOUND,
                                      ARGUMENT_VERSION_MISMATCH, INVALID_ARGUMENT):
                    raise _error_for(_code(exc), "read GPU memory", where) from None
        try:
            m = lib.nvmlDeviceGetMemoryInfo(h)
            return int(m.total), int(m.free), int(m.used), 0, False
        except lib.NVMLError as exc:
            if _code(exc) != NOT_SUPPORTED:
                raise _error_for(_code(exc), "read GPU memory", where) from None
        # NOTE: unified-memory devices (GB10, Jetson) have no NVML memory info; vLLM 0.11.1+
        # counts host RAM as free memory there, so do we.
        total, available = self._host_memory()
        notes.append("unified memory: NVML has no memory info, using host RAM")
        return total, available, total - available, 0, True

    def _processes(self, h: Any, where: str, notes: list[str]) -> tuple[GpuProcess, ...]:
        lib = self._lib
        mismatch = getattr(lib, "NVMLLibraryMismatchError", ())
        try:
            try:
                raw = lib.nvmlDeviceGetComputeRunningProcesses(h)
            except mismatch:    # NOTE: drivers before R510 lack the _v3 call pynvml makes
                raw = lib.nvmlDeviceGetComputeRunningProcesses_v2(h)
        except lib.NVMLError as exc:
            code = _code(exc)
            if code in (NOT_SUPPORTED, FUNCTION_NOT_FOUND):
                return ()
            if code == NO_PERMISSION:
                notes.append("no permission to list the processes on this GPU")
                return ()
            raise _error_for(code, "list GPU processes", where) from None
        procs, hidden = [], []
        for p in raw:
            pid = int(p.pid)
            used = getattr(p, "usedGpuMemory", None)
            name, visible = self._process_info(pid)
            if not visible:
                hidden.append(pid)
            procs.append(GpuProcess(pid=pid, name=name,
                                    used_bytes=int(used) if used is not None else None))
        if hidden:
            pids = ", ".join(str(p) for p in hidden)
            notes.append(f"PID {pids} not in this PID namespace: NVML reports host PIDs from "
                         "a container (run with --pid=host to see their names)")
        procs.sort(key=lambda p: -(p.used_bytes or 0))
        return tuple(procs)

    def peer_link(self, indices: Sequence[int]) -> str | None:
        """How the GPUs with NVML `indices` reach each other, as vLLM's custom all-reduce
        asks (`is_fully_connected`, then peer access): "nvlink" when every pair is linked by
        NVLink, "p2p" when every pair has peer access, "none" otherwise; None when NVML
        cannot tell (fewer than two GPUs, MIG instances, a driver without the query)."""
        wanted = list(dict.fromkeys(indices))
        if len(wanted) < 2:
            return None
        with self._lock:
            if self._devices is None:
                self._start()
            try:
                devices = [self._devices_of(i) for i in wanted]
            except ProbeError:
                self._devices = {}
                return None
            if any(len(d) != 1 or d[0].mig for d in devices):
                return None
            handles = [d[0].handle for d in devices]
            pairs = [(a, b) for n, a in enumerate(handles) for b in handles[n + 1:]]
            for cap, name in ((P2P_CAPS_NVLINK, "nvlink"), (P2P_CAPS_READ, "p2p")):
                status = [self._p2p(a, b, cap) for a, b in pairs]
                if None in status:
                    return None
                if all(st == P2P_STATUS_OK for st in status):
                    return name
            return "none"

    def _p2p(self, a: Any, b: Any, cap: int) -> int | None:
        try:
            return int(self._lib.nvmlDeviceGetP2PStatus(a, b, cap))
        except self._lib.NVMLError:
            return None

    # ---- NVML call helpers ------------------------------------------------------------------
    def _call(self, fn: Callable, *args: Any, what: str, where: str) -> Any:
        try:
            return fn(*args)
        except self._lib.NVMLError as exc:
            raise _error_for(_code(exc), what, where) from None

    def _optional(self, fn: Callable, *args: Any, where: str = "NVML") -> Any:
        """fn(*args), or None when the device does not support it. Lost GPUs still raise."""
        try:
            return fn(*args)
        except self._lib.NVMLError as exc:
            code = _code(exc)
            if code in (GPU_IS_LOST, RESET_REQUIRED, DRIVER_NOT_LOADED, LIB_RM_VERSION_MISMATCH):
                raise _error_for(code, f"read {getattr(fn, '__name__', 'a field')}",
                                 where) from None
            return None


def _code(exc: BaseException) -> int:
    return int(getattr(exc, "value", -1))


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@lru_cache(maxsize=64)
def gpu_spec_for(nvml_name: str, cuda_total_bytes: int, compute_capability: tuple[int, int] | None,
                 uma: bool = False) -> GpuSpec:
    """The catalog GpuSpec for an NVML name when its total matches what NVML measures,
    else a GpuSpec built from NVML's own total (minus the driver reservation)."""
    from ..core.gpu_catalog import lookup_gpu
    from ..errors import UsageError
    try:
        spec = lookup_gpu(nvml_name)
    except UsageError:
        spec = None
    if spec is not None and cuda_total_bytes > 0 and (
            abs(spec.total_bytes - cuda_total_bytes) <= CATALOG_TOTAL_TOLERANCE * cuda_total_bytes
            or spec.uma or uma):
        return spec
    return GpuSpec(name=nvml_name, total_bytes=cuda_total_bytes, full_name=nvml_name,
                   compute_capability=compute_capability, uma=uma, source="nvml")


def _psutil_process_info(pid: int) -> tuple[str | None, bool]:
    """(name, visible): visible is False when the PID does not exist in our PID namespace."""
    import psutil
    try:
        return psutil.Process(pid).name(), True
    except psutil.NoSuchProcess:
        return None, False
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None, True


def _psutil_host_memory() -> tuple[int, int]:
    import psutil
    vm = psutil.virtual_memory()
    return int(vm.total), int(vm.available)


_SESSION: NvmlSession | None = None
_SESSION_LOCK = threading.Lock()


def session() -> NvmlSession:
    """The process-wide NVML session (created on first use)."""
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = NvmlSession()
        return _SESSION


def shutdown() -> None:
    """Shut NVML down if this process started it (e.g. before exec'ing vLLM, so no NVML
    state or device file is carried over)."""
    with _SESSION_LOCK:
        if _SESSION is not None:
            _SESSION.close()


def read_peer_link(indices: Sequence[int]) -> str | None:
    """`NvmlSession.peer_link` of the process-wide session: "nvlink", "p2p", "none", or None
    when NVML cannot tell (never raises: the link refines a plan, it does not gate it)."""
    try:
        return session().peer_link(indices)
    except ProbeError:
        return None


def read_gpus(indices: Sequence[int] | None = None, *,
              skip_lost: bool = False) -> list[GpuState]:
    """The live GPUs (NVML indices `indices`, or all), one `GpuState` per CUDA device:
    MIG instances are listed on their own. Raises ProbeError (with a fix) when NVML fails;
    a lost GPU raises GpuLostError, or with `skip_lost` is a stand-in (`is_lost(state)`).
    Cheap to call repeatedly: NVML is initialised once and handles are reused."""
    return session().read(indices, skip_lost=skip_lost)
