"""The `vramguard watch` terminal frame: plain text (+ optional ANSI colour), no curses.

`render_frame(sample, alerts, ...)` returns the whole frame as one string; the command
redraws it in place with `redraw(frame)` (cursor home, clear each line, clear below).
Takes results (a Sample, Alerts, rates computed by the command); computes nothing else.
"""

from __future__ import annotations

import textwrap
import time
from typing import Mapping, Sequence

GIB = 1 << 30
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"
_SEVERITY_COLOR = {"critical": "\x1b[1;31m", "warning": "\x1b[33m", "info": "\x1b[36m"}
_RESET = "\x1b[0m"


def bar(fraction: float | None, width: int = 30, *, ascii_only: bool = False) -> str:
    """`[#####.....]` for a fraction 0-1 (`[ ?? ]` padded when unknown)."""
    full, empty = ("#", ".") if ascii_only else ("\u2588", "\u2591")
    if fraction is None:
        return "[" + "?".center(width) + "]"
    n = max(0, min(width, round(fraction * width)))
    return "[" + full * n + empty * (width - n) + "]"


def _paint(text: str, severity: str | None, color: bool) -> str:
    if not color or severity not in _SEVERITY_COLOR:
        return text
    return _SEVERITY_COLOR[severity] + text + _RESET


def _fmt(n) -> str:
    return "-" if n is None else f"{n:,}"


def _gpu_lines(sample, color: bool, ascii_only: bool) -> list[str]:
    lines = []
    for gpu in sample.gpus:
        total = gpu.spec.total_bytes
        used = gpu.used_bytes if gpu.used_bytes is not None else total - gpu.free_bytes
        frac = used / total if total else None
        sev = "critical" if frac and frac > 0.98 else None
        util = f"  util {gpu.utilization_pct:.0f}%" if gpu.utilization_pct is not None else ""
        lines.append(f"GPU {gpu.index} {gpu.spec.name:<12} "
                     + _paint(bar(frac, ascii_only=ascii_only), sev, color)
                     + f" {used / GIB:6.1f}/{total / GIB:.1f} GiB used, "
                       f"{gpu.free_bytes / GIB:.1f} GiB free{util}")
        procs = sorted(gpu.processes, key=lambda p: -(p.used_bytes or 0))[:4]
        if procs:
            lines.append("      " + ", ".join(
                f"{p.name or '?'} (PID {p.pid}"
                + (f", {p.used_bytes / GIB:.1f} GiB)" if p.used_bytes else ")") for p in procs))
    if sample.gpu_error:
        lines.append(_paint(f"note: {sample.gpu_error}", "warning", color))
    return lines


def _endpoint_lines(sample, rates: Mapping[str, float | None], color: bool,
                    ascii_only: bool) -> list[str]:
    lines = []
    for ep in sample.endpoints:
        if not ep.ok:
            lines.append(ep.url + "  " + _paint(f"DOWN: {ep.error}", "critical", color))
            continue
        latency = f"  scrape {ep.latency_s * 1000:.0f} ms" if ep.latency_s is not None else ""
        lines.append(f"{ep.url}  {ep.model_name or '?'}{latency}")
        rate = rates.get(ep.url)
        for e in ep.engines:
            usage = e.kv_cache_usage
            sev = ("critical" if usage is not None and usage >= 0.99 else
                   "warning" if usage is not None and usage >= 0.9 else None)
            pct = "  ?  " if usage is None else f"{usage * 100:5.1f}%"
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(e.waiting_by_reason.items()) if v)
            waiting = _fmt(e.num_requests_waiting) + (f" ({reasons})" if reasons else "")
            swapped = (f"  swapped {e.num_requests_swapped}"
                       if e.num_requests_swapped else "")
            lines.append(f"  engine {e.engine}  KV " + _paint(bar(usage, 20, ascii_only=ascii_only),
                                                           sev, color)
                         + f" {pct}  running {_fmt(e.num_requests_running)}  waiting {waiting}"
                         + swapped)
            pool = f"pool {_fmt(e.kv_pool_tokens)} tok" if e.kv_pool_tokens else "pool ?"
            lines.append(f"            preemptions {_fmt(e.num_preemptions_total)}"
                         + (f" ({rate:.1f}/min)" if rate is not None and len(ep.engines) == 1
                            else "")
                         + f"  {pool}"
                         + (f"  {e.cache_dtype}" if e.cache_dtype else ""))
        if len(ep.engines) > 1 and rate is not None:
            lines.append(f"  all engines: preemptions {rate:.1f}/min")
        for note in ep.notes:
            lines.append("  " + _paint(f"note: {note}", "warning", color))
    return lines


def _alert_lines(alerts: Sequence, width: int, color: bool) -> list[str]:
    if not alerts:
        return ["alerts: none"]
    lines = [f"alerts ({len(alerts)}):"]
    for a in alerts:
        head = f"  {a.severity.upper():<8} {a.rule}  {a.subject}"
        lines.append(_paint(head, a.severity, color))
        lines += textwrap.wrap(a.message, width=max(40, width - 6),
                               initial_indent="      ", subsequent_indent="      ")
    return lines


def render_frame(sample, alerts: Sequence = (), *, rates: Mapping[str, float | None] | None = None,
                 interval_s: float | None = None, recording: str | None = None,
                 width: int = 100, color: bool = False, ascii_only: bool = False,
                 footer: str | None = "Ctrl-C to quit") -> str:
    """One frame: header, a memory bar per GPU, each endpoint's engines, then the alerts."""
    clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sample.ts))
    head = f"vramguard watch  {clock}"
    if interval_s:
        head += f"  every {interval_s:g}s"
    if sample.missed_ticks:
        head += f"  ({sample.missed_ticks} tick(s) missed: sampling slower than the interval)"
    lines = [head]
    if recording:
        lines.append(f"recording to {recording}")
    lines.append("")
    lines += _gpu_lines(sample, color, ascii_only)
    if sample.gpus or sample.gpu_error:
        lines.append("")
    lines += _endpoint_lines(sample, rates or {}, color, ascii_only)
    if sample.endpoints:
        lines.append("")
    lines += _alert_lines(alerts, width, color)
    if footer:
        lines += ["", footer]
    return "\n".join(lines)


def redraw(frame: str, *, first: bool = False) -> str:
    """The bytes that replace the previous frame in place (clear each line, then below)."""
    body = "\x1b[K\n".join(frame.split("\n")) + "\x1b[K\n\x1b[J"
    return ("\x1b[2J" if first else "") + "\x1b[H" + body
