"""A 24-hour history at 1 s: 86,400 ticks x (8 GPUs + 2 endpoints) written, then read back.

    .venv/bin/python bench/history_24h.py [--ticks 86400] [--keep FILE]

Writes one transaction per tick (as `watch` does), then: streams every TickRow through
`History.series()`, aggregates `History.buckets(60)`, and reads one hour of one GPU. Prints
time, file size and RSS after each step: the reads must stay in bounded memory (streamed
cursors), so RSS should not grow with the number of ticks. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _monitor_common import METRICS, fake_gpu_reader, peak_rss_mib, rss_mib


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=86_400)
    ap.add_argument("--keep", default=None, help="write here and keep the file")
    args = ap.parse_args()

    from dataclasses import replace

    from vramguard.monitor.history import History
    from vramguard.monitor.metrics import EndpointScrape, parse_metrics
    from vramguard.monitor.rules import Alert
    from vramguard.monitor.sampler import Sample

    path = Path(args.keep) if args.keep else Path(tempfile.mkdtemp()) / "history.sqlite3"
    if path.exists():
        path.unlink()
    (base,) = parse_metrics((METRICS / "vllm-0.32-cpu" / "metrics_during_load.txt").read_text())
    reader = fake_gpu_reader(8)
    start_ts = 1_800_000_000.0
    print(f"start RSS {rss_mib():.1f} MiB; writing {args.ticks:,} ticks to {path}")
    t0 = time.perf_counter()
    alert = Alert("kv_usage_high", "warning", "KV cache 95% full for 60 s ...", "http://a engine 0")
    with History(path, retention_s=7 * 86400) as h:
        for k in range(args.ticks):
            engines = (replace(base, kv_cache_usage=(k % 600) / 600,
                               num_requests_running=k % 64, num_requests_waiting=k % 9,
                               num_preemptions_total=k // 500,
                               generation_tokens_total=base.generation_tokens_total + 40 * k),)
            eps = tuple(EndpointScrape(u, True, engines, latency_s=0.002)
                        for u in ("http://a:8000", "http://b:8000"))
            sample = Sample(ts=start_ts + k, tick=k, gpus=tuple(reader()), endpoints=eps)
            h.write(sample, [alert] if (k // 300) % 10 == 9 else [])
    write_s = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    print(f"write: {write_s:.1f} s ({write_s / args.ticks * 1e6:.0f} us/tick), "
          f"files {size / 2**20:.1f} MiB, RSS {rss_mib():.1f} MiB")

    r = History(path, readonly=True)
    t0 = time.perf_counter()
    n_ticks = n_gpu = n_ep = 0
    max_kv = 0.0
    for row in r.series():
        n_ticks += 1
        n_gpu += len(row.gpus)
        n_ep += len(row.endpoints)
        max_kv = max(max_kv, max((e.kv_cache_usage or 0) for e in row.endpoints))
    print(f"series(): {n_ticks:,} ticks, {n_gpu:,} GPU rows, {n_ep:,} endpoint rows in "
          f"{time.perf_counter() - t0:.1f} s; RSS {rss_mib():.1f} MiB")
    t0 = time.perf_counter()
    buckets = sum(1 for _ in r.buckets(60))
    print(f"buckets(60): {buckets:,} rows in {time.perf_counter() - t0:.1f} s; "
          f"RSS {rss_mib():.1f} MiB")
    t0 = time.perf_counter()
    hour = sum(1 for _ in r.gpu_series(start_ts + 3600, start_ts + 7200, gpu_index=3))
    print(f"gpu_series(one hour, one GPU): {hour:,} rows in {(time.perf_counter() - t0) * 1000:.0f} ms")
    print(f"alerts: {len(r.alerts())} incidents; peak RSS {peak_rss_mib():.1f} MiB")
    r.close()
    if not args.keep:
        for p in path.parent.glob(path.name + "*"):
            os.unlink(p)


if __name__ == "__main__":
    main()
