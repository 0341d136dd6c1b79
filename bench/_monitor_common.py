"""Shared pieces of the monitor benchmarks: stub endpoints in a child process, fake GPUs."""

from __future__ import annotations

import multiprocessing
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
METRICS = ROOT / "tests" / "data" / "metrics"
GIB = 1 << 30


def _serve(body: bytes, queue) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    queue.put(server.server_address[1])
    server.serve_forever()


def start_stub_endpoints(n: int, fixture: str = "vllm-0.32-cpu/metrics_during_load.txt"):
    """n stub vLLM /metrics servers in child processes (their CPU is not ours). -> (urls, procs)"""
    body = (METRICS / fixture).read_bytes()
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    urls, procs = [], []
    for _ in range(n):
        q = ctx.Queue()
        p = ctx.Process(target=_serve, args=(body, q), daemon=True)
        p.start()
        urls.append(f"http://127.0.0.1:{q.get(timeout=10)}")
        procs.append(p)
    return urls, procs


def fake_gpu_reader(n: int = 8):
    """A reader that builds n GpuStates per call (like the NVML adapter does)."""
    from vramguard.core.gpu import GpuProcess, GpuSpec, GpuState
    spec = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB))
    counter = {"k": 0}

    def read():
        counter["k"] += 1
        wobble = (counter["k"] % 7) << 20
        return [GpuState(index=i, spec=spec, free_bytes=6 * GIB + wobble,
                         used_bytes=spec.total_bytes - 6 * GIB - wobble, uuid=f"GPU-{i:04d}",
                         utilization_pct=87.0,
                         processes=(GpuProcess(2000 + i, "python3", 72 * GIB),))
                for i in range(n)]
    return read


def rss_mib() -> float:
    """Current RSS (MiB) from /proc, else the peak from getrusage."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mib() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
