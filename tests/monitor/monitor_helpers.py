"""Helpers for the monitor tests: fixture files, a stub /metrics server, fake GPUs, samples."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from vramguard.core.gpu import GpuProcess, GpuSpec, GpuState
from vramguard.monitor.metrics import EndpointScrape, EngineMetrics
from vramguard.monitor.sampler import Sample

ROOT = Path(__file__).resolve().parents[2]
METRICS = ROOT / "tests" / "data" / "metrics"
REAL = METRICS / "vllm-0.32-cpu"
BUILT = METRICS / "constructed"
GIB = 1 << 30


def fixture_text(name: str) -> str:
    """A recorded scrape: 'vllm-0.32-cpu/metrics.txt' or 'constructed/vllm-0.6.6-v0.txt'."""
    return (METRICS / name).read_text()


def timeline_ticks() -> list[str]:
    """The real 0.32 pressure timeline, one exposition text per `t=N` block."""
    blocks, current = [], None
    for line in (REAL / "metrics_pressure_timeline.txt").read_text().splitlines():
        if line.startswith("t="):
            current = []
            blocks.append(current)
        elif current is not None and line.strip():
            current.append(line)
    return ["\n".join(b) + "\n" for b in blocks]


# ---- stub server -------------------------------------------------------------------------
class StubMetricsServer:
    """Serves a scripted sequence on 127.0.0.1:<free port>; the last step repeats.

    Steps: ("text", body) | ("status", code) | ("sleep", seconds, body) | ("bytes", raw)
    """

    def __init__(self, steps):
        self.steps = list(steps)
        self.hits = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with stub._lock:
                    step = stub.steps[min(stub.hits, len(stub.steps) - 1)]
                    stub.hits += 1
                kind = step[0]
                if kind == "status":
                    self._send(step[1], b"internal error")
                elif kind == "sleep":
                    time.sleep(step[1])
                    self._send(200, step[2].encode())
                elif kind == "bytes":
                    self._send(200, step[1])
                else:
                    self._send(200, step[1].encode())

            def _send(self, code, body):
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_binary(name: str) -> str:
    """The binary's path; skip when missing, but FAIL under CI (CI must run these)."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not installed (scripts/setup-test-env installs Debian's prometheus)"
    if os.environ.get("CI"):
        pytest.fail("CI must run the Prometheus tests: " + message, pytrace=False)
    pytest.skip(message)


# ---- synthetic samples -------------------------------------------------------------------
def gpu(index=0, free_gib=10.0, total_gib=80.0, processes=(), name="H100-80GB") -> GpuState:
    total = int(total_gib * GIB)
    free = int(free_gib * GIB)
    return GpuState(index=index, spec=GpuSpec(name=name, total_bytes=total), free_bytes=free,
                    used_bytes=total - free, uuid=f"GPU-{index:04d}",
                    processes=tuple(GpuProcess(pid, pname, int(g * GIB))
                                    for pid, pname, g in processes))


def fake_gpus(n=8, free_gib=10.0):
    """A GPU reader: n H100s each held by one vLLM worker."""
    states = [gpu(i, free_gib, processes=[(1000 + i, "vllm", 69.0)]) for i in range(n)]
    return lambda: states


def engine(kv=None, running=None, waiting=None, preempt=None, engine_id="0", blocks=None,
           block_size=16, **kw) -> EngineMetrics:
    config = {}
    if blocks is not None:
        config = {"num_gpu_blocks": str(blocks), "block_size": str(block_size)}
    return EngineMetrics(engine=engine_id, model_name="m", kv_cache_usage=kv,
                         num_requests_running=running, num_requests_waiting=waiting,
                         num_preemptions_total=preempt, cache_config=config, **kw)


def sample(ts, engines=(), gpus=(), url="http://vllm:8000", ok=True, error=None, more=()):
    eps = (EndpointScrape(url=url, ok=ok, engines=tuple(engines), error=error),) + tuple(more)
    return Sample(ts=float(ts), tick=int(ts), gpus=tuple(gpus), endpoints=eps)
