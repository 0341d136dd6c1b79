"""Parameter counts from config.json vs the counts the model publishers state.

Published numbers come from the shared corpus's models.jsonl `total_params` (copied here,
tests never read ../shared) plus a few well-known model cards. A number published with
few digits carries its rounding: "0.49B" means 0.485-0.495B, so the tolerance is the
larger of 0.5% and half the last published digit.
"""
import re

import pytest

from vramguard.sources.config import spec_from_config

# folder under tests/data/configs -> published total parameters (as published)
PUBLISHED = {
    "meta-llama__Llama-3.1-8B-Instruct": "8.03B",
    "meta-llama__Meta-Llama-3-8B": "8.03B",
    "meta-llama__Llama-3.2-3B-Instruct": "3.21B",
    "meta-llama__Llama-3.1-70B-Instruct": "70.6B",
    "Qwen__Qwen2-7B-Instruct": "7.62B",
    "Qwen__Qwen2.5-7B-Instruct": "7.62B",
    "Qwen__Qwen2.5-32B-Instruct": "32.8B",
    "Qwen__Qwen2.5-3B-Instruct": "3.09B",
    "Qwen__Qwen2.5-1.5B-Instruct": "1.54B",
    "Qwen__Qwen2.5-Math-1.5B": "1.54B",
    "Qwen__Qwen2.5-0.5B": "0.49B",
    "Qwen__Qwen2.5-VL-7B-Instruct": "8.29B",
    "Qwen__Qwen2.5-VL-3B-Instruct": "3.75B",
    "Qwen__Qwen1.5-14B-Chat": "14.2B",
    "Qwen__Qwen-7B": "7.7B",
    "Qwen__Qwen3-0.6B": "0.6B",
    "Qwen__Qwen3-4B": "4.02B",
    "Qwen__Qwen3-8B": "8.19B",
    "Qwen__Qwen3-32B": "32.8B",
    "Qwen__Qwen3-30B-A3B": "30.5B",
    "Qwen__Qwen3-VL-30B-A3B-Instruct-FP8": "31B",
    "Qwen__Qwen3-235B-A22B": "235B",
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B": "7.62B",
    "deepseek-ai__DeepSeek-R1-Distill-Qwen-32B": "32.8B",
    "deepseek-ai__deepseek-coder-1.3b-instruct": "1.35B",
    "deepseek-ai__deepseek-coder-6.7b-instruct": "6.74B",
    "deepseek-ai__DeepSeek-Coder-V2-Lite-Instruct": "15.7B",
    "deepseek-ai__DeepSeek-R1": "671B",
    "openai__gpt-oss-120b": "116.8B",
    "openai__gpt-oss-20b": "20.9B",
    "mistralai__Mistral-7B-Instruct-v0.2": "7.24B",
    "mistralai__Mistral-Small-3.2-24B-Instruct-2506": "24B",
    "microsoft__phi-4": "14.7B",
    "microsoft__Phi-4-mini-instruct": "3.84B",
    "OpenGVLab__InternVL3-78B": "78.4B",
    "facebook__opt-125m": "125M",
    # model cards (not in models.jsonl)
    "deepseek-ai__DeepSeek-V3": "671B",
    # Mistral AI launch post (mistral.ai/news/mixtral-of-experts): "46.7B total parameters";
    # exact 46,702,792,704 in keras-team/keras-hub keras_hub/src/models/mixtral/mixtral_presets.py
    "mistralai__Mixtral-8x7B-Instruct-v0.1": "46.7B",
    "google__gemma-2-9b-it": "9.24B",
    "google__gemma-2-27b-it": "27.2B",
    "google__gemma-3-27b-it": "27.4B",
    "microsoft__Phi-3-mini-4k-instruct": "3.82B",
    # meta-llama/llama-models models/llama4/MODEL_CARD.md: "17B (Activated) 109B (Total)"
    # (HF safetensors total 108,641,793,536 per third-party copies of the Hub API; we compute that)
    "meta-llama__Llama-4-Scout-17B-16E-Instruct": "109B",
    # MoonshotAI/Kimi-VL README.md publishes only "16B" total; 16.4B is derived from the bf16
    # shards of the same-architecture huggingface.co/moonshotai/Kimi-VL-A3B-Thinking (32.83 GB / 2)
    "moonshotai__Kimi-VL-A3B-Instruct": "16.4B",
    "Qwen__Qwen3-Next-80B-A3B-Instruct": "80B",
    "THUDM__glm-4-9b-chat": "9.4B",
    "mistralai__Mistral-Small-3.1-24B-Instruct-2503": "24B",
    "codellama__CodeLlama-34b-hf": "33.7B",
    "BAAI__bge-m3": "568M",
}


def parse(text: str) -> tuple[float, float]:
    """'7.62B' -> (7.62e9, tolerance as a fraction)."""
    m = re.fullmatch(r"~?([\d.]+)([BM])", text)
    assert m, text
    value = float(m.group(1)) * (1e9 if m.group(2) == "B" else 1e6)
    decimals = len(m.group(1).split(".")[1]) if "." in m.group(1) else 0
    half_digit = 0.5 * 10 ** -decimals * (1e9 if m.group(2) == "B" else 1e6)
    return value, max(0.005, half_digit / value)


