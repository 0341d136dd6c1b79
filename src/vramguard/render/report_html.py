"""`vramguard report --html`: one self-contained HTML page with inline SVG charts.

Takes a `monitor.report_data.ReportData` and lays it out; computes nothing but pixel
positions. No JavaScript, no web fonts, no network: the page opens from a file anywhere.
Tooltips are SVG `<title>` elements (alert marks, the peak), which browsers show natively.
"""

from __future__ import annotations

import html
import math
import time

from ..monitor.report_data import AlertMark, Chart, Line, ReportData

PALETTE = ("#2563eb", "#059669", "#9333ea", "#ea580c", "#0891b2", "#db2777", "#65a30d",
           "#b45309")
SEVERITY = {"critical": "#dc2626", "warning": "#f59e0b", "info": "#3b82f6"}
W, H = 1080, 210
ML, MR, MT, MB = 64, 18, 14, 30          # margins: left (y labels), right, top, bottom (x)
TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
              43200, 86400, 172800, 604800)

CSS = """
:root { --ink:#0f172a; --muted:#64748b; --line:#e2e8f0; --bg:#f8fafc; --card:#ffffff; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; }
main { max-width:1140px; margin:0 auto; padding:28px 24px 40px; }
header h1 { font-size:24px; margin:0 0 4px; letter-spacing:-0.01em; }
header .sub { color:var(--muted); margin:0; }
.meta { display:flex; flex-wrap:wrap; gap:6px 18px; color:var(--muted); font-size:13px;
  margin:10px 0 0; }
.meta b { color:var(--ink); font-weight:600; }
.cards { display:grid; grid-template-columns:repeat(6,1fr); gap:12px; margin:22px 0 8px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:12px 14px; box-shadow:0 1px 2px rgba(15,23,42,.04); }
.card .k { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.card .v { font-size:26px; font-weight:650; margin:2px 0 0; font-variant-numeric:tabular-nums; }
.card .d { color:var(--muted); font-size:12px; }
.card.bad { border-color:#fecaca; background:#fef2f2; } .card.bad .v { color:#b91c1c; }
.card.warn { border-color:#fde68a; background:#fffbeb; } .card.warn .v { color:#b45309; }
.card.good .v { color:#047857; }
section.chart { background:var(--card); border:1px solid var(--line); border-radius:10px;
  padding:14px 16px 8px; margin:14px 0; }
section.chart h2 { font-size:15px; margin:0; display:flex; justify-content:space-between; }
section.chart h2 span { color:var(--muted); font-weight:400; font-size:13px; }
.legend { display:flex; flex-wrap:wrap; gap:4px 16px; font-size:12px; color:#334155;
  margin:6px 0 2px; }
.legend i { display:inline-block; width:18px; height:0; border-top:2.5px solid; margin-right:6px;
  vertical-align:middle; }
.legend i.dashed { border-top-style:dashed; } .legend i.bars { height:10px; border:0; width:10px; }
.legend i.area { height:10px; border-top-width:2.5px; }
svg { display:block; width:100%; height:auto; }
svg text { font:11px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif; fill:#64748b; }
.empty { color:var(--muted); padding:28px 0 30px; text-align:center; }
table { width:100%; border-collapse:collapse; font-size:13px; background:var(--card); }
th, td { text-align:left; padding:7px 10px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase;
  letter-spacing:.04em; }
.sev { display:inline-block; padding:1px 8px; border-radius:999px; color:#fff; font-size:12px; }
.tablewrap { border:1px solid var(--line); border-radius:10px; overflow:hidden; margin-top:14px; }
h2.section { font-size:16px; margin:26px 0 0; }
footer { color:var(--muted); font-size:12px; margin-top:26px; }
@media (max-width: 900px) { .cards { grid-template-columns:repeat(3,1fr); } }
"""


# --- formatting -------------------------------------------------------------------------

def _e(text) -> str:
    return html.escape(str(text), quote=True)


def fmt_duration(seconds: float) -> str:
    """`3725` -> `1h 2m`; `75` -> `1m 15s`; `4.2` -> `4.2s`; `0.25` -> `250ms`."""
    s = max(0.0, seconds)
    if 0 < s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 10:
        return f"{s:.1f}s" if s % 1 else f"{s:.0f}s"
    s = int(round(s))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    parts = [(d, "d"), (h, "h"), (m, "m"), (sec, "s")]
    shown = [f"{v}{u}" for v, u in parts if v][:2]
    return " ".join(shown) or "0s"


def fmt_num(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.2f}".rstrip("0").rstrip(".")


