"""core/_memo.py: memoized planner terms give plans identical to fresh ones.

Plans of many random settings (every field the planner reads, including those the memo
keys leave out) are made twice: with the caches on (and warm from earlier settings) and
off. `Plan.to_dict()` must be equal, and a repeated plan must be served from the caches."""

from __future__ import annotations

import collections
import random
from functools import lru_cache

import pytest

from vramguard.core import _memo, planner
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.settings import Settings
from vramguard.errors import UsageError
from vramguard.sources.resolve import load_model_spec

MODELS = ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "google/gemma-2-9b-it",
          "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V2-Lite-Chat",
          "Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct", "openai/gpt-oss-20b",
          "tiiuae/falcon-mamba-7b", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
          "deepseek-ai/DeepSeek-V4-Flash")
GPUS = ("H100-80GB", "A100-40GB", "L4", "T4", "B200", "MI300X")
VERSIONS = (None, "0.33.0", "0.27.0", "0.22.0", "0.11.0", "0.10.1", "0.9.0", "0.8.5", "0.7.3",
            "0.6.3")


@lru_cache(maxsize=None)
def spec(model):
    return load_model_spec(model, offline=True)


@pytest.fixture
def memo_state():
    _memo.clear()
    yield
    _memo.set_enabled(True)


def random_settings(rng: random.Random) -> Settings:
    ch: dict = {}
    pick = rng.choice
    if rng.random() < 0.9:
        ch["gpu_memory_utilization"] = pick((0.5, 0.8, 0.9, 0.92, 0.95))
    if rng.random() < 0.8:
        ch["max_model_len"] = pick((512, 2048, 4096, 8192, 32768))
    for name, values in (("max_num_seqs", (1, 16, 64, 256, 1024)),
                         ("max_num_batched_tokens", (1024, 2048, 8192, 16384)),
                         ("tensor_parallel_size", (1, 2, 4)),
                         ("pipeline_parallel_size", (1, 2)),
                         ("kv_cache_dtype", ("auto", "fp8", "fp8_e5m2")),
                         ("quantization", ("fp8", "awq")),
                         ("dtype", ("auto", "float16", "bfloat16")),
                         ("enforce_eager", (True,)),
                         ("block_size", (16, 32)),
                         ("kv_cache_memory_bytes", (4 << 30, 20 << 30)),
                         ("num_gpu_blocks_override", (100, 5000)),
                         ("cpu_offload_gb", (0.0, 4.0)),
                         ("enable_expert_parallel", (True,)),
                         ("enable_prefix_caching", (True, False)),
                         ("async_scheduling", (True, False)),
                         ("enable_chunked_prefill", (True, False)),
                         ("disable_sliding_window", (True,)),
                         ("disable_hybrid_kv_cache_manager", (True,)),
                         ("num_speculative_tokens", (0, 3)),
                         ("speculative_method", ("mtp", "ngram")),
                         ("enable_lora", (True,)),
                         ("max_loras", (1, 4)),
                         ("max_lora_rank", (8, 64)),
                         ("data_parallel_size", (1, 2)),
                         ("swap_space", (0.0, 4.0)),
                         ("entrypoint", ("serve", "llm")),
                         ("optimization_level", (0, 1, 3)),
                         ("compilation_mode", (0, 3)),
                         ("cudagraph_mode", ("NONE", "PIECEWISE", "FULL_DECODE_ONLY")),
                         ("cudagraph_capture_sizes", ((1, 2, 4, 8), (16, 4096))),
                         ("max_cudagraph_capture_size", (64, 256)),
                         ("mamba_cache_dtype", ("float32",)),
                         ("mamba_ssm_cache_dtype", ("float32", "float16")),
                         ("limit_mm_per_prompt", ((("image", 0), ("video", 0)),
                                                  (("image", 1),)))):
        if rng.random() < 0.25:
            ch[name] = pick(values)
    if ch.get("max_num_batched_tokens") and ch.get("max_num_seqs", 0) > ch["max_num_batched_tokens"]:
        ch["max_num_seqs"] = ch["max_num_batched_tokens"]
    return Settings(**ch, user_set=frozenset(ch))


