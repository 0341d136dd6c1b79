"""A synthetic `vramguard watch` history for the report tests (and to look at the report).

    python tests/report_history.py OUT.sqlite3      # writes the same file the tests use

10 minutes at 1 s on 2 GPUs and 2 vLLM endpoints: endpoint A's KV usage ramps to 100 %, holds
above 90 % for 130 s while requests queue and preemptions rise, then drains; a foreign process
takes 6 GiB of GPU 0 at t=420 s; the sampler misses 10 ticks at t=300 s. Alerts are the real
rules (monitor.rules.evaluate) over a rolling window, as `watch` records them.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from vramguard.core.gpu import GpuProcess, GpuSpec, GpuState  # noqa: E402
from vramguard.monitor.history import History  # noqa: E402
from vramguard.monitor.metrics import EndpointScrape, EngineMetrics  # noqa: E402
from vramguard.monitor.rules import RuleConfig, evaluate  # noqa: E402
from vramguard.monitor.sampler import Sample  # noqa: E402

GIB = 1 << 30
T0 = 1_790_000_000.0
N = 600
GAP = range(300, 310)                  # ticks never sampled
URL_A = "http://127.0.0.1:8000"
URL_B = "http://127.0.0.1:8001"
H100 = GpuSpec(name="H100-80GB", total_bytes=85_029_158_912)     # 79.19 GiB


def kv_a(t: int) -> float:
    """Endpoint A's KV usage: 0.25 -> ramp -> 1.0 held 150..279 -> drain to 0.45."""
    if t < 100:
        return 0.25 + 0.05 * math.sin(t / 9)
    if t < 150:
        return 0.25 + (t - 100) / 50 * 0.75
    if t < 280:
        return 1.0 if t % 17 else 0.97
    if t < 340:
        return max(0.45, 1.0 - (t - 280) / 60 * 0.55)
    return 0.45 + 0.04 * math.sin(t / 7)


def preemptions_a(t: int) -> int:
    """Counter: +1 every 4 s while KV is full (150..279)."""
    return 0 if t < 150 else (min(t, 279) - 150) // 4 + 1


def engine_a(t: int) -> EngineMetrics:
    full = 150 <= t < 280
    return EngineMetrics(
        engine="0", model_name="meta-llama/Llama-3.1-8B-Instruct", kv_cache_usage=kv_a(t),
        kv_usage_metric="vllm:kv_cache_usage_perc",
        num_requests_running=48 if full else int(12 + 30 * kv_a(t)),
        num_requests_waiting=min(40, (t - 150) // 3) if full else 0,
        waiting_by_reason={"capacity": min(40, (t - 150) // 3) if full else 0},
        num_preemptions_total=preemptions_a(t),
        prompt_tokens_total=int(t * 2600 + 400 * math.sin(t / 5)),
        generation_tokens_total=1400 * t - 500 * min(max(t - 150, 0), 130),
        cache_config={"num_gpu_blocks": "28500", "block_size": "16",
                      "kv_cache_max_concurrency": "3.48", "gpu_memory_utilization": "0.92"})


def engine_b(t: int) -> EngineMetrics:
    return EngineMetrics(
        engine="0", model_name="Qwen/Qwen3-8B", kv_cache_usage=0.18 + 0.1 * math.sin(t / 40) ** 2,
        kv_usage_metric="vllm:kv_cache_usage_perc", num_requests_running=6 + round(2 * math.sin(t / 20)),
        num_requests_waiting=0, num_preemptions_total=0, prompt_tokens_total=t * 700,
        generation_tokens_total=t * 350,
        cache_config={"num_gpu_blocks": "30000", "block_size": "16"})


def gpus(t: int) -> tuple[GpuState, ...]:
    vllm = GpuProcess(pid=4242, name="vllm", used_bytes=int(72.6 * GIB))
    used0 = int((72.9 + 0.05 * math.sin(t / 11)) * GIB)
    procs0 = (vllm,)
    if t >= 420:
        used0 += 6 * GIB
        procs0 = (vllm, GpuProcess(pid=5150, name="python train.py", used_bytes=6 * GIB))
    used1 = int((71.8 + 0.03 * math.cos(t / 13)) * GIB)
    return (
        GpuState(index=0, spec=H100, free_bytes=H100.total_bytes - used0, used_bytes=used0,
                 uuid="GPU-0000", processes=procs0),
        GpuState(index=1, spec=H100, free_bytes=H100.total_bytes - used1, used_bytes=used1,
                 uuid="GPU-0001", processes=(GpuProcess(4243, "vllm", int(71.5 * GIB)),)),
    )


def sample(t: int, missed: int = 0) -> Sample:
    return Sample(ts=T0 + t, tick=t, gpus=gpus(t), missed_ticks=missed, duration_s=0.004,
                  endpoints=(EndpointScrape(URL_A, True, (engine_a(t),), latency_s=0.003),
                             EndpointScrape(URL_B, True, (engine_b(t),), latency_s=0.002)))


def write_history(path: Path) -> Path:
    """Write the scenario to `path` (replacing it); returns the path."""
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    config = RuleConfig(kv_sustained_s=30.0, window_s=120.0)
    window: list[Sample] = []
    with History(path) as history:
        missed = 0
        for t in range(N):
            if t in GAP:
                missed += 1
                continue
            s = sample(t, missed)
            missed = 0
            window = (window + [s])[-120:]
            history.write(s, evaluate(window, config))
    return path


if __name__ == "__main__":
    print(write_history(Path(sys.argv[1] if len(sys.argv) > 1 else "history-demo.sqlite3")))
