"""Fixtures for the sources tests: corpus configs copied into tests/data/configs."""
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)                 # for `import src_helpers`

from src_helpers import load_config  # noqa: E402


@pytest.fixture
def config():
    return load_config


@pytest.fixture
def no_hf_cache(tmp_path, monkeypatch):
    """Point every HF cache variable at an empty folder and forbid the network."""
    empty = tmp_path / "empty-hf"
    empty.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(empty))
    monkeypatch.setenv("HF_HOME", str(empty))
    monkeypatch.setenv("XDG_CACHE_HOME", str(empty))
    monkeypatch.setenv("HOME", str(empty))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    return empty
