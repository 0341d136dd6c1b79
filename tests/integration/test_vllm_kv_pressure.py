"""KV pressure on a real vLLM 0.32 CPU server: 3 KV blocks (one request fits), 8 at once.

The pool: `--num-gpu-blocks-override 3`, block 128, so 2 usable blocks (vLLM keeps a null
block); a 100-token prompt + 100 generated tokens needs 2 blocks. Several such requests are
admitted with one block each and are preempted when they grow into their second block.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pytest

import vllm_server

pytestmark = pytest.mark.integration


def test_startup_log_override(vllm_kv_pressure):
    text = vllm_kv_pressure.log_path.read_text(errors="replace")
    assert "Overriding num_gpu_blocks=16384 with num_gpu_blocks_override=3" in text
    assert ("CPU KV cache size: 384 tokens, Maximum concurrency for 256 tokens per request: "
            "1.50x") in text
    from vramguard.logs.parser import parse

    ex = parse(str(vllm_kv_pressure.log_path))
    assert ex.blocks_override == (16_384, 3)
    assert ex.kv_cache_tokens == 384
    assert ex.max_concurrency == pytest.approx(1.5)


def _load(url: str, n: int, prompt_tokens: int, max_tokens: int, errors: list,
          rounds: int = 1) -> list:
    """n client threads, each sending `rounds` requests one after the other."""
    def one(i: int) -> None:
        for r in range(rounds):
            prompt = [16 + (i * 7 + r * 13 + j) % 200 for j in range(prompt_tokens)]
            try:
                vllm_server.post_json(url + "/v1/completions", {
                    "model": vllm_server.SERVED_NAME, "prompt": prompt, "max_tokens": max_tokens,
                    "ignore_eos": True, "temperature": 0.0}, timeout_s=120)
            except Exception as exc:  # collected and asserted on by the test
                errors.append(repr(exc))
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def _pressure_seen(window) -> bool:
    """Some scrape saw the pool full, and some scrape saw a request waiting (what the test
    asserts: on busy cores one burst can fall between scrapes)."""
    points = [s.endpoints[0].to_dict() for s in window if s.endpoints[0].ok]
    return (any(p["kv_cache_usage"] >= 0.999 for p in points)
            and any(p["num_requests_waiting"] > 0 for p in points))


def test_pressure_metrics_and_alerts(vllm_kv_pressure):
    from vramguard.monitor.rules import RuleConfig, evaluate
    from vramguard.monitor.sampler import Sampler

    # NOTE: a generous scrape timeout: on 2 busy cores a scrape can take seconds under load
    sampler = Sampler([vllm_kv_pressure.url], interval_s=0.1, timeout_s=15.0, gpus=False)
    window = [sampler.sample_once()]
    base = window[0].endpoints[0].to_dict()["num_preemptions_total"]
    errors: list = []
    # NOTE: 4 clients x 6 requests of 100 + 150 tokens (2 blocks each; one fits at a time)
    # keep the pool full for many seconds with few HTTP requests in flight, so slow scrapes
    # on busy cores still see the peak.
    threads = _load(vllm_kv_pressure.url, 4, 100, 150, errors, rounds=6)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        window.append(sampler.sample_once())
        if not any(t.is_alive() for t in threads):
            if _pressure_seen(window):
                break
            # NOTE: on busy cores a scrape can take seconds and miss the whole burst: keep the
            # pool under pressure (another burst) until the scrapes have seen it full and a
            # request waiting.
            threads = _load(vllm_kv_pressure.url, 4, 100, 150, errors, rounds=6)
        time.sleep(0.02)
    for t in threads:
        t.join(timeout=120)
    window.append(sampler.sample_once())
    sampler.close()
    assert not errors
    points = [s.endpoints[0].to_dict() for s in window if s.endpoints[0].ok]
    seen = [(p["kv_cache_usage"], p["num_requests_running"], p["num_requests_waiting"],
             p["num_preemptions_total"]) for p in points]
    assert len(points) >= 3, [s.endpoints[0].error for s in window]
    assert max(p["kv_cache_usage"] for p in points) == pytest.approx(1.0), seen
    assert points[-1]["num_preemptions_total"] - base > 0
    assert max(p["num_requests_waiting"] for p in points) > 0
    fired = set()
    config = RuleConfig(kv_sustained_s=0.0)
    for i in range(1, len(window) + 1):
        fired |= {a.rule for a in evaluate(window[:i], config)}
    assert {"kv_usage_high", "preemptions_rising"} <= fired


def _stress(url: str, levels: str, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "vramguard", "stress", "--url", url, "--concurrency", levels,
         "--prompt-tokens", "100", "--max-tokens", "150", "--requests-per-level", "16", *extra],
        capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr
    return proc


def _stress_json(url: str) -> dict:
    return json.loads(_stress(url, "1,2,4,8", "--duration-per-level", "90", "--json").stdout)


def _engine_counters(url: str) -> dict[str, float]:
    """vLLM's preemption counter and running/waiting gauges, read from /metrics with a regex
    (not vramguard's parser: an independent reading)."""
    status, body = vllm_server.http_get(url + "/metrics", timeout_s=15)
    assert status == 200, status
    out = {}
    for name in ("num_preemptions_total", "num_requests_running", "num_requests_waiting"):
        m = re.search(rf"^vllm:{name}{{[^}}]*}} ([0-9.e+]+)$", body.decode(), re.M)
        assert m, name
        out[name] = float(m.group(1))
    return out


def _idle_preemptions(url: str) -> float:
    """The preemption counter once the engine runs and waits for nothing."""
    deadline = time.monotonic() + 60
    while True:
        c = _engine_counters(url)
        if (c["num_requests_running"] == c["num_requests_waiting"] == 0
                or time.monotonic() > deadline):
            return c["num_preemptions_total"]
        time.sleep(0.5)


def _ramp(url: str) -> tuple[dict, dict, float]:
    """One 1,2,4,8 ramp: (its JSON, its levels by concurrency, vLLM's counter delta)."""
    before = _idle_preemptions(url)
    data = _stress_json(url)
    delta = _idle_preemptions(url) - before
    return data, {l["concurrency"]: l for l in data["levels"]}, delta


def test_stress_finds_the_knee(vllm_kv_pressure):
    for _ in range(3):
        data, levels, delta = _ramp(vllm_kv_pressure.url)
        # NOTE: on every ramp, the levels' counts add up to vLLM's own counter over it: no
        # preemption lost between levels or counted twice.
        assert sum(l["preemptions"] for l in levels.values()) == delta, (levels, delta)
        if (data["knee_concurrency"] in (1, 2) and levels[8]["preemptions"]
                and levels[8]["kv_usage_peak"] == 1.0):
            break
        # NOTE: on 2 busy cores the engine once served a whole 8-client level one request
        # at a time (each newcomer admitted only after the running one held both blocks: no
        # preemption; 3-15 preemptions otherwise), and vLLM's gauges can lag a whole level
        # (/metrics answers in about a second under load; no reading shows the engine busy:
        # peak unknown). vramguard reported what vLLM's metrics said (the counts add up);
        # another ramp (at most three; the second failed too in 1 of ~10 CI runs) tells that
        # from a counting bug.
    assert all(l["requests_failed"] == 0 for l in levels.values())
    assert levels[1]["preemptions"] == 0
    assert levels[8]["preemptions"] > 0 and levels[8]["kv_usage_peak"] == pytest.approx(1.0)
    assert data["workload_fit_concurrency"] == 1          # (3 - 1) // cdiv(250, 128)
    # NOTE: a preemption needs a second request admitted while the first holds one block
    # (its first 28 tokens of output). Whether the engine admits it in time is vLLM's
    # scheduling on 2 contended cores, not vramguard's: 2 or 4 clients can fall into a
    # convoy in which each newcomer waits for the pool instead (level 4 with no preemption
    # in two ramps of one CI run, and twice in a row on an idle machine, while level 2
    # preempted). At least one of them preempts, so the knee is 1 or 2.
    assert data["knee_concurrency"] in (1, 2)
    assert data["first_preempting_concurrency"] == 2 * data["knee_concurrency"]
    assert data["server"]["num_gpu_blocks"] == 3
    assert data["server_max_concurrency"] == pytest.approx(1.5)


def test_stress_text_output(vllm_kv_pressure):
    want = "knee: concurrency 1 runs without preemption; 8 preempts"
    proc = _stress(vllm_kv_pressure.url, "1,8")
    first = proc.stdout
    if want not in first:
        # NOTE: the convoy of test_stress_finds_the_knee (vLLM serving the 8 clients one at
        # a time on 2 busy cores; seen in a fresh-clone CI run): a second ramp.
        proc = _stress(vllm_kv_pressure.url, "1,8")
    assert want in proc.stdout, first + proc.stdout
    assert "KV pool: 3 blocks x 128 tokens" in proc.stdout


def test_watch_record_then_report(vllm_kv_pressure, tmp_path):
    """`watch --record` during real KV pressure, then `report` shows it (HTML + summary)."""
    import signal

    db, html = tmp_path / "history.sqlite3", tmp_path / "report.html"
    watch = subprocess.Popen(
        [sys.executable, "-m", "vramguard", "watch", "--url", vllm_kv_pressure.url, "--no-gpu",
         "--record", str(db), "--interval", "0.25s", "--timeout", "5s", "--sustain", "0.5s",
         "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
        errors: list = []
        for _ in range(2):
            threads = _load(vllm_kv_pressure.url, 8, 100, 100, errors)
            for t in threads:
                t.join(timeout=120)
        time.sleep(2)
    finally:
        watch.send_signal(signal.SIGTERM)
        try:
            watch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait(timeout=10)
    assert watch.returncode == 0, watch.stderr.read()
    assert not errors
    proc = subprocess.run(
        [sys.executable, "-m", "vramguard", "report", "--db", str(db), "--since", "1h",
         "--html", str(html), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)["summary"]
    assert summary["peak_kv_usage"] == pytest.approx(1.0)
    assert summary["total_preemptions"] > 0
    assert summary["time_above_threshold_s"] > 0
    assert summary["alerts_by_severity"]
    page = html.read_text()
    assert page.count("<svg") == 4            # no GPU chart: recorded with --no-gpu
    assert "no GPU samples" in page and "preemptions_rising" in page
