"""`vramguard watch`: GPU memory and vLLM KV metrics, live, with alerts that explain.

    vramguard watch --url http://127.0.0.1:8000 [--url ...] [--interval 1s]
    vramguard watch --url ... --once --json          # one snapshot as JSON
    vramguard watch --url ... --record FILE          # history to FILE (default: user data dir)

Parses, wires Sampler -> Watcher (rules, history) -> renderer. No arithmetic here.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    parser.add_argument("--url", action="append", default=[], metavar="URL",
                        help="a vLLM server (its /metrics is read); repeat for several")
    parser.add_argument("--interval", default="1s", help="sampling interval (default 1s)")
    parser.add_argument("--timeout", default=None,
                        help="per-scrape timeout (default: 0.8 x interval, 0.25-10 s)")
    parser.add_argument("--once", action="store_true", help="take one sample, print, exit")
    parser.add_argument("--json", action="store_true",
                        help="JSON: one document with --once, else one line per tick")
    parser.add_argument("--record", metavar="FILE", default=None,
                        help="SQLite history file (default: $VRAMGUARD_DATA_DIR or the user "
                             "data dir /history.sqlite3; --once records only with --record)")
    parser.add_argument("--no-record", action="store_true", help="do not record history")
    parser.add_argument("--retention", default="7d", help="keep this much history (default 7d)")
    parser.add_argument("--no-gpu", action="store_true", help="watch the endpoints only (no NVML)")
    parser.add_argument("--window", default="5m", help="rule window (default 5m)")
    parser.add_argument("--kv-threshold", type=float, default=0.90,
                        help="KV usage that counts as full (default 0.90)")
    parser.add_argument("--sustain", default="60s",
                        help="how long KV must stay full before alerting (default 60s)")
    parser.add_argument("--planned-kv-tokens", type=int, default=None, metavar="N",
                        help="the KV pool vramguard planned (tokens), compared with the live one")
    parser.add_argument("--model", default=None,
                        help="plan this model with the live settings and compare KV pools")
    parser.add_argument("--gpu", default=None, help="GPU for --model (default: the live GPU)")
    parser.add_argument("--vllm-version", default=None, help="vLLM release for --model")
    parser.add_argument("--offline", action="store_true",
                        help="--model: do not use the network to fetch its config")
    parser.add_argument("--ignore-pid", type=int, action="append", default=[],
                        help="a GPU process that is expected (not a foreign process)")
    parser.add_argument("--no-color", action="store_true", help="no ANSI colours")
    parser.add_argument("--ascii", action="store_true", help="ASCII bars")


def build(args, *, once: bool = False):
    """(Sampler, Watcher, history path or None) from parsed arguments; raises UsageError."""
    from ..errors import UsageError
    from ..monitor.history import History, default_history_path
    from ..monitor.rules import RuleConfig
    from ..durations import parse_duration
    from ..monitor.sampler import Sampler
    from ..monitor.watcher import PlanRequest, Watcher

    if not args.url and args.no_gpu:
        raise UsageError("nothing to watch", where="--no-gpu",
                         fix="Give --url http://HOST:PORT of a vLLM server.")
    for url in args.url:
        check_url(url)
    if not 0 < args.kv_threshold <= 1:
        raise UsageError(f"must be in (0, 1], got {args.kv_threshold}", where="--kv-threshold")
    if args.planned_kv_tokens is not None and args.planned_kv_tokens <= 0:
        raise UsageError(f"must be a positive token count, got {args.planned_kv_tokens}",
                         where="--planned-kv-tokens",
                         fix="Give the KV cache size in tokens that `vramguard plan` printed")
    interval = parse_duration(args.interval, flag="--interval")
    timeout = parse_duration(args.timeout, flag="--timeout") if args.timeout else None
    # NOTE: parsed even with --once (which alerts at once): a typo is an error either way.
    sustain = parse_duration(args.sustain, flag="--sustain")
    config = RuleConfig(kv_threshold=args.kv_threshold,
                        kv_sustained_s=0.0 if once else sustain,
                        down_after_failures=1 if once else 3,
                        window_s=parse_duration(args.window, flag="--window"))
    retention = parse_duration(args.retention, flag="--retention")
    path = None
    if not args.no_record and (args.record or not once):
        path = args.record or default_history_path()
    plan_request = (PlanRequest(args.model, args.gpu, args.vllm_version,
                                offline=getattr(args, "offline", False))
                    if args.model else None)
    sampler = Sampler(args.url, interval_s=interval, timeout_s=timeout, gpus=not args.no_gpu)
    if not args.url and sampler.check_gpus():
        sampler.close()
        raise UsageError(f"nothing to watch: no --url, and the GPUs cannot be read "
                         f"({sampler.nvml_error})",
                         fix="Give --url http://HOST:PORT of a vLLM server.")
    try:
        history = History(path, retention_s=retention) if path else None
    except BaseException:
        sampler.close()
        raise
    watcher = Watcher(config=config, history=history, planned_kv_tokens=args.planned_kv_tokens,
                      plan_request=plan_request, ignore_pids=args.ignore_pid)
    return sampler, watcher, path


def check_url(url: str) -> None:
    """Raise UsageError for a --url that `stress` refuses (not http(s), no host, a bad port).
    NOTE: else watch runs on and only shows the endpoint DOWN, exit 0."""
    from ..monitor.stress import base_url
    base_url(url)


def _frame(watcher, sampler, path, args, color: bool, width: int) -> str:
    from ..render.watch_text import render_frame
    sample, alerts = watcher.latest
    frame = render_frame(sample, alerts, rates=watcher.rates(), interval_s=sampler.interval_s,
                         recording=str(path) if path else None, width=width, color=color,
                         ascii_only=args.ascii, footer=None if args.once else "Ctrl-C to quit")
    if watcher.notes:
        frame += "\n" + "\n".join(f"note: {n}" for n in watcher.notes)
    return frame


def run(args) -> int:
    import json
    import os
    import shutil

    sampler, watcher, path = build(args, once=args.once)
    tty = sys.stdout.isatty()
    color = tty and not args.no_color and not os.environ.get("NO_COLOR")
    width = shutil.get_terminal_size((100, 40)).columns
    try:
        if args.once:
            watcher.on_sample(sampler.sample_once())
            if args.json:
                print(json.dumps(watcher.snapshot(), indent=2))
            else:
                print(_frame(watcher, sampler, path, args, color, width))
            return 0
        return _loop(sampler, watcher, path, args, tty, color, width)
    finally:
        sampler.close()
        if watcher.history is not None:
            watcher.history.close()


def _loop(sampler, watcher, path, args, tty: bool, color: bool, width: int) -> int:
    import json
    import shutil

    from ..render.watch_text import HIDE_CURSOR, SHOW_CURSOR, redraw
    first = True
    live = tty and not args.json

    def on_sample(sample) -> None:
        nonlocal first, width
        watcher.on_sample(sample)
        if args.json:
            sys.stdout.write(json.dumps(watcher.snapshot(), separators=(",", ":")) + "\n")
        elif live:
            width = shutil.get_terminal_size((100, 40)).columns
            sys.stdout.write(redraw(_frame(watcher, sampler, path, args, color, width),
                                    first=first))
        else:
            sys.stdout.write(_frame(watcher, sampler, path, args, color, width) + "\n\n")
        sys.stdout.flush()
        first = False

    if live:
        sys.stdout.write(HIDE_CURSOR)
    previous = terminate_as_interrupt()
    try:
        sampler.run(on_sample)
    except KeyboardInterrupt:
        pass                                   # Ctrl-C is how watch ends: exit 0, cleanly
    finally:
        restore_signal(previous)
        if live:
            sys.stdout.write(SHOW_CURSOR + "\n")
            sys.stdout.flush()
    return 0


def terminate_as_interrupt():
    """SIGTERM ends the loop like Ctrl-C (cursor restored, history closed). Returns the old
    handler, or None when not in the main thread."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return None

    def _raise(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, _raise)


def restore_signal(previous) -> None:
    import signal
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
