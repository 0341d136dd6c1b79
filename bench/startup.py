"""Cold-start time of `vramguard plan` next to a bare `python -c pass`.

    .venv/bin/python bench/startup.py [-n 30] [--precompile] [--importtime]
        [--cmd "plan Qwen/Qwen2.5-7B-Instruct --gpu A100-80GB"]

Runs both N times, interleaved (so drift hits both alike), each as a fresh process, and
prints the medians (wall clock, and CPU time = user + system, steadier on a busy machine),
the spread and the ratio. The target is a median under 150 ms for the
plan. No assertions: this is a measurement, not a test. `python -X importtime` shows where
the time goes (`--importtime` prints the 15 slowest imports of one plan run).
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CMD = "plan Qwen/Qwen2.5-7B-Instruct --gpu A100-80GB"


def _vramguard_argv(python: str, cmd: str) -> list[str]:
    exe = Path(python).with_name("vramguard")
    head = [str(exe)] if exe.exists() else [python, "-m", "vramguard"]
    return head + shlex.split(cmd)


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _time(argv: list[str], env: dict) -> tuple[float, int, float]:
    """(wall ms, exit code, CPU ms) of one fresh process."""
    c0, t0 = _cpu_s(), time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = (time.perf_counter() - t0) * 1000
    cpu = (_cpu_s() - c0) * 1000
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr.decode(errors="replace"))
    return dt, proc.returncode, cpu


def _importtime(tokens: list[str], python: str, env: dict) -> None:
    """One run under `python -X importtime`, the 15 slowest imports (cumulative)."""
    proc = subprocess.run([python, "-X", "importtime", "-c",
                           "import sys; from vramguard.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", *tokens],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3 or "self [us]" in line:
            continue
        self_us = int(parts[0].split(":", 1)[1])
        rows.append((int(parts[1]), self_us, parts[2].rstrip()))
    print("slowest imports (cumulative us, self us, module):")
    for cum, own, name in sorted(rows, reverse=True)[:15]:
        print(f"  {cum:>8} {own:>8}  {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="runs of each (default 30)")
    ap.add_argument("--cmd", default=DEFAULT_CMD,
                    help=f"vramguard arguments (default: {DEFAULT_CMD})")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the venv")
    ap.add_argument("--importtime", action="store_true", help="also show the slowest imports")
    ap.add_argument("--precompile", action="store_true",
                    help="byte-compile the package first, as `pip install` does (useful where "
                         "PYTHONDONTWRITEBYTECODE is set and no .pyc would ever be written)")
    args = ap.parse_args()
    if args.precompile:
        subprocess.run([args.python, "-m", "compileall", "-q", str(ROOT / "src" / "vramguard")],
                       check=False)

    env = dict(os.environ, NO_COLOR="1")
    plan_argv = _vramguard_argv(args.python, args.cmd)
    base_argv = [args.python, "-c", "pass"]
    # one warm-up of each: the first run pays for the disk cache and .pyc writing
    _time(plan_argv, env)
    _time(base_argv, env)
    plan_ms, base_ms, plan_cpu, base_cpu, codes = [], [], [], [], set()
    for _ in range(args.n):
        dt, rc, cpu = _time(plan_argv, env)
        plan_ms.append(dt)
        plan_cpu.append(cpu)
        codes.add(rc)
        dt, _, cpu = _time(base_argv, env)
        base_ms.append(dt)
        base_cpu.append(cpu)

    def row(name, xs):
        q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else [xs[0]] * 9
        return (f"{name:<48} median {statistics.median(xs):7.1f} ms   "
                f"p10 {q[0]:7.1f}   p90 {q[-1]:7.1f}   min {min(xs):7.1f}")

    has_pyc = any((ROOT / "src" / "vramguard" / "__pycache__").glob("cli.*.pyc"))
    pyc = "with .pyc" if has_pyc else "no .pyc: every import compiles from source"
    print(f"{args.n} runs each, interleaved ({sys.platform}, {os.cpu_count()} CPUs, {pyc})")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > (os.cpu_count() or 1):
        print(f"WARNING: load average {load:.1f} > {os.cpu_count()} CPUs: absolute times are "
              "inflated; the ratio to `python -c pass` is the steadier figure")
    print(row("python -c pass", base_ms) + f"   cpu {statistics.median(base_cpu):6.1f}")
    print(row("vramguard " + args.cmd, plan_ms) + f"   cpu {statistics.median(plan_cpu):6.1f}")
    med_p, med_b = statistics.median(plan_ms), statistics.median(base_ms)
    print(f"ratio {med_p / med_b:.2f}x; vramguard's own cost {med_p - med_b:.1f} ms; "
          f"target: median < 150 ms ({'met' if med_p < 150 else 'NOT met'}); "
          f"exit codes seen: {sorted(codes)}")
    if args.importtime:
        _importtime(shlex.split(args.cmd), args.python, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
