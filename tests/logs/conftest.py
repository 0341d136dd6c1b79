"""Shared paths for the log tests (all data lives under tests/data/logs)."""
import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "logs"
CPU = DATA / "vllm-0.32-cpu"


def load_cases() -> list[dict]:
    with open(DATA / "cases.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def cases() -> list[dict]:
    return load_cases()


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty VRAMGUARD_DATA_DIR for store tests."""
    monkeypatch.setenv("VRAMGUARD_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"
