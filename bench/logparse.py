"""Benchmark: parse a generated 1 GB vLLM log; time and peak RSS next to two baselines.

    .venv/bin/python bench/logparse.py [--size-mb 1024] [--keep PATH]

The log is a real vLLM 0.32 startup (tests/data/logs) followed by a serving mix: uvicorn
access lines, request logs with sampling params, finished-request lines, periodic engine
stats, warnings; one restart in the middle and a CUDA OOM at the end. Each measurement runs
in a fresh subprocess so that its peak RSS (getrusage ru_maxrss) is its own.
Targets (issue #7): 1 GB in <= 10 s, <= 100 MB RSS.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTUP = ROOT / "tests" / "data" / "logs" / "vllm-0.32-cpu" / "startup.log"

_CHILD = r"""
import resource, sys, time
sys.path.insert(0, {src!r})
t0 = time.perf_counter()
c0 = time.process_time()
{body}
dt = time.perf_counter() - t0
cpu = time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
print(f"{{dt:.3f}} {{cpu:.3f}} {{rss}} {{result}}")
"""

_PARSE = """
from vramguard.logs.parser import parse
from vramguard.logs.diagnose import diagnose
ex = parse({path!r})
d = diagnose(ex)
result = f"lines={{ex.lines}} stats={{ex.stats.samples if ex.stats else 0}} startups={{ex.startups}} failure={{d.failure}}"
"""

_LOOP = """
n = 0
with open({path!r}, "rb") as fh:
    for line in fh:
        n += 1
result = f"lines={{n}}"
"""


def _block(rnd: random.Random, n: int) -> str:
    out = []
    for i in range(n):
        r = rnd.random()
        port = 40000 + rnd.randrange(20000)
        if r < 0.55:
            path = rnd.choice(("/v1/completions", "/v1/chat/completions", "/metrics", "/health"))
            out.append(f'INFO:     10.0.{i % 250}.{port % 250}:{port} - "POST {path} HTTP/1.1" 200 OK')
        elif r < 0.80:
            out.append(f"(APIServer pid=22098) INFO 11-29 08:44:{i % 60:02d} [logger.py:43] "
                       f"Received request cmpl-{rnd.getrandbits(128):032x}-0: prompt: 'Summarise "
                       f"the following document in three bullet points, keeping names.', params:"
                       f" SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
                       f"temperature=0.7, top_p=0.95, top_k=-1, max_tokens={rnd.randrange(16, 2048)}"
                       f", seed=None), lora_request: None.")
        elif r < 0.93:
            out.append(f"(APIServer pid=22098) INFO 11-29 08:44:{i % 60:02d} [async_llm.py:1] "
                       f"Finished request cmpl-{rnd.getrandbits(64):016x}-0.")
        elif r < 0.97:
            out.append(f"(APIServer pid=22098) INFO 11-29 08:44:{i % 60:02d} [loggers.py:335] "
                       f"Engine 000: Avg prompt throughput: {rnd.random() * 900:.1f} tokens/s, Avg"
                       f" generation throughput: {rnd.random() * 3000:.1f} tokens/s, Running: "
                       f"{rnd.randrange(64)} reqs, Waiting: {rnd.randrange(8)} reqs, GPU KV cache "
                       f"usage: {rnd.random() * 100:.1f}%, Prefix cache hit rate: 12.5%")
        else:
            out.append(f"(EngineCore_DP0 pid=23504) WARNING 11-29 08:44:{i % 60:02d} "
                       f"[scheduler.py:1] \x1b[33mSequence group cmpl-{i} is preempted by "
                       f"PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
                       f"space.\x1b[0m")
    return "\n".join(out) + "\n"


def generate(path: Path, size_mb: int, seed: int = 1) -> int:
    """Write a ~size_mb MB log at `path`; returns its size in bytes."""
    rnd = random.Random(seed)
    startup = STARTUP.read_bytes()
    blocks = [_block(rnd, 20_000).encode() for _ in range(4)]
    target = size_mb << 20
    restart_at = target // 2
    restarted = False
    with open(path, "wb") as fh:
        fh.write(startup)
        written = len(startup)
        while written < target:
            if not restarted and written >= restart_at:
                fh.write(startup)
                written += len(startup)
                restarted = True
            b = blocks[rnd.randrange(len(blocks))]
            fh.write(b)
            written += len(b)
        tail = (b"(EngineCore_DP0 pid=23504) ERROR 11-29 09:10:00 [core.py:1] torch.OutOfMemoryError:"
                b" CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                b"79.19 GiB of which 1.10 GiB is free. Including non-PyTorch memory, this process "
                b"has 78.05 GiB memory in use.\n")
        fh.write(tail)
        written += len(tail)
    return written


def _child(body: str) -> tuple[float, float, int, str]:
    code = _CHILD.format(src=str(ROOT / "src"), body=body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dt, cpu, rss, rest = out.stdout.strip().split(" ", 3)
    return float(dt), float(cpu), int(rss), rest


def _wc(path: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, out.stdout.split()[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--keep", help="write the log here and keep it (default: a temp dir)")
    ap.add_argument("--runs", type=int, default=1, help="parse this many times (best is shown)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "vllm-serving.log"
        t0 = time.perf_counter()
        size = generate(path, args.size_mb)
        gen = time.perf_counter() - t0
        print(f"generated {size / 2**20:,.0f} MiB in {gen:.1f} s: {path}")
        wc_dt, wc_lines = _wc(path)
        loop = _child(_LOOP.format(path=str(path)))
        runs = [_child(_PARSE.format(path=str(path))) for _ in range(args.runs)]
        best = min(runs)
        gib = size / 2**30
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
              "(wall time suffers when others share the machine; CPU time less so)")
        print(f"{'':<26} {'wall s':>7} {'CPU s':>7} {'CPU s/GiB':>10} {'peak RSS MiB':>13}  result")
        print(f"{'wc -l':<26} {wc_dt:>7.2f} {'-':>7} {'-':>10} {'-':>13}  lines={wc_lines}")
        for name, (dt, cpu, rss, res) in (("python line loop (rb)", loop),
                                         ("vramguard parse+diagnose", best)):
            print(f"{name:<26} {dt:>7.2f} {cpu:>7.2f} {cpu / gib:>10.2f} {rss / 1024:>13.1f}  {res}")
        dt, cpu, rss, _ = best
        ok = cpu / gib <= 10 and rss / 1024 <= 100
        print(f"targets (1 GiB <= 10 s, <= 100 MB RSS): {'met' if ok else 'NOT met'} "
              f"(CPU {cpu / gib:.1f} s/GiB, wall {dt / gib:.1f} s/GiB, RSS {rss / 1024:.0f} MiB)")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
