"""Property tests: random and mutated inputs to every parser; only SourceError may escape."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramguard.errors import SourceError
from vramguard.sources import gguf as gguf_src
from vramguard.sources import quant
from vramguard.sources import safetensors as sft
from vramguard.sources.config import spec_from_config

from src_helpers import load_config, raw_safetensors, write_gguf

BASES = ["meta-llama__Llama-3.1-8B-Instruct", "deepseek-ai__DeepSeek-V3",
         "Qwen__Qwen3-Next-80B-A3B-Instruct", "google__gemma-4-E2B-it", "openai__gpt-oss-20b",
         "Qwen__Qwen3.8-27B-FP8", "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
         "meta-llama__Llama-4-Scout-17B-16E-Instruct", "THUDM__glm-4-9b-chat",
         "nvidia__Llama-3_3-Nemotron-Super-49B-v1", "OpenGVLab__InternVL3-78B", "BAAI__bge-m3"]
CONFIGS = {b: load_config(b) for b in BASES}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_values = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                                                        st.dictionaries(st.text(max_size=6), c, max_size=4)),
                           max_leaves=12)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _keys(cfg: dict) -> list[str]:
    out = list(cfg)
    for nested in ("text_config", "vision_config", "llm_config", "quantization_config"):
        if isinstance(cfg.get(nested), dict):
            out += [f"{nested}.{k}" for k in cfg[nested]]
    return out


def _mutate(cfg: dict, key: str, value) -> dict:
    cfg = json.loads(json.dumps(cfg))
    if "." in key:
        outer, inner = key.split(".", 1)
        cfg[outer][inner] = value
    else:
        cfg[key] = value
    return cfg


def _only_source_errors(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except SourceError as exc:
        assert exc.line()


@FUZZ
@given(base=st.sampled_from(BASES), data=st.data(), value=json_values)
def test_mutated_configs(base, data, value):
    key = data.draw(st.sampled_from(_keys(CONFIGS[base])))
    cfg = _mutate(CONFIGS[base], key, value)
    _only_source_errors(spec_from_config, cfg, name="fuzz")


@FUZZ
@given(base=st.sampled_from(BASES), data=st.data())
def test_configs_with_deleted_keys(base, data):
    cfg = json.loads(json.dumps(CONFIGS[base]))
    for key in data.draw(st.lists(st.sampled_from(sorted(cfg)), max_size=6)):
        cfg.pop(key, None)
    _only_source_errors(spec_from_config, cfg, name="fuzz")


@FUZZ
@given(cfg=st.one_of(json_values, st.dictionaries(
    st.sampled_from(["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "vocab_size", "intermediate_size", "num_key_value_heads", "head_dim",
                     "layer_types", "num_experts", "kv_lora_rank", "qk_rope_head_dim",
                     "text_config", "quantization_config", "sliding_window", "rope_scaling"]),
    json_values, max_size=16)))
def test_random_configs(cfg):
    _only_source_errors(spec_from_config, cfg, name="fuzz")


@FUZZ
@given(qc=json_values)
def test_random_quantization_configs(qc):
    _only_source_errors(quant.quant_from_config, qc, where="fuzz")


@FUZZ
@given(buf=st.binary(max_size=300), extra=st.integers(0, 1000))
def test_random_safetensors_bytes(buf, extra):
    _only_source_errors(sft.parse_header, buf, len(buf) + extra, "fuzz")


tensor_info = st.fixed_dictionaries({
    "dtype": st.sampled_from(["F16", "BF16", "F8_E4M3", "U8", "I64", "BOOL", "F4", "XX"]),
    "shape": st.lists(st.integers(-2, 2 ** 50), max_size=4),
    "data_offsets": st.lists(st.integers(-5, 2 ** 50), min_size=0, max_size=3)})


@FUZZ
@given(header=st.dictionaries(st.text(max_size=5), st.one_of(tensor_info, json_values), max_size=5),
       data_len=st.integers(0, 4096))
def test_random_safetensors_headers(header, data_len):
    buf = raw_safetensors(header, b"\0" * data_len)
    _only_source_errors(sft.parse_header, buf, len(buf), "fuzz")


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "t.gguf"
    write_gguf(path)
    return path.read_bytes()


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_gguf(gguf_bytes, data, tmp_path_factory):
    buf = bytearray(gguf_bytes)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    path = tmp_path_factory.mktemp("m") / "m.gguf"
    path.write_bytes(bytes(buf[:cut]) if data.draw(st.booleans()) else bytes(buf))
    _only_source_errors(gguf_src.spec_from_gguf, path)
