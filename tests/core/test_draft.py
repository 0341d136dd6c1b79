"""A separate drafter of speculative decoding (`ModelSpec.draft`): its weights and KV layers,
and the releases that refuse it or fall back to v0. Numbers computed by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from core_specs import dense
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.model import FULL, AttentionSpec, DraftModel
from vramguard.core.planner import plan
from vramguard.core.provenance import GIB
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

RTX4090 = lookup_gpu("RTX-4090")
# Qwen2.5-1.5B-like target (28 layers, 2 KV heads x 128) and Qwen2.5-0.5B-like drafter
# (24 layers, 2 KV heads x 64): 28 x 2 x 2 x 128 x 2 B = 28,672 B/token, 24 x 2 x 2 x 64 x 2 B
# = 12,288 B/token.
TARGET = dense("Qwen/Qwen2.5-1.5B-Instruct", layers=28, hidden=1536, heads=12, kv_heads=2,
               head_dim=128, inter=8960, vocab=151936, max_pos=32768, rope={})
DRAFT_LAYERS = tuple(AttentionSpec(kind=FULL, num_kv_heads=2, head_dim=64) for _ in range(24))
DRAFT = DraftModel(name="Qwen/Qwen2.5-0.5B-Instruct", method="draft_model",
                   weights_bytes=988_000_000, attention=DRAFT_LAYERS)
WITH_DRAFT = replace(TARGET, draft=DRAFT)
SPEC = Settings(max_model_len=16384, num_speculative_tokens=3, speculative_method="draft_model",
                speculative_model=DRAFT.name)


def test_draft_layers_join_the_block_pool_and_its_weights_the_weights():
    """bytes/token = 28,672 + 12,288 = 40,960 (one group, per-layer pages summed: vLLM's
    UniformTypeKVCacheSpecs); weights + 988 MB, halved per rank at TP 2."""
    alone = plan(TARGET, SPEC, RTX4090, vllm_version="0.30.0")
    both = plan(WITH_DRAFT, SPEC, RTX4090, vllm_version="0.30.0")
    assert (alone.kv.bytes_per_token, both.kv.bytes_per_token) == (28_672, 40_960)
    assert both.kv.page_size_bytes == 16 * 40_960
    w0, w1 = alone.tightest.weights.value_bytes, both.tightest.weights.value_bytes
    assert w1 - w0 == 988_000_000
    tp2 = plan(WITH_DRAFT, SPEC.with_(tensor_parallel_size=2), RTX4090, vllm_version="0.30.0")
    tp2_alone = plan(TARGET, SPEC.with_(tensor_parallel_size=2), RTX4090, vllm_version="0.30.0")
    assert (tp2.tightest.weights.value_bytes - tp2_alone.tightest.weights.value_bytes
            == 988_000_000 // 2)
    assert tp2.kv.bytes_per_token == 40_960 // 2      # one KV head of each per rank
    assert any("Speculative decoding with Qwen/Qwen2.5-0.5B-Instruct (draft_model): 0.92 GiB"
               in a and "24 attention layers" in a for a in both.assumptions)


def test_no_speculation_no_drafter():
    p = plan(WITH_DRAFT, SPEC.with_(num_speculative_tokens=0), RTX4090, vllm_version="0.30.0")
    assert p.kv.bytes_per_token == 28_672
    assert p.tightest.weights.value_bytes == plan(TARGET, SPEC.with_(num_speculative_tokens=0),
                                                  RTX4090, vllm_version="0.30.0"
                                                  ).tightest.weights.value_bytes


def test_the_drafter_is_on_the_last_pipeline_stage_only():
    s = SPEC.with_(pipeline_parallel_size=2)
    p = plan(WITH_DRAFT, s, RTX4090, vllm_version="0.30.0")
    q = plan(TARGET, s, RTX4090, vllm_version="0.30.0")
    first, last = p.ledgers[0], p.ledgers[-1]
    assert first.weights.value_bytes == q.ledgers[0].weights.value_bytes
    assert last.weights.value_bytes == q.ledgers[-1].weights.value_bytes + 988_000_000
    assert first.kv_bytes_per_token == q.ledgers[0].kv_bytes_per_token
    assert last.kv_bytes_per_token == q.ledgers[-1].kv_bytes_per_token + 12_288


@pytest.mark.parametrize("version, explicit, needle", [
    ("0.10.1", True, "Speculative decoding with draft model is not supported yet. Please "
                     "consider using other speculative decoding methods such as ngram, "
                     "medusa, eagle, or deepseek_mtp."),
    ("0.12.0", True, "Draft model speculative decoding is not supported yet. Please consider "
                     "using other speculative decoding methods such as ngram, medusa, eagle, "
                     "or mtp."),
    ("0.14.1", False, "Speculative decoding with draft model is not supported yet. Please "
                      "consider using other speculative decoding methods such as ngram, "
                      "medusa, eagle, or mtp."),
    ("0.15.0", False, "Unsupported speculative method: 'None'"),
])
def test_releases_that_refuse_a_draft_model(version, explicit, needle):
    s = SPEC if explicit else replace(SPEC, speculative_method=None)
    with pytest.raises(UsageError) as exc:
        plan(WITH_DRAFT, s, RTX4090, vllm_version=version)
    assert str(exc.value.what) == needle


@pytest.mark.parametrize("version, method", [("0.15.0", "draft_model"), ("0.17.0", None),
                                             ("0.12.0", "eagle")])
def test_releases_that_run_it(version, method):
    s = replace(SPEC, speculative_method=method)
    draft = replace(DRAFT, method="eagle") if method == "eagle" else DRAFT
    p = plan(replace(TARGET, draft=draft), s, RTX4090, vllm_version=version)
    assert p.kv.bytes_per_token == 40_960


def test_v1_up_to_092_falls_back_to_v0_for_a_draft_model():
    """0.9.2's v1 runs n-gram / EAGLE / Medusa / MTP only: any other drafter (or one given
    without a method) makes the default engine fall back to v0; v1 asked for is refused
    (engine/arg_utils.py `_raise_or_fallback` with VLLM_USE_V1=1)."""
    p = plan(WITH_DRAFT, SPEC, RTX4090, vllm_version="0.9.2")
    assert p.engine == "v0"
    assert any("speculative decoding (draft_model)" in a for a in p.assumptions)
    eagle = plan(replace(TARGET, draft=replace(DRAFT, method="eagle")),
                 replace(SPEC, speculative_method="eagle"), RTX4090, vllm_version="0.9.2")
    assert eagle.engine == "v1"
    with pytest.raises(UsageError, match=r"VLLM_USE_V1=1 is not supported with Speculative"):
        plan(WITH_DRAFT, SPEC, RTX4090, vllm_version="0.9.2", engine="v1")


def test_v0_07_to_092_does_not_deduct_the_drafter_weights():
    """v0 0.7-0.9.2: non-KV memory is the target runner's weights + peak + non-torch; the
    drafter's weights load before profiling and stay outside the budget. Its KV layers share
    the blocks (the proposer cache gets the same number of blocks)."""
    p = plan(WITH_DRAFT, SPEC, RTX4090, vllm_version="0.9.2", engine="v0")
    q = plan(TARGET, SPEC, RTX4090, vllm_version="0.9.2", engine="v0")
    assert p.tightest.weights.value_bytes == q.tightest.weights.value_bytes
    assert p.kv.bytes_per_token == 40_960
    assert any("does not deduct its weights" in a for a in p.assumptions)
    old = plan(WITH_DRAFT, SPEC, RTX4090, vllm_version="0.6.5")
    assert (old.tightest.weights.value_bytes
            == plan(TARGET, SPEC, RTX4090, vllm_version="0.6.5").tightest.weights.value_bytes
            + 988_000_000)


def test_medusa_heads_add_weights_not_kv():
    heads = DraftModel(name="m/medusa", method="medusa", weights_bytes=GIB, attention=())
    s = replace(SPEC, speculative_method="medusa")
    p = plan(replace(TARGET, draft=heads), s, RTX4090, vllm_version="0.30.0")
    assert p.kv.bytes_per_token == 28_672
    assert any("no KV layers" in a for a in p.assumptions)


def test_a_drafter_with_unlike_layers_counts_each():
    """23 layers of 2 KV heads x 64 and one of 4 x 64: 23 x 512 + 1024 = 12,800 B/token."""
    layers = DRAFT_LAYERS[:23] + (AttentionSpec(kind=FULL, num_kv_heads=4, head_dim=64),)
    p = plan(replace(TARGET, draft=replace(DRAFT, attention=layers)), SPEC, RTX4090,
             vllm_version="0.30.0")
    assert p.kv.bytes_per_token == 28_672 + 12_800


def test_speculative_refusals_by_engine_and_mamba_layers():
    """V0 refuses any speculative config from 0.10 (platforms/cuda.py); V1 refuses it on
    models with Mamba / linear-attention layers: Mamba2 layers in 0.9.2, any in 0.10.0-0.10.1,
    any but Qwen3-Next's in 0.10.2-0.16 (mamba/abstract.py), none from 0.17."""
    from core_specs import qwen3_next_kv_only
    h100 = lookup_gpu("H100-80GB")
    ngram = Settings(max_model_len=8192, num_speculative_tokens=3, speculative_method="ngram")
    with pytest.raises(UsageError, match="Speculative decoding is not supported on vLLM V0."):
        plan(TARGET, ngram, h100, vllm_version="0.10.1", engine="v0")
    assert plan(TARGET, ngram, h100, vllm_version="0.9.2", engine="v0").outcome.ok
    nxt = qwen3_next_kv_only()
    other = replace(nxt, model_type="qwen3_5", architecture="Qwen3_5ForCausalLM")
    tp4 = ngram.with_(tensor_parallel_size=4)
    for version in ("0.10.1", "0.16.0"):
        with pytest.raises(UsageError, match="Mamba with speculative decoding is not supported"):
            plan(other, tp4, h100, vllm_version=version, engine="v1")
    with pytest.raises(UsageError, match="Mamba with speculative decoding"):
        plan(nxt, tp4, h100, vllm_version="0.10.1", engine="v1")
    for version in ("0.10.2", "0.16.0"):
        plan(nxt, tp4, h100, vllm_version=version, engine="v1")
    plan(other, tp4, h100, vllm_version="0.17.0", engine="v1")
    plan(other, tp4, h100, vllm_version="0.9.2", engine="v1")          # GDN: not Mamba2
    plan(other, tp4.with_(num_speculative_tokens=0, speculative_method=None), h100,
         vllm_version="0.16.0", engine="v1")