def outcome(fn):
    try:
        return fn().to_dict()
    except UsageError as exc:
        return ("error", exc.line())


def test_memoized_plans_equal_fresh_plans(memo_state):
    rng = random.Random(1234)
    cases = []
    for _ in range(700):
        cases.append((rng.choice(MODELS), rng.choice(GPUS), rng.choice(VERSIONS),
                      random_settings(rng), rng.choice((None, None, 30 << 30))))
    for model, gpu, version, s, free in cases:
        g = lookup_gpu(gpu)
        args = (spec(model), s, g)
        kw = {"vllm_version": version, "free_bytes": free}
        _memo.set_enabled(True)
        memo = outcome(lambda: planner.plan(*args, **kw))
        misses = _memo.stats["misses"]
        again = outcome(lambda: planner.plan(*args, **kw))       # a cache hit
        if not isinstance(memo, tuple):
            # every term of `again` was served from the caches (errors are raised afresh)
            assert _memo.stats["misses"] == misses, (model, gpu, version, s)
        _memo.set_enabled(False)
        fresh = outcome(lambda: planner.plan(*args, **kw))
        assert memo == fresh == again, (model, gpu, version, s)
    assert _memo.stats["misses"] > 0


def test_spec_identity_not_equality():
    """Two equal-looking specs never share an entry by id reuse: the slot keeps the spec."""
    _memo.clear()
    a = spec("Qwen/Qwen2.5-7B-Instruct")
    s = Settings()
    w1 = _memo.weights_per_rank(a, s)
    first = _memo.stats["misses"]       # the weights and the model's checkpoint scale
    import dataclasses
    b = dataclasses.replace(a, checkpoint=None, num_layers=a.num_layers)
    assert _memo.weights_per_rank(b, s) == w1          # same facts, computed afresh
    assert _memo.stats["misses"] == 2 * first


def test_tables_are_bounded():
    _memo.clear()
    s = Settings()
    specs = [dataclasses_copy(spec("Qwen/Qwen2.5-7B-Instruct")) for _ in range(_memo.MAX_SPECS + 5)]
    for sp in specs:
        _memo.weights_per_rank(sp, s)
    assert len(_memo._specs) == _memo.MAX_SPECS


def dataclasses_copy(x):
    import dataclasses
    return dataclasses.replace(x)


# One field at a time from a base: every variant is planned right after the base, so a cache
# keyed on too little (the stage terms without tokens/seqs, the KV layout's shape without the
# batched tokens, the flag sources, the weights, the checkpoint scale) serves the base's
# entry and the plan differs from a fresh one.
SWEEP = {
    "max_num_batched_tokens": (1024, 4096, 16384), "max_num_seqs": (1, 8, 200),
    "gpu_memory_utilization": (0.5, 0.95), "max_model_len": (1024, 8192),
    "tensor_parallel_size": (2, 4), "pipeline_parallel_size": (2,),
    "data_parallel_size": (2,), "kv_cache_dtype": ("fp8", "fp8_e5m2"),
    "quantization": ("fp8", "awq"), "allow_deprecated_quantization": (True,), "dtype": ("float16", "float32"), "enforce_eager": (True,),
    "block_size": (32,), "cpu_offload_gb": (2.0,), "enable_expert_parallel": (True,),
    "enable_chunked_prefill": (False,), "disable_sliding_window": (True,),
    "disable_hybrid_kv_cache_manager": (True,), "num_speculative_tokens": (2,),
    "enable_lora": (True,), "max_loras": (4,), "max_lora_rank": (64,),
    "disable_custom_all_reduce": (True,), "entrypoint": ("llm",),
    "language_model_only": (True,), "skip_mm_profiling": (True,),
    "enable_prefix_caching": (False, True), "async_scheduling": (False, True),
    "mamba_cache_dtype": ("float32",), "mamba_ssm_cache_dtype": ("float32",),
    "optimization_level": (0,), "compilation_mode": (0,), "cudagraph_mode": ("PIECEWISE",),
    "cudagraph_capture_sizes": ((1, 2, 4),), "performance_mode": ("throughput",),
    "limit_mm_per_prompt": ((("image", 0), ("video", 0), ("audio", 0)), (("image", 0),)),
    "mm_encoder_tp_mode": ("data",), "enable_multimodal_encoder_data_parallel": (True,),
    "mm_ipc_gpu_memory_gb": (1.5,),
    "config_overrides": ((("--hf-overrides", '{"rope_theta": 1000000.0}'),),),
    "flag_spellings": ((("--speculative-config", '{"num_speculative_tokens": 2}'),),
                          (("--spec-tokens", "2"),)),
}
SWEEP_MODELS = ("google/gemma-2-9b-it", "Qwen/Qwen3-Next-80B-A3B-Instruct",
                "deepseek-ai/DeepSeek-V2-Lite-Chat", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b",
                "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3.5-4B", "google/gemma-4-E2B-it",
                "deepseek-ai/DeepSeek-V4-Flash")


