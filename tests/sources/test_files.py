"""Checkpoint readers: safetensors headers, GGUF, .bin zips; with malformed inputs."""
import json
import struct

import pytest

from vramguard.errors import SourceError
from vramguard.sources import gguf as gguf_src
from vramguard.sources import safetensors as st
from vramguard.sources import torchbin
from vramguard.sources.resolve import load_model_spec

from src_helpers import TINY_LLAMA, raw_safetensors, write_gguf, write_model_folder, write_torch_zip


# ---- safetensors ----------------------------------------------------------------------------
def test_sharded_folder_bytes_equal_sum_of_header_tensors(tmp_path):
    tensors = write_model_folder(tmp_path / "m", shards=3)
    info = st.read_checkpoint(tmp_path / "m")
    assert info.total_bytes == sum(t.nbytes for t in tensors.values())
    assert info.num_params == sum(t.size for t in tensors.values())
    assert info.num_tensors == len(tensors) and info.bytes_by_dtype == {"F16": info.total_bytes}


def test_folder_spec_has_checkpoint_and_config_counts(tmp_path):
    tensors = write_model_folder(tmp_path / "m")
    spec = load_model_spec(str(tmp_path / "m"))
    assert spec.checkpoint.num_params == spec.num_params() == sum(t.size for t in tensors.values())
    assert spec.provenance["checkpoint"].value == "checkpoint"


def test_missing_shard_is_reported(tmp_path):
    write_model_folder(tmp_path / "m", shards=2)
    (tmp_path / "m" / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(SourceError, match="missing"):
        st.read_checkpoint(tmp_path / "m")
    spec = load_model_spec(str(tmp_path / "m"))              # a partial download still resolves
    assert spec.checkpoint is None and any("incomplete" in n for n in spec.notes)


def test_dtype_sizes_fp8_and_bf16(tmp_path):
    header = {"a": {"dtype": "F8_E4M3", "shape": [4, 4], "data_offsets": [0, 16]},
              "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]},
              "__metadata__": {"format": "pt"}}
    s = st.parse_header(raw_safetensors(header, b"\0" * 24), 8 + len(json.dumps(header)) + 24, "x")
    assert s.bytes_by_dtype == {"F8_E4M3": 16, "BF16": 8} and s.num_params == 20


@pytest.mark.parametrize("header,data,match", [
    ({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "outside"),
    ({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 6]}}, b"\0" * 6, "needs"),
    ({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
      "b": {"dtype": "F16", "shape": [2], "data_offsets": [2, 6]}}, b"\0" * 6, "overlap"),
    ({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}, b"\0", "unknown dtype"),
    ({"a": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 2]}}, b"\0" * 2, "shape"),
    ({"a": [1, 2]}, b"", "no dtype"),
    (b"[1, 2]", b"", "not a JSON object"),
    (b"{not json", b"", "not valid JSON"),
])
def test_malformed_headers(header, data, match):
    buf = raw_safetensors(header, data)
    with pytest.raises(SourceError, match=match):
        st.parse_header(buf, len(buf), "f.safetensors")


def test_truncated_and_oversized_headers(tmp_path):
    small = tmp_path / "small.safetensors"
    small.write_bytes(b"\x01\x02")
    with pytest.raises(SourceError, match="not a safetensors"):
        st.read_file(small)
    huge = tmp_path / "huge.safetensors"
    huge.write_bytes(struct.pack("<Q", 200 << 20) + b"{}")
    with pytest.raises(SourceError, match="limit"):
        st.read_file(huge)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(SourceError, match="past the end"):
        st.read_file(cut)


