"""load_model_spec: local folder > config.json > .gguf > HF cache > catalog > hub."""
import json
import os

import pytest

from vramguard.core.provenance import Source
from vramguard.errors import SourceError
from vramguard.sources import catalog, hfcache
from vramguard.sources.resolve import load_model_spec

from src_helpers import TINY_LLAMA, write_model_folder


def fake_cache(root, model_id, rev="abc123", config=None, main=True):
    repo = root / ("models--" + model_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config or TINY_LLAMA))
    if main:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(rev)
    return snap


def test_hf_cache_hit_beats_catalog(no_hf_cache):
    cfg = dict(TINY_LLAMA, num_hidden_layers=3)
    snap = fake_cache(no_hf_cache, "Qwen/Qwen2.5-7B-Instruct", config=cfg)
    spec = load_model_spec("Qwen/Qwen2.5-7B-Instruct")
    assert spec.num_layers == 3 and spec.source_ref == f"hf-cache:{snap}"
    assert spec.name == "Qwen/Qwen2.5-7B-Instruct"
    assert spec.provenance["num_layers"] == Source.CONFIG


def test_hf_cache_cases_and_envs(tmp_path, no_hf_cache, monkeypatch):
    home = tmp_path / "hfhome"
    fake_cache(home / "hub", "Org/Model", main=False)
    monkeypatch.setenv("HF_HOME", str(home))
    assert hfcache.find_snapshot("org/model") is not None       # case-insensitive, no refs/main
    assert str(home / "hub") in [str(p) for p in hfcache.cache_dirs()]
    spec = load_model_spec("org/model")
    assert spec.hidden_size == 64


def test_hf_cache_snapshot_with_safetensors(no_hf_cache):
    snap = fake_cache(no_hf_cache, "me/tiny")
    tensors = write_model_folder(snap)
    spec = load_model_spec("me/tiny")
    assert spec.checkpoint.total_bytes == sum(t.nbytes for t in tensors.values())


def test_catalog_offline_qwen(no_hf_cache):
    spec = load_model_spec("Qwen/Qwen2.5-7B-Instruct", offline=True)
    assert abs(spec.num_params() - 7.62e9) / 7.62e9 < 0.005
    assert spec.source_ref == "catalog:Qwen/Qwen2.5-7B-Instruct"
    assert spec.provenance["hidden_size"] == Source.CATALOG
    assert load_model_spec("qwen/QWEN2.5-7b-instruct", offline=True).name == spec.name


def test_unknown_id_offline_names_cache_folders(no_hf_cache):
    with pytest.raises(SourceError) as info:
        load_model_spec("nobody/nothing-here", offline=True)
    assert str(no_hf_cache) in info.value.what and info.value.fix


def test_hf_hub_offline_env(no_hf_cache):
    with pytest.raises(SourceError, match="offline"):
        load_model_spec("nobody/nothing-here")                   # HF_HUB_OFFLINE=1 by fixture


def test_hub_unreachable_is_source_error(no_hf_cache, monkeypatch):
    from vramguard.sources import hub
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def boom(model_id, **kw):
        raise hub.not_found(model_id, "the hub is unreachable (ConnectError)")
    monkeypatch.setattr(hub, "fetch_model", boom)
    with pytest.raises(SourceError, match="unreachable"):
        load_model_spec("nobody/nothing-here")


def test_hub_fetch_uses_downloaded_folder(no_hf_cache, monkeypatch, tmp_path):
    from vramguard.sources import hub
    monkeypatch.delenv("HF_HUB_OFFLINE")
    folder = tmp_path / "dl"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    monkeypatch.setattr(hub, "fetch_model", lambda model_id, **kw: (folder, None))
    spec = load_model_spec("someone/tiny")
    assert spec.source_ref == "hub:someone/tiny" and spec.name == "someone/tiny"


