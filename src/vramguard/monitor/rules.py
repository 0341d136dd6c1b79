"""Alert rules that explain: pure functions over a window of samples (oldest first).

Every rule takes `window: Sequence[Sample]` (what `Sampler.sample_once()` returns) and returns
a list of `Alert(rule, severity, message, subject)`; the message says what is happening, why it
matters and which vLLM flag to change. No I/O, no clock: the timestamps come from the samples.

    alerts = evaluate(window)                                # every rule, default thresholds
    alerts = evaluate(window, RuleConfig(kv_sustained_s=10), planned_kv_tokens=456_000)
    kv_usage_high(window, threshold=0.9, sustained_s=60)     # one rule
    kv_pool_mismatch(live_tokens=384, planned_tokens=512)    # plain numbers -> Alert | None

Rules (the `rule` field): `kv_usage_high`, `preemptions_rising`, `queue_growing_kv_full`,
`foreign_process`, `kv_pool_mismatch`, `endpoint_down`. Severities: info < warning < critical.
`ActiveAlerts` turns per-tick alert lists into fired/resolved transitions (for history).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .sampler import Sample

RULES = ("kv_usage_high", "preemptions_rising", "queue_growing_kv_full", "foreign_process",
         "kv_pool_mismatch", "endpoint_down")
SEVERITIES = ("info", "warning", "critical")
GIB = 1 << 30
FIX_CAPACITY = ("lower --max-num-seqs, raise --gpu-memory-utilization, use --kv-cache-dtype fp8, "
                "a shorter --max-model-len, or another (larger) GPU")


@dataclass(frozen=True)
class Alert:
    """One firing rule about one subject (an endpoint engine, a GPU)."""

    rule: str
    severity: str
    message: str
    subject: str = ""
    value: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.subject)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                "subject": self.subject, "value": self.value}


@dataclass(frozen=True)
class RuleConfig:
    """Thresholds. The defaults suit a 1 s interval and a 5 min window."""

    kv_threshold: float = 0.90
    kv_sustained_s: float = 60.0
    min_preemptions: int = 1
    queue_min_growth: int = 1
    foreign_min_drop_bytes: int = 1 * GIB
    kv_pool_tolerance: float = 0.10
    down_after_failures: int = 3
    window_s: float = 300.0


def capacity_fix(cache_dtype: str | None = None) -> str:
    """The flags that give requests more KV room (fp8 only when the cache is not fp8 yet)."""
    if cache_dtype and cache_dtype.lower().startswith("fp8"):
        return FIX_CAPACITY.replace("use --kv-cache-dtype fp8, ", "")
    return FIX_CAPACITY


def _dtype(window: Sequence[Sample], url: str, engine: str) -> str | None:
    ep = window[-1].endpoint(url) if window else None
    eng = next((e for e in ep.engines if e.engine == engine), None) if ep else None
    return eng.cache_dtype if eng else None


def _subject(url: str, engine: str) -> str:
    return f"{url} engine {engine}"


def _series(window: Sequence[Sample], attr: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(url, engine) -> [(ts, value)] for one EngineMetrics attribute, skipping unknowns."""
    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for sample in window:
        for ep in sample.endpoints:
            if not ep.ok:
                continue
            for eng in ep.engines:
                value = getattr(eng, attr)
                if value is not None:
                    out.setdefault((ep.url, eng.engine), []).append((sample.ts, value))
    return out


def counter_increase(values: Iterable[float]) -> float:
    """Increase of a counter over a run of values, counting through resets (like PromQL)."""
    total, prev = 0.0, None
    for v in values:
        if prev is not None:
            total += v - prev if v >= prev else v
        prev = v
    return total


def kv_usage_high(window: Sequence[Sample], *, threshold: float = 0.90,
                  sustained_s: float = 60.0) -> list[Alert]:
    """KV usage >= threshold on every sample of the last `sustained_s` seconds."""
    alerts = []
    for (url, engine), points in _series(window, "kv_cache_usage").items():
        if points[-1][1] < threshold:
            continue
        first_ts = points[-1][0]
        for ts, value in reversed(points):
            if value < threshold:
                break
            first_ts = ts
        held = points[-1][0] - first_ts
        if held < sustained_s:
            continue
        pct = points[-1][1] * 100
        alerts.append(Alert(
            "kv_usage_high", "critical" if points[-1][1] >= 0.99 else "warning",
            f"KV cache {pct:.0f}% full" + (f" for {held:.0f} s" if held >= 1 else "")
            + f" (>= {threshold:.0%}): new requests "
            f"wait for blocks and running ones get preempted and recomputed, so latency "
            f"climbs. To fit more: {capacity_fix(_dtype(window, url, engine))}.",
            _subject(url, engine), round(points[-1][1], 4)))
    return alerts


