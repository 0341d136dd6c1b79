"""Exporter scrape latency: p50/p99 of GET /metrics on `vramguard exporter`'s HTTP server.

    .venv/bin/python bench/exporter_scrape.py [--scrapes 2000]

The collector state: one tick of 2 endpoints (the constructed 0.11 data-parallel scrape: 2
engines each) with firing alerts, plus a fresh 8-GPU reading per scrape (fake reader).
Measures the client-side latency over HTTP on 127.0.0.1 (a new connection per
request, the worst case). Target: p99 <= 10 ms.
"""

from __future__ import annotations

import argparse
import http.client
import os
import time

from _monitor_common import METRICS, fake_gpu_reader


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=2000)
    args = ap.parse_args()

    from vramguard.monitor.exporter import exposition, make_registry, serve
    from vramguard.monitor.metrics import EndpointScrape, parse_metrics
    from vramguard.monitor.rules import RuleConfig
    from vramguard.monitor.sampler import Sample
    from vramguard.monitor.watcher import Watcher

    engines = parse_metrics((METRICS / "constructed" / "vllm-0.11.0-v1-dp2.txt").read_text())
    reader = fake_gpu_reader(8)
    watcher = Watcher(config=RuleConfig(kv_sustained_s=0), planned_kv_tokens=300_000)
    eps = tuple(EndpointScrape(f"http://127.0.0.1:{8000 + i}", True, engines, latency_s=0.002)
                for i in range(2))
    watcher.on_sample(Sample(ts=time.time(), tick=0, gpus=tuple(reader()), endpoints=eps))
    registry = make_registry(watcher, reader)
    body = exposition(registry)
    server, port = serve(registry, "127.0.0.1", 0)

    def one() -> float:
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/metrics")
        data = conn.getresponse().read()
        conn.close()
        assert data.startswith(b"# HELP")
        return time.perf_counter() - t0

    for _ in range(50):
        one()
    cpu0 = time.process_time()
    lat = sorted(one() for _ in range(args.scrapes))
    cpu_per_scrape = (time.process_time() - cpu0) / args.scrapes
    gen = []
    for _ in range(500):
        t0 = time.perf_counter()
        exposition(registry)
        gen.append(time.perf_counter() - t0)
    gen.sort()
    server.shutdown()

    def pct(xs, p):
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000

    n_lines = body.count(b"\n")
    print(f"exposition: {len(body)} bytes, {n_lines} lines "
          f"(8 GPUs, 2 endpoints x 2 engines, alerts)")
    print(f"HTTP scrape over 127.0.0.1, {args.scrapes} requests: p50 {pct(lat, 50):.2f} ms, "
          f"p99 {pct(lat, 99):.2f} ms, max {lat[-1] * 1000:.2f} ms (target p99 <= 10 ms)")
    print(f"collect + generate_latest in process: p50 {pct(gen, 50):.2f} ms, "
          f"p99 {pct(gen, 99):.2f} ms")
    print(f"CPU per scrape (server + client, this process): {cpu_per_scrape * 1000:.2f} ms")
    if hasattr(os, "getloadavg"):
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
              f"(wall-clock percentiles include time other processes held the CPU)")


if __name__ == "__main__":
    main()
