"""--limit-mm-per-prompt with every input of the encoder at 0: not profiled in any release,
not loaded where the release skips building the tower (0.10.1-0.14: the models that check
the limit; 0.15+: every model)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core_specs import dense
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.model import VisionSpec
from vramguard.core.planner import plan
from vramguard.core.settings import Settings

L4 = lookup_gpu("L4")
TOWER_PARAMS = 675_000_000
QWEN_VL = replace(dense("q/vl", layers=28, hidden=3584, heads=28, kv_heads=4, inter=18944,
                        vocab=152064, max_pos=32768, rope={}, model_type="qwen2_5_vl"),
                  vision=VisionSpec(num_params=TOWER_PARAMS, hidden_size=1280, num_layers=32,
                                    patch_size=14, modalities=("image", "video")),
                  architecture="Qwen2_5_VLForConditionalGeneration")
GEMMA = replace(QWEN_VL, model_type="gemma3", architecture="Gemma3ForConditionalGeneration",
                vision=replace(QWEN_VL.vision, modalities=("image",)))
BASE = Settings(max_model_len=8192)
OFF = BASE.with_(limit_mm_per_prompt=(("image", 0), ("video", 0)))


def terms(spec, s, version):
    t = plan(spec, s, L4, vllm_version=version).tightest
    return t.weights.value_bytes, t.activation.value_bytes


@pytest.mark.parametrize("version, model, unloaded", [
    ("0.9.2", QWEN_VL, False),       # before 0.10.1: built whatever the limit
    ("0.11.0", QWEN_VL, True),       # qwen2_5_vl.py checks the limit from 0.10.1
    ("0.11.0", GEMMA, False),        # gemma3 does not before 0.15
    ("0.15.0", GEMMA, True),         # every model from 0.15
])
def test_every_input_at_zero(version, model, unloaded):
    """The tower's weights (bf16, TP 1) go when the release skips it; the profile is the one
    --skip-mm-profiling gives in every release."""
    w_on, a_on = terms(model, BASE, version)
    w_off, a_off = terms(model, OFF, version)
    assert w_on - w_off == (2 * TOWER_PARAMS if unloaded else 0)
    if version != "0.9.2":          # NOTE: --skip-mm-profiling came in 0.10.1
        assert a_off == terms(model, BASE.with_(skip_mm_profiling=True), version)[1]
    assert a_off <= a_on


@pytest.mark.parametrize("limits", [(("image", 0),),                  # video still on
                                    (("image", 1), ("video", 0)),
                                    (("audio", 0),)])
def test_an_input_left_on_keeps_the_encoder(limits):
    assert terms(QWEN_VL, BASE.with_(limit_mm_per_prompt=limits), "0.30.0") == \
        terms(QWEN_VL, BASE, "0.30.0")


def test_the_plan_echoes_the_flag_and_says_what_it_did():
    p = plan(QWEN_VL, OFF, L4, vllm_version="0.30.0")
    assert p.settings["limit_mm_per_prompt"] == (("image", 0), ("video", 0))
    assert p.settings["language_model_only"] is False       # as given, not as applied
    assert p.settings_sources["limit_mm_per_prompt"] == "user"
    assert any("turns off every input of the encoder (image, video): not profiled, and not "
               "loaded either" in a for a in p.assumptions)
    old = plan(QWEN_VL, OFF, L4, vllm_version="0.9.2")
    assert any("still loaded" in a for a in old.assumptions)
    part = plan(QWEN_VL, BASE.with_(limit_mm_per_prompt=(("image", 0),)), L4,
                vllm_version="0.30.0")
    assert any("limits above 0 are not modelled" in a for a in part.assumptions)
    text = plan(dense(), OFF, L4, vllm_version="0.30.0")
    assert any("a text-only model, no effect" in a for a in text.assumptions)


@pytest.mark.parametrize("model, version, replicated", [
    (QWEN_VL, "0.11.0", True),       # qwen2_5_vl supports_encoder_tp_data
    (GEMMA, "0.30.0", False),        # gemma3 does not: vLLM falls back to "weights"
])
def test_encoder_tp_mode_data_replicates_the_encoder(model, version, replicated):
    """TP 2: "data" keeps the whole encoder on each rank (+ half the tower, bf16) where the
    model supports it; the plan says which."""
    tp2 = BASE.with_(tensor_parallel_size=2)
    w = plan(model, tp2, L4, vllm_version=version).tightest.weights.value_bytes
    p = plan(model, tp2.with_(mm_encoder_tp_mode="data"), L4, vllm_version=version)
    assert p.tightest.weights.value_bytes - w == (TOWER_PARAMS if replicated else 0)
    assert p.settings["mm_encoder_tp_mode"] == "data"
    said = "replicated on every TP rank" if replicated else "falls back to 'weights'"
    assert any(said in a for a in p.assumptions)


def test_encoder_tp_mode_by_release():
    """The releases' own lists (arch_registry.ENCODER_TP_DATA): 0.9.1-0.10.1 had the switch
    --enable-multimodal-encoder-data-parallel, read by Llama 4 (and Step3-VL from 0.10.1);
    --mm-encoder-tp-mode came in 0.10.2, with Qwen2.5-VL among the models that replicate."""
    from vramguard.errors import UsageError
    tp2 = BASE.with_(tensor_parallel_size=2)
    data = tp2.with_(mm_encoder_tp_mode="data")
    switch = tp2.with_(enable_multimodal_encoder_data_parallel=True)
    with pytest.raises(UsageError, match="unrecognized arguments: --mm-encoder-tp-mode data"):
        plan(QWEN_VL, data, L4, vllm_version="0.10.1")
    with pytest.raises(UsageError, match="unrecognized arguments: --enable-multimodal-encoder"):
        plan(QWEN_VL, switch, L4, vllm_version="0.13.0")
    llama4 = replace(QWEN_VL, model_type="llama4", architecture="Llama4ForConditionalGeneration")
    for version, model, given, extra in (("0.10.1", QWEN_VL, switch, 0),
                                         ("0.10.1", llama4, switch, TOWER_PARAMS),
                                         ("0.10.2", QWEN_VL, data, TOWER_PARAMS),
                                         ("0.12.0", QWEN_VL, switch, TOWER_PARAMS),
                                         ("0.10.2", GEMMA, data, 0)):
        w = plan(model, tp2, L4, vllm_version=version)
        d = plan(model, given, L4, vllm_version=version)
        assert d.tightest.weights.value_bytes - w.tightest.weights.value_bytes == extra
        said = "replicated on every TP rank" if extra else "falls back to 'weights'"
        assert any(said in a for a in d.assumptions), (version, model.model_type)


def test_v0_reads_no_skip_mm_profiling():
    """0.10.1-0.10.2: --skip-mm-profiling is read by V1's profile run only; V0 still profiles
    the encoder, unless every input is limited to 0 (no multimodal data in either engine)."""
    def act(engine, s):
        return plan(QWEN_VL, s, L4, vllm_version="0.10.2", engine=engine).tightest \
            .activation.value_bytes
    skip = BASE.with_(skip_mm_profiling=True)
    assert act("v0", skip) == act("v0", BASE)
    assert act("v1", skip) < act("v1", BASE)
    off = OFF.with_(skip_mm_profiling=True)
    assert act("v0", off) == act("v0", OFF) < act("v0", BASE)


def test_model_runner_v2_profiles_the_encoder_from_0_27():
    """Model Runner V2 (the default for dense models from 0.25) ran the text forward and
    the sampler only in its profile run until 0.26; 0.27 added the encoder batch. The V1
    runner (VLLM_USE_V2_MODEL_RUNNER=0) always had it."""
    def act(version, s=BASE, env=None):
        return plan(QWEN_VL, s, L4, vllm_version=version, env=env).tightest \
            .activation.value_bytes
    skip = BASE.with_(skip_mm_profiling=True)
    for version in ("0.25.0", "0.26.0"):
        assert act(version) == act(version, skip)
        v1 = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
        assert act(version, env=v1) > act(version, skip, env=v1)
    assert act("0.27.0") > act("0.27.0", skip)


def test_v1_encoder_batch_item_count_by_release():
    """V1 profiles budget // T images of the largest item (budget = max(batched tokens, T)),
    at most max_num_seqs x the per-prompt limit; cdiv up to 0.9.2; without chunked prefill
    the requests are capped at batched tokens // T (0.10.1+)."""
    from vramguard.core.activation import v1_mm_items
    assert v1_mm_items("per_prompt", 256, 8192, 256, 999, True) == 32
    assert v1_mm_items("per_prompt", 256, 8192, 4, 2, True) == 8
    assert v1_mm_items("per_prompt", 16384, 8192, 256, 999, True) == 1
    assert v1_mm_items("per_prompt", 3000, 8192, 256, 999, False) == 2
    assert v1_mm_items("cdiv", 3000, 8192, 256, 1, True) == 3
    assert v1_mm_items("floor", 3000, 8192, 1, 1, True) == 1


