"""max_model_len rules by release that vLLM's ModelConfig applies before memory is sized:
the interleaved sliding-window cap (0.5.1-0.11.0) and the tokenizer's model_max_length
(0.9.1 every model, 0.9.2+ encoders). Hand-built specs; expectations from the released code."""

from dataclasses import replace

import pytest

from core_specs import dense
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.maxlen import derive_max_model_len, resolve_max_model_len
from vramguard.core.planner import plan
from vramguard.core.rules import resolve_rules
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

L40S = lookup_gpu("L40S")


def gemma2():
    """Gemma-2-like: sliding (4096) and full attention layers alternate, 8192 positions."""
    return dense("google/gemma-2-9b-it", model_type="gemma2", window=4096, window_every=2,
                 max_pos=8192, layers=8)


def length(spec, version, env=None, engine=None, settings=None):
    p = plan(spec, settings or Settings(), L40S, vllm_version=version, env=env, engine=engine)
    return p.settings["max_model_len"], p


@pytest.mark.parametrize("version,env,capped,text", [
    ("0.5.0", None, False, None),
    ("0.5.4", None, True, "Gemma 2 uses sliding window attention for every odd layer, which is "
                          "currently not supported by vLLM. Disabling sliding window and "
                          "capping the max length to the sliding window size (4096)."),
    ("0.6.4", None, True, "gemma2 has interleaved attention, which is currently not supported "
                          "by vLLM."),
    ("0.6.6", None, False, None),
    ("0.6.6", {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}, False, None),
    ("0.6.6", {"VLLM_ATTENTION_BACKEND": "XFORMERS"}, True,
     "gemma2 has interleaved attention, which is currently not supported by the XFORMERS "
     "backend."),
    ("0.8.5", {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}, True, "by the FLASHINFER backend."),
    ("0.10.1", {"VLLM_ATTENTION_BACKEND": "XFORMERS"}, False, None),
    ("0.10.1", {"VLLM_ATTENTION_BACKEND": "XFORMERS", "VLLM_USE_V1": "0"}, True,
     "by the XFORMERS backend."),
    ("0.11.1", {"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_V1": "0"}, False, None),
])
def test_interleaved_sliding_windows_turned_off_by_release(version, env, capped, text):
    engine = "v0" if env and env.get("VLLM_USE_V1") == "0" and version < "0.11" else None
    L, p = length(gemma2(), version, env, engine)
    assert L == (4096 if capped else 8192)
    assert p.settings["disable_sliding_window"] is capped
    notes = [a for a in p.assumptions if "turns the sliding windows off" in a]
    assert bool(notes) is capped
    if text:
        assert text in notes[0]


def test_the_cap_is_vllms_length_check_and_the_users_own_flag_has_no_warning():
    with pytest.raises(UsageError, match=r"\(sliding_window=4096 or"):
        plan(gemma2(), Settings(max_model_len=8192, user_set=frozenset({"max_model_len"})),
             L40S, vllm_version="0.6.3")
    own = Settings(disable_sliding_window=True, user_set=frozenset({"disable_sliding_window"}))
    L, p = length(gemma2(), "0.6.3", settings=own)
    assert L == 4096 and not [a for a in p.assumptions if "turns the sliding windows" in a]


