"""`vramguard report`: an HTML (and PNG) report of the history `vramguard watch` recorded.

    vramguard report --since 1h --html report.html [--png report.png] [--db FILE]

Reads the SQLite history (monitor/history.py) read-only, so it is safe while `watch` is
still recording. Without --html/--png it prints the summary (or JSON with --json).
Exit status: 0 written, 2 bad input, no history, or nothing in the window.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    parser.add_argument("--since", default="1h",
                        help="how far back from the newest sample (default 1h; e.g. 30m, 24h, 7d)")
    parser.add_argument("--until", default=None,
                        help="end the window this long before the newest sample (default: 0)")
    parser.add_argument("--db", metavar="FILE", default=None,
                        help="the history file (default: the one `watch` records to)")
    parser.add_argument("--html", metavar="FILE", default=None, help="write the HTML page here")
    parser.add_argument("--png", metavar="FILE", default=None,
                        help="write a PNG of the charts here (needs matplotlib: pip install "
                             "'vramguard[plot]')")
    parser.add_argument("--title", default=None, help="the page title")
    parser.add_argument("--max-points", type=int, default=600,
                        help="points per series (default 600; buckets aggregate the rest)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def _write(path: str, data: bytes, flag: str) -> None:
    from ..errors import UsageError
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise UsageError(f"cannot write it ({exc.strerror or exc})", where=f"{flag} {path}",
                         fix="Check the directory and permissions.") from None


def _summary_text(data) -> str:
    from ..render.report_html import fmt_duration
    s = data.summary
    span = s.end_ts - s.start_ts
    lines = [f"{data.title}: {s.ticks} samples over {fmt_duration(span)} from {data.source}"]
    if s.peak_kv_usage is not None:
        lines.append(f"  peak KV usage      {s.peak_kv_usage * 100:.0f}%")
    lines.append(f"  time >= {s.threshold * 100:.0f}% KV     {fmt_duration(s.time_above_threshold_s)}")
    if s.total_preemptions is not None:
        lines.append(f"  preemptions        {s.total_preemptions}")
    if s.peak_waiting is not None:
        lines.append(f"  peak waiting       {s.peak_waiting}")
    for label, used, total in s.peak_gpu_used:
        of = f" of {total / (1 << 30):.1f}" if total else ""
        lines.append(f"  peak used {label}: {used / (1 << 30):.2f}{of} GiB")
    n = sum(s.alerts_by_severity.values())
    lines.append(f"  alerts             {n}" + (
        " (" + ", ".join(f"{v} {k}" for k, v in s.alerts_by_severity.items()) + ")" if n else ""))
    return "\n".join(lines)


def run(args) -> int:
    import json
    import time

    from ..errors import UsageError
    from ..monitor.history import History
    from ..monitor.report_data import build_report
    from ..durations import parse_duration

    since = parse_duration(args.since, flag="--since")
    until = parse_duration(args.until, flag="--until") if args.until else 0.0
    if until >= since:
        raise UsageError("--until must be shorter than --since", where="--until")
    if not 2 <= args.max_points <= 10_000:
        raise UsageError("must be 2..10000", where="--max-points")
    with History(args.db, readonly=True) as history:
        span = history.span()
        newest = span[1] if span else time.time()
        from ..logs.store import utf8_text
        data = build_report(history, newest - since, newest - until,
                            max_points=args.max_points, title=utf8_text(args.title))
    if args.html:
        from ..render.report_html import render_html
        _write(args.html, render_html(data).encode("utf-8"), "--html")
    if args.png:
        from ..render.report_png import render_png
        _write(args.png, render_png(data), "--png")
    if args.json:
        print(json.dumps(data.to_dict(), indent=2))
    elif not (args.html or args.png):
        print(_summary_text(data))
        print("(write the charts with --html FILE and/or --png FILE)", file=sys.stderr)
    else:
        written = " and ".join(p for p in (args.html, args.png) if p)
        print(f"{_summary_text(data)}\nwrote {written}")
    return 0
