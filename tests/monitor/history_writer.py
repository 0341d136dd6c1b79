"""A history writer to be killed mid-run: prints the number of committed ticks after each."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from monitor_helpers import engine, fake_gpus, sample  # noqa: E402
from vramguard.monitor.history import History  # noqa: E402

path = sys.argv[1]
reader = fake_gpus(8)
with History(path) as h:
    n = 0
    while True:
        s = sample(1_000_000 + n, [engine(kv=0.5, running=3, waiting=n % 5, preempt=n)],
                   gpus=reader())
        h.write(s, [])
        n += 1
        print(n, flush=True)