def fmt_time(ts: float, span_s: float, seconds: bool = False) -> str:
    t = time.localtime(ts)
    if span_s > 2 * 86400:
        return time.strftime("%m-%d %H:%M", t)
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", t)


def _nice_ceiling(vmax: float) -> tuple[float, float]:
    """(top, step) for a y axis from 0 to at least vmax with about 4 gridlines."""
    if vmax <= 0 or vmax != vmax:
        return 1.0, 0.25
    raw = vmax / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return math.ceil(vmax / step - 1e-9) * step, step


# --- one chart --------------------------------------------------------------------------

def display_range(data: ReportData) -> tuple[float, float]:
    """The time axis: the window, widened to 1 s around a single sample."""
    t0, t1 = data.since_ts, data.until_ts
    return (t0, t1) if t1 - t0 >= 1.0 else ((t0 + t1) / 2 - 0.5, (t0 + t1) / 2 + 0.5)


class _Frame:
    """Maps (ts, value) to SVG coordinates."""

    def __init__(self, t0: float, t1: float, top: float):
        self.t0, self.t1 = t0, t1
        self.top = top

    def x(self, ts: float) -> float:
        return ML + (ts - self.t0) / (self.t1 - self.t0) * (W - ML - MR)

    def y(self, v: float) -> float:
        return MT + (1 - min(max(v / self.top, 0.0), 1.05)) * (H - MT - MB)


def _runs(xs, values):
    """Contiguous runs of non-None values as lists of (ts, value)."""
    run = []
    for ts, v in zip(xs, values):
        if v is None:
            if run:
                yield run
            run = []
        else:
            run.append((ts, v))
    if run:
        yield run


def _line_svg(fr: _Frame, xs, line: Line, color: str, bar_index: int, bars: int,
              step_px: float) -> list[str]:
    out = []
    if line.style == "bars":
        group_px = step_px * line.bin
        width = max(1.0, group_px * 0.8 / max(bars, 1))
        for i in range(0, len(xs), line.bin):
            v = line.values[i]
            if v:
                x = fr.x(xs[i]) - step_px / 2 + group_px * 0.1 + bar_index * width
                y = fr.y(v)
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
                           f'height="{max(0.5, fr.y(0) - y):.1f}" fill="{color}" opacity=".85" '
                           f'rx="1"><title>{_e(line.label)}: {fmt_num(v)}/min at '
                           f'{fmt_time(xs[i], 0, True)}</title></rect>')
        return out
    dash = ' stroke-dasharray="5 4"' if line.style == "dashed" else ""
    for run in _runs(xs, line.values):
        pts = " ".join(f"{fr.x(t):.1f},{fr.y(v):.1f}" for t, v in run)
        if len(run) == 1:
            t, v = run[0]
            out.append(f'<circle cx="{fr.x(t):.1f}" cy="{fr.y(v):.1f}" r="2.2" fill="{color}"/>')
            continue
        if line.style == "area":
            base = f"{fr.x(run[-1][0]):.1f},{fr.y(0):.1f} {fr.x(run[0][0]):.1f},{fr.y(0):.1f}"
            out.append(f'<polygon points="{pts} {base}" fill="{color}" opacity=".13"/>')
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.8" '
                   f'stroke-linejoin="round" stroke-linecap="round"{dash}/>')
    return out


def _x_axis(fr: _Frame) -> list[str]:
    span = fr.t1 - fr.t0
    step = next((s for s in TIME_STEPS if s >= span / 8), TIME_STEPS[-1])
    offset = time.localtime(fr.t0).tm_gmtoff
    first = math.ceil((fr.t0 + offset) / step) * step - offset
    out, ts = [], first
    while ts <= fr.t1 + 1e-6 and len(out) < 40:
        x = fr.x(ts)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{MT}" y2="{H - MB}" stroke="#f1f5f9"/>')
        out.append(f'<text x="{x:.1f}" y="{H - MB + 16}" text-anchor="middle">'
                   f'{fmt_time(ts, span, seconds=step < 60)}</text>')
        ts += step
    return out


