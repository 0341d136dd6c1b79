"""`vramguard watch` on the real NVML path (pynvml + probe/nvml.py) over tests/fake_nvml.

A foreign process appears on the GPU mid-watch: the foreign_process alert names it with its PID.
Integration: needs gcc to build the fake libnvidia-ml.so.1 (FAILS under CI when missing).
"""

import json
import os
import subprocess
import sys
import time

import pytest

from monitor_helpers import ROOT, StubMetricsServer, fixture_text

pytestmark = pytest.mark.integration
GIB = 1 << 30
TOTAL = 85_520_809_984


def _config(free: int, procs) -> str:
    lines = ["driver version=550.54.15",
             f'gpu uuid=GPU-1 name="NVIDIA H100 80GB HBM3" total={TOTAL} free={free} '
             f"used={TOTAL - free} util=37"]
    lines += [f"proc gpu=0 pid={pid} used={used}" for pid, used in procs]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def fake_nvml_dir(tmp_path_factory):
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    from fake_nvml.machine import build_or_skip
    return build_or_skip(tmp_path_factory.mktemp("fake_nvml"))


def test_foreign_process_alert_names_the_pid(fake_nvml_dir, tmp_path):
    cfg = tmp_path / "nvml.txt"
    vllm_pid, intruder = os.getpid(), os.getppid()
    cfg.write_text(_config(8 * GIB, [(vllm_pid, 70 * GIB)]))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LD_LIBRARY_PATH=str(fake_nvml_dir),
               FAKE_NVML_CONFIG=str(cfg))
    steps = [("text", fixture_text("vllm-0.32-cpu/metrics_during_load.txt"))]
    with StubMetricsServer(steps) as stub:
        proc = subprocess.Popen([sys.executable, "-m", "vramguard", "watch", "--url", stub.url,
                                 "--interval", "0.2", "--json", "--no-record"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = json.loads(proc.stdout.readline())
            assert first["gpu_error"] is None and first["gpus"][0]["free_bytes"] == 8 * GIB
            assert first["alerts"] == []
            cfg.write_text(_config(2 * GIB, [(vllm_pid, 70 * GIB), (intruder, 6 * GIB)]))
            deadline = time.monotonic() + 20
            alert = None
            while alert is None and time.monotonic() < deadline:
                doc = json.loads(proc.stdout.readline())
                alert = next((a for a in doc["alerts"] if a["rule"] == "foreign_process"), None)
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
    assert alert is not None, "no foreign_process alert"
    assert f"PID {intruder}" in alert["message"] and "6.0 GiB" in alert["message"]
    assert alert["subject"] == "GPU 0"


def test_nvml_driver_failure_degrades_with_a_note(fake_nvml_dir, tmp_path):
    cfg = tmp_path / "nvml.txt"
    cfg.write_text("init rc=9\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LD_LIBRARY_PATH=str(fake_nvml_dir),
               FAKE_NVML_CONFIG=str(cfg))
    with StubMetricsServer([("text", fixture_text("vllm-0.32-cpu/metrics.txt"))]) as stub:
        out = subprocess.run([sys.executable, "-m", "vramguard", "watch", "--url", stub.url,
                              "--once", "--json"], env=env, capture_output=True, text=True,
                             timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["gpus"] == [] and "watching endpoints only" in doc["gpu_error"]
    assert "driver is not loaded" in doc["gpu_error"]
    assert doc["endpoints"][0]["ok"]
