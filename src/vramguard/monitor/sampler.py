"""The sampler: one `Sample` per tick (GPUs via NVML + every vLLM endpoint), on a fixed grid.

    sampler = Sampler(["http://127.0.0.1:8000"], interval_s=1.0)   # NVML on, degrades if absent
    sample = sampler.sample_once()                                  # never raises
    sampler.run(on_sample, stop=threading.Event())                  # until stop is set

Scheduling: tick k is due at `start + k * interval` on the monotonic clock, so the rate does
not drift. A slow tick does not lose the next one (it starts at once, late); when whole ticks
were overrun, the next sample carries `missed_ticks` (a gap marker) and the grid is kept.

Failures never escape `sample_once`: an endpoint that is down, slow, answers garbage or 500
is an `EndpointScrape(ok=False, error=...)`; a counter that went down (vLLM restarted) is a
note on that scrape; an NVML failure turns GPU sampling off with `gpu_error` set on every
later sample ("watching endpoints only"), and NVML is tried again every GPU_RETRY_S.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

from ..core.gpu import GpuState
from ..errors import UsageError
from .metrics import EndpointScrape, scrape

GpuReader = Callable[[], Sequence[GpuState]]
GPU_RETRY_S = 60.0                 # after an NVML failure, try again this much later
COUNTERS = ("num_preemptions_total", "prompt_tokens_total", "generation_tokens_total")


@dataclass(frozen=True)
class Sample:
    """Everything seen at one tick. `ts` is wall-clock seconds (UNIX time)."""

    ts: float
    tick: int
    gpus: tuple[GpuState, ...] = ()
    endpoints: tuple[EndpointScrape, ...] = ()
    gpu_error: str | None = None       # set when GPUs are not (or no longer) sampled
    missed_ticks: int = 0              # ticks skipped just before this one (gap marker)
    duration_s: float = 0.0            # how long taking the sample took

    def endpoint(self, url: str) -> EndpointScrape | None:
        return next((e for e in self.endpoints if e.url == url), None)

    def to_dict(self) -> dict:
        return {
            "ts": round(self.ts, 3), "tick": self.tick, "missed_ticks": self.missed_ticks,
            "duration_s": round(self.duration_s, 6), "gpu_error": self.gpu_error,
            "gpus": [gpu_to_dict(g) for g in self.gpus],
            "endpoints": [e.to_dict() for e in self.endpoints],
        }


def gpu_to_dict(gpu: GpuState) -> dict:
    total = gpu.spec.total_bytes
    used = gpu.used_bytes if gpu.used_bytes is not None else total - gpu.free_bytes
    return {
        "index": gpu.index, "name": gpu.spec.name, "uuid": gpu.uuid,
        "total_bytes": total, "used_bytes": used, "free_bytes": gpu.free_bytes,
        "utilization_pct": gpu.utilization_pct,
        "processes": [{"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes}
                      for p in gpu.processes],
    }


def default_gpu_reader() -> GpuReader:
    """`vramguard.probe.nvml.read_gpus` (imported lazily; ImportError if not available)."""
    from ..probe.nvml import read_gpus
    return read_gpus


class Sampler:
    """Samples GPUs and endpoints. `gpu_reader=None` with `gpus=False` watches endpoints only."""

    def __init__(self, urls: Iterable[str], *, interval_s: float = 1.0,
                 timeout_s: float | None = None, gpus: bool = True,
                 gpu_reader: GpuReader | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time):
        self.urls = tuple(dict.fromkeys(urls))
        if interval_s <= 0:
            raise UsageError(f"interval must be positive, got {interval_s:g} s", where="--interval")
        self.interval_s = float(interval_s)
        self.timeout_s = timeout_s if timeout_s else min(max(0.8 * interval_s, 0.25), 10.0)
        self._clock, self._wall = clock, wall
        self._gpu_reader: GpuReader | None = None
        self.nvml_error: str | None = None
        self._retry: tuple[GpuReader, float] | None = None
        self.gpu_error: str | None = None if gpus else "GPU sampling off (--no-gpu)"
        if gpus:
            self._init_gpu_reader(gpu_reader)
        self._last_counters: dict[tuple[str, str], dict[str, int]] = {}
        self._pool = ThreadPoolExecutor(max_workers=len(self.urls),
                                        thread_name_prefix="vramguard-scrape") \
            if len(self.urls) > 1 else None
        self._tick = 0

    def _init_gpu_reader(self, gpu_reader: GpuReader | None) -> None:
        if gpu_reader is not None:
            self._gpu_reader = gpu_reader
            return
        try:
            self._gpu_reader = default_gpu_reader()
        except Exception as exc:   # NOTE: ImportError (probe not there) or a broken pynvml
            self._disable_gpus(exc)

    def _disable_gpus(self, exc: BaseException) -> None:
        line = getattr(exc, "line", None)
        text = line() if callable(line) else f"{type(exc).__name__}: {exc}"
        self.nvml_error = text
        self.gpu_error = f"NVML unavailable ({text}); watching endpoints only"
        if self._gpu_reader is not None:        # a reader that worked: retry it later
            self._retry = (self._gpu_reader, self._clock() + GPU_RETRY_S)
        self._gpu_reader = None

    def _read_gpus(self) -> tuple[GpuState, ...]:
        if self._gpu_reader is None and self._retry and self._clock() >= self._retry[1]:
            self._gpu_reader, self._retry = self._retry[0], None
        if self._gpu_reader is None:
            return ()
        try:
            gpus = tuple(self._gpu_reader())
        except Exception as exc:   # ProbeError, pynvml errors: degrade, never crash
            self._disable_gpus(exc)
            return ()
        if self.nvml_error:                     # back after a failure
            self.nvml_error = self.gpu_error = None
        return gpus

    @property
    def gpu_reader(self) -> GpuReader | None:
        """The GPU reader in use (None when GPUs are off or NVML failed)."""
        return self._gpu_reader

    def check_gpus(self) -> str | None:
        """Read the GPUs once; returns `gpu_error` (None when NVML works)."""
        self._read_gpus()
        return self.gpu_error

    def _scrape_all(self) -> tuple[EndpointScrape, ...]:
        if self._pool is None:
            return tuple(scrape(u, self.timeout_s) for u in self.urls)
        return tuple(self._pool.map(lambda u: scrape(u, self.timeout_s), self.urls))

    def sample_once(self, *, missed_ticks: int = 0) -> Sample:
        """Take one sample now. Never raises for endpoint or NVML failures."""
        start = self._clock()
        ts = self._wall()
        gpus = self._read_gpus()
        endpoints = tuple(self._check_resets(e) for e in self._scrape_all())
        sample = Sample(ts=ts, tick=self._tick, gpus=gpus, endpoints=endpoints,
                        gpu_error=self.gpu_error, missed_ticks=missed_ticks,
                        duration_s=self._clock() - start)
        self._tick += 1
        return sample

    def _check_resets(self, scrape_: EndpointScrape) -> EndpointScrape:
        notes = []
        for engine in scrape_.engines:
            key = (scrape_.url, engine.engine)
            now = {c: getattr(engine, c) for c in COUNTERS if getattr(engine, c) is not None}
            before = self._last_counters.get(key, {})
            dropped = [c for c, v in now.items() if c in before and v < before[c]]
            if dropped:
                notes.append(f"counter reset on engine {engine.engine} "
                             f"({', '.join(dropped)} went down): vLLM restarted?")
            if engine.kv_pool_tokens is not None:
                now["kv_pool_tokens"] = engine.kv_pool_tokens
                old = before.get("kv_pool_tokens")
                if old is not None and old != engine.kv_pool_tokens:
                    notes.append(f"KV pool of engine {engine.engine} changed from {old:,} to "
                                 f"{engine.kv_pool_tokens:,} tokens: restarted with other "
                                 f"settings or less free memory?")
            self._last_counters[key] = now
        return replace(scrape_, notes=scrape_.notes + tuple(notes)) if notes else scrape_

    def run(self, on_sample: Callable[[Sample], object], *, stop: threading.Event | None = None,
            max_ticks: int | None = None) -> None:
        """Sample on the grid until `stop` is set (or `max_ticks` samples were taken)."""
        stop = stop or threading.Event()
        start = self._clock()
        k, missed, taken = 0, 0, 0
        while not stop.is_set() and (max_ticks is None or taken < max_ticks):
            delay = start + k * self.interval_s - self._clock()
            if delay > 0 and stop.wait(delay):
                break
            on_sample(self.sample_once(missed_ticks=missed))
            taken += 1
            k, missed = next_tick(start, k, self.interval_s, self._clock())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def next_tick(start: float, k: int, interval_s: float, now: float) -> tuple[int, int]:
    """After tick k finished at `now`: the next tick index and how many were skipped.

    The next tick is k+1 unless its slot has already passed and further slots too; then the
    latest slot that is due is taken (starting at once) and the ones between count as missed.
    """
    due = math.floor((now - start) / interval_s + 1e-9)   # latest slot whose time has come
    nxt = max(k + 1, due)
    return nxt, nxt - (k + 1)
