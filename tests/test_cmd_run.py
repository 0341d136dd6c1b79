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


def test_a_pasted_snippet_runs_its_first_launch_with_its_exports(no_nvml, monkeypatch, capsys):
    seen = {}

    def execvpe(path, argv, env):
        seen.update(path=path, argv=argv, env=env)
        raise OSError(errno.ENOENT, "No such file or directory")
    monkeypatch.setattr("os.execvpe", execvpe)
    snippet = ("# two nodes\nexport VLLM_LOGGING_LEVEL=DEBUG\n"
               "vllm serve M --port 8000 &\nvllm serve M --headless\n")
    assert cli.main(["run", "--force", "--offline", "--", snippet]) == 2
    err = capsys.readouterr().err
    assert "note: the pasted snippet has 2 vLLM launch commands; the first is read" in err
    assert seen["argv"][:4] == ["vllm", "serve", "M", "--port"]
    assert seen["env"]["VLLM_LOGGING_LEVEL"] == "DEBUG"
