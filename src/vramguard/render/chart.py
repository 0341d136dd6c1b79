"""The max_model_len ↔ max concurrency curve: a text chart, a PNG and a self-contained HTML.

Takes the curve the tuner computed ((max_model_len, max concurrency) points, both from
planner runs) and draws it; never computes memory. The text chart uses unicode blocks
(ASCII `#` when the terminal cannot encode them). PNG needs matplotlib (the `plot` extra),
imported only when a PNG is asked for; the HTML is one file with an inline SVG.
"""

from __future__ import annotations

import html
import math

from ..errors import UsageError

_EIGHTHS = " ▏▎▍▌▋▊▉█"


def _bar(value: float, top: float, width: int, unicode: bool) -> str:
    if top <= 0 or value <= 0:
        return ""
    cells = value / top * width
    if not unicode:
        return "#" * max(1, int(round(cells)))
    full = int(cells)
    frac = int((cells - full) * 8)
    return "█" * full + (_EIGHTHS[frac] if frac else "")


def text_chart(curve, *, width: int = 40, unicode: bool = True, mark: int | None = None,
               target: float | None = None) -> list[str]:
    """One line per point: `  6144 │█████▍ 22.6x`. `mark` flags the chosen max_model_len;
    `target` (the KV-usage fraction) adds the concurrency at that target."""
    if not curve:
        return []
    top = max(c for _, c in curve)
    bar = "│" if unicode else "|"
    lines = []
    for length, conc in curve:
        text = f"{length:>7} {bar}{_bar(conc, top, width, unicode):<{width}} {conc:,.1f}x"
        if target is not None:
            text += f"  ({int(math.floor(conc * target + 1e-9))} at {int(target * 100)}%)"
        if mark is not None and length == mark:
            text += "  ◀ chosen" if unicode else "  <- chosen"
        lines.append(text)
    return lines


def write_plot(curve, path: str, *, title: str, target: float | None = None,
               mark: int | None = None) -> str:
    """Write the curve to `path` (.png or .html). Returns the path."""
    low = path.lower()
    if not curve:
        raise UsageError("no curve to plot (nothing fits)", where="--plot")
    if low.endswith(".png"):
        return _png(curve, path, title, target, mark)
    if low.endswith((".html", ".htm")):
        return _html(curve, path, title, target, mark)
    raise UsageError(f"cannot plot to {path!r}", where="--plot",
                     fix="Give a file ending in .png or .html")


def _png(curve, path, title, target, mark) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("matplotlib is not installed", where="--plot",
                         fix="pip install 'vramguard[plot]', or write .html instead") from None
    xs = [x for x, _ in curve]
    ys = [y for _, y in curve]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(xs, ys, marker="o", label="max concurrency (vLLM's log line)")
    if target is not None:
        ax.plot(xs, [y * target for y in ys], linestyle="--",
                label=f"at {int(target * 100)}% KV usage")
    if mark is not None:
        ax.axvline(mark, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("max_model_len (tokens)")
    ax.set_ylabel("concurrent requests")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UsageError(f"cannot write the plot: {exc.strerror or exc}", where=path) from None
    finally:
        plt.close(fig)
    return path


def svg(curve, *, title: str, target: float | None = None, mark: int | None = None,
        width: int = 640, height: int = 360) -> str:
    """An inline SVG line chart, log-log axes, no scripts or external references."""
    left, right, top_m, bottom = 64, 16, 32, 44
    w, h = width - left - right, height - top_m - bottom
    xs = [math.log2(max(1, x)) for x, _ in curve]
    ys = [math.log10(max(1e-3, y)) for _, y in curve]
    low_y = min(ys + ([math.log10(max(1e-3, y * target)) for _, y in curve] if target else []))
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = math.floor(low_y), math.ceil(max(ys)) if math.ceil(max(ys)) > math.floor(low_y) \
        else math.floor(low_y) + 1

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * w

    def py(y: float) -> float:
        return top_m + h - (y - y0) / (y1 - y0) * h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="12">'
           f'{html.escape(title)}</text>',
           f'<rect x="{left}" y="{top_m}" width="{w}" height="{h}" fill="none" stroke="#999"/>']
    for e in range(int(y0), int(y1) + 1):
        y = py(e)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    for (length, _), x in zip(curve, xs):
        out.append(f'<text x="{px(x):.1f}" y="{top_m + h + 16}" text-anchor="middle" '
                   f'font-size="9">{length}</text>')
    pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
    out.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    if target:
        tpts = " ".join(f"{px(x):.1f},{py(math.log10(max(1e-3, c * target))):.1f}"
                        for x, (_, c) in zip(xs, curve))
        out.append(f'<polyline points="{tpts}" fill="none" stroke="#ff7f0e" '
                   'stroke-dasharray="5,4" stroke-width="1.5"/>')
    for (length, conc), x, y in zip(curve, xs, ys):
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="#1f77b4">'
                   f'<title>{length} tokens: {conc:,.2f}x</title></circle>')
    if mark is not None:
        mx = px(math.log2(max(1, mark)))
        out.append(f'<line x1="{mx:.1f}" y1="{top_m}" x2="{mx:.1f}" y2="{top_m + h}" '
                   'stroke="#888" stroke-dasharray="2,3"/>')
    out.append(f'<text x="{left + w / 2}" y="{height - 6}" text-anchor="middle">'
               'max_model_len (tokens, log scale)</text>')
    out.append(f'<text x="14" y="{top_m + h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top_m + h / 2})">concurrent requests</text>')
    out.append("</svg>")
    return "\n".join(out)


def _html(curve, path, title, target, mark) -> str:
    rows = "".join(f"<tr><td>{x}</td><td>{y:,.2f}</td>"
                   + (f"<td>{int(math.floor(y * target + 1e-9))}</td>" if target else "")
                   + "</tr>" for x, y in curve)
    head = "<th>max_model_len</th><th>max concurrency</th>" + (
        f"<th>at {int(target * 100)}% KV usage</th>" if target else "")
    doc = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
           f"<title>{html.escape(title)}</title>"
           "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body>"
           f"<h3>{html.escape(title)}</h3>\n{svg(curve, title=title, target=target, mark=mark)}"
           f"\n<table><tr>{head}</tr>{rows}</table></body></html>\n")
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(doc)
    except OSError as exc:
        raise UsageError(f"cannot write the plot: {exc.strerror or exc}", where=path) from None
    return path
