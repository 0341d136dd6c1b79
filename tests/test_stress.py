"""`vramguard stress` against a fake OpenAI/vLLM server on loopback (no vLLM needed).

The fake has a KV pool of `FIT` concurrent requests: whenever more than FIT completions are
in flight at once, each extra arrival counts one preemption on /metrics, and KV usage is
in_flight / FIT (capped at 1). So the knee is FIT by construction.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vramguard.cli import main
from vramguard.errors import MonitorError, UsageError
from vramguard.monitor.stress import (StressConfig, _quantile, base_url, parse_levels,
                                      run_stress)
from vramguard.render.stress_text import render_stress

FIT = 2
LATENCY_S = 0.15


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.in_flight = self.peak = self.preemptions = self.requests = self.tokens = 0
        self.bodies: list[dict] = []
        self.fail = False


def _metrics(state: _State) -> str:
    kv = min(1.0, state.in_flight / FIT)
    return (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0",model_name="fake"}} {kv}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0",model_name="fake"}} {min(state.in_flight, FIT)}\n'
        "# TYPE vllm:num_requests_waiting gauge\n"
        f'vllm:num_requests_waiting{{engine="0",model_name="fake"}} {max(0, state.in_flight - FIT)}\n'
        "# TYPE vllm:num_preemptions counter\n"
        f'vllm:num_preemptions_total{{engine="0",model_name="fake"}} {state.preemptions}\n'
        "# TYPE vllm:generation_tokens counter\n"
        f'vllm:generation_tokens_total{{engine="0",model_name="fake"}} {state.tokens}\n'
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="16",engine="0",num_gpu_blocks="{FIT * 2 + 1}",'
        'kv_cache_max_concurrency="2.5"} 1.0\n')


def _handler(state: _State):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code: int, body: str, ctype: str = "application/json"):
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/v1/models":
                self._send(200, json.dumps({"data": [{"id": "fake", "max_model_len": 256}]}))
            elif self.path == "/metrics":
                with state.lock:
                    self._send(200, _metrics(state), "text/plain")
            else:
                self._send(404, "{}")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.bodies.append(body)
                state.requests += 1
                state.in_flight += 1
                state.peak = max(state.peak, state.in_flight)
                if state.in_flight > FIT:
                    state.preemptions += 1
            time.sleep(LATENCY_S)
            with state.lock:
                state.in_flight -= 1
                state.tokens += body["max_tokens"]
            if state.fail:
                self._send(500, '{"error": "boom"}')
                return
            self._send(200, json.dumps({"usage": {"completion_tokens": body["max_tokens"]}}))

    return Handler


@pytest.fixture
def fake():
    state = _State()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def test_knee_found_and_requests_bounded(fake):
    url, state = fake
    config = StressConfig(url=url, levels=(1, 2, 4), prompt_tokens=40, max_tokens=8,
                          requests_per_level=6, duration_per_level_s=30)
    result = run_stress(config)
    assert [l.requests_sent for l in result.levels] == [6, 6, 6]
    assert state.requests == 18
    assert [l.requests_ok for l in result.levels] == [6, 6, 6]
    assert result.levels[0].preemptions == 0 and result.levels[1].preemptions == 0
    assert result.levels[2].preemptions > 0
    assert result.knee == 2 and result.first_preempting == 4
    assert result.levels[2].kv_usage_peak == 1.0
    assert result.levels[2].output_tokens == 6 * 8
    assert result.workload_fit == (FIT * 2 + 1 - 1) // 3           # 48 tokens = 3 blocks of 16
    assert result.server.kv_cache_max_concurrency == 2.5
    text = render_stress(result)
    assert "knee: concurrency 2 runs without preemption; 4 preempts" in text


def test_prompts_are_exact_unique_and_ignore_eos(fake):
    url, state = fake
    run_stress(StressConfig(url=url, levels=(2,), prompt_tokens=33, max_tokens=5,
                            requests_per_level=4))
    prompts = [tuple(b["prompt"]) for b in state.bodies]
    assert all(len(p) == 33 for p in prompts)
    assert len({p[:2] for p in prompts}) == 4                     # no shared prefix block
    assert all(b["ignore_eos"] and b["max_tokens"] == 5 and b["model"] == "fake"
               for b in state.bodies)


def test_time_bound_stops_a_level(fake):
    url, state = fake
    config = StressConfig(url=url, levels=(1,), prompt_tokens=8, max_tokens=4,
                          requests_per_level=10_000, duration_per_level_s=0.5)
    t0 = time.monotonic()
    result = run_stress(config)
    assert time.monotonic() - t0 < 5
    level = result.levels[0]
    assert level.stopped_by == "time"
    assert 1 <= level.requests_sent <= 0.5 / LATENCY_S + 2


def test_failures_are_counted_and_reported(fake):
    url, state = fake
    state.fail = True
    result = run_stress(StressConfig(url=url, levels=(1, 2), prompt_tokens=8, max_tokens=4,
                                     requests_per_level=2))
    assert len(result.levels) == 1                      # stops: every request failed
    assert result.levels[0].requests_failed == 2
    assert "HTTP 500" in result.levels[0].errors[0]
    assert result.knee is None


def test_cli_json(fake, capsys):
    url, _ = fake
    rc = main(["stress", "--url", url, "--concurrency", "1,4", "--prompt-tokens", "16",
               "--max-tokens", "4", "--requests-per-level", "4", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["knee_concurrency"] == 1
    assert doc["first_preempting_concurrency"] == 4
    assert [l["requests_ok"] for l in doc["levels"]] == [4, 4]


def test_cli_text_prints_each_level_on_stderr_as_it_ends(fake, capsys):
    from vramguard.render.stress_text import HEADER

    url, _ = fake
    rc = main(["stress", "--url", url, "--concurrency", "1,4", "--prompt-tokens", "16",
               "--max-tokens", "4", "--requests-per-level", "4"])
    assert rc == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert lines[0] == HEADER and len(lines) == 3      # the header once, then one per level
    assert lines[1].split()[0] == "1" and lines[2].split()[0] == "4"
    assert "knee: concurrency 1 runs without preemption; 4 preempts" in captured.out


def test_cli_errors(fake, capsys):
    url, _ = fake
    assert main(["stress", "--url", url, "--concurrency", "4,2"]) == 2
    assert main(["stress", "--url", url, "--prompt-tokens", "250", "--max-tokens", "10"]) == 2
    assert "max_model_len" in capsys.readouterr().err
    assert main(["stress", "--url", "http://127.0.0.1:9", "--concurrency", "1"]) == 2


def test_parse_levels_and_url():
    assert parse_levels("1,2,4,8") == (1, 2, 4, 8)
    for bad in ("", "0,1", "2,1", "1,1", "a"):
        with pytest.raises(UsageError):
            parse_levels(bad)
    assert base_url("127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    assert base_url("http://h:1/metrics") == "http://h:1"
    for bad in ("ftp://h/x", "http://[::1", "http://h:99999", "http://h:port", ""):
        with pytest.raises(UsageError):
            base_url(bad)
    with pytest.raises(UsageError, match="empty URL"):
        base_url("  ")


def test_quantile():
    assert _quantile([], 0.5) is None
    assert _quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert _quantile([1.0, 2.0, 3.0, 4.0], 0.95) == 4.0


def test_unreachable_is_a_monitor_error():
    with pytest.raises(MonitorError):
        run_stress(StressConfig(url="http://127.0.0.1:9", levels=(1,)))


def test_cli_with_planner(fake, capsys):
    url, _ = fake
    rc = main(["stress", "--url", url, "--concurrency", "1", "--prompt-tokens", "16",
               "--max-tokens", "4", "--requests-per-level", "2", "--json",
               "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB",
               "--vllm-flags", "--max-model-len 8192", "--offline"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["planned_max_concurrency"] > 1
    assert doc["planned_num_blocks"] > 1000
    # 20 tokens = 2 blocks of 16: (blocks - 1) // 2
    assert doc["planned_workload_fit_concurrency"] == (doc["planned_num_blocks"] - 1) // 2
    assert "H100" in doc["planned_source"]


def test_captured_real_run_is_consistent():
    """tests/data/vllm-0.32-cpu/stress_smallkv.json: a real ramp on 3 KV blocks (knee 1)."""
    from pathlib import Path

    path = Path(__file__).parent / "data" / "vllm-0.32-cpu" / "stress_smallkv.json"
    doc = json.loads(path.read_text())
    assert doc["server"]["num_gpu_blocks"] == 3 and doc["server"]["block_size"] == 128
    assert doc["workload_fit_concurrency"] == 1 == doc["knee_concurrency"]
    assert doc["levels"][0]["preemptions"] == 0
    assert all(l["preemptions"] > 0 for l in doc["levels"][1:])


class _LaggingState(_State):
    """/metrics shows the state of `lag_s` ago (vLLM's API server on busy cores)."""

    def __init__(self, lag_s: float):
        super().__init__()
        self.lag_s = lag_s
        # (t, in_flight, preemptions, generated tokens)
        self.history: list[tuple[float, int, int, int]] = [(0.0, 0, 0, 0)]

    def snapshot(self) -> None:
        self.history.append((time.monotonic(), self.in_flight, self.preemptions, self.tokens))


def test_lagging_metrics_are_waited_for_before_a_level_is_closed():
    state = _LaggingState(lag_s=1.0)
    base = _handler(state)

    class Handler(base):
        def do_GET(self):
            if self.path != "/metrics":
                return super().do_GET()
            with state.lock:
                cutoff = time.monotonic() - state.lag_s
                _, in_flight, preempt, tokens = [h for h in state.history if h[0] <= cutoff][-1]
                shown = _State()
                shown.in_flight, shown.preemptions, shown.tokens = in_flight, preempt, tokens
                self._send(200, _metrics(shown), "text/plain")

        def do_POST(self):
            with state.lock:
                state.snapshot()
            try:
                super().do_POST()
            finally:
                with state.lock:
                    state.snapshot()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        # NOTE: snapshots are taken around each request; the first one (before the request
        # counted itself) shows the previous state, the last one the final state. 16
        # requests keep the 4-client level busy ~0.6 s, so the settle reads (every 0.25 s)
        # see it full through the lag even on a loaded machine (8 flaked once).
        result = run_stress(StressConfig(url=url, levels=(2, 4), prompt_tokens=40, max_tokens=8,
                                         requests_per_level=16, duration_per_level_s=30))
    finally:
        server.shutdown()
        server.server_close()
    # each level's preemptions are counted in that level, though /metrics shows them 1 s late
    assert result.levels[0].preemptions == 0
    assert result.levels[1].preemptions == state.preemptions > 0
    assert result.levels[1].kv_usage_peak == 1.0
    assert result.knee == 2


def _stress_with(handler, **config):
    """`run_stress` against a fake server with this handler class."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        return run_stress(StressConfig(url=url, prompt_tokens=40, max_tokens=8,
                                       duration_per_level_s=30, **config))
    finally:
        server.shutdown()
        server.server_close()


def test_a_level_without_metrics_readings_has_no_peaks():
    """/metrics fails while requests run (a busy API server): the level's peaks are unknown
    (null, and said in the text), not the zeros of the idle server read before and after."""
    state = _State()
    base = _handler(state)

    class Handler(base):
        def do_GET(self):
            if self.path == "/metrics" and state.in_flight:
                return self._send(503, "busy", "text/plain")
            return super().do_GET()

    result = _stress_with(Handler, levels=(4,), requests_per_level=12)
    level = result.levels[0]
    assert level.preemptions == state.preemptions > 0
    assert level.scrapes_failed > 0     # NOTE: readings of the idle server may succeed
    assert "503" in level.scrape_error
    assert level.kv_usage_peak is None and level.running_peak is None
    assert level.to_dict()["scrapes_failed"] == level.scrapes_failed
    assert "conc 4: no /metrics reading saw the requests" in render_stress(result)


def test_gauges_that_never_show_the_requests_give_no_peaks():
    """/metrics answers but its gauges stay idle while requests run (vLLM's API server lagging
    on busy cores): the level's peaks are unknown and the text says why, not 0 %."""
    state = _State()
    base = _handler(state)

    class Handler(base):
        def do_GET(self):
            if self.path == "/metrics":
                with state.lock:
                    shown = _State()
                    shown.preemptions, shown.tokens = state.preemptions, state.tokens
                    return self._send(200, _metrics(shown), "text/plain")
            return super().do_GET()

    result = _stress_with(Handler, levels=(4,), requests_per_level=12)
    level = result.levels[0]
    assert level.scrapes_stale > 0 and level.scrapes_failed == 0
    assert level.kv_usage_peak is None and level.waiting_peak is None
    assert level.preemptions == state.preemptions > 0
    assert "vLLM's gauges lagging" in render_stress(result)
