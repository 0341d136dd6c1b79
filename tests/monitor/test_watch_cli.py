"""`vramguard watch` end to end against the stub server, and the text frame."""

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from monitor_helpers import (ROOT, StubMetricsServer, engine, fixture_text, free_port, gpu,
                             sample, timeline_ticks)
from vramguard.cli import main
from vramguard.monitor.rules import Alert
from vramguard.render.watch_text import bar, redraw, render_frame


def test_once_json_snapshot(capsys):
    steps = [("text", fixture_text("vllm-0.32-cpu/metrics_smallkv.txt"))]
    with StubMetricsServer(steps) as stub:
        down = f"http://127.0.0.1:{free_port()}"
        rc = main(["watch", "--url", stub.url, "--url", down, "--once", "--json", "--no-gpu",
                   "--planned-kv-tokens", "512"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpus"] == [] and "--no-gpu" in doc["gpu_error"]
    ep, bad = doc["endpoints"]
    assert ep["url"] == stub.url and ep["ok"]
    assert ep["kv_cache_usage"] == 0.0 and ep["num_preemptions_total"] == 7
    assert ep["num_requests_running"] == 0 and ep["num_requests_waiting"] == 0
    assert ep["kv_pool_tokens"] == 384 and ep["planned_kv_pool_tokens"] == 512
    assert ep["engines"][0]["block_size"] == 128
    assert not bad["ok"] and "cannot connect" in bad["error"]
    rules = {a["rule"] for a in doc["alerts"]}
    assert rules == {"kv_pool_mismatch", "endpoint_down"}
    assert all(set(a) >= {"rule", "severity", "message"} for a in doc["alerts"])


def test_once_text_and_record(tmp_path, capsys):
    steps = [("text", timeline_ticks()[0])]
    db = tmp_path / "h.sqlite3"
    with StubMetricsServer(steps) as stub:
        assert main(["watch", "--url", stub.url, "--once", "--no-gpu", "--record", str(db)]) == 0
    out = capsys.readouterr().out
    assert stub.url in out and "100.0%" in out and "running 2" in out and "capacity 4" in out
    assert "kv_usage_high" in out                      # --once: no sustain needed
    assert sqlite3.connect(db).execute("SELECT count(*) FROM ticks").fetchone()[0] == 1


def test_nothing_to_watch_is_a_usage_error(capsys):
    assert main(["watch", "--no-gpu", "--once"]) == 2
    assert "nothing to watch" in capsys.readouterr().err
    assert main(["watch", "--url", "x", "--interval", "soon", "--once"]) == 2


@pytest.mark.parametrize("flags,where", [(["--planned-kv-tokens", "-5"], "--planned-kv-tokens"),
                                         (["--planned-kv-tokens", "0"], "--planned-kv-tokens"),
                                         (["--sustain", "abc"], "--sustain")])
def test_bad_values_are_errors_with_once_too(capsys, flags, where):
    url = "http://127.0.0.1:9"
    assert main(["watch", "--url", url, "--no-gpu", "--once", *flags]) == 2
    assert f"vramguard watch: error: {where}:" in capsys.readouterr().err


def test_ctrl_c_ends_cleanly_and_history_is_kept(tmp_path):
    steps = [("text", fixture_text("vllm-0.32-cpu/metrics_during_load.txt"))]
    db = tmp_path / "h.sqlite3"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with StubMetricsServer(steps) as stub:
        # NOTE: Ctrl-C as a terminal delivers it: a test run started in the background (`&`
        # without job control) ignores SIGINT, and the child would inherit that
        proc = subprocess.Popen([sys.executable, "-m", "vramguard", "watch", "--url", stub.url,
                                 "--no-gpu", "--interval", "0.2", "--json", "--record", str(db)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        lines = [proc.stdout.readline() for _ in range(3)]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    docs = [json.loads(x) for x in lines]
    assert docs[0]["endpoints"][0]["num_requests_running"] == 4
    assert docs[2]["tick"] == 2
    ticks = sqlite3.connect(db).execute("SELECT count(*) FROM ticks").fetchone()[0]
    assert ticks >= 3


def test_render_frame():
    s = sample(0, [engine(kv=0.95, running=2, waiting=4, preempt=7, blocks=3, block_size=128)],
               gpus=[gpu(0, free_gib=20.0, processes=[(11, "vllm", 58.0)])])
    alert = Alert("kv_usage_high", "warning", "KV cache 95% full for 60 s. " * 5,
                  "http://vllm:8000 engine 0")
    frame = render_frame(s, [alert], rates={"http://vllm:8000": 3.5}, interval_s=1.0,
                         width=80, ascii_only=True)
    assert "GPU 0 H100-80GB" in frame and "60.0/80.0 GiB used, 20.0 GiB free" in frame
    assert "vllm (PID 11, 58.0 GiB)" in frame
    assert " 95.0%" in frame and "running 2" in frame and "(3.5/min)" in frame
    assert "pool 384 tok" in frame and "WARNING  kv_usage_high" in frame
    assert max(len(line) for line in frame.splitlines()) <= 100
    assert "\x1b" not in frame                              # no colour unless asked
    full = sample(0, [engine(kv=1.0)])
    assert "\x1b[1;31m" in render_frame(full, [], color=True)


def test_bar_and_redraw():
    assert bar(0.5, 10, ascii_only=True) == "[#####.....]"
    assert bar(None, 4, ascii_only=True) == "[ ?  ]"
    assert bar(1.7, 4, ascii_only=True) == "[####]"
    out = redraw("a\nb", first=True)
    assert out.startswith("\x1b[2J\x1b[H") and out.endswith("\x1b[J") and "a\x1b[K\nb" in out


def test_no_url_and_no_nvml_is_a_usage_error(capsys, monkeypatch):
    from vramguard.errors import ProbeError
    from vramguard.monitor import sampler as sampler_mod

    def reader():
        raise ProbeError("no NVIDIA driver found")
    monkeypatch.setattr(sampler_mod, "default_gpu_reader", lambda: reader)
    assert main(["watch", "--once"]) == 2
    assert "nothing to watch" in capsys.readouterr().err


def test_sigterm_ends_watch_cleanly(tmp_path):
    steps = [("text", fixture_text("vllm-0.32-cpu/metrics.txt"))]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    with StubMetricsServer(steps) as stub:
        proc = subprocess.Popen([sys.executable, "-m", "vramguard", "watch", "--url", stub.url,
                                 "--no-gpu", "--interval", "0.2", "--json", "--no-record"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.stdout.readline()
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "Traceback" not in err


def test_record_path_that_cannot_be_made_is_exit_2(tmp_path, capsys, monkeypatch):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    down = f"http://127.0.0.1:{free_port()}"
    assert main(["watch", "--once", "--no-gpu", "--url", down,
                 "--record", str(plain / "h.sqlite3")]) == 2
    assert "cannot open the history file" in capsys.readouterr().err
    monkeypatch.setenv("VRAMGUARD_DATA_DIR", str(plain))
    assert main(["watch", "--no-gpu", "--url", down]) == 2       # fails before the first tick
    assert "cannot open the history file" in capsys.readouterr().err


BAD_URLS = ["ftp://127.0.0.1:9", "http://[::1", "http://127.0.0.1:99999", "", "http://h:abc"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_watch_refuses_a_url_stress_refuses(url, capsys):
    assert main(["watch", "--once", "--no-gpu", "--url", url]) == 2
    err = capsys.readouterr().err
    assert ("--url: empty URL" if not url else "--url: not a") in err


@pytest.mark.parametrize("url", BAD_URLS)
def test_exporter_refuses_a_url_before_serving(url, capsys, monkeypatch):
    def serve(*_):
        raise AssertionError("served with a bad --url")
    monkeypatch.setattr("vramguard.monitor.exporter.serve", serve)
    assert main(["exporter", "--no-gpu", "--listen", "127.0.0.1:0", "--url", url]) == 2
    err = capsys.readouterr().err
    assert ("--url: empty URL" if not url else "--url: not a") in err
