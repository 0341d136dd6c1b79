"""A sampling window over the live GPUs, like `nvidia-smi dmon -c 60`.

`sample_window(read, window_s=60, interval_s=1)` calls `read()` (e.g. `nvml.read_gpus`) every
`interval_s` seconds for `window_s` seconds and folds the samples into one `GpuState` per GPU:
`free_bytes` is the LOWEST free memory seen (what a launch must survive), with
`free_min_bytes` / `free_median_bytes` / `free_max_bytes` beside it, and the processes that
came and went are `ProcessEvent`s (also summarised in each GPU's `notes`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..core.gpu import GpuProcess, GpuState
from ..errors import UsageError

GIB = 1 << 30


@dataclass(frozen=True)
class ProcessEvent:
    """A GPU process that started or ended during the window."""

    gpu_index: int
    gpu_uuid: str | None
    pid: int
    name: str | None
    kind: str                 # "appeared" | "left"
    at_s: float               # seconds since the window started
    used_bytes: int | None    # the most it used while seen

    def describe(self) -> str:
        who = f"PID {self.pid}" + (f" ({self.name})" if self.name else "")
        mem = f", up to {self.used_bytes / GIB:.1f} GiB" if self.used_bytes else ""
        return f"{who} {self.kind} at +{self.at_s:.0f}s{mem}"


@dataclass(frozen=True)
class Window:
    """The folded result of a sampling window."""

    gpus: tuple[GpuState, ...]
    samples: int
    duration_s: float
    interval_s: float
    events: tuple[ProcessEvent, ...] = ()

    def to_dict(self) -> dict:
        return {"samples": self.samples, "duration_s": round(self.duration_s, 3),
                "interval_s": self.interval_s,
                "events": [{"gpu_index": e.gpu_index, "gpu_uuid": e.gpu_uuid, "pid": e.pid,
                            "name": e.name, "kind": e.kind, "at_s": round(e.at_s, 3),
                            "used_bytes": e.used_bytes} for e in self.events]}


def _key(g: GpuState, position: int) -> str:
    return g.uuid or f"#{g.index}:{position}"


def sample_window(read: Callable[[], Sequence[GpuState]], *, window_s: float, interval_s: float,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> Window:
    """Sample `read()` every `interval_s` for `window_s` seconds (one sample when window_s
    is 0) and fold the samples. Samples follow a fixed schedule, so slow reads do not drift.
    """
    if interval_s <= 0:
        raise UsageError("the sampling interval must be positive", where="--interval",
                         fix="Use e.g. --interval 1s")
    start = clock()
    samples: list[tuple[float, Sequence[GpuState]]] = []
    k = 0
    while True:
        samples.append((clock() - start, read()))
        k += 1
        due = k * interval_s
        if due >= window_s:
            break
        delay = start + due - clock()
        if delay > 0:
            sleep(delay)
    return fold(samples, interval_s=interval_s, duration_s=clock() - start)


def fold(samples: Sequence[tuple[float, Sequence[GpuState]]], *, interval_s: float,
         duration_s: float) -> Window:
    """Fold timed samples `(at_s, gpus)` into a Window (pure; see sample_window)."""
    order: list[str] = []
    series: dict[str, list[tuple[float, GpuState]]] = {}
    for at, gpus in samples:
        for pos, g in enumerate(gpus):
            key = _key(g, pos)
            if key not in series:
                order.append(key)
                series[key] = []
            series[key].append((at, g))
    folded, events = [], []
    for key in order:
        state, evs = _fold_gpu(series[key])
        folded.append(state)
        events += evs
    return Window(gpus=tuple(folded), samples=len(samples), duration_s=duration_s,
                  interval_s=interval_s, events=tuple(events))


def _fold_gpu(series: list[tuple[float, GpuState]]) -> tuple[GpuState, list[ProcessEvent]]:
    last = series[-1][1]
    frees = [g.free_bytes for _, g in series]
    peak: dict[int, GpuProcess] = {}
    changes: list[tuple[str, int, float]] = []      # (kind, pid, at_s)
    prev: dict[int, GpuProcess] | None = None
    for at, g in series:
        now = {p.pid: p for p in g.processes}
        for pid, p in now.items():
            old = peak.get(pid)
            if old is None or (p.used_bytes or 0) > (old.used_bytes or 0):
                peak[pid] = p
        if prev is not None:
            changes += [("appeared", pid, at) for pid in now if pid not in prev]
            changes += [("left", pid, at) for pid in prev if pid not in now]
        prev = now
    # each process is reported at the most it used while seen
    events = [ProcessEvent(gpu_index=last.index, gpu_uuid=last.uuid, pid=pid,
                           name=peak[pid].name, kind=kind, at_s=at,
                           used_bytes=peak[pid].used_bytes) for kind, pid, at in changes]
    procs = tuple(sorted((peak[pid] for pid in (prev or {})),
                         key=lambda p: -(p.used_bytes or 0)))
    used = [g.used_bytes for _, g in series if g.used_bytes is not None]
    utils = [g.utilization_pct for _, g in series if g.utilization_pct is not None]
    notes = tuple(dict.fromkeys(n for _, g in series for n in g.notes))
    notes += tuple(e.describe() + " during the window" for e in events)
    state = replace(last, free_bytes=min(frees), free_min_bytes=min(frees),
                    free_median_bytes=int(statistics.median(frees)), free_max_bytes=max(frees),
                    used_bytes=max(used) if used else None,
                    utilization_pct=max(utils) if utils else None,
                    processes=procs, notes=notes)
    return state, events
