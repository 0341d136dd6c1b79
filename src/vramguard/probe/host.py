"""Host checks: RAM, the container's cgroup memory limit and /dev/shm, against what vLLM
needs on the host (swap space / CPU KV offload, --cpu-offload-gb, the weight-loading copy and
the processes' own memory).

`read_host()` reads the machine (every path under an injectable `root`, so tests can build a
fake /proc and /sys); `host_need()` estimates vLLM's host memory; `check_host()` compares them
and returns Problems with fixes. Only `read_host` does I/O.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..core.model import ModelSpec
from ..core.settings import Settings
from .verdict import ERROR, WARNING, Problem

GIB = 1 << 30
MIB = 1 << 20
# cgroup v1 writes "unlimited" as a huge page-aligned number (e.g. 9223372036854771712).
_UNLIMITED = 1 << 60
# vLLM's processes themselves: the API server, then each GPU worker (torch, CUDA host side).
FRONTEND_BYTES = 2 * GIB
WORKER_BYTES = 2 * GIB
# vLLM streams checkpoint shards; HF shards are at most 5 GB by default. PyTorch .bin shards
# are loaded whole (unpickled by vLLM) by every worker, so they cost more.
SAFETENSORS_SHARD_BYTES = 5 * GIB
BIN_SHARD_BYTES = 10 * GIB
V0_SWAP_SPACE_GIB = 4.0
# NCCL and vLLM's shared-memory broadcast queue need /dev/shm for TP/PP > 1; Docker's
# default is 64 MiB, which makes NCCL fail ("unhandled system error") or hang.
SHM_MIN_BYTES = 1 * GIB


@dataclass(frozen=True)
class HostState:
    """The host as measured. None = unknown / not applicable (no cgroup limit, no /dev/shm)."""

    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    cgroup_version: int | None = None
    cgroup_limit_bytes: int | None = None
    cgroup_usage_bytes: int | None = None
    shm_total_bytes: int | None = None
    shm_free_bytes: int | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in (
            "ram_total_bytes", "ram_available_bytes", "cgroup_version", "cgroup_limit_bytes",
            "cgroup_usage_bytes", "shm_total_bytes", "shm_free_bytes")} | {
            "notes": list(self.notes)}


@dataclass(frozen=True)
class HostNeed:
    """What vLLM needs on the host, term by term (bytes), and /dev/shm for multi-GPU."""

    terms: dict[str, int] = field(default_factory=dict)
    shm_bytes: int = 0
    world_size: int = 1
    shm_offload_bytes: int = 0      # the KV offloading buffer's part of shm_bytes (0.20+)

    @property
    def total_bytes(self) -> int:
        return sum(self.terms.values())

    def to_dict(self) -> dict:
        return {"total_bytes": self.total_bytes, "terms": dict(self.terms),
                "shm_bytes": self.shm_bytes}


# ---- reading the machine ---------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int_or_none(text: str | None) -> int | None:
    if text is None or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= _UNLIMITED else value


def read_cgroup(root: Path) -> tuple[int | None, int | None, int | None]:
    """(version, limit_bytes, usage_bytes) of this process's memory cgroup.

    v2: <root>/sys/fs/cgroup/<path>/memory.max and memory.current, path from
    <root>/proc/self/cgroup ("0::/path"); in a container with a cgroup namespace the path
    is "/" and the files sit at the top. v1: .../memory/<path>/memory.limit_in_bytes.
    """
    base = root / "sys/fs/cgroup"
    own = _read(root / "proc/self/cgroup") or ""
    v2_path, v1_path = None, None
    for line in own.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_path = parts[2]
        elif "memory" in parts[1].split(","):
            v1_path = parts[2]
    if (base / "cgroup.controllers").exists() or v2_path is not None and v1_path is None:
        for d in _candidates(base, v2_path):
            limit_text = _read(d / "memory.max")
            if limit_text is not None:
                return 2, _int_or_none(limit_text), _int_or_none(_read(d / "memory.current"))
        return 2, None, None
    mem = base / "memory"
    for d in _candidates(mem, v1_path):
        limit_text = _read(d / "memory.limit_in_bytes")
        if limit_text is not None:
            return 1, _int_or_none(limit_text), _int_or_none(_read(d / "memory.usage_in_bytes"))
    return None, None, None


def _candidates(base: Path, rel: str | None) -> list[Path]:
    out = []
    if rel and rel != "/":
        out.append(base / rel.lstrip("/"))
    out.append(base)
    return out


def read_host(root: str | Path = "/", *,
              statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
              memory: Callable[[], tuple[int, int]] | None = None) -> HostState:
    """Measure the host: RAM (psutil, or `memory()` -> (total, available)), the cgroup
    memory limit under `root`, and the size of <root>/dev/shm (via `statvfs`)."""
    root = Path(root)
    if memory is None:
        import psutil
        vm = psutil.virtual_memory()
        total, available = int(vm.total), int(vm.available)
    else:
        total, available = memory()
    version, limit, usage = read_cgroup(root)
    notes = []
    shm_total = shm_free = None
    try:
        st = statvfs(str(root / "dev/shm"))
        shm_total, shm_free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        notes.append("/dev/shm is missing")
    return HostState(ram_total_bytes=total, ram_available_bytes=available,
                     cgroup_version=version, cgroup_limit_bytes=limit, cgroup_usage_bytes=usage,
                     shm_total_bytes=shm_total, shm_free_bytes=shm_free, notes=tuple(notes))


# ---- what vLLM needs -------------------------------------------------------------------
def host_need(settings: Settings, spec: ModelSpec | None, *, engine: str | None = None,
              offload_in_shm: bool = False) -> HostNeed:
    """An estimate of vLLM's host memory for one launch (all its processes together).
    `offload_in_shm`: the release keeps the native KV offloading buffer in /dev/shm (0.20+,
    `rules.kv_offload_in_shm`)."""
    ws = settings.world_size * max(1, settings.data_parallel_size)
    terms = {"vllm_processes": FRONTEND_BYTES + WORKER_BYTES * ws}
    swap = settings.swap_space
    if swap is None and engine == "v0":
        swap = V0_SWAP_SPACE_GIB
    if swap:
        terms["swap_space"] = int(swap * GIB) * ws
    if settings.cpu_offload_gb:
        terms["cpu_offload"] = int(settings.cpu_offload_gb * GIB) * ws
    terms["weight_loading"] = _loading_copy(spec) * ws
    offload = _kv_offload_bytes(settings)
    if offload:
        # NOTE: the size is the total over the TP ranks (vLLM's help); per engine instance
        terms["kv_offloading"] = offload * max(1, settings.data_parallel_size)
    in_shm = offload if offload_in_shm else 0
    return HostNeed(terms=terms, shm_bytes=(SHM_MIN_BYTES if settings.world_size > 1 else 0)
                    + in_shm, world_size=ws, shm_offload_bytes=in_shm)


def _kv_offload_bytes(settings: Settings) -> int:
    """Host bytes of --kv-offloading-size with the native backend (LMCache keeps its own
    server's memory: not counted)."""
    size = settings.kv_offloading_size
    if not size or (settings.kv_offloading_backend or "native") != "native":
        return 0
    return int(size * GIB)


def _loading_copy(spec: ModelSpec | None) -> int:
    """Host bytes one worker holds while streaming the checkpoint onto its GPU."""
    if spec is None:
        return SAFETENSORS_SHARD_BYTES
    ck = spec.checkpoint
    if ck is not None:
        cap = BIN_SHARD_BYTES if ck.format == "pytorch_bin" else SAFETENSORS_SHARD_BYTES
        return min(ck.total_bytes, cap)
    return min(spec.num_params() * spec.dtype_bytes, SAFETENSORS_SHARD_BYTES)


# ---- comparing -------------------------------------------------------------------------
def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def _need_text(need: HostNeed) -> str:
    return " + ".join(f"{k.replace('_', ' ')} {_gib(v)}" for k, v in need.terms.items())


def check_host(state: HostState, need: HostNeed) -> list[Problem]:
    """Problems (with fixes) where the host cannot give vLLM what it needs."""
    out: list[Problem] = []
    total = need.total_bytes
    detail = f"vLLM needs about {_gib(total)} on the host ({_need_text(need)})"
    if state.cgroup_limit_bytes is not None and state.cgroup_limit_bytes < total:
        out.append(Problem(
            "cgroup_memory_limit",
            f"the container's memory limit is {_gib(state.cgroup_limit_bytes)} but {detail}; "
            "the kernel will OOM-kill vLLM while it loads",
            fix=f"Raise the limit to at least {_gib(total)} (`docker run --memory`, "
                "Kubernetes resources.limits.memory)"))
    if state.ram_available_bytes is not None and state.ram_available_bytes < total:
        out.append(Problem(
            "host_ram",
            f"the host has {_gib(state.ram_available_bytes)} of RAM available but {detail}",
            fix="Free host memory, lower --swap-space / --cpu-offload-gb, or use a larger machine",
            severity=ERROR if state.ram_available_bytes < total * 0.75 else WARNING))
    if need.shm_bytes and state.shm_total_bytes is not None \
            and state.shm_total_bytes < need.shm_bytes:
        out.append(_shm_problem(state, need))
    return out


def _shm_problem(state: HostState, need: HostNeed) -> Problem:
    offload = need.shm_offload_bytes
    if offload:
        # NOTE: vLLM's words: "Insufficient space in /dev/shm: N MiB required, M MiB free"
        return Problem(
            "shm_too_small",
            f"/dev/shm is {state.shm_total_bytes / MIB:.0f} MiB; the KV offloading buffer "
            f"(--kv-offloading-size) is one {_gib(offload)} file there, so vLLM stops with "
            "'Insufficient space in /dev/shm'",
            fix=f"Give /dev/shm at least {_gib(need.shm_bytes)} (`--shm-size`, or `--ipc=host` "
                "on a host with that much), or lower --kv-offloading-size")
    return Problem(
        "shm_too_small",
        f"/dev/shm is {state.shm_total_bytes / MIB:.0f} MiB; tensor/pipeline parallelism "
        f"({need.world_size} GPUs) needs at least {_gib(need.shm_bytes)} for NCCL "
        "(Docker's 64 MiB default makes NCCL fail or hang)",
        fix="Run the container with `--ipc=host` or `--shm-size=16g`; in Kubernetes mount an "
            "emptyDir with medium: Memory at /dev/shm")
