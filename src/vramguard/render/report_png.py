"""`vramguard report --png`: the report's charts as one PNG, drawn with matplotlib.

matplotlib is an optional extra (`pip install 'vramguard[plot]'`), imported only here and
only when called; without it, a UsageError says how to install it. Lays out a ReportData,
computes nothing.
"""

from __future__ import annotations

import io
import time

from ..errors import UsageError
from ..monitor.report_data import ReportData
from .report_html import PALETTE, SEVERITY, display_range, fmt_duration


def _matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg", force=True)
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--png needs matplotlib, which is not installed", where="--png",
                         fix="pip install 'vramguard[plot]' (or use --html).") from None
    return plt, mdates


def _runs(xs, values):
    run_x, run_y = [], []
    for x, v in zip(xs, values):
        if v is None:
            if run_x:
                yield run_x, run_y
            run_x, run_y = [], []
        else:
            run_x.append(x)
            run_y.append(v)
    if run_x:
        yield run_x, run_y


def render_png(data: ReportData, *, dpi: int = 110) -> bytes:
    """The PNG bytes: a title with the summary, then one panel per chart, sharing time."""
    plt, mdates = _matplotlib()
    from datetime import datetime

    xs = [datetime.fromtimestamp(ts) for ts in data.bucket_ts]
    charts = data.charts
    fig, axes = plt.subplots(len(charts), 1, figsize=(13, 2.3 * len(charts) + 1.0), sharex=True,
                             squeeze=False)
    s = data.summary
    peak = "–" if s.peak_kv_usage is None else f"{s.peak_kv_usage * 100:.0f}%"
    fig.suptitle(f"{data.title}   peak KV {peak} · preemptions "
                 f"{'–' if s.total_preemptions is None else s.total_preemptions} · "
                 f"≥{s.threshold * 100:.0f}% KV for {fmt_duration(s.time_above_threshold_s)}",
                 fontsize=12, x=0.01, ha="left")
    step_days = data.step_s / 86400
    for ax, chart in zip(axes[:, 0], charts):
        ax.set_title(f"{chart.title} ({chart.unit})", fontsize=10, loc="left")
        ax.grid(True, color="#e5e7eb", linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
        for a in data.alerts:
            end = a.resolved_ts if a.resolved_ts is not None else data.until_ts
            ax.axvspan(datetime.fromtimestamp(a.fired_ts), datetime.fromtimestamp(end),
                       color=SEVERITY.get(a.severity, "#64748b"), alpha=0.05, linewidth=0)
        if not chart.lines or chart.empty_note:
            ax.text(0.5, 0.5, chart.empty_note or "no data", transform=ax.transAxes,
                    ha="center", va="center", color="#64748b")
            ax.set_yticks([])
            continue
        bars = [l for l in chart.lines if l.style == "bars" and any(l.values)]
        for line in chart.lines:
            color = PALETTE[line.group % len(PALETTE)]
            if line.style == "bars" and line not in bars:
                ax.bar([], [], color=color, label=line.label)     # legend only: no bars
                continue
            if line.style == "bars":
                i = bars.index(line)
                width = step_days * line.bin * 0.8 / len(bars)
                pts = [(xs[j], line.values[j]) for j in range(0, len(xs), line.bin)
                       if line.values[j]]
                if pts:
                    ax.bar([mdates.date2num(x) - step_days / 2 + step_days * line.bin * 0.1
                            + i * width for x, _ in pts],
                           [v for _, v in pts], width=width, align="edge", color=color,
                           label=line.label)
                continue
            style = "--" if line.style == "dashed" else "-"
            for n, (rx, ry) in enumerate(_runs(xs, line.values)):
                ax.plot(rx, ry, style, color=color, linewidth=1.5,
                        label=line.label if n == 0 else None)
                if line.style == "area":
                    ax.fill_between(rx, ry, color=color, alpha=0.13, linewidth=0)
        if chart.threshold is not None:
            ax.axhline(chart.threshold, color="#dc2626", linestyle=":", linewidth=1)
        top = chart.y_max if chart.y_max is not None else max(
            [v for l in chart.lines for v in l.values if v is not None] + [1e-9])
        ax.set_ylim(0, top * 1.08)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    t0, t1 = display_range(data)
    axes[-1, 0].set_xlim(datetime.fromtimestamp(t0), datetime.fromtimestamp(t1))
    axes[-1, 0].set_xlabel(time.strftime("%Z", time.localtime(data.until_ts)), fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