def test_speculative_methods_model_runner_v2_runs_by_release():
    """Model Runner V2 profiles no rejection sampler; the methods it hands back to the V1
    runner shrink: n-gram runs on V2 from 0.32 (config/vllm.py)."""
    h200 = lookup_gpu("H200")
    plain = Settings(max_model_len=8192)
    ngram = plain.with_(num_speculative_tokens=3, speculative_method="ngram")

    def act(version, s):
        return plan(TARGET, s, h200, vllm_version=version).tightest.activation.value_bytes
    assert act("0.31.0", ngram) > act("0.31.0", plain)
    assert act("0.32.0", ngram) == act("0.32.0", plain)
    suffix = plain.with_(num_speculative_tokens=3, speculative_method="suffix")
    assert act("0.33.0", suffix) > act("0.33.0", plain)


@pytest.mark.parametrize("version, method, engine", [
    ("0.8.2", "ngram", "v0"), ("0.8.3", "ngram", "v1"), ("0.8.3", "eagle3", "v0"),
    ("0.8.5", "eagle3", "v1"), ("0.8.5", "deepseek_mtp", "v0"), ("0.9.0", "deepseek_mtp", "v1"),
    ("0.9.2", "mtp", "v0"), ("0.10.0", "mtp", "v1")])
def test_speculative_methods_v1_ran_before_0_10(version, method, engine):
    """engine/arg_utils.py `_is_v1_supported_oracle`: any speculation fell back to V0 in
    0.8.0-0.8.2; V1 took n-gram and EAGLE from 0.8.3, EAGLE-3 from 0.8.5, Medusa and
    DeepSeek MTP from 0.9.0; others fell back until V0's removal."""
    s = Settings(max_model_len=8192, num_speculative_tokens=2, speculative_method=method)
    assert plan(TARGET, s, lookup_gpu("H100-80GB"), vllm_version=version).engine == engine