@pytest.mark.parametrize("model", SWEEP_MODELS)
@pytest.mark.parametrize("version", (None, "0.11.0", "0.8.5"))
@pytest.mark.parametrize("user_set", (True, False))
def test_one_field_changed_memo_equals_fresh(model, version, user_set):
    import dataclasses
    g = lookup_gpu("H100-80GB")
    base = Settings(max_num_seqs=64, max_model_len=4096, max_num_batched_tokens=2048)
    _memo.clear()
    for name, values in SWEEP.items():
        for value in values:
            for s in (base, dataclasses.replace(base, **{name: value})):
                if user_set:
                    s = dataclasses.replace(s, user_set=frozenset(
                        f.name for f in dataclasses.fields(s)
                        if getattr(s, f.name) != getattr(Settings(), f.name)))
                with_memo = outcome(lambda: planner.plan(spec(model), s, g, vllm_version=version))
                with _memo.disabled():
                    fresh = outcome(lambda: planner.plan(spec(model), s, g,
                                                         vllm_version=version))
                assert with_memo == fresh, (model, version, name, value)


def test_layout_shape_with_inflight_equals_build_layout():
    """kv.build_layout = the shape (memoized without the batched tokens) + in-flight tokens."""
    from vramguard.core import kv
    from vramguard.core.rules import resolve_rules
    for model in SWEEP_MODELS:
        sp = spec(model)
        for version in (None, "0.11.0", "0.8.5"):
            rules = resolve_rules(version)
            for s in (Settings(), Settings(pipeline_parallel_size=2, tensor_parallel_size=2)):
                kw = dict(kv_bytes=2, mamba_bytes=2, block_size=16, engine=rules.engine)
                for tokens in (512, 8192):
                    _memo.clear()
                    first = _memo.build_layout(sp, s, rules, (0, sp.num_layers),
                                               max_num_batched_tokens=tokens * 2, **kw)
                    got = _memo.build_layout(sp, s, rules, (0, sp.num_layers),
                                             max_num_batched_tokens=tokens, **kw)
                    want = kv.build_layout(sp, s, rules, (0, sp.num_layers),
                                           max_num_batched_tokens=tokens, **kw)
                    assert got == want and repr(got) == repr(want), (model, version, tokens)
                    assert first.groups == got.groups


# ---- the per-model caches of this round: each keyed on everything it depends on ----------

RUN_MODELS = SWEEP_MODELS + ("meta-llama/Llama-3.1-8B-Instruct", "tiiuae/falcon-mamba-7b")