GEMMA3 = replace(dense("g/gemma-3-like", layers=62, hidden=5376, heads=32, kv_heads=16,
                       head_dim=128, inter=21504, vocab=262208, max_pos=131072, rope={},
                       model_type="gemma3"),
                 vision=VisionSpec(num_params=417_000_000, hidden_size=1152, num_layers=27,
                                   image_size=896, patch_size=14, tokens_per_item=256,
                                   patches_per_item=4096),
                 architecture="Gemma3ForConditionalGeneration")


def test_gemma3_encoder_batch_and_its_outputs():
    """Gemma 3 (256 tokens, 4,096 patches per image) at 8,192 batched tokens profiles 32
    images: 32 x 4,096 x 1,152 x 8 B = 1.13 GiB of encoder peak (below the text peak); their
    outputs stay in the encoder cache through the text forward: 32 x 256 x 5,376 x 2 B
    (0.13), padded to the budget's 8,192 rows in 0.11.0-0.11.2: 32 x 8,192 x 5,376 x 2 B."""
    h100 = lookup_gpu("H100-80GB")
    s = Settings(max_model_len=8192, max_num_batched_tokens=8192, max_num_seqs=64,
                 user_set=frozenset({"max_num_batched_tokens", "max_num_seqs"}))

    def act(version, **flags):
        return plan(GEMMA3, s.with_(**flags), h100, vllm_version=version).tightest \
            .activation.value_bytes
    skip = {"skip_mm_profiling": True}
    assert act("0.13.0") - act("0.13.0", **skip) == 32 * 256 * 5376 * 2
    assert act("0.11.0") - act("0.11.0", **skip) == 32 * 8192 * 5376 * 2
    assert act("0.12.0") - act("0.12.0", **skip) == 32 * 256 * 5376 * 2