def test_config_json_path_and_errors(tmp_path):
    good = tmp_path / "config.json"
    good.write_text(json.dumps(TINY_LLAMA))
    assert load_model_spec(str(good)).num_layers == 2
    bad = tmp_path / "bad" / "config.json"
    bad.parent.mkdir()
    bad.write_text('{"hidden_size": 64,')
    with pytest.raises(SourceError, match="not valid JSON"):
        load_model_spec(str(bad))
    with pytest.raises(SourceError, match="not valid JSON"):
        load_model_spec(str(bad.parent))
    with pytest.raises(SourceError, match="no such file"):
        load_model_spec(str(tmp_path / "missing" / "config.json"))
    with pytest.raises(SourceError, match="not a regular file or folder"):
        load_model_spec("/dev/null")
    null = tmp_path / "null" / "config.json"
    null.parent.mkdir()
    null.write_text("null")
    with pytest.raises(SourceError, match="is a JSON null, not an object"):
        load_model_spec(str(null))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="no config.json"):
        load_model_spec(str(empty))
    with pytest.raises(SourceError):
        load_model_spec("  ")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_unreadable_folder(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0)
    try:
        with pytest.raises(SourceError, match="cannot read"):
            load_model_spec(str(folder))
    finally:
        folder.chmod(0o755)


def test_unreadable_config_file(tmp_path, monkeypatch):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").mkdir()                # a folder where the file should be
    with pytest.raises(SourceError):
        load_model_spec(str(folder))


def test_tokenizer_max_length_and_hf_quant_config(tmp_path):
    write_model_folder(tmp_path / "m")
    (tmp_path / "m" / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8192}))
    (tmp_path / "m" / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8",
                                                            "kv_cache_quant_algo": "FP8"}}))
    spec = load_model_spec(str(tmp_path / "m"))
    assert spec.tokenizer_max_length == 8192
    assert spec.quant.kv_cache_scheme == "fp8"


# ---- catalog ----------------------------------------------------------------------------------
def test_catalog_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMGUARD_CATALOG_DIR", str(tmp_path))
    entry = {"model_id": "Org/Tiny-1B", "aliases": ["org/tiny-alias"], "source": "test",
             "published_params": "1B", "config": TINY_LLAMA}
    (tmp_path / "Org__Tiny-1B.json").write_text(json.dumps(entry))
    (tmp_path / "Other__Model.json").write_text(json.dumps(dict(entry, model_id="Other/Model",
                                                                 aliases=[])))
    assert catalog.get("Org/Tiny-1B").config == TINY_LLAMA
    assert catalog.get("org/tiny-1b").model_id == "Org/Tiny-1B"
    assert catalog.get("ORG/TINY-ALIAS").model_id == "Org/Tiny-1B"
    assert catalog.get("org/none") is None
    assert [e.model_id for e in catalog.list_models()] == ["Org/Tiny-1B", "Other/Model"]
    assert [e.model_id for e in catalog.search("tiny")] == ["Org/Tiny-1B"]
    assert [e.model_id for e in catalog.search("other model")] == ["Other/Model"]


def test_catalog_bad_file(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMGUARD_CATALOG_DIR", str(tmp_path))
    (tmp_path / "Bad__File.json").write_text("{oops")
    with pytest.raises(SourceError, match="not valid JSON"):
        catalog.get("Bad/File")
    (tmp_path / "Bad__File.json").write_text(json.dumps({"model_id": "Bad/File"}))
    with pytest.raises(SourceError, match="lacks"):
        catalog.get("Bad/File")


def test_every_shipped_catalog_entry_parses():
    from vramguard.sources.config import spec_from_config
    entries = catalog.list_models()
    assert len(entries) >= 40
    for entry in entries:
        spec = spec_from_config(entry.config, name=entry.model_id, origin=Source.CATALOG)
        assert spec.num_params() > 0, entry.model_id
        assert len(spec.layers) == spec.num_layers, entry.model_id
        assert spec.kv_bytes_per_token() > 0 or spec.is_encoder_only or not any(
            l.attention.kind in ("full", "sliding", "chunked", "mla") for l in spec.layers)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ref=st.one_of(st.text(max_size=40), st.text(min_size=250, max_size=6000),
                     st.text(alphabet="~./\\:aZ09-_ \udcff\ud800\U00010000", max_size=60),
                     st.builds(lambda a, b: f"{a}/{b}", st.text(max_size=300), st.text(max_size=300))))