@pytest.mark.parametrize("model", RUN_MODELS)
def test_layout_from_runs_equals_layer_by_layer(model):
    """`kv.layout_shape` over counted distinct specs = one pass per layer (one run each)."""
    from vramguard.core import kv
    from vramguard.core.rules import resolve_rules
    from vramguard.core.weights import pp_layer_split
    sp = spec(model)
    for version in (None, "0.11.0", "0.8.5"):
        rules = resolve_rules(version)
        for s in (Settings(), Settings(tensor_parallel_size=2, num_speculative_tokens=2),
                  Settings(disable_sliding_window=True, pipeline_parallel_size=3)):
            for rng in pp_layer_split(sp.num_layers, s.pipeline_parallel_size):
                kw = dict(kv_bytes=1, mamba_bytes=2, block_size=16, engine=rules.engine)
                per_layer = tuple((l.attention, 1) for l in sp.layers[rng[0]:rng[1]])
                want = kv.layout_shape(sp, s, rules, rng, runs=per_layer, **kw)
                _memo.clear()
                for other in pp_layer_split(sp.num_layers, 2) + ((0, sp.num_layers),):
                    _memo.attention_runs(sp, other)        # other ranges first
                got = _memo.layout_shape(sp, s, rules, rng, **kw)
                assert got == want and repr(got) == repr(want), (model, version, s, rng)


@pytest.mark.parametrize("model", RUN_MODELS)
def test_weights_from_distinct_layers_bit_identical(model):
    """The weights summed from each distinct layer's terms equal a loop over the layers, bit
    for bit (the float sum keeps the layer order)."""
    from vramguard.core import weights
    sp = spec(model)
    kv_default = sp.num_kv_heads or 1
    every_layer = (tuple((l.params, l.attention.num_kv_heads or kv_default) for l in sp.layers),
                   tuple(range(len(sp.layers))))
    for s in (Settings(), Settings(tensor_parallel_size=4, quantization="fp8"),
              Settings(pipeline_parallel_size=3, enable_expert_parallel=True,
                       tensor_parallel_size=2)):
        want = weights.weights_per_rank(sp, s, (9, 0), index=every_layer)
        _memo.clear()
        got = _memo.weights_per_rank(sp, s, (9, 0))
        assert got == want, (model, s)
        for stage in range(s.pipeline_parallel_size):
            pp = (stage, s.pipeline_parallel_size)
            a = weights._rank_bytes(sp, s, pp, 2, None, index=every_layer)
            b = weights._rank_bytes(sp, s, pp, 2, None, index=_memo.layer_index(sp))
            assert a == b and a[0].hex() == b[0].hex(), (model, s, stage)
        one = Settings(tensor_parallel_size=s.tensor_parallel_size)
        bare = layers_only(sp)
        got = weights._rank_bytes(bare, one, (0, 1), 2, None, index=_memo.layer_index(bare))
        assert got == layers_by_loop(sp, one.tensor_parallel_size, 2), (model, s)


def layers_only(sp):
    """The model without embedding, head, final norm, extras and vision (adds exact zeros)."""
    import dataclasses
    return dataclasses.replace(sp, embed_params=0, lm_head_params=0, final_norm_params=0,
                               extra_params=0, extra_tp_params=0, vision=None)


def layers_by_loop(sp, tp, dtype_b):
    """The layer part of `weights._rank_bytes` (TP `tp`, no quantization, one stage) as a
    plain loop over the layers (the code before the distinct-layer terms)."""
    total_b, params = 0.0, 0
    for layer in sp.layers:
        p = layer.params
        kv_heads = layer.attention.num_kv_heads or sp.num_kv_heads or 1
        kv_div = max(1, min(tp, kv_heads))
        att = p.attn_q / tp + p.attn_o / tp + p.attn_kv / kv_div
        rep = p.attn_replicated + p.router + p.norms
        dense = p.mlp / tp + p.shared_experts / tp + p.mixer / tp
        experts = p.experts / tp
        total_b += (att * dtype_b + dense * dtype_b + experts * dtype_b * 1.0
                    + (p.router + p.norms) * dtype_b)
        total_b += p.attn_replicated * dtype_b
        params += int(att + rep + dense + experts)
    return total_b, params