def test_which_models_each_release_names():
    mistral = dense(model_type="mistral", window=4096, max_pos=32768, layers=8)   # all sliding
    assert length(mistral, "0.5.4")[0] == 32768
    gemma3 = dense(model_type="gemma3", window=1024, window_every=6, max_pos=131072, layers=12)
    backend = {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    assert length(gemma3, "0.7.3", backend)[0] == 131072          # not in 0.7's list
    L, p = length(gemma3, "0.8.5", backend)
    assert L == 1024 and any("gemma3_text has interleaved attention" in a for a in p.assumptions)
    other = dense(model_type="olmo3", window=4096, window_every=4, max_pos=65536, layers=8)
    assert length(other, "0.8.5", backend)[0] == 65536             # named models only
    assert length(other, "0.9.2", backend)[0] == 4096              # any interleaved model


def test_the_tokenizer_caps_every_model_in_0_9_1_and_encoders_later():
    spec = replace(dense(max_pos=131072), tokenizer_max_length=16384)
    assert derive_max_model_len(spec, resolve_rules("0.9.0")).value == 131072
    d = derive_max_model_len(spec, resolve_rules("0.9.1"))
    assert (d.value, d.limit) == (16384, 131072)
    # 0.9.1 caps the checked length afterwards, the user's too (silently)
    assert resolve_max_model_len(spec, resolve_rules("0.9.1"), 32768)[0] == 16384
    with pytest.raises(UsageError):
        resolve_max_model_len(spec, resolve_rules("0.9.1"), 200000)
    for v in ("0.9.2", "0.10.0", "0.33.0"):
        assert derive_max_model_len(spec, resolve_rules(v)).value == 131072, v
    encoder = replace(dense(max_pos=8194), tokenizer_max_length=8192, is_encoder_only=True)
    assert derive_max_model_len(encoder, resolve_rules("0.9.0")).value == 8194
    assert derive_max_model_len(encoder, resolve_rules("0.9.2")).value == 8192
    assert derive_max_model_len(encoder, resolve_rules("0.33.0")).limit == 8192


# ---- the derivation and the too-long message by release (released code, 0.4.0-0.33.0) ----
def R(version, **env):
    from vramguard.core.rules_env import apply_env
    return apply_env(resolve_rules(version), env or None)


def test_a_configs_own_model_max_length_wins_from_0_8_3():
    cmdr = replace(dense(max_pos=8192, model_type="cohere"),
                   max_len_keys={"max_position_embeddings": 8192, "model_max_length": 131072})
    assert derive_max_model_len(cmdr, R("0.8.2")).value == 8192
    d = derive_max_model_len(cmdr, R("0.8.3"))
    assert (d.value, d.key) == (131072, "model_max_length")


def test_without_a_length_key_a_users_length_is_taken_unchecked():
    bare = replace(dense(), max_len_keys={})
    assert derive_max_model_len(bare, R("0.33.0")).value == 2048
    assert resolve_max_model_len(bare, R("0.33.0"), 65536)[0] == 65536


def test_longrope_defaults_to_the_original_length_from_0_11_1():
    phi = replace(dense(max_pos=131072, model_type="phi3"), rope_scaling={"type": "longrope"},
                  max_len_keys={"max_position_embeddings": 131072,
                                "original_max_position_embeddings": 4096})
    assert derive_max_model_len(phi, R("0.11.0")).value == 131072
    d = derive_max_model_len(phi, R("0.11.1"))
    assert (d.value, d.limit) == (4096, 131072)


@pytest.mark.parametrize("version,rope,model_type,shown", [
    ("0.11.0", {"rope_type": "llama3", "factor": 8.0}, "llama", "131072"),
    ("0.12.0", {"rope_type": "llama3", "factor": 8.0}, "llama", "131072.0"),
    ("0.11.0", None, "qwen2", "131072"),
    ("0.12.0", None, "qwen2", "131072.0"),
    ("0.12.0", None, "gpt2", "131072"),
    ("0.29.0", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
     "qwen2", "131072.0"),
    ("0.29.0", {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32768},
     "qwen2", "131072"),
    ("0.30.0", {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32768},
     "qwen2", "32768.0"),                        # not multiplied from 0.30, but x1.0
    ("0.29.0", {"rope_type": "deepseek_yarn", "factor": 2,
                "original_max_position_embeddings": 4096}, "deepseek_v3", "262144"),
])
def test_the_derived_length_as_vllm_prints_it(version, rope, model_type, shown):
    spec = replace(dense(max_pos=131072 if model_type != "qwen2" or not rope else 32768,
                         model_type=model_type), rope_scaling=rope)
    assert derive_max_model_len(spec, R(version)).shown == shown


@pytest.mark.parametrize("version,tail", [
    ("0.5.3", "CUDA errors. Make sure the value is correct and within the model context size."),
    ("0.5.4", "CUDA errors. To allow overriding this maximum, set the env var "
              "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
    ("0.10.2", "will cause a CUDA array out-of-bounds error."),
])
def test_the_too_long_message_by_release(version, tail):
    with pytest.raises(UsageError) as e:
        resolve_max_model_len(dense(max_pos=8192, model_type="gpt2"), R(version), 16384)
    text = str(e.value)
    assert ("greater than the derived max_model_len (max_position_embeddings=8192 or "
            "model_max_length=None in model's config.json).") in text
    assert tail in text


def test_the_long_length_override_exists_from_0_5_4():
    spec = dense(max_pos=8192)
    with pytest.raises(UsageError):
        resolve_max_model_len(spec, R("0.5.3", VLLM_ALLOW_LONG_MAX_MODEL_LEN="1"), 16384)
    assert resolve_max_model_len(spec, R("0.5.4", VLLM_ALLOW_LONG_MAX_MODEL_LEN="1"),
                                 16384)[0] == 16384


def test_a_sentence_transformers_length_replaces_the_derived_one_from_0_6_4():
    bge = replace(dense(max_pos=8194, model_type="xlm-roberta"), is_encoder_only=True,
                  encoder_max_seq_length=8192)
    assert derive_max_model_len(bge, R("0.6.3")).value == 8194
    d = derive_max_model_len(bge, R("0.6.4"))
    assert (d.value, d.limit) == (8192, 8192)
