"""`vramguard run`: exec failures are one-line errors (the probe is replaced by a fake)."""

import errno

import pytest

from vramguard import cli
from vramguard.errors import ProbeError


@pytest.fixture
def no_nvml(monkeypatch):
    """The GPUs cannot be read, so only --force launches."""
    def read_gpus(*_, **__):
        raise ProbeError("no NVIDIA driver found", where="NVML")
    monkeypatch.setattr("vramguard.probe.nvml.read_gpus", read_gpus)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.parametrize("code, text", [(errno.ENOEXEC, "Exec format error"),
                                        (errno.ENAMETOOLONG, "File name too long")])
def test_force_exec_failure_is_exit_2(code, text, no_nvml, monkeypatch, capsys):
    def execvpe(path, argv, env):
        raise OSError(code, text)
    monkeypatch.setattr("os.execvpe", execvpe)
    name = "v" * 5000
    assert cli.main(["run", "--force", "--offline", "--", name, "serve", "M"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "cannot execute 'vvv" in last and text in last
    assert len(last) < 500                        # the name is shortened