def _y_axis(fr: _Frame, step: float, unit: str) -> list[str]:
    out, v = [], 0.0
    while v <= fr.top + 1e-9:
        y = fr.y(v)
        out.append(f'<line x1="{ML}" x2="{W - MR}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="{"#cbd5e1" if v == 0 else "#eef2f7"}"/>')
        label = fmt_num(v) + ("%" if unit == "%" else "")
        out.append(f'<text x="{ML - 8}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
        v += step
    return out


def _alert_marks(fr: _Frame, alerts: tuple[AlertMark, ...], until_ts: float) -> list[str]:
    out = []
    for a in alerts:
        color = SEVERITY.get(a.severity, "#64748b")
        x0 = fr.x(max(a.fired_ts, fr.t0))
        x1 = fr.x(min(a.resolved_ts if a.resolved_ts is not None else until_ts, fr.t1))
        tip = _e(f"{a.severity} {a.rule} at {fmt_time(a.fired_ts, 0, True)}: {a.message}")
        out.append(f'<g><title>{tip}</title>'
                   f'<rect x="{x0:.1f}" y="{MT}" width="{max(2.0, x1 - x0):.1f}" '
                   f'height="{H - MT - MB}" fill="{color}" opacity=".05"/>'
                   f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{MT}" y2="{H - MB}" stroke="{color}" '
                   f'stroke-width="1.2" opacity=".7"/>'
                   f'<path d="M{x0 - 5:.1f},{MT - 1} L{x0 + 5:.1f},{MT - 1} L{x0:.1f},{MT + 7}Z" '
                   f'fill="{color}"/></g>')
    return out


def chart_svg(data: ReportData, chart: Chart) -> str:
    """The `<svg>` of one chart (axes, grid, alert marks, series)."""
    xs = data.bucket_ts
    values = [v for line in chart.lines for v in line.values if v is not None]
    top, step = _nice_ceiling(max(values + [chart.threshold or 0.0], default=0.0))
    if chart.y_max is not None and (not values or max(values) <= chart.y_max):
        top, step = chart.y_max, chart.y_max / 4
    fr = _Frame(*display_range(data), top)
    parts = [f'<svg viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg" role="img" '
             f'aria-label="{_e(chart.title)}">']
    parts += _y_axis(fr, step, chart.unit) + _x_axis(fr)
    parts += _alert_marks(fr, data.alerts, data.until_ts)
    if chart.threshold is not None:
        y = fr.y(chart.threshold)
        parts.append(f'<line x1="{ML}" x2="{W - MR}" y1="{y:.1f}" y2="{y:.1f}" stroke="#dc2626" '
                     f'stroke-dasharray="3 3" opacity=".7"/><text x="{W - MR}" y="{y - 4:.1f}" '
                     f'text-anchor="end" fill="#dc2626">{fmt_num(chart.threshold)}%</text>')
    bars = [l for l in chart.lines if l.style == "bars" and any(l.values)]
    step_px = (W - ML - MR) / max(len(xs), 1)
    for line in chart.lines:
        color = PALETTE[line.group % len(PALETTE)]
        index = bars.index(line) if line in bars else 0
        parts += _line_svg(fr, xs, line, color, index, len(bars), step_px)
    parts.append("</svg>")
    return "".join(parts)


def _legend(chart: Chart) -> str:
    items = []
    for line in chart.lines:
        color = PALETTE[line.group % len(PALETTE)]
        style = (f"background:{color};opacity:.85" if line.style == "bars" else
                 f"border-color:{color};background:{color}22" if line.style == "area" else
                 f"border-color:{color}")
        items.append(f'<span><i class="{line.style}" style="{style}"></i>{_e(line.label)}</span>')
    return f'<div class="legend">{"".join(items)}</div>'


def _chart_section(data: ReportData, chart: Chart) -> str:
    head = f'<h2>{_e(chart.title)} <span>{_e(chart.unit)}</span></h2>'
    if chart.empty_note or not chart.lines:
        return (f'<section class="chart" id="{chart.key}">{head}'
                f'<div class="empty">{_e(chart.empty_note or "no data")}</div></section>')
    return (f'<section class="chart" id="{chart.key}">{head}{_legend(chart)}'
            f'{chart_svg(data, chart)}</section>')


# --- header, cards, alerts ---------------------------------------------------------------

def _card(key: str, value: str, detail: str = "", tone: str = "") -> str:
    return (f'<div class="card {tone}"><div class="k">{_e(key)}</div>'
            f'<div class="v">{_e(value)}</div><div class="d">{_e(detail)}</div></div>')


def _cards(data: ReportData) -> str:
    s = data.summary
    window = max(s.end_ts - s.start_ts, 0.0)
    cards = []
    if s.peak_kv_usage is None:
        cards.append(_card("Peak KV usage", "–", "no KV samples"))
    else:
        tone = "bad" if s.peak_kv_usage >= s.threshold else "good"
        cards.append(_card("Peak KV usage", f"{s.peak_kv_usage * 100:.0f}%",
                           f"at {fmt_time(s.peak_kv_ts, 0, True)}", tone))
    share = s.time_above_threshold_s / window * 100 if window else 0.0
    cards.append(_card(f"Time ≥ {s.threshold * 100:.0f}% KV", fmt_duration(s.time_above_threshold_s),
                       f"{share:.0f}% of the window",
                       "warn" if s.time_above_threshold_s > 0 else "good"))
    if s.total_preemptions is None:
        cards.append(_card("Preemptions", "–", "not exported"))
    else:
        rate = s.total_preemptions * 60 / window if window else 0.0
        cards.append(_card("Preemptions", f"{s.total_preemptions:,}", f"{fmt_num(rate)}/min average",
                           "bad" if s.total_preemptions else "good"))
    cards.append(_card("Peak waiting", "–" if s.peak_waiting is None else str(s.peak_waiting),
                       "requests queued", "warn" if s.peak_waiting else ""))
    if s.peak_gpu_used:
        label, used, total = max(s.peak_gpu_used, key=lambda g: g[1])
        of = f" of {total / (1 << 30):.1f} GiB" if total else ""
        share = used / total if total else 0.0
        cards.append(_card("Peak GPU memory", f"{used / (1 << 30):.1f} GiB", label + of,
                           "bad" if share >= 0.98 else ""))
    else:
        cards.append(_card("Peak GPU memory", "–", "no GPU samples"))
    n = sum(s.alerts_by_severity.values())
    order = [k for k in SEVERITY if k in s.alerts_by_severity]
    order += sorted(k for k in s.alerts_by_severity if k not in SEVERITY)
    detail = ", ".join(f"{s.alerts_by_severity[k]} {k}" for k in order) or "none fired"
    tone = "bad" if s.alerts_by_severity.get("critical") else "warn" if n else "good"
    cards.append(_card("Alerts", str(n), detail, tone))
    return f'<div class="cards">{"".join(cards)}</div>'


def _meta(data: ReportData) -> str:
    s = data.summary
    span = s.end_ts - s.start_ts
    every = f", every {fmt_duration(s.interval_s)}" if s.interval_s else ""
    items = [
        ("Window", f"{fmt_time(s.start_ts, span, True)} – {fmt_time(s.end_ts, span, True)} "
                   f"{time.strftime('%Z', time.localtime(s.end_ts))} ({fmt_duration(span)})"),
        ("Samples", f"{s.ticks:,}{every}"),
        ("Endpoints", ", ".join(s.endpoints) or "none"),
        ("GPUs", ", ".join(s.gpus) or "none"),
    ]
    if s.failed_scrapes:
        items.append(("Failed scrapes", str(s.failed_scrapes)))
    if s.gaps:
        items.append(("Gaps", str(s.gaps)))
    return '<div class="meta">' + "".join(
        f"<span><b>{_e(k)}</b> {_e(v)}</span>" for k, v in items) + "</div>"


def _alerts_table(data: ReportData) -> str:
    if not data.alerts:
        return ('<h2 class="section">Alerts</h2><p class="empty" style="padding:10px 0">'
                'No alert fired in this window.</p>')
    rows = []
    span = data.until_ts - data.since_ts
    for a in data.alerts:
        color = SEVERITY.get(a.severity, "#64748b")
        lasted = (fmt_duration(a.resolved_ts - a.fired_ts) if a.resolved_ts is not None
                  else "open at the end")
        rows.append(f'<tr><td>{fmt_time(a.fired_ts, span, True)}</td><td>{_e(lasted)}</td>'
                    f'<td><span class="sev" style="background:{color}">{_e(a.severity)}</span>'
                    f'</td><td><b>{_e(a.rule)}</b><br><span style="color:#64748b">'
                    f'{_e(a.subject)}</span></td><td>{_e(a.message)}</td></tr>')
    return ('<h2 class="section">Alerts</h2><div class="tablewrap"><table><thead><tr>'
            '<th>Fired</th><th>Lasted</th><th>Severity</th><th>Rule</th><th>What and why</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def render_html(data: ReportData) -> str:
    """The whole page as one string (UTF-8, self-contained)."""
    generated = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(data.generated_ts))
    body = [
        f'<header><h1>{_e(data.title)}</h1><p class="sub">GPU memory and vLLM KV-cache '
        f'pressure, recorded by <code>vramguard watch</code></p>{_meta(data)}</header>',
        _cards(data),
        *(_chart_section(data, c) for c in data.charts),
        _alerts_table(data),
        f'<footer>Generated {_e(generated)} from {_e(data.source)} · one point per '
        f'{_e(fmt_duration(data.step_s))} (maximum of gauges, rate of counters).</footer>',
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(data.title)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")
