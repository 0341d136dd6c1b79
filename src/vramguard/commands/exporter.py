"""`vramguard exporter`: serve vramguard's view (GPU memory, KV pools, alerts) to Prometheus.

    vramguard exporter --url http://127.0.0.1:8000 [--listen 127.0.0.1:9400] [--interval 1s]

Loopback only unless --allow-remote. Samples in the foreground (Ctrl-C stops it); each
scrape reads the latest tick plus a fresh NVML reading. Rules and deploy/prometheus/alerts.yml
fire on the same conditions.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    parser.add_argument("--url", action="append", default=[], metavar="URL",
                        help="a vLLM server (its /metrics is read); repeat for several")
    parser.add_argument("--listen", default="127.0.0.1:9400",
                        help="HOST:PORT to serve /metrics on (default 127.0.0.1:9400)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a non-loopback --listen address (e.g. 0.0.0.0)")
    parser.add_argument("--interval", default="1s", help="sampling interval (default 1s)")
    parser.add_argument("--timeout", default=None, help="per-scrape timeout")
    parser.add_argument("--record", metavar="FILE", default=None,
                        help="also record history to FILE (default: no recording)")
    parser.add_argument("--retention", default="7d", help="history to keep (default 7d)")
    parser.add_argument("--no-gpu", action="store_true", help="endpoints only (no NVML)")
    parser.add_argument("--window", default="5m", help="rule window (default 5m)")
    parser.add_argument("--kv-threshold", type=float, default=0.90)
    parser.add_argument("--sustain", default="60s")
    parser.add_argument("--planned-kv-tokens", type=int, default=None, metavar="N")
    parser.add_argument("--model", default=None)
    parser.add_argument("--gpu", default=None)
    parser.add_argument("--vllm-version", default=None)
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--ignore-pid", type=int, action="append", default=[])


def run(args) -> int:
    from ..monitor.exporter import make_registry, parse_listen, serve
    from .watch import build, restore_signal, terminate_as_interrupt

    host, port = parse_listen(args.listen, allow_remote=args.allow_remote)
    args.no_record = args.record is None
    args.once = False
    sampler, watcher, _ = build(args)
    registry = make_registry(watcher, sampler.gpu_reader)
    server, bound = serve(registry, host, port)
    shown = f"[{host}]" if ":" in host else host
    print(f"vramguard exporter: serving http://{shown}:{bound}/metrics "
          f"({len(sampler.urls)} endpoint(s), GPUs: {sampler.gpu_error or 'NVML'})",
          file=sys.stderr, flush=True)
    previous = terminate_as_interrupt()
    try:
        sampler.run(watcher.on_sample)
    except KeyboardInterrupt:
        pass
    finally:
        restore_signal(previous)
        if server is not None:
            server.shutdown()
        sampler.close()
        if watcher.history is not None:
            watcher.history.close()
    return 0