def test_v0_encodes_an_image_per_dummy_sequence():
    """v0 (0.5.1+): max(1, min(max_num_seqs, batched tokens // T)) dummy sequences, each with
    an image, all encoded in the profile forward: Gemma 3 at 8,192 tokens, 64 sequences:
    32 images x 4,096 patches x 1,152 x 59 B."""
    from vramguard.core import activation as act
    t4 = lookup_gpu("T4")
    s = Settings(max_model_len=8192, max_num_batched_tokens=8192, max_num_seqs=64,
                 dtype="half", user_set=frozenset({"max_num_batched_tokens", "max_num_seqs"}))
    off = s.with_(limit_mm_per_prompt=(("image", 0),))

    def a(settings):
        return plan(GEMMA3, settings, t4, vllm_version="0.8.5", engine="v0").tightest \
            .activation.value_bytes
    assert a(s) - a(off) == int(32 * 4096 * 1152 * act.VISION_BYTES_PER_PATCH_HIDDEN["v0"])


def test_v1_builds_and_profiles_the_towers_on_every_pp_stage():
    """V1's model classes build the vision tower on every PP stage and its runner profiles
    the encoder on every rank (no first-rank check in `profile_run`); with Model Runner V2
    the encoder is profiled on the first rank (0.27+) and from 0.33 only the first stage
    builds the tower."""
    s = BASE.with_(pipeline_parallel_size=2)
    skip = s.with_(skip_mm_profiling=True)

    def ledgers(version, settings=s):
        return plan(QWEN_VL, settings, L4, vllm_version=version).ledgers
    first, second = ledgers("0.11.0")
    bare = plan(replace(QWEN_VL, vision=None), s, L4, vllm_version="0.11.0").ledgers
    tower = 2 * TOWER_PARAMS                              # bf16, TP 1
    assert second.weights.value_bytes - bare[1].weights.value_bytes == tower
    assert second.activation.value_bytes > ledgers("0.11.0", skip)[1].activation.value_bytes
    v2_first, v2_second = ledgers("0.33.0")
    bare33 = plan(replace(QWEN_VL, vision=None), s, L4, vllm_version="0.33.0").ledgers
    assert v2_second.weights.value_bytes == bare33[1].weights.value_bytes
    assert v2_second.activation.value_bytes == ledgers("0.33.0", skip)[1].activation.value_bytes


def test_encoder_data_parallel_runs_whole_items_per_rank():
    """--mm-encoder-tp-mode data (Qwen2.5-VL from 0.10.2): each TP rank encodes whole items
    of the dummy batch at full width, ceil(items / TP) of them (models/vision.py); the
    weights mode shards one batch over the ranks."""
    from vramguard.core import activation as act
    per_item = 65536 * 1280 * act.VISION_BYTES_PER_PATCH_HIDDEN["v1"]
    assert act.vision_encoder_bytes(QWEN_VL, 2, "v1", 1, True) == int(per_item)
    assert act.vision_encoder_bytes(QWEN_VL, 2, "v1", 3, True) == int(2 * per_item)
    assert act.vision_encoder_bytes(QWEN_VL, 2, "v1", 1) == int(per_item / 2 ** 0.5)