def test_eagle3_targets_by_release():
    """config/speculative.py: EAGLE-3 only for target model types containing a listed name
    (Llama only 0.8.5-0.10.0; + Qwen 0.10.1; ...; none from 0.22), in each release's words."""
    h100 = lookup_gpu("H100-80GB")
    eagle3 = Settings(max_model_len=8192, num_speculative_tokens=2, speculative_method="eagle3")
    qwen = replace(TARGET, model_type="qwen3")
    glm = replace(TARGET, model_type="glm4_moe")
    with pytest.raises(UsageError) as exc:
        plan(qwen, eagle3, h100, vllm_version="0.10.0")
    assert exc.value.what == ("Eagle3 is only supported for Llama models. Got "
                              "self.target_model_config.hf_text_config.model_type='qwen3'")
    plan(qwen, eagle3, h100, vllm_version="0.10.1")
    with pytest.raises(UsageError) as exc:
        plan(glm, eagle3, h100, vllm_version="0.19.0")
    assert exc.value.what.startswith("eagle3 is only supported for ['llama', 'qwen', ")
    plan(glm, eagle3, h100, vllm_version="0.22.0")


def test_async_scheduling_default_with_speculation_pp_and_mamba_modes():
    """config/vllm.py: the default (on from 0.14) is turned off for speculative methods other
    than EAGLE / MTP kinds (ngram_gpu kept from 0.18, draft_model from 0.32), for PP > 1 in
    0.14-0.15 (the V1 model runner only from 0.32), and from 0.33 on the V1 runner only."""
    from vramguard.core.rules import resolve_rules
    from vramguard.core.stage_terms import async_scheduling

    def on(version, v2=False, **kw):
        s = Settings(**kw)
        return async_scheduling(TARGET, s, resolve_rules(version), v2)
    spec = {"num_speculative_tokens": 3}
    assert on("0.20.0") and on("0.20.0", speculative_method="eagle3", **spec)
    assert not on("0.20.0", speculative_method="ngram", **spec)
    assert on("0.20.0", speculative_method="ngram_gpu", **spec)
    assert not on("0.17.0", speculative_method="ngram_gpu", **spec)
    assert not on("0.31.0", speculative_method="draft_model", **spec)
    assert on("0.32.0", speculative_method="draft_model", **spec)
    assert not on("0.15.0", pipeline_parallel_size=2) and on("0.20.0", pipeline_parallel_size=2)
    assert not on("0.32.0", pipeline_parallel_size=2) and on("0.32.0", True, pipeline_parallel_size=2)
    assert not on("0.32.0", True, speculative_method="ngram", **spec)
    assert on("0.33.0", True, speculative_method="ngram", **spec)
    assert not on("0.33.0", False, speculative_method="ngram", **spec)
    assert not on("0.20.0", speculative_method="ngram", async_scheduling=False, **spec) and \
        on("0.20.0", speculative_method="ngram", async_scheduling=True, **spec)


