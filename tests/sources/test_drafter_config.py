"""The drafter adapter: `--speculative-config` "model" read into `ModelSpec.draft`."""

from __future__ import annotations

import json

import pytest

from vramguard.core.settings import Settings
from vramguard.core.weights import weights_per_rank
from vramguard.sources.draft import attach_draft, infer_method
from vramguard.sources.resolve import load_model_spec

TARGET = "Qwen/Qwen2.5-1.5B-Instruct"
SMALL = "Qwen/Qwen2.5-0.5B-Instruct"


def spec_and(settings: Settings, target: str = TARGET):
    return attach_draft(load_model_spec(target, offline=True), settings, offline=True)


def test_a_draft_lm_is_read_whole():
    """Qwen2.5-0.5B as a draft LM: every weight (tied embeddings once) at the target's dtype,
    its 24 attention layers; the method is inferred (0.17+)."""
    spec, notes = spec_and(Settings(num_speculative_tokens=3, speculative_model=SMALL))
    d = spec.draft
    small = load_model_spec(SMALL, offline=True)
    w = weights_per_rank(small, Settings())[0]
    assert (d.name, d.method, len(d.attention), notes) == (SMALL, "draft_model", 24, [])
    assert d.weights_bytes == w.bytes - w.rope_cache_bytes
    assert 0.9e9 < d.weights_bytes < 1.1e9
    assert all(a.num_kv_heads == 2 and a.head_dim == 64 for a in d.attention)


@pytest.mark.parametrize("settings", [
    Settings(num_speculative_tokens=0, speculative_model=SMALL),          # not speculating
    Settings(num_speculative_tokens=3, speculative_model=SMALL, speculative_method="ngram"),
    Settings(num_speculative_tokens=3, speculative_model=TARGET, speculative_method="mtp"),
    Settings(num_speculative_tokens=3, speculative_model=TARGET),          # its own MTP layers
    Settings(num_speculative_tokens=3),                                    # no drafter named
])
def test_no_separate_drafter(settings):
    spec, notes = spec_and(settings)
    assert spec.draft is None and notes == []


def test_an_unreadable_drafter_is_noted_not_counted():
    spec, notes = spec_and(Settings(num_speculative_tokens=3, speculative_model="nobody/nothing"))
    assert spec.draft is None
    assert len(notes) == 1 and notes[0].startswith("drafter nobody/nothing: ")
    assert "not counted" in notes[0]


@pytest.mark.parametrize("name, method", [
    ("yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "eagle"),
    ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3"),
    ("AngelSlim/Qwen3-8B_eagle3", "eagle3"),
    (SMALL, "draft_model"),
])
def test_method_inferred_from_the_name(name, method):
    assert infer_method(name, load_model_spec(SMALL, offline=True)) == method


def _eagle_folder(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 128256,
        "draft_vocab_size": 32000, "torch_dtype": "float16", "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048}))
    return str(folder)


@pytest.mark.parametrize("method, lm_head", [("eagle", 0), ("eagle3", 32000 * 4096)])
def test_an_eagle_head_from_its_config(tmp_path, method, lm_head):
    """No checkpoint headers: the decoder layer (q/o 4096^2 each, k/v 4096 x 1024 each, gated
    MLP 3 x 4096 x 14336, 2 norms) and the final norm at 2 B; the embedding shared with the
    target; EAGLE-3's own LM head over its draft vocabulary (config `draft_vocab_size`)."""
    ref = _eagle_folder(tmp_path, method)
    s = Settings(num_speculative_tokens=3, speculative_model=ref, speculative_method=method)
    spec, notes = spec_and(s, target="meta-llama/Llama-3.1-8B-Instruct")
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert spec.draft.weights_bytes == 2 * (layer + 4096 + lm_head)
    assert len(spec.draft.attention) == 1 and not spec.draft.from_checkpoint
    assert notes and "estimated from its config" in notes[0]


def test_the_model_itself_as_an_explicit_draft_lm():
    """`"method": "draft_model"` with the target's own id: vLLM loads a second copy as the
    drafter (only without a method is it taken as the model's own MTP layers)."""
    spec, _ = spec_and(Settings(num_speculative_tokens=2, speculative_model=TARGET,
                                speculative_method="draft_model"))
    assert spec.draft is not None and spec.draft.method == "draft_model"
    assert len(spec.draft.attention) == spec.num_layers
