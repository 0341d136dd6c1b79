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