def test_random_references_only_source_errors(ref, no_hf_cache):
    try:
        load_model_spec(ref, offline=True)
    except SourceError as exc:
        assert exc.line()


def test_config_overrides_apply_before_reading(no_hf_cache, tmp_path):
    """vLLM's --hf-overrides: keys set, nested model configs updated key by key, plain dict
    attributes (rope_scaling) replaced; catalog, folders and config.json alike; noted."""
    from vramguard.sources.resolve import apply_overrides
    cfg = {"a": 1, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
           "text_config": {"hidden_size": 8, "num_hidden_layers": 2}}
    out = apply_overrides(cfg, {"a": 2, "rope_scaling": {"rope_type": "yarn"},
                                "text_config": {"num_hidden_layers": 4}})
    assert out == {"a": 2, "rope_scaling": {"rope_type": "yarn"},
                   "text_config": {"hidden_size": 8, "num_hidden_layers": 4}}
    assert cfg["text_config"]["num_hidden_layers"] == 2            # not mutated
    base = load_model_spec("Qwen/Qwen3-30B-A3B", offline=True)
    spec = load_model_spec("Qwen/Qwen3-30B-A3B", offline=True,
                           config_overrides={"max_position_embeddings": 131072})
    assert base.max_len_keys["max_position_embeddings"] == 40960
    assert spec.max_len_keys["max_position_embeddings"] == 131072
    assert any("overridden" in n and "max_position_embeddings" in n for n in spec.notes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    assert load_model_spec(str(path), config_overrides={"num_hidden_layers": 5}).num_layers == 5
    folder = tmp_path / "m"
    write_model_folder(folder)
    assert load_model_spec(str(folder), config_overrides={"num_hidden_layers": 1}).num_layers == 1


@pytest.mark.parametrize("name", ["model.safetensors", "pytorch_model.bin"])
def test_checkpoint_file_without_config_is_not_read_as_a_neighbouring_gguf(tmp_path, name):
    from src_helpers import write_gguf
    write_gguf(tmp_path / "unrelated-Q4.gguf")
    (tmp_path / name).write_bytes(b"\0" * 16)
    with pytest.raises(SourceError) as e:
        load_model_spec(str(tmp_path / name))
    assert e.value.where == str(tmp_path / name)
    assert e.value.what == "its folder has no config.json"
    write_model_folder(tmp_path / "m", shards=1)                 # with config.json: as the folder
    shard = tmp_path / "m" / "model-00001-of-00001.safetensors"
    assert load_model_spec(str(shard)).checkpoint is not None


def test_invalid_config_overrides_are_blamed_on_the_flags(no_hf_cache, tmp_path):
    with pytest.raises(SourceError) as e:
        load_model_spec("Qwen/Qwen3-8B", offline=True, config_overrides={"num_attention_heads": 0})
    assert "after the command-line config overrides: num_attention_heads" in e.value.what
    assert "--hf-overrides" in e.value.fix and "config.json" not in e.value.fix
    bad = tmp_path / "config.json"                   # a bad file is still the file's fault
    bad.write_text(json.dumps(dict(TINY_LLAMA, num_hidden_layers=0)))
    with pytest.raises(SourceError) as e:
        load_model_spec(str(bad), config_overrides={"rope_theta": 5.0})
    assert "overrides" not in e.value.what and "config.json" in e.value.fix


def test_sentence_transformers_max_seq_length_and_longrope_original(tmp_path):
    write_model_folder(tmp_path / "m")
    (tmp_path / "m" / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": 8192, "do_lower_case": False}))
    spec = load_model_spec(str(tmp_path / "m"))
    assert spec.encoder_max_seq_length == 8192
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    cfg["original_max_position_embeddings"] = 4096
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    assert load_model_spec(str(tmp_path / "m")).max_len_keys[
        "original_max_position_embeddings"] == 4096
