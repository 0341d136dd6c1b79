"""`vramguard model` end to end through the CLI entry point (no network)."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "sources"))

from vramguard.cli import main  # noqa: E402
from vramguard.commands.model import SCHEMA, build_report, weight_bytes  # noqa: E402

from src_helpers import TINY_LLAMA, write_gguf, write_model_folder  # noqa: E402


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    empty = tmp_path / "hf-empty"
    empty.mkdir()
    for var in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.setenv(var, str(empty))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def run_json(capsys, *argv):
    assert main(["model", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_qwen_offline_json(capsys):
    r = run_json(capsys, "Qwen/Qwen2.5-7B-Instruct", "--offline")
    assert r["schema"] == SCHEMA and r["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert abs(r["params"]["total"] - 7.62e9) / 7.62e9 < 0.005
    assert r["kv_cache"]["bytes_per_token"] == {"auto": 57344, "bfloat16": 57344, "fp8": 28672}
    assert r["max_model_len"]["derived"] == 32768
    assert r["weights"]["bf16_bytes"] == 2 * r["params"]["total"]
    assert r["provenance"]["hidden_size"] == "catalog" and r["provenance"]["head_dim"] == "derived"
    assert set(r) >= {"spec", "params", "weights", "kv_cache", "max_model_len", "provenance", "notes"}


def test_llama_max_len_not_scaled_by_llama3_rope(capsys):
    r = run_json(capsys, "meta-llama/Llama-3.1-8B-Instruct")
    assert r["max_model_len"]["derived"] == 131072


def test_local_sharded_folder_shows_both_counts(tmp_path, capsys):
    tensors = write_model_folder(tmp_path / "tiny", shards=3)
    r = run_json(capsys, str(tmp_path / "tiny"))
    ck = r["weights"]["checkpoint"]
    assert ck["total_bytes"] == sum(t.nbytes for t in tensors.values())
    assert ck["format"] == "safetensors" and ck["num_tensors"] == len(tensors)
    assert r["params"]["checkpoint"] == r["params"]["total"]
    assert r["params"]["checkpoint_minus_config"] == 0
    assert r["weights"]["checkpoint_minus_declared_bytes"] == 0
    assert main(["model", str(tmp_path / "tiny")]) == 0
    text = capsys.readouterr().out
    assert "checkpoint files" in text and "[checkpoint]" in text


def test_text_report_of_a_checkpoint_with_no_parameters(tmp_path, capsys):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    header = b"{}"
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    assert main(["model", str(folder)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "checkpoint tensors" in ln)
    assert " 0  [checkpoint]" in line and "holds no parameters" in line


def test_gguf_file(tmp_path, capsys):
    path = tmp_path / "tiny.gguf"
    write_gguf(path)
    r = run_json(capsys, str(path))
    assert r["weights"]["checkpoint"]["format"] == "gguf"
    assert r["weights"]["declared_method"] == "gguf"


def test_text_report(capsys):
    assert main(["model", "openai/gpt-oss-120b"]) == 0
    out = capsys.readouterr().out
    for needle in ("sliding x18", "full x18", "mxfp4", "bytes/token fp8", "max model length",
                   "[catalog]"):
        assert needle in out, needle


def test_list_and_search(capsys):
    rows = run_json(capsys, "list")
    assert len(rows) >= 40 and {"model_id", "aliases", "published_params", "source"} <= set(rows[0])
    assert main(["model", "list", "--search", "gpt-oss"]) == 0
    out = capsys.readouterr().out
    assert "openai/gpt-oss-120b" in out and "Qwen/" not in out
    assert main(["model", "list", "--search", "no-such-model-anywhere"]) == 0
    assert "no catalog model" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["nobody/nothing"], ["/no/such/path"], ["./missing.gguf"]])
def test_errors_are_one_line_exit_2(argv, capsys):
    assert main(["model", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramguard model: error:")
    assert "Traceback" not in captured.err


def test_bad_config_exit_2(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY_LLAMA, num_hidden_layers=0)))
    assert main(["model", str(tmp_path)]) == 2
    assert "num_hidden_layers" in capsys.readouterr().err


def test_not_gguf_exit_2(tmp_path, capsys):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"nope" * 10)
    assert main(["model", str(bad)]) == 2
    assert "not a GGUF" in capsys.readouterr().err


def test_weight_bytes_by_hand():
    from vramguard.sources.config import spec_from_config
    spec = spec_from_config(TINY_LLAMA, name="t")
    linear = sum(l.params.total() - l.params.norms for l in spec.layers)
    rest = spec.num_params() - linear
    assert weight_bytes(spec, 1.0) == linear + 2 * rest
    r = build_report(spec)
    assert r["weights"]["fp8_bytes"] == linear + 2 * rest
    assert r["weights"]["declared_bytes"] == 2 * spec.num_params()


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from vramguard.errors import SourceError  # noqa: E402

_values = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 40, 2 ** 40), st.floats(),
                    st.text(max_size=5), st.lists(st.integers(0, 3), max_size=3),
                    st.dictionaries(st.sampled_from(["factor", "rope_type", "type",
                                                     "original_max_position_embeddings"]),
                                    st.one_of(st.floats(), st.text(max_size=4), st.integers()),
                                    max_size=3))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["rope_scaling", "max_position_embeddings", "seq_length",
                            "torch_dtype", "num_key_value_heads", "quantization_config",
                            "tie_word_embeddings", "sliding_window", "model_type"]),
       value=_values)
def test_report_of_mutated_config_only_source_errors(key, value):
    from vramguard.sources.config import spec_from_config
    cfg = dict(TINY_LLAMA, **{key: value})
    try:
        build_report(spec_from_config(cfg, name="fuzz"))
    except SourceError:
        pass


def test_report_for_every_catalog_model():
    from vramguard.core.provenance import Source
    from vramguard.sources import catalog
    from vramguard.sources.config import spec_from_config
    for entry in catalog.list_models():
        spec = spec_from_config(entry.config, name=entry.model_id, origin=Source.CATALOG)
        r = build_report(spec)
        assert r["params"]["total"] > 0 and r["max_model_len"]["derived"] > 0, entry.model_id
        assert r["weights"]["declared_bytes"] > 0
        json.dumps(r)


def test_json_schema_keys_are_stable(capsys):
    r = run_json(capsys, "google/gemma-3-27b-it")
    assert list(r) == ["schema", "model", "source_ref", "architecture", "model_type", "spec",
                       "params", "weights", "kv_cache", "max_model_len", "provenance", "notes"]
    assert set(r["spec"]) == {
        "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
        "vocab_size", "intermediate_size", "torch_dtype", "tie_word_embeddings",
        "is_encoder_only", "is_hybrid", "uses_mla", "attention_kinds", "sliding_window_tokens",
        "chunk_size_tokens", "moe", "vision", "quant", "max_len_keys", "rope_scaling",
        "tokenizer_max_length"}
    assert set(r["params"]) == {"total", "active", "by_component", "mtp_not_loaded", "checkpoint",
                                "checkpoint_minus_config"}
    assert set(r["weights"]) == {"bf16_bytes", "fp8_bytes", "int4_bytes", "declared_method",
                                 "declared_bytes", "checkpoint", "checkpoint_minus_declared_bytes"}
    assert set(r["kv_cache"]) == {"bytes_per_token", "auto_dtype", "mamba_state_bytes_per_request",
                                  "layers_with_kv"}
    assert set(r["max_model_len"]) == {"derived", "limit", "key", "key_value", "note",
                                       "vllm_version"}
    assert r["spec"]["attention_kinds"] == {"sliding": 52, "full": 10}
    assert r["max_model_len"]["derived"] == 131072          # Gemma 3: rope factor not applied


def test_modelopt_kv_scheme_makes_auto_fp8_only_in_new_vllm(tmp_path, capsys):
    write_model_folder(tmp_path / "m")
    (tmp_path / "m" / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    new = run_json(capsys, str(tmp_path / "m"))
    assert new["kv_cache"]["auto_dtype"] == "fp8"
    assert new["kv_cache"]["bytes_per_token"]["auto"] == new["kv_cache"]["bytes_per_token"]["fp8"]
    old = run_json(capsys, str(tmp_path / "m"), "--vllm-version", "0.20.0")
    assert old["kv_cache"]["auto_dtype"] == "bfloat16"