# ---- GGUF -------------------------------------------------------------------------------------
def test_gguf_exact_bytes_and_config(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_gguf(path)
    spec = gguf_src.spec_from_gguf(path)
    assert spec.checkpoint.format == "gguf"
    assert spec.checkpoint.bytes_by_dtype == {"F16": 32 * 64 * 2, "Q8_0": 64 * 64 // 32 * 34}
    assert spec.checkpoint.num_params == 32 * 64 + 64 * 64
    assert spec.num_layers == 1 and spec.hidden_size == 64 and spec.num_kv_heads == 2
    assert spec.vocab_size == 32 and spec.max_len_keys["max_position_embeddings"] == 4096
    assert spec.tie_word_embeddings                    # no output.weight tensor
    assert spec.quant.method == "gguf" and spec.quant.linear_bytes_per_param == pytest.approx(34 / 32)
    assert spec.name == "tiny-gguf"
    assert spec.provenance["hidden_size"].value == "checkpoint"
    assert load_model_spec(str(path)).checkpoint.total_bytes == spec.checkpoint.total_bytes


def test_not_gguf(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGML" + b"\0" * 100)
    with pytest.raises(SourceError, match="not a GGUF"):
        gguf_src.spec_from_gguf(path)


def test_truncated_gguf(tmp_path):
    path = tmp_path / "t.gguf"
    write_gguf(path)
    data = path.read_bytes()
    for cut in (4, 10):
        p = tmp_path / f"head{cut}.gguf"
        p.write_bytes(data[:cut])
        with pytest.raises(SourceError, match=f"truncated GGUF file \\({cut} bytes"):
            gguf_src.spec_from_gguf(p)
    for cut in (30, 200, len(data) - 10):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(data[:cut])
        with pytest.raises(SourceError):
            gguf_src.spec_from_gguf(p)


# ---- .bin -------------------------------------------------------------------------------------
def test_torch_zip_sizes_without_unpickling(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(TINY_LLAMA))
    write_torch_zip(folder / "pytorch_model.bin", [1000, 24])
    spec = load_model_spec(str(folder))
    assert spec.checkpoint.format == "pytorch_bin" and spec.checkpoint.approximate
    assert spec.checkpoint.total_bytes == 1024


def test_bin_index_total_size(tmp_path):
    (tmp_path / "pytorch_model.bin.index.json").write_text(
        json.dumps({"metadata": {"total_size": 4242}, "weight_map": {}}))
    assert torchbin.read_checkpoint(tmp_path).total_bytes == 4242


def test_legacy_pickle_bin_is_refused(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x02}q\x00.")
    with pytest.raises(SourceError, match="zip"):
        torchbin.read_checkpoint(tmp_path)


def test_gguf_deepseek2_metadata_maps_to_mla(tmp_path):
    path = tmp_path / "ds.gguf"
    _gguf_with(path, "deepseek2", {
        "block_count": 2, "embedding_length": 64, "feed_forward_length": 128,
        "attention.head_count": 4, "attention.head_count_kv": 4, "expert_count": 4,
        "expert_used_count": 2, "expert_feed_forward_length": 32, "expert_shared_count": 1,
        "leading_dense_block_count": 1, "attention.kv_lora_rank": 32,
        "attention.key_length": 24, "attention.value_length": 16, "rope.dimension_count": 8,
        "context_length": 1024})
    spec = gguf_src.spec_from_gguf(path)
    assert spec.uses_mla and spec.kv_bytes_per_token() == 2 * (32 + 8) * 2
    assert spec.moe.num_experts == 4 and spec.moe.first_dense_layers == 1
    assert spec.layers[0].params.experts == 0 and spec.layers[1].params.experts > 0


def _gguf_with(path, arch: str, meta: dict) -> None:
    """A one-tensor GGUF whose `arch.KEY` metadata are `meta` (ints as uint32, else strings)."""
    import gguf
    import numpy as np
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in meta.items():
        (w.add_uint32 if isinstance(value, int) else w.add_string)(f"{arch}.{key}", value)
    w.add_token_list([f"t{i}" for i in range(32)])
    w.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


_DS2 = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128,
        "attention.head_count": 4, "attention.head_count_kv": 4, "attention.kv_lora_rank": 32,
        "attention.key_length": 24, "attention.value_length": 16, "rope.dimension_count": 8}


@pytest.mark.parametrize("key", ["attention.key_length", "rope.dimension_count",
                                 "embedding_length"])
def test_gguf_metadata_of_the_wrong_type_names_the_key(tmp_path, key):
    path = tmp_path / "bad.gguf"
    _gguf_with(path, "deepseek2", {**_DS2, key: "abc"})
    with pytest.raises(SourceError) as err:
        gguf_src.spec_from_gguf(path)
    assert err.value.line() == (f"{path}: GGUF key deepseek2.{key} is 'abc', not a whole "
                                "number. Check or re-download the .gguf file")


def test_gguf_metadata_errors_do_not_ask_for_config_json(tmp_path):
    path = tmp_path / "heads0.gguf"
    _gguf_with(path, "deepseek2", {**_DS2, "attention.head_count": 0})
    with pytest.raises(SourceError, match="num_attention_heads is 0") as err:
        gguf_src.spec_from_gguf(path)
    assert "config.json" not in err.value.line() and "GGUF metadata" in err.value.line()
    assert err.value.fix == "Check or re-download the .gguf file"


def test_index_pointing_outside_the_folder_is_refused(tmp_path):
    write_model_folder(tmp_path / "m", shards=1)
    (tmp_path / "m" / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "../../etc/passwd"}}))
    with pytest.raises(SourceError, match="outside"):
        st.read_checkpoint(tmp_path / "m")


def test_gguf_arrays_nested_too_deep_say_so(tmp_path):
    import struct
    key = b"x.deep"
    body = struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 9, 1) \
        + struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key \
        + struct.pack("<I", 9) + body
    path = tmp_path / "deep.gguf"
    path.write_bytes(data + b"\0" * 64)
    with pytest.raises(SourceError, match="nests arrays more than 2 deep"):
        gguf_src.spec_from_gguf(path)


def test_a_gguf_plans_only_with_the_releases_that_read_gguf(tmp_path):
    """vLLM reads GGUF in 0.5.5-0.23; 0.24 removed it (the default, newest release too)."""
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.core.planner import plan
    from vramguard.core.settings import Settings
    from vramguard.errors import UsageError
    path = tmp_path / "tiny.gguf"
    write_gguf(path)
    spec, gpu = gguf_src.spec_from_gguf(path), lookup_gpu("L4")
    for version in (None, "0.24.0", "0.5.4"):
        with pytest.raises(UsageError, match="cannot load a GGUF checkpoint") as exc:
            plan(spec, Settings(), gpu, vllm_version=version)
        assert "--vllm-version 0.23" in exc.value.fix
    for version in ("0.5.5", "0.23.0"):
        assert plan(spec, Settings(), gpu, vllm_version=version).outcome.ok