def preemptions_rising(window: Sequence[Sample], *, min_increase: int = 1) -> list[Alert]:
    """vllm:num_preemptions_total went up within the window."""
    alerts = []
    for (url, engine), points in _series(window, "num_preemptions_total").items():
        rise = counter_increase(v for _, v in points)
        if rise < min_increase or len(points) < 2:
            continue
        span = max(points[-1][0] - points[0][0], 1e-9)
        alerts.append(Alert(
            "preemptions_rising", "warning",
            f"{rise:.0f} preemption{'' if round(rise) == 1 else 's'} in the last {span:.0f} s ({rise * 60 / span:.1f}/min): "
            f"the KV cache ran out, so vLLM evicted running requests and will recompute them "
            f"(wasted GPU time, latency spikes). To stop it: "
            f"{capacity_fix(_dtype(window, url, engine))}.",
            _subject(url, engine), rise))
    return alerts


def queue_growing_kv_full(window: Sequence[Sample], *, kv_threshold: float = 0.90,
                          min_growth: int = 1) -> list[Alert]:
    """Waiting requests grew over the window while KV usage is at/above the threshold now."""
    kv_now = {k: pts[-1][1] for k, pts in _series(window, "kv_cache_usage").items()}
    alerts = []
    for key, points in _series(window, "num_requests_waiting").items():
        if len(points) < 2 or kv_now.get(key, 0.0) < kv_threshold:
            continue
        growth = points[-1][1] - min(v for _, v in points)
        if growth < min_growth or points[-1][1] <= points[0][1]:
            continue
        url, engine = key
        alerts.append(Alert(
            "queue_growing_kv_full", "critical",
            f"{points[-1][1]:.0f} requests waiting (+{growth:.0f}) while the KV cache is "
            f"{kv_now[key]:.0%} full: the queue is bound by KV memory, not compute, so it keeps "
            f"growing under this load. Give the KV pool room: "
            f"{capacity_fix(_dtype(window, url, engine))}; or spread the "
            f"load over more replicas.",
            _subject(url, engine), points[-1][1]))
    return alerts


def foreign_process(window: Sequence[Sample], *, min_drop_bytes: int = GIB,
                    ignore_pids: Iterable[int] = ()) -> list[Alert]:
    """A GPU's free memory fell by >= min_drop_bytes and a process not seen before appeared."""
    ignore = set(ignore_pids)
    first: dict[tuple, object] = {}
    for sample in window:
        for gpu in sample.gpus:
            first.setdefault((gpu.index, gpu.uuid), gpu)   # NOTE: MIG instances share an index
    if not window or not window[-1].gpus:
        return []
    alerts = []
    for gpu in window[-1].gpus:
        start = first[(gpu.index, gpu.uuid)]
        drop = start.free_bytes - gpu.free_bytes
        if drop < min_drop_bytes:
            continue
        old = {p.pid for p in start.processes}
        new = [p for p in gpu.processes if p.pid not in old and p.pid not in ignore]
        who = ", ".join(f"{p.name or '?'} (PID {p.pid}"
                        + (f", {p.used_bytes / GIB:.1f} GiB)" if p.used_bytes else ")")
                        for p in new) or "no new process visible (another container or host?)"
        if any("vllm" in (p.name or "").lower() for p in new):
            who += " - a vLLM process: a second server or a restart on this GPU?"
        alerts.append(Alert(
            "foreign_process", "warning",
            f"GPU {gpu.index} free memory fell {drop / GIB:.1f} GiB to "
            f"{gpu.free_bytes / GIB:.1f} GiB; new: {who}. vLLM sized its KV pool at startup, so "
            f"this eats the headroom its CUDA graphs and activations need (runtime OOM risk), and "
            f"a restart will get fewer KV blocks or fail the free-memory check. Move that "
            f"process to another GPU, or lower --gpu-memory-utilization before restarting.",
            f"GPU {gpu.index}" + (f" {gpu.uuid}" if (gpu.uuid or "").startswith("MIG-") else ""),
            float(drop)))
    return alerts


def kv_pool_mismatch(live_tokens: int, planned_tokens: int, *, tolerance: float = 0.10,
                     subject: str = "") -> Alert | None:
    """Compare the live KV pool (num_gpu_blocks x block_size) with vramguard's plan."""
    if not planned_tokens or planned_tokens <= 0 or live_tokens is None:
        return None
    diff = (live_tokens - planned_tokens) / planned_tokens
    if abs(diff) <= tolerance:
        return None
    if diff < 0:
        why = ("vLLM got less KV memory than planned: another process held memory at startup, "
               "activations/CUDA graphs took more than estimated, or the settings differ. "
               "Run `vramguard calibrate` on the startup log; to get the planned pool free the GPU "
               "or raise --gpu-memory-utilization")
        severity = "warning"
    else:
        why = ("vLLM got more KV memory than planned: the plan is conservative for this machine. "
               "Run `vramguard calibrate` on the startup log to tighten future plans")
        severity = "info"
    return Alert("kv_pool_mismatch", severity,
                 f"live KV pool {live_tokens:,} tokens vs planned {planned_tokens:,} "
                 f"({diff:+.0%}, tolerance {tolerance:.0%}): {why}.",
                 subject, round(diff, 4))


