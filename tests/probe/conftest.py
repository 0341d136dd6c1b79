"""Fixtures for the probe tests: a pure-Python fake of pynvml, and the compiled fake
libnvidia-ml.so.1 with a helper that runs the real `vramguard` CLI against it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from fake_nvml.machine import Machine, build_or_skip  # noqa: E402


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory) -> Path:
    """A directory holding the compiled fake libnvidia-ml.so.1."""
    return build_or_skip(tmp_path_factory.mktemp("fake_nvml"))


@dataclass
class FakeHost:
    """Runs `vramguard` in a subprocess whose libnvidia-ml.so.1 is the fake."""

    lib_dir: Path
    config: Path
    log: Path
    tmp: Path

    def set(self, machine: Machine) -> None:
        machine.write(self.config)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES",)}
        env.update({"LD_LIBRARY_PATH": str(self.lib_dir), "FAKE_NVML_CONFIG": str(self.config),
                    "FAKE_NVML_LOG": str(self.log), "PYTHONPATH": str(ROOT / "src"),
                    "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"})
        env.update(extra)
        return env

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "vramguard", *args]

    def run(self, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(self.cmd(*args), env=self.env(**env), capture_output=True,
                              text=True, timeout=timeout)

    def popen(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.cmd(*args), env=self.env(**env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def calls(self, name: str | None = None) -> list[str]:
        if not self.log.exists():
            return []
        lines = self.log.read_text().split()
        return [x for x in lines if name is None or x == name]


@pytest.fixture
def fake_host(fake_nvml_dir, tmp_path) -> FakeHost:
    return FakeHost(lib_dir=fake_nvml_dir, config=tmp_path / "machine.txt",
                    log=tmp_path / "nvml.log", tmp=tmp_path)
