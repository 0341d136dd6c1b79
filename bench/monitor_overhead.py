"""Sampler overhead: CPU time per tick with 8 fake GPUs and 2 stub vLLM endpoints.

    .venv/bin/python bench/monitor_overhead.py [--ticks 30] [--interval 1]

Runs the whole `watch` path per tick (scrape + parse 2 x 52 KB real 0.32 scrapes, 8 GPUs,
rules over a 5-minute window, one SQLite transaction, the text frame) on its real 1 s schedule, and prints
the CPU seconds this process used per tick and as % of one core. The stub servers run in child
processes, so their CPU is not counted. Target: <= 1 % of a core at 1 s. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _monitor_common import fake_gpu_reader, start_stub_endpoints


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()

    from vramguard.monitor.history import History
    from vramguard.monitor.sampler import Sampler
    from vramguard.monitor.watcher import Watcher

    urls, procs = start_stub_endpoints(2)
    tmp = tempfile.mkdtemp(prefix="vramguard-bench-")
    sampler = Sampler(urls, interval_s=args.interval, gpu_reader=fake_gpu_reader(args.gpus))
    watcher = Watcher(history=History(Path(tmp) / "h.sqlite3", retention_s=7 * 86400))
    # warm-up: imports, first connections, SQLite schema
    for _ in range(3):
        watcher.on_sample(sampler.sample_once())

    cpu_per_tick: list[float] = []
    scrape_only: list[float] = []

    from vramguard.render.watch_text import redraw, render_frame

    def on_sample(sample) -> None:
        c0 = time.process_time()
        alerts = watcher.on_sample(sample)
        redraw(render_frame(sample, alerts, rates=watcher.rates(), interval_s=args.interval))
        cpu_per_tick.append(time.process_time() - c0)

    wall0, cpu0 = time.monotonic(), time.process_time()
    sampler.run(on_sample, max_ticks=args.ticks)
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    # sampling alone (scrape + parse + GPUs), back to back
    for _ in range(20):
        c0 = time.process_time()
        sampler.sample_once()
        scrape_only.append(time.process_time() - c0)
    sampler.close()
    for p in procs:
        p.terminate()

    per_tick = cpu / args.ticks
    print(f"ticks: {args.ticks} at {args.interval:g} s, {args.gpus} fake GPUs, 2 stub endpoints "
          f"(52 KB real vLLM 0.32 scrapes)")
    print(f"wall: {wall:.2f} s; process CPU: {cpu:.3f} s")
    print(f"CPU per tick (all threads): {per_tick * 1000:.2f} ms "
          f"= {per_tick / args.interval * 100:.2f} % of one core (target <= 1 %)")
    print(f"  of which rules + history + frame per tick: "
          f"{sum(cpu_per_tick) / len(cpu_per_tick) * 1000:.2f} ms (mean), "
          f"{max(cpu_per_tick) * 1000:.2f} ms (max)")
    if hasattr(os, "getloadavg"):
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  sampling alone (scrape+parse 2 endpoints, 8 GPUs): "
          f"{sorted(scrape_only)[len(scrape_only) // 2] * 1000:.2f} ms median")


if __name__ == "__main__":
    main()