def kv_pool_vs_plan(window: Sequence[Sample], planned_kv_tokens: int | Mapping[str, int],
                    *, tolerance: float = 0.10) -> list[Alert]:
    """kv_pool_mismatch for each engine of the latest sample (planned: one int, or per URL)."""
    if not window:
        return []
    alerts = []
    for ep in window[-1].endpoints:
        planned = (planned_kv_tokens.get(ep.url) if isinstance(planned_kv_tokens, Mapping)
                   else planned_kv_tokens)
        if not ep.ok or not planned:
            continue
        for eng in ep.engines:
            if eng.kv_pool_tokens is None:
                continue
            alert = kv_pool_mismatch(eng.kv_pool_tokens, planned, tolerance=tolerance,
                                     subject=_subject(ep.url, eng.engine))
            if alert:
                alerts.append(alert)
    return alerts


def endpoint_down(window: Sequence[Sample], *, min_failures: int = 3) -> list[Alert]:
    """The last `min_failures` scrapes of an endpoint all failed."""
    if not window:
        return []
    alerts = []
    for ep in window[-1].endpoints:
        recent = [s.endpoint(ep.url) for s in window[-min_failures:]]
        if len(recent) < min_failures or any(r is None or r.ok for r in recent):
            continue
        alerts.append(Alert(
            "endpoint_down", "critical",
            (f"{min_failures} scrapes in a row failed" if min_failures > 1 else "scrape failed")
            + f" ({ep.error}): vLLM is down, restarting, "
            f"hung or overloaded; nothing about its KV cache is known. Check its log "
            f"(`vramguard diagnose LOG` explains an OOM).",
            ep.url, float(min_failures)))
    return alerts


def evaluate(window: Sequence[Sample], config: RuleConfig = RuleConfig(), *,
             planned_kv_tokens: int | Mapping[str, int] | None = None,
             ignore_pids: Iterable[int] = ()) -> list[Alert]:
    """Every rule over the window; most severe first."""
    window = trim(window, config.window_s)
    alerts = (kv_usage_high(window, threshold=config.kv_threshold,
                            sustained_s=config.kv_sustained_s)
              + preemptions_rising(window, min_increase=config.min_preemptions)
              + queue_growing_kv_full(window, kv_threshold=config.kv_threshold,
                                      min_growth=config.queue_min_growth)
              + foreign_process(window, min_drop_bytes=config.foreign_min_drop_bytes,
                                ignore_pids=ignore_pids)
              + endpoint_down(window, min_failures=config.down_after_failures))
    if planned_kv_tokens:
        alerts += kv_pool_vs_plan(window, planned_kv_tokens, tolerance=config.kv_pool_tolerance)
    return sorted(alerts, key=lambda a: (-SEVERITIES.index(a.severity), a.rule, a.subject))


def trim(window: Sequence[Sample], seconds: float) -> Sequence[Sample]:
    """The samples of the last `seconds` (relative to the newest one)."""
    if not window:
        return window
    cutoff = window[-1].ts - seconds
    i = 0
    while i < len(window) and window[i].ts < cutoff:
        i += 1
    return window[i:]


def preemption_rate_per_min(window: Sequence[Sample], url: str) -> float | None:
    """Preemptions per minute of one endpoint (all engines) over the window; None if unknown."""
    total, span, found = 0.0, 0.0, False
    for (u, _), points in _series(window, "num_preemptions_total").items():
        if u != url or len(points) < 2:
            continue
        found = True
        total += counter_increase(v for _, v in points)
        span = max(span, points[-1][0] - points[0][0])
    return total * 60 / span if found and span > 0 else None


class ActiveAlerts:
    """Tracks which alerts are firing; `update` returns (fired, resolved) since the last call."""

    def __init__(self) -> None:
        self.active: dict[tuple[str, str], Alert] = {}

    def update(self, alerts: Iterable[Alert]) -> tuple[list[Alert], list[Alert]]:
        now = {a.key: a for a in alerts}
        fired = [a for k, a in now.items() if k not in self.active]
        resolved = [a for k, a in self.active.items() if k not in now]
        self.active = now
        return fired, resolved