def test_flag_sources_keyed_on_the_flags_in_user_set():
    """Same values, user_set differing in one flag the sources read: different sources."""
    g = lookup_gpu("H100-80GB")
    sp = spec("Qwen/Qwen2.5-7B-Instruct")
    base = dict(max_num_seqs=8, tensor_parallel_size=1, kv_cache_dtype="auto")
    cases = [frozenset({"max_num_seqs"}), frozenset({"max_num_seqs", "tensor_parallel_size"}),
             frozenset({"max_num_seqs", "kv_cache_dtype"}), frozenset(),
             frozenset({"enable_prefix_caching"})]
    _memo.clear()
    seen = []
    for user in cases + cases[::-1]:
        s = Settings(**base, user_set=user)
        got = planner.plan(sp, s, g, detail=False).settings_sources
        with _memo.disabled():
            want = planner.plan(sp, s, g, detail=False).settings_sources
        assert got == want, user
        seen.append(got["tensor_parallel_size"])
    assert "user" in seen and "vllm_default" in seen


def test_stage_terms_second_level_keyed_on_tokens_and_seqs():
    """Within one first-level entry (same Settings fields), every (tokens, seqs) pair."""
    g = lookup_gpu("H100-80GB")
    sp = spec("Qwen/Qwen3-Next-80B-A3B-Instruct")
    _memo.clear()
    for tokens, seqs in ((2048, 64), (8192, 64), (2048, 256), (8192, 256), (2048, 64)):
        s = Settings(tensor_parallel_size=2, max_num_batched_tokens=tokens, max_num_seqs=seqs,
                     gpu_memory_utilization=0.95)
        got = planner.plan(sp, s, g).to_dict()
        with _memo.disabled():
            assert got == planner.plan(sp, s, g).to_dict(), (tokens, seqs)


def test_kv_dtype_siblings_share_the_runtime_terms_and_plan_as_fresh():
    """Families that differ only in the KV-cache dtype share their row, settings base and
    the terms that do not read it (`_memo.family`'s `shared`): every KV dtype planned after
    another, for random settings, gives the fresh plan."""
    from dataclasses import replace
    rng = random.Random(77)
    shared_seen = 0
    for _ in range(250):
        model, gpu, version = rng.choice(MODELS), rng.choice(GPUS), rng.choice(VERSIONS)
        base = random_settings(rng)
        g = lookup_gpu(gpu)
        _memo.clear()
        for kv in rng.sample(("auto", "fp8", "fp8_e5m2", "fp8_e4m3"), 3):
            s = replace(base, kv_cache_dtype=kv, user_set=base.user_set | {"kv_cache_dtype"})
            kw = {"vllm_version": version}
            memo = outcome(lambda: planner.plan(spec(model), s, g, **kw))
            with _memo.disabled():
                fresh = outcome(lambda: planner.plan(spec(model), s, g, **kw))
            assert memo == fresh, (model, gpu, version, s)
        families = _memo._specs[id(spec(model))][1].get("family", {}).values()
        by_shared = collections.Counter(id(f.shared) for _g, f in families)
        shared_seen += any(n > 1 for n in by_shared.values())
    assert shared_seen > 50


def test_last_model_tables_follow_clear_and_other_models():
    """`_table` keeps the last model's tables at hand: never another model's, none after
    clear()."""
    import dataclasses
    a = spec("Qwen/Qwen2.5-7B-Instruct")
    b = dataclasses.replace(a, num_layers=a.num_layers)     # equal facts, another object
    s = Settings()
    _memo.clear()
    _memo.weights_per_rank(a, s)
    first = _memo.stats["misses"]
    _memo.weights_per_rank(b, s)
    assert _memo.stats["misses"] == 2 * first
    _memo.weights_per_rank(a, s)
    assert _memo.stats["misses"] == 2 * first               # a's tables again
    _memo.clear()
    _memo.weights_per_rank(a, s)
    assert _memo.stats["misses"] == first