@pytest.mark.parametrize("folder", sorted(PUBLISHED))
def test_total_params_match_published(folder, config):
    spec = spec_from_config(config(folder), name=folder)
    value, tol = parse(PUBLISHED[folder])
    assert abs(spec.num_params() - value) / value <= tol, (spec.num_params(), value, tol)


# Exact counts: the sum of the published safetensors shapes (hand-checked formulas).
EXACT = {
    "meta-llama__Llama-3.1-8B-Instruct": 8_030_261_248,
    "Qwen__Qwen2.5-7B-Instruct": 7_615_616_512,
    "Qwen__Qwen2.5-0.5B": 494_032_768,
    "mistralai__Mixtral-8x7B-Instruct-v0.1": 46_702_792_704,  # keras-hub mixtral_presets.py
    "google__gemma-2-9b-it": 9_241_705_984,
    "microsoft__Phi-3-mini-4k-instruct": 3_821_079_552,
    "facebook__opt-125m": 125_239_296,
}


@pytest.mark.parametrize("folder", sorted(EXACT))
def test_exact_counts(folder, config):
    assert spec_from_config(config(folder), name=folder).num_params() == EXACT[folder]


def test_llama_8b_by_hand(config):
    spec = spec_from_config(config("meta-llama__Llama-3.1-8B-Instruct"), name="l")
    h, i, v, layers = 4096, 14336, 128256, 32
    attn = h * h * 2 + 2 * h * 1024
    assert spec.layers[0].params.attn_q == h * h
    assert spec.layers[0].params.attn_kv == 2 * h * 1024
    assert spec.layers[0].params.mlp == 3 * h * i
    assert spec.num_params() == layers * (attn + 3 * h * i + 2 * h) + 2 * v * h + h


def test_qwen2_counts_qkv_bias(config):
    spec = spec_from_config(config("Qwen__Qwen2.5-7B-Instruct"), name="q")
    p = spec.layers[0].params
    assert p.attn_q == 3584 * 3584 + 3584
    assert p.attn_kv == 2 * (3584 * 512 + 512)
    assert p.attn_o == 3584 * 3584


def test_active_params_moe(config):
    spec = spec_from_config(config("Qwen__Qwen3-30B-A3B"), name="q")
    assert 3.2e9 < spec.num_active_params() < 3.4e9          # published 3.3B active
    ds = spec_from_config(config("deepseek-ai__DeepSeek-V3"), name="d")
    assert 37e9 <= ds.num_active_params() < 38e9            # published 37B active


def test_qwen3_non_embedding(config):
    spec = spec_from_config(config("Qwen__Qwen3-0.6B"), name="q")
    non_emb = spec.num_params() - spec.embed_params - spec.lm_head_params
    assert abs(non_emb - 0.44e9) / 0.44e9 < 0.005             # published 0.44B non-embedding


def test_deepseek_v3_mtp_kept_out_but_noted(config):
    spec = spec_from_config(config("deepseek-ai__DeepSeek-V3"), name="d")
    assert len(spec.layers) == 61
    assert any("MTP" in n and "num_nextn_predict_layers" in n for n in spec.notes)


def test_vision_towers_counted(config):
    for folder, low, high in [("Qwen__Qwen2.5-VL-7B-Instruct", 0.66e9, 0.69e9),
                              ("google__gemma-3-27b-it", 0.41e9, 0.44e9),
                              ("OpenGVLab__InternVL3-78B", 5.5e9, 6.0e9)]:
        spec = spec_from_config(config(folder), name=folder)
        assert spec.vision is not None and low < spec.vision.num_params < high, folder


def _published(text: str | None):
    if not text:
        return None
    m = re.fullmatch(r"~?\s*([\d.]+)\s*([BMT])", text.strip())
    if not m:
        return None
    unit = {"B": 1e9, "M": 1e6, "T": 1e12}[m.group(2)]
    decimals = len(m.group(1).split(".")[1]) if "." in m.group(1) else 0
    value = float(m.group(1)) * unit
    return value, max(0.005, 0.5 * 10 ** -decimals * unit / value)


def test_catalog_published_counts():
    """Every catalog entry with a published count matches it (with or without MTP layers)."""
    from vramguard.core.provenance import Source
    from vramguard.sources import catalog
    checked = 0
    for entry in catalog.list_models():
        pub = _published(entry.published_params)
        if pub is None:
            continue
        value, tol = pub
        spec = spec_from_config(entry.config, name=entry.model_id, origin=Source.CATALOG)
        errors = [abs(n - value) / value for n in (spec.num_params(),
                                                   spec.num_params() + spec.mtp_params)]
        assert min(errors) <= tol, (entry.model_id, spec.num_params(), entry.published_params)
        checked += 1
    assert checked >= 20
