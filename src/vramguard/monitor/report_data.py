"""What `vramguard report` shows, computed from the recorded history (monitor/history.py).

    with History(path, readonly=True) as h:
        data = build_report(h, since_ts=now - 3600)
    render.report_html.render_html(data)   # the renderers only lay out `data`

One streamed pass over `History.series()` (bounded memory: aggregates per time bucket, at
most `max_points` buckets per series, not per tick):
- gauges per bucket: GPU used (max) / free (min), KV usage (max), running/waiting (max);
- counters (preemptions, prompt and generation tokens) become rates: the increase over the
  bucket, counting through resets (a restart) like PromQL's `increase()`;
- the summary: peak KV usage and when, total preemptions, time with KV usage >= 90 %
  (each sample holds until the next one, capped at 3 sampling intervals over gaps),
  peak waiting, peak GPU memory used.
Empty buckets stay None, so charts break their lines over gaps instead of bridging them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ..errors import MonitorError

KV_THRESHOLD = 0.90
GIB = 1 << 30


@dataclass(frozen=True)
class Line:
    """One series of a chart. `values[i]` belongs to bucket i (None: no sample there)."""

    label: str
    values: tuple[float | None, ...]
    style: str = "solid"             # "solid" | "dashed" | "area" | "bars"
    group: int = 0                   # colour index: lines of one GPU/endpoint share it
    bin: int = 1                     # bars: one bar per `bin` buckets (equal values inside)


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    unit: str
    lines: tuple[Line, ...]
    y_max: float | None = None       # fixed top (100 for percentages), else from the data
    threshold: float | None = None   # a dashed horizontal rule (the 90 % KV line)
    empty_note: str | None = None    # why there is nothing to draw


@dataclass(frozen=True)
class AlertMark:
    rule: str
    severity: str
    subject: str
    message: str
    fired_ts: float
    resolved_ts: float | None


@dataclass(frozen=True)
class Summary:
    start_ts: float
    end_ts: float
    ticks: int
    interval_s: float | None
    gpus: tuple[str, ...]
    endpoints: tuple[str, ...]
    peak_kv_usage: float | None
    peak_kv_ts: float | None
    total_preemptions: int | None
    time_above_threshold_s: float
    threshold: float
    peak_waiting: int | None
    peak_gpu_used: tuple[tuple[str, int, int | None], ...]   # (gpu label, used, total)
    failed_scrapes: int
    gaps: int
    alerts_by_severity: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "start_ts": self.start_ts, "end_ts": self.end_ts, "ticks": self.ticks,
            "interval_s": self.interval_s, "gpus": list(self.gpus),
            "endpoints": list(self.endpoints), "peak_kv_usage": self.peak_kv_usage,
            "peak_kv_ts": self.peak_kv_ts, "total_preemptions": self.total_preemptions,
            "time_above_threshold_s": round(self.time_above_threshold_s, 3),
            "threshold": self.threshold, "peak_waiting": self.peak_waiting,
            "peak_gpu_used": [{"gpu": g, "used_bytes": u, "total_bytes": t}
                              for g, u, t in self.peak_gpu_used],
            "failed_scrapes": self.failed_scrapes, "gaps": self.gaps,
            "alerts_by_severity": dict(self.alerts_by_severity),
        }


@dataclass(frozen=True)
class ReportData:
    title: str
    source: str                      # the history file
    generated_ts: float
    since_ts: float
    until_ts: float
    step_s: float
    bucket_ts: tuple[float, ...]     # the middle of each bucket
    summary: Summary
    charts: tuple[Chart, ...]
    alerts: tuple[AlertMark, ...]

    def to_dict(self) -> dict:
        return {"title": self.title, "source": self.source, "generated_ts": self.generated_ts,
                "since_ts": self.since_ts, "until_ts": self.until_ts, "step_s": self.step_s,
                "summary": self.summary.to_dict(),
                "alerts": [a.__dict__ for a in self.alerts]}


# --- accumulation -----------------------------------------------------------------------

class _Gauge:
    """Per-bucket max (or min) of one value."""

    def __init__(self, n: int, use_min: bool = False):
        self.values: list[float | None] = [None] * n
        self.use_min = use_min

    def add(self, b: int, v) -> None:
        if v is None:
            return
        cur = self.values[b]
        if cur is None or (v < cur if self.use_min else v > cur):
            self.values[b] = float(v)


class _Counter:
    """Per-bucket increase of a counter and the time it covers, through resets.

    The increase since the previous sample is booked in the bucket of the later sample with
    the seconds it took, so a rate is increase / seconds even across a gap (no spike).
    """

    def __init__(self, n: int):
        self.inc: list[float | None] = [None] * n
        self.secs: list[float] = [0.0] * n
        self.last: tuple[float, float] | None = None     # (ts, value)
        self.total = 0.0
        self.seen = False

    def add(self, b: int, ts: float, v) -> None:
        if v is None:
            return
        self.seen = True
        if self.last is not None and ts > self.last[0]:
            inc = v - self.last[1] if v >= self.last[1] else v
            self.total += inc
            self.inc[b] = (self.inc[b] or 0.0) + inc
            self.secs[b] += ts - self.last[0]
        self.last = (ts, v)

    def rates(self, per_s: float = 1.0, bin: int = 1) -> tuple[float | None, ...]:
        """Rate per `per_s` seconds, averaged over groups of `bin` buckets (repeated)."""
        out: list[float | None] = []
        for start in range(0, len(self.inc), bin):
            incs = [x for x in self.inc[start:start + bin] if x is not None]
            secs = sum(self.secs[start:start + bin])
            value = sum(incs) / secs * per_s if incs and secs > 0 else None
            out += [value] * len(self.inc[start:start + bin])
        return tuple(out)


class _Endpoint:
    def __init__(self, n: int):
        self.kv, self.running, self.waiting = _Gauge(n), _Gauge(n), _Gauge(n)
        self.preemptions, self.gen, self.prompt = _Counter(n), _Counter(n), _Counter(n)
        self.last_kv: tuple[float, float] | None = None     # (ts, value) of the last sample
        self.above_s = 0.0
        self.peak: tuple[float, float] | None = None        # (value, ts)


class _Gpu:
    def __init__(self, n: int):
        self.used, self.free = _Gauge(n), _Gauge(n, use_min=True)
        self.total: int | None = None
        self.peak_used: int | None = None
        self.name: str | None = None


def _interval(history, first: float, last: float) -> float | None:
    count = history.count()
    return (last - first) / (count - 1) if count > 1 and last > first else None


def build_report(history, since_ts: float | None = None, until_ts: float | None = None, *,
                 max_points: int = 600, title: str | None = None,
                 threshold: float = KV_THRESHOLD) -> ReportData:
    """Aggregate the history between `since_ts` and `until_ts` into charts and a summary.

    Raises MonitorError when nothing was recorded in that window.
    """
    span = history.span()
    if span is None:
        raise MonitorError("the history is empty", where=str(history.path),
                           fix="Record with `vramguard watch --record FILE` first.")
    lo = span[0] if since_ts is None else max(since_ts, span[0])
    hi = span[1] if until_ts is None else min(until_ts, span[1])
    if lo > hi:
        raise MonitorError(f"no samples in the window asked for (history spans "
                           f"{_fmt(span[0])} to {_fmt(span[1])})", where=str(history.path),
                           fix="Widen --since, e.g. --since 24h.")
    interval = _interval(history, *span)
    step = max((hi - lo) / max_points, interval or 0.0, 1e-3)
    n = max(1, min(max_points, int(math.floor((hi - lo) / step)) + 1))
    gap_cap = 3 * interval if interval else None
    eps: dict[tuple[str, str], _Endpoint] = {}
    gpus: dict[int, _Gpu] = {}
    ticks = failed = gaps = 0
    for row in history.series(lo, hi):
        ticks += 1
        gaps += 1 if row.missed_ticks else 0
        b = min(n - 1, int((row.ts - lo) / step))
        for g in row.gpus:
            acc = gpus.setdefault(g.index, _Gpu(n))
            _add_gpu(acc, b, g)
        for e in row.endpoints:
            if not e.ok:
                failed += 1
                continue
            acc = eps.setdefault((e.url, e.engine), _Endpoint(n))
            _add_endpoint(acc, b, row.ts, e, threshold, gap_cap)
    if ticks == 0:
        raise MonitorError("no samples in the window asked for", where=str(history.path),
                           fix="Widen --since, e.g. --since 24h.")
    alerts = tuple(AlertMark(a.rule, a.severity, a.subject, a.message, a.fired_ts,
                             a.resolved_ts) for a in history.alerts(lo, hi))
    summary = _summary(lo, hi, ticks, interval, gpus, eps, failed, gaps, alerts, threshold)
    charts = _charts(gpus, eps, step, threshold, ticks)
    return ReportData(
        title=title or "vramguard report", source=str(history.path), generated_ts=time.time(),
        since_ts=lo, until_ts=hi, step_s=step,
        bucket_ts=tuple(lo + (i + 0.5) * step if n > 1 else lo for i in range(n)),
        summary=summary, charts=charts, alerts=alerts)


def _add_gpu(acc: _Gpu, b: int, g) -> None:
    used = g.used_bytes
    if used is None and g.total_bytes is not None and g.free_bytes is not None:
        used = g.total_bytes - g.free_bytes
    acc.used.add(b, None if used is None else used / GIB)
    acc.free.add(b, None if g.free_bytes is None else g.free_bytes / GIB)
    acc.total = g.total_bytes or acc.total
    acc.name = g.name or acc.name
    if used is not None and (acc.peak_used is None or used > acc.peak_used):
        acc.peak_used = used


def _add_endpoint(acc: _Endpoint, b: int, ts: float, e, threshold: float,
                  gap_cap: float | None) -> None:
    kv = e.kv_cache_usage
    acc.kv.add(b, None if kv is None else kv * 100)
    acc.running.add(b, e.num_requests_running)
    acc.waiting.add(b, e.num_requests_waiting)
    acc.preemptions.add(b, ts, e.num_preemptions_total)
    acc.gen.add(b, ts, e.generation_tokens_total)
    acc.prompt.add(b, ts, e.prompt_tokens_total)
    if kv is None:
        return
    if acc.last_kv is not None and acc.last_kv[1] >= threshold:
        dt = ts - acc.last_kv[0]
        acc.above_s += min(dt, gap_cap) if gap_cap else dt
    acc.last_kv = (ts, kv)
    if acc.peak is None or kv > acc.peak[0]:
        acc.peak = (kv, ts)


def _endpoint_label(key: tuple[str, str], many_engines: bool) -> str:
    url, engine = key
    short = url.split("://", 1)[-1].rstrip("/")
    if short.endswith("/metrics"):
        short = short[: -len("/metrics")]
    return f"{short} #{engine}" if many_engines else short


def _gpu_label(index: int, acc: _Gpu) -> str:
    return f"GPU {index}" + (f" {acc.name}" if acc.name else "")


def _summary(lo, hi, ticks, interval, gpus, eps, failed, gaps, alerts, threshold) -> Summary:
    peaks = [a.peak for a in eps.values() if a.peak is not None]
    peak = max(peaks) if peaks else None
    counters = [a.preemptions for a in eps.values() if a.preemptions.seen]
    waiting = [v for a in eps.values() for v in a.waiting.values if v is not None]
    many = len({k[1] for k in eps}) > 1
    by_sev: dict[str, int] = {}
    for a in alerts:
        by_sev[a.severity] = by_sev.get(a.severity, 0) + 1
    return Summary(
        start_ts=lo, end_ts=hi, ticks=ticks, interval_s=interval,
        gpus=tuple(_gpu_label(i, g) for i, g in sorted(gpus.items())),
        endpoints=tuple(_endpoint_label(k, many) for k in sorted(eps)),
        peak_kv_usage=peak[0] if peak else None, peak_kv_ts=peak[1] if peak else None,
        total_preemptions=int(round(sum(c.total for c in counters))) if counters else None,
        time_above_threshold_s=max((a.above_s for a in eps.values()), default=0.0),
        threshold=threshold, peak_waiting=int(max(waiting)) if waiting else None,
        peak_gpu_used=tuple((_gpu_label(i, g), g.peak_used, g.total)
                            for i, g in sorted(gpus.items()) if g.peak_used is not None),
        failed_scrapes=failed, gaps=gaps, alerts_by_severity=by_sev)


def _charts(gpus: dict, eps: dict, step: float, threshold: float, ticks: int) -> tuple:
    n = len(next(iter(eps.values())).kv.values) if eps else 0
    # NOTE: preemptions are rare events: one bar per bucket at 1 s is a comb; about 40 bars
    # over the window read as a rate.
    pbin = max(1, round(n / 40))
    many = len({k[1] for k in eps}) > 1
    no_ep = "no vLLM endpoint samples in this window"
    gpu_lines, kv, req, pre, tput = [], [], [], [], []
    for group, (index, g) in enumerate(sorted(gpus.items())):
        label = _gpu_label(index, g)
        total = f" (of {g.total / GIB:.1f} GiB)" if g.total else ""
        gpu_lines.append(Line(f"{label} used{total}", tuple(g.used.values), "solid", group))
        gpu_lines.append(Line(f"{label} free", tuple(g.free.values), "dashed", group))
    for group, key in enumerate(sorted(eps)):
        a, label = eps[key], _endpoint_label(key, many)
        kv.append(Line(label, tuple(a.kv.values), "area", group))
        req.append(Line(f"{label} running", tuple(a.running.values), "solid", group))
        req.append(Line(f"{label} waiting", tuple(a.waiting.values), "dashed", group))
        pre.append(Line(label, a.preemptions.rates(60.0, pbin), "bars", group, pbin))
        tput.append(Line(f"{label} generation", a.gen.rates(), "solid", group))
        tput.append(Line(f"{label} prompt", a.prompt.rates(), "dashed", group))
    return (
        Chart("gpu_memory", "GPU memory: used and free", "GiB", tuple(gpu_lines),
              empty_note=None if gpu_lines else "no GPU samples (recorded with --no-gpu, or "
                                                 "NVML unavailable)"),
        Chart("kv_usage", "KV cache usage", "%", tuple(kv), y_max=100.0,
              threshold=threshold * 100, empty_note=None if kv else no_ep),
        Chart("requests", "Requests running and waiting", "requests", tuple(req),
              empty_note=None if req else no_ep),
        Chart("preemptions", "Preemptions", "per min", tuple(pre),
              empty_note=None if pre else no_ep),
        Chart("throughput", "Throughput", "tokens/s", tuple(tput),
              empty_note=None if tput else no_ep),
    )


def _fmt(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
