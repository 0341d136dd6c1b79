"""Benchmark: candidate plans per second, in-process (no timing asserts anywhere in tests).

    .venv/bin/python bench/tuner.py [--quick]

1. planner throughput on the kind of candidates the tuner makes (random utilization,
   max_model_len, max_num_seqs, batched tokens, KV dtype, TP) for a few models, with the
   memo caches of core/_memo.py off and on;
2. the tuner end to end: candidate plans per second inside `tune()` (`TuneResult.num_evaluated`
   over the CPU time of the calls), side by side: cold (the memo caches cleared before every
   request: one `vramguard tune` invocation; the figure compared with the 20,000 target),
   warm (the caches kept across requests: a long-running process) and memo off.

Each figure is the best of a few repetitions, in CPU time of this process (the machine
may be shared; wall-clock time would count other processes' load).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from vramguard.core import _memo, planner                      # noqa: E402
from vramguard.core.gpu_catalog import lookup_gpu               # noqa: E402
from vramguard.core.settings import Settings                    # noqa: E402
from vramguard.core.tuner import GpuTarget, TuneRequest, tune   # noqa: E402
from vramguard.core.workload import Workload                    # noqa: E402
from vramguard.errors import UsageError                        # noqa: E402
from vramguard.sources.resolve import load_model_spec           # noqa: E402

MODELS = ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B",
          "google/gemma-2-9b-it", "Qwen/Qwen3-Next-80B-A3B-Instruct")


def candidates(n: int, seed: int = 0) -> list[Settings]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ch = {"gpu_memory_utilization": rng.choice((0.80, 0.85, 0.9, 0.92, 0.95)),
              "max_model_len": rng.choice((2048, 4096, 6144, 8192, 16384)),
              "max_num_seqs": rng.choice((1, 8, 16, 64, 128, 256)),
              "kv_cache_dtype": rng.choice(("auto", "fp8")),
              "tensor_parallel_size": rng.choice((1, 2, 4))}
        if rng.random() < 0.3:
            ch["max_num_batched_tokens"] = rng.choice((512, 1024, 2048, 4096))
        out.append(Settings(**ch, user_set=frozenset(ch)))
    return out


def best_rate(fn, count: int, reps: int) -> float:
    best = 0.0
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        dt = time.process_time() - t0
        best = max(best, count / dt)
    return best


def bench_planner(specs, gpu, n: int, reps: int) -> dict:
    cands = candidates(n)

    def runner(detail: bool):
        def run():
            for spec in specs:
                for s in cands:
                    try:
                        planner.plan(spec, s, gpu, detail=detail)
                    except UsageError:      # e.g. a length beyond the model's maximum
                        pass
        return run
    out = {}
    for label, on, detail in (("memo off", False, True), ("memo on", True, True),
                              ("memo on, screening (detail=False)", True, False)):
        _memo.clear()
        _memo.set_enabled(on)
        out[label] = best_rate(runner(detail), n * len(specs), reps)
    _memo.set_enabled(True)
    return out


def tuner_requests(specs) -> list[TuneRequest]:
    """Three GPU setups per model (a 24 GiB card, an 80 GiB card, two 80 GiB cards)."""
    reqs = []
    for spec in specs:
        for gpu, n in (("RTX-3090", 1), ("H100-80GB", 1), ("A100-80GB", 2)):
            reqs.append(TuneRequest(spec, Settings(), tuple(GpuTarget(lookup_gpu(gpu))
                                                            for _ in range(n)),
                                    workload=Workload(800, 2000, 6000), explain=False))
    return reqs


# label -> (memo on, memo cleared before every tune request)
TUNER_MODES = {
    "cold (memo cleared per request)": (True, True),
    "warm (memo kept across requests)": (True, False),
    "memo off": (False, False),
}


def bench_tuner(specs, reps: int) -> dict:
    """Candidate plans per CPU second inside `tune()`, per memo mode (best of `reps`).

    NOTE: cold is what one `vramguard tune` invocation sees (a fresh process: nothing
    memoized); warm is a long-running process serving many tune calls (the same requests
    repeated, so from the second repetition every stage term is memoized)."""
    reqs = tuner_requests(specs)
    out = {}
    for label, (on, cold) in TUNER_MODES.items():
        _memo.clear()
        _memo.set_enabled(on)
        best = 0.0
        for _ in range(reps):
            runs, cpu = 0, 0.0
            for r in reqs:
                if cold:
                    _memo.clear()       # not timed
                t0 = time.process_time()
                runs += tune(r).num_evaluated
                cpu += time.process_time() - t0
            best = max(best, runs / cpu)
        out[label] = best
    _memo.set_enabled(True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer candidates and repetitions")
    args = ap.parse_args()
    n, reps = (300, 2) if args.quick else (1500, 3)
    specs = [load_model_spec(m, offline=True) for m in MODELS]
    gpu = lookup_gpu("H100-80GB")
    p = bench_planner(specs, gpu, n, reps)
    print(f"planner.plan, {len(specs)} models x {n} candidates:")
    for k, v in p.items():
        print(f"  {k:34} {v:9,.0f} plans/s  ({1e6 / v:6.1f} µs/plan)")
    t = bench_tuner(specs, reps)
    print(f"tune() end to end, {len(specs) * 3} requests (candidate plans per CPU second of "
          "the whole search, the options shown finished from their screened walk):")
    for k, v in t.items():
        print(f"  {k:34} {v:9,.0f} plans/s  ({1e6 / v:6.1f} µs/plan)")
    cold = t["cold (memo cleared per request)"]
    print(f"target: >= 20,000 candidate plans/s, cold: {'met' if cold >= 20000 else 'not met'} "
          f"({cold:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
