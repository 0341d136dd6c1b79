"""Debian's Prometheus and promtool against vramguard's exporter and deploy/prometheus files.

Integration: real binaries. Missing binaries skip locally and FAIL under CI (`CI` set).
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from monitor_helpers import ROOT, StubMetricsServer, fixture_text, free_port, require_binary

pytestmark = pytest.mark.integration
DEPLOY = ROOT / "deploy" / "prometheus"


def _run(args, cwd=DEPLOY):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_test_rules():
    promtool = require_binary("promtool")
    result = _run([promtool, "test", "rules", "alerts_test.yml"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_rules_and_config():
    promtool = require_binary("promtool")
    rules = _run([promtool, "check", "rules", "alerts.yml"])
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = _run([promtool, "check", "config", "prometheus.yml"])
    assert config.returncode == 0, config.stdout + config.stderr


def _get_json(url: str, timeout=5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def _wait(predicate, timeout_s: float, what: str, procs=()):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{what}: a process exited early (rc={p.returncode})")
        try:
            last = predicate()
            if last:
                return last
        except OSError as exc:
            last = exc
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what} (last: {last})")


def test_prometheus_scrapes_the_exporter(tmp_path):
    prometheus = require_binary("prometheus")
    exporter_port, prom_port = free_port(), free_port()
    shutil.copy(DEPLOY / "alerts.yml", tmp_path / "alerts.yml")
    (tmp_path / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [alerts.yml]
scrape_configs:
  - job_name: vramguard
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
""")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    procs = []
    with StubMetricsServer([("text", fixture_text("vllm-0.32-cpu/metrics_smallkv.txt"))]) as stub:
        try:
            exporter = subprocess.Popen(
                [sys.executable, "-m", "vramguard", "exporter", "--url", stub.url, "--no-gpu",
                 "--listen", f"127.0.0.1:{exporter_port}", "--planned-kv-tokens", "512"],
                env=env, stdout=subprocess.DEVNULL, stderr=open(tmp_path / "exporter.log", "w"))
            procs.append(exporter)
            prom = subprocess.Popen(
                [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                cwd=tmp_path, stdout=subprocess.DEVNULL,
                stderr=open(tmp_path / "prometheus.log", "w"))
            procs.append(prom)
            api = f"http://127.0.0.1:{prom_port}/api/v1"

            def query(expr):
                q = urllib.parse.urlencode({"query": expr})
                return _get_json(f"{api}/query?{q}")["data"]["result"]

            result = _wait(lambda: query("vramguard_kv_pool_live_tokens"), 90,
                           "the vramguard series in Prometheus", procs)
            assert result[0]["metric"]["url"] == stub.url
            assert result[0]["metric"]["job"] == "vramguard"
            assert float(result[0]["value"][1]) == 384.0
            planned = query("vramguard_kv_pool_planned_tokens")
            assert float(planned[0]["value"][1]) == 512.0
            # the rule file loaded and the pool-below-plan alert fires on the live series
            firing = _wait(lambda: [a for a in _get_json(f"{api}/alerts")["data"]["alerts"]
                                    if a["labels"]["alertname"] == "VramguardKvPoolBelowPlan"],
                           30, "VramguardKvPoolBelowPlan", procs)
            assert firing[0]["labels"]["url"] == stub.url
        finally:
            for p in reversed(procs):
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
