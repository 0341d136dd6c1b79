"""sources/hub.py with a fake huggingface_hub module (no network)."""
import json
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramguard.errors import SourceError
from vramguard.sources import hub
from vramguard.sources.resolve import load_model_spec

from src_helpers import TINY_LLAMA


@pytest.fixture(autouse=True)
def hub_reachable(monkeypatch):
    """The fake hub module stands in for the network: skip the TCP reachability probe."""
    monkeypatch.setattr(hub, "_reachable", lambda timeout_s: True)


def test_unreachable_hub_fails_fast_with_a_clear_line(monkeypatch):
    monkeypatch.setattr(hub, "_reachable", lambda timeout_s: False)
    monkeypatch.setitem(sys.modules, "huggingface_hub", types.ModuleType("huggingface_hub"))
    with pytest.raises(SourceError, match="unreachable"):
        hub.fetch_model("org/model")


def fake_hf(tmp_path: Path, *, error: Exception | None = None, tensors=None):
    mod = types.ModuleType("huggingface_hub")
    snap = tmp_path / "snap"
    snap.mkdir(exist_ok=True)

    def hf_hub_download(repo_id, filename, **kw):
        if error is not None:
            raise error
        if filename != "config.json":
            raise FileNotFoundError(filename)
        (snap / "config.json").write_text(json.dumps(TINY_LLAMA))
        return str(snap / "config.json")

    def get_safetensors_metadata(repo_id, **kw):
        if tensors is None:
            raise RuntimeError("no safetensors")
        info = types.SimpleNamespace
        files = {"model.safetensors": info(tensors={
            name: info(dtype=dt, shape=shape, data_offsets=off) for name, (dt, shape, off) in tensors.items()})}
        return info(files_metadata=files)

    mod.hf_hub_download = hf_hub_download
    mod.get_safetensors_metadata = get_safetensors_metadata
    return mod


def test_fetch_model_downloads_config_and_reads_remote_headers(tmp_path, monkeypatch):
    tensors = {"a": ("BF16", [4, 4], [0, 32]), "b": ("F8_E4M3", [8], [32, 40])}
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hf(tmp_path, tensors=tensors))
    folder, ck = hub.fetch_model("org/tiny")
    assert (folder / "config.json").is_file()
    assert ck.total_bytes == 40 and ck.num_params == 24 and ck.bytes_by_dtype == {"BF16": 32, "F8_E4M3": 8}


@pytest.mark.parametrize("name,match", [("GatedRepoError", "gated"),
                                        ("RepositoryNotFoundError", "no such model"),
                                        ("EntryNotFoundError", "no config.json"),
                                        ("HFValidationError", "not a valid"),
                                        ("ConnectError", "unreachable")])
def test_hub_errors_translate(tmp_path, monkeypatch, name, match):
    err = type(name, (Exception,), {})("boom")
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hf(tmp_path, error=err))
    with pytest.raises(SourceError, match=match):
        hub.fetch_model("org/tiny")


def test_resolve_uses_remote_checkpoint_when_no_local_files(tmp_path, monkeypatch, no_hf_cache):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    tensors = {"a": ("BF16", [4, 4], [0, 32])}
    monkeypatch.setitem(sys.modules, "huggingface_hub", fake_hf(tmp_path, tensors=tensors))
    spec = load_model_spec("someone/not-in-catalog")
    assert spec.source_ref == "hub:someone/not-in-catalog"
    assert spec.checkpoint.path == "hub:someone/not-in-catalog" and spec.checkpoint.total_bytes == 32


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)),
       name=st.sampled_from(["config.json", "model.safetensors", "model.safetensors.index.json",
                             "pytorch_model.bin", "tokenizer_config.json"]))
def test_random_files_in_a_model_folder(tmp_path_factory, content, name):
    folder = tmp_path_factory.mktemp("m")
    if name != "config.json":
        (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    (folder / name).write_bytes(content)
    try:
        load_model_spec(str(folder))
    except SourceError as exc:
        assert exc.line()