def test_tuner_plan_cache_gpu_key_by_value():
    """Equal GPU targets (distinct objects) share plans; different ones do not."""
    from vramguard.core.tuner import GpuTarget, TuneRequest
    from vramguard.core.tuner_candidates import _Ctx
    h = lookup_gpu("H100-80GB")
    a, b, c = GpuTarget(h), GpuTarget(h), GpuTarget(h, 40 << 30)
    ctx = _Ctx(TuneRequest(spec("Qwen/Qwen2.5-7B-Instruct"), Settings(), (a, b, c)))
    assert ctx.gpu_key(a) == ctx.gpu_key(b) != ctx.gpu_key(c)
    s = Settings(gpu_memory_utilization=0.6)
    assert ctx.plan(s, a) is ctx.plan(s, b)
    assert ctx.plan(s, c).to_dict() != ctx.plan(s, a).to_dict()
    assert ctx.runs == 2


# Settings that fail only vLLM's checks of the searched flags (`validation.validate_searched`),
# by release; each follows a valid plan of its family, which skips the other checks.
SEARCHED_INVALID = (
    (None, dict(gpu_memory_utilization=1.5)),
    (None, dict(max_model_len_auto=True, max_model_len=4096)),
    ("0.11.0", dict(max_model_len_auto=True)),
    ("0.9.0", dict(kv_cache_memory_bytes=8 << 30)),
    (None, dict(max_num_batched_tokens=32, max_num_seqs=64)),
    (None, dict(max_model_len=10 ** 7)),                       # resolve_settings' own check
)


@pytest.mark.parametrize("version,bad", SEARCHED_INVALID)
def test_family_checks_the_searched_flags_of_every_candidate(version, bad):
    """A family whose other flags passed every check still refuses a searched flag, with the
    same error as a fresh plan; a refused candidate does not mark its family checked."""
    import dataclasses
    g = lookup_gpu("H100-80GB")
    sp = spec("Qwen/Qwen2.5-7B-Instruct")
    good = Settings(gpu_memory_utilization=0.9, max_model_len=4096)
    bad_s = dataclasses.replace(good, **bad)
    _memo.clear()
    for order in ((good, bad_s, good), (bad_s, good, bad_s)):
        for s in order:
            got = outcome(lambda: planner.plan(sp, s, g, vllm_version=version))
            with _memo.disabled():
                want = outcome(lambda: planner.plan(sp, s, g, vllm_version=version))
            assert got == want, (version, bad, s)
    assert isinstance(outcome(lambda: planner.plan(sp, bad_s, g, vllm_version=version)), tuple)


def test_flag_releases_checked_per_candidate_user_set():
    """Which flags were given is searched (`user_set`): a flag the release lacks is refused
    even when its family passed the checks with the flag at its default."""
    g = lookup_gpu("H100-80GB")
    sp = spec("Qwen/Qwen2.5-7B-Instruct")
    quiet = Settings(max_model_len=4096, user_set=frozenset({"max_model_len"}))
    given = dataclasses_replace(quiet, user_set=frozenset({"max_model_len", "mm_encoder_tp_mode"}))
    _memo.clear()
    assert not isinstance(outcome(lambda: planner.plan(sp, quiet, g, vllm_version="0.9.0")),
                          tuple)
    got = outcome(lambda: planner.plan(sp, given, g, vllm_version="0.9.0"))
    assert isinstance(got, tuple) and "unrecognized arguments" in got[1]


def dataclasses_replace(x, **kw):
    import dataclasses
    return dataclasses.replace(x, **kw)