def test_speculative_tokens_without_a_method_or_model():
    """SpeculativeConfig: 0.8.2-0.10.2 let DeepSeek-V3 (+ MiMo 0.9, ERNIE-4.5-MoE and
    Qwen3-Next 0.10.2) draft with their MTP layers when no model is named, and refuse other
    models; from 0.11 a method is required."""
    h100 = lookup_gpu("H100-80GB")
    bare = Settings(max_model_len=8192, num_speculative_tokens=2)
    ds = replace(TARGET, model_type="deepseek_v3")
    with pytest.raises(UsageError) as exc:
        plan(TARGET, bare, h100, vllm_version="0.9.2")
    assert exc.value.what == "num_speculative_tokens was provided without speculative model."
    plan(ds, bare, h100, vllm_version="0.9.2")
    with pytest.raises(UsageError) as exc:
        plan(ds, bare, h100, vllm_version="0.11.0")
    assert exc.value.what == ("num_speculative_tokens was provided but without speculative "
                              "model.")
    plan(TARGET, bare.with_(speculative_method="ngram"), h100, vllm_version="0.11.0")


@pytest.mark.parametrize("version, method, pp, text", [
    ("0.10.2", "eagle", 1, "Currently, speculative decoding is not supported with async scheduling."),
    ("0.10.2", None, 2, "Async scheduling is not supported with pipeline-parallel-size > 1."),
    ("0.12.0", "ngram", 1, "Currently, async scheduling is only supported with EAGLE/MTP kind of "
                           "speculative decoding"),
    ("0.14.0", None, 2, "Async scheduling is not yet compatible with pipeline_parallel_size > 1."),
    ("0.20.0", "ngram", 1, "Currently, async scheduling is only supported with EAGLE/MTP/Draft "
                           "Model/NGram GPU kind of speculative decoding"),
    ("0.33.0", "suffix", 1, "Async scheduling is not supported by the V1 model runner with "
                            "suffix-based speculative decoding."),
])
def test_explicit_async_scheduling_refusals(version, method, pp, text):
    """--async-scheduling given with a speculative method or PP the release cannot schedule
    asynchronously: vLLM's error, in the release's words."""
    s = Settings(max_model_len=8192, async_scheduling=True, pipeline_parallel_size=pp)
    if method:
        s = s.with_(num_speculative_tokens=2, speculative_method=method)
    with pytest.raises(UsageError) as exc:
        plan(TARGET, s, lookup_gpu("H100-80GB"), vllm_version=version, engine="v1")
    assert exc.value.what == text


def test_explicit_async_scheduling_accepted():
    h100 = lookup_gpu("H100-80GB")
    s = Settings(max_model_len=8192, async_scheduling=True, num_speculative_tokens=2)
    for version, method in (("0.12.0", "eagle3"), ("0.16.0", "draft_model"), ("0.33.0", "ngram")):
        plan(TARGET, s.with_(speculative_method=method), h100, vllm_version=version)
    plan(TARGET, Settings(max_model_len=8192, async_scheduling=True, pipeline_parallel_size=2),
         h100, vllm_version="0.20.0")
