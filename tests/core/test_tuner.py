"""The tuner (core.tuner.tune): hand-checked arithmetic, the three reference examples, pins,
impossible targets. Models come from the embedded catalog (no network)."""

from __future__ import annotations

import math
from functools import lru_cache

import pytest

from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan as replan
from vramguard.core.provenance import GIB, MIB
from vramguard.core.settings import Settings
from vramguard.core.tuner import (LIMIT_PINNED, LIMIT_TARGET, LIMIT_VLLM,
                                  GpuTarget, TuneRequest, default_headroom_bytes, headroom_gib,
                                  max_safe_utilization, tune)
from vramguard.core.workload import Workload
from vramguard.errors import UsageError
from vramguard.sources.resolve import load_model_spec
from vramguard.sources.vllm_args import format_command, parse_vllm_command, settings_to_args


@lru_cache(maxsize=None)
def spec(model_id):
    return load_model_spec(model_id, offline=True)


def gpus(name, n=1, free_gib=None):
    g = lookup_gpu(name)
    free = None if free_gib is None else int(free_gib * GIB)
    return tuple(GpuTarget(g, free) for _ in range(n))


def pinned(**flags):
    return Settings(**flags, user_set=frozenset(flags))


def request(model, gpu="H100-80GB", n=1, **kw):
    return TuneRequest(spec=spec(model), base=kw.pop("base", Settings()),
                       gpus=kw.pop("gpus", None) or gpus(gpu, n), **kw)


def command(opt, model):
    return format_command(model, settings_to_args(opt.settings))


def replanned(opt, model, req):
    """Parse the printed command back and plan it as a user would."""
    cmd = parse_vllm_command(command(opt, model))
    assert cmd.model == model
    return cmd.settings, replan(spec(model), cmd.settings, opt.gpu.spec,
                                vllm_version=req.vllm_version, engine=req.engine,
                                free_bytes=opt.gpu.free_bytes)


# ---- hand-checked helpers ----------------------------------------------------------------

def test_default_headroom_is_4_percent_with_a_512_mib_floor():
    assert default_headroom_bytes(lookup_gpu("H100-80GB")) == int(79.19 * GIB * 0.04)
    small = lookup_gpu("RTX-4070-8GB")            # 7.65 GiB: 4% = 313 MiB < 512 MiB
    assert default_headroom_bytes(small) == 512 * MIB


def test_max_safe_utilization_floors_free_minus_headroom():
    a100 = lookup_gpu("A100-80GB")                # 79.25 GiB as CUDA reports it
    g = GpuTarget(a100, int(40 * GIB))
    # (40 - 3.17) / 79.25 = 0.4647 -> 0.46
    assert max_safe_utilization(g, default_headroom_bytes(a100)) == 0.46
    # idle card, no headroom: capped at 0.95
    assert max_safe_utilization(GpuTarget(a100), 0) == 0.95
    # nothing free
    assert max_safe_utilization(GpuTarget(a100, int(1 * GIB)), 2 * GIB) == 0.0


def test_kv_target_arithmetic_matches_the_plan():
    """supported = floor(target x max_concurrency); max_num_seqs <= supported; for a plain
    GQA model max_concurrency = num_blocks / ceil(L / 16)."""
    model = "meta-llama/Llama-3.1-8B-Instruct"
    req = request(model, "A100-80GB", workload=Workload(1000, 3000, 8000), target_kv_usage=0.5)
    res = tune(req)
    rec = res.recommended
    kv = rec.plan.kv
    assert rec.max_model_len == 8192                       # 8000 rounded up to 256
    assert kv.blocks_per_request == 8192 // 16
    assert kv.max_concurrency == pytest.approx(kv.num_blocks / 512)
    assert rec.supported_concurrency == math.floor(0.5 * kv.max_concurrency)
    assert rec.max_num_seqs <= rec.supported_concurrency
    # 128 KiB/token bf16, 8192 tokens -> 1 GiB per request at TP=1
    assert kv.bytes_per_token == 131072


def test_shared_gpu_keeps_a_headroom():
    model = "Qwen/Qwen2.5-7B-Instruct"
    req = request(model, gpus=gpus("A100-80GB", 1, free_gib=40), workload=Workload(500, 1000, 4000))
    rec = tune(req).recommended
    assert rec is not None and rec.starts
    assert rec.settings.gpu_memory_utilization == 0.46
    assert headroom_gib(rec) >= default_headroom_bytes(lookup_gpu("A100-80GB")) / GIB - 0.01


def test_least_free_gpu_decides():
    model = "Qwen/Qwen2.5-7B-Instruct"
    a100 = lookup_gpu("A100-80GB")
    two = (GpuTarget(a100, int(70 * GIB)), GpuTarget(a100, int(30 * GIB)))
    res = tune(request(model, gpus=two, workload=Workload(500, 1000, 4000), concurrency=8))
    tp2 = [o for o in res.options if o.settings.tensor_parallel_size == 2]
    assert tp2 and all(o.gpu.free_bytes == int(30 * GIB) for o in tp2)
    tp1 = [o for o in res.options if o.settings.tensor_parallel_size == 1]
    assert tp1 and all(o.gpu.free_bytes == int(70 * GIB) for o in tp1)


# ---- the three reference examples ----------------------------------------------------------

def test_qwen7b_on_one_rtx3090_with_p99_6000_starts():
    model = "Qwen/Qwen2.5-7B-Instruct"
    req = request(model, "RTX-3090", workload=Workload(800, 2000, 6000))
    res = tune(req)
    rec = res.recommended
    assert rec is not None and res.reason is None
    assert rec.settings.tensor_parallel_size == 1 and rec.needs_more_gpus == 0
    assert rec.settings.quantization is None
    assert 6000 <= rec.max_model_len == 6144               # p99, never the model's 32768
    settings, p = replanned(rec, model, req)
    assert p.outcome.ok and not p.outcome.risks
    assert settings.max_num_seqs <= 0.7 * p.kv.max_concurrency
    assert command(rec, model).startswith("vllm serve Qwen/Qwen2.5-7B-Instruct ")


def test_70b_bf16_on_one_h100_proposes_tp2_or_fp8_on_one_card():
    model = "meta-llama/Llama-3.3-70B-Instruct"
    req = request(model, "H100-80GB", workload=Workload(1000, 2000, 4000))
    res = tune(req)
    single_bf16 = [o for o in res.options if o.settings.world_size == 1
                   and o.settings.quantization is None]
    assert single_bf16 and not any(o.starts for o in single_bf16)
    rec = res.recommended
    assert rec is not None
    assert (rec.settings.tensor_parallel_size == 2 and rec.needs_more_gpus == 1) or (
        rec.settings.world_size == 1 and rec.settings.quantization == "fp8")
    one_card_fp8 = [o for o in res.options if o.starts and o.settings.world_size == 1
                    and o.settings.quantization == "fp8"]
    assert one_card_fp8, "the fp8 alternative on the one card given is offered"
    assert any("needs 2 GPUs" in n for n in rec.notes)


def test_no_fp8_weights_on_a_gpu_vllm_refuses_them_for():
    """vLLM checks the method's minimum compute capability (fp8: 8.0 up to 0.13, 7.5 from
    0.14): on a V100 (7.0) no fp8-weights option is offered; on a T4 (7.5) only from 0.14."""
    model = "Qwen/Qwen2.5-7B-Instruct"
    for gpu, version, offered in (("V100-32GB", None, False), ("T4", "0.13.0", False),
                                  ("T4", "0.14.0", True)):
        res = tune(request(model, gpu, workload=Workload(500, 1000, 2000),
                           vllm_version=version))
        fp8 = [o for o in res.options if o.settings.quantization == "fp8"]
        assert bool(fp8) is offered, (gpu, version)
        assert res.recommended is not None


def test_bfloat16_config_on_a_t4_before_091_gets_dtype_half():
    """vLLM < 0.9.1 refuses a bfloat16 config on a T4 with --dtype auto: the tuner runs
    float16 (and says so); from 0.9.1 vLLM falls back itself; a pinned bfloat16 is refused."""
    model = "Qwen/Qwen2.5-3B-Instruct"
    wl = Workload(500, 1000, 2000)
    res = tune(request(model, "T4", workload=wl, vllm_version="0.8.5"))
    rec = res.recommended
    assert rec is not None and rec.settings.dtype == "half"
    assert "--dtype half" in command(rec, model)
    assert any(n.startswith("--dtype half") for n in rec.notes)
    s, p = replanned(rec, model, request(model, "T4", workload=wl, vllm_version="0.8.5"))
    assert p.outcome.ok
    rec = tune(request(model, "T4", workload=wl, vllm_version="0.9.1")).recommended
    assert rec is not None and rec.settings.dtype == "auto"
    with pytest.raises(UsageError, match="Bfloat16 is only supported"):
        tune(request(model, "T4", workload=wl, vllm_version="0.8.5",
                     base=pinned(dtype="bfloat16")))


def test_half_b_model_on_h100_is_capped_by_vllm_not_memory():
    model = "Qwen/Qwen2.5-0.5B"
    res = tune(request(model, "H100-80GB", workload=Workload(500, 1500, 3000)))
    rec = res.recommended
    assert rec.limit == LIMIT_VLLM
    assert rec.max_num_seqs == 1024                        # vLLM's default on an H100
    assert rec.supported_concurrency > 1024                # memory would allow more
    assert any("vLLM's default limit" in n for n in rec.notes)


# ---- pins, targets, impossibility ------------------------------------------------------------

def test_pins_are_never_changed():
    model = "meta-llama/Llama-3.1-8B-Instruct"
    base = pinned(max_model_len=16384, kv_cache_dtype="auto", tensor_parallel_size=1)
    res = tune(request(model, "A100-80GB", base=base, concurrency=8))
    assert res.options
    for o in res.options:
        s = o.settings
        assert (s.max_model_len, s.kv_cache_dtype, s.tensor_parallel_size) == (16384, "auto", 1)


def test_pinned_max_num_seqs_is_reported_as_pinned():
    res = tune(request("Qwen/Qwen2.5-7B-Instruct", "A100-80GB", base=pinned(max_num_seqs=4),
                       workload=Workload(500, 1000, 2000)))
    assert res.recommended.max_num_seqs == 4 and res.recommended.limit == LIMIT_PINNED


def test_concurrency_target_is_met_or_explained():
    model = "Qwen/Qwen2.5-7B-Instruct"
    res = tune(request(model, "A100-80GB", workload=Workload(500, 1000, 4000), concurrency=48))
    rec = res.recommended
    assert rec.max_num_seqs == 48 and rec.limit == LIMIT_TARGET
    assert rec.supported_concurrency >= 48


def test_impossible_target_explains_the_nearest_and_the_blocking_pin():
    model = "meta-llama/Llama-3.1-8B-Instruct"
    base = pinned(max_model_len=32768, tensor_parallel_size=1)
    req = request(model, "L4", base=base, concurrency=64)
    res = tune(req)
    assert res.recommended is None
    assert "does not fit" in res.reason
    assert res.nearest and "at most" in res.nearest and "64 concurrent requests of at most" \
        in res.nearest
    assert "max_model_len" in res.blocking_pins


def test_a_pinned_max_num_seqs_is_the_target_the_reason_names():
    """A pinned --max-num-seqs above what the KV target holds: the reason and the nearest
    target speak of those sequences, not of one request."""
    model = "meta-llama/Llama-3.1-8B-Instruct"
    base = pinned(max_model_len=32768, max_num_seqs=128, tensor_parallel_size=1)
    res = tune(request(model, "L4", base=base))
    assert res.recommended is None
    assert res.reason.startswith("the target of 128 concurrent request(s) of 32768 tokens")
    assert res.reason.endswith("(--max-num-seqs 128 is pinned: the KV target holds every "
                               "sequence)")
    assert "128 concurrent requests of at most" in res.nearest


def test_nothing_starts_says_pp_or_a_larger_gpu():
    model = "meta-llama/Llama-3.1-405B"
    req = request(model, "RTX-3090", workload=Workload(500, 1000, 2000), allow_quantization=False,
                  base=pinned(pipeline_parallel_size=1))
    res = tune(req)
    assert res.recommended is None
    assert "pipeline parallelism" in res.reason and "larger GPU" in res.reason


def test_workload_longer_than_the_model_is_bad_input():
    with pytest.raises(UsageError, match="longer than the model's maximum"):
        tune(request("Qwen/Qwen2.5-0.5B", workload=Workload(1000, 2000, 10_000_000)))


def test_a_disabled_sliding_window_limits_the_lengths_tried():
    model = "mistralai/Mistral-7B-v0.1"                      # window 4096, 32768 positions
    base = pinned(disable_sliding_window=True)
    with pytest.raises(UsageError, match=r"longer than the model's maximum length \(4096\)"):
        tune(request(model, "L4", base=base, workload=Workload(800, 2000, 6000)))
    res = tune(request(model, "L4", base=base))
    assert res.recommended.max_model_len == 4096
    assert all(o.max_model_len <= 4096 for o in res.options)
    assert tune(request(model, "L4", workload=Workload(800, 2000, 6000))).recommended


def test_vllms_own_interleaved_window_cap_limits_the_lengths_tried():
    model = "google/gemma-2-9b-it"                  # sliding 4096 / full, 8192 positions
    with pytest.raises(UsageError, match=r"longer than the model's maximum length \(4096\)"):
        tune(request(model, "L40S", vllm_version="0.6.3", workload=Workload(800, 2000, 6000)))
    res = tune(request(model, "L40S", vllm_version="0.6.3"))
    assert res.recommended.max_model_len == 4096
    assert "--disable-sliding-window" not in command(res.recommended, model)
    assert tune(request(model, "L40S", vllm_version="0.6.6",
                        workload=Workload(800, 2000, 6000))).recommended
    xformers = (("VLLM_ATTENTION_BACKEND", "XFORMERS"),)          # 0.6.5+: only then
    assert tune(request(model, "L40S", vllm_version="0.6.6", env=xformers)
                ).recommended.max_model_len == 4096


@pytest.mark.parametrize("kw,match", [({"target_kv_usage": 0}, "outside"),
                                      ({"target_kv_usage": 1.5}, "outside"),
                                      ({"concurrency": 0}, "at least 1"),
                                      ({"headroom_bytes": -1}, ">= 0")])
def test_bad_requests(kw, match):
    with pytest.raises(UsageError, match=match):
        tune(request("Qwen/Qwen2.5-0.5B", **kw))


def test_fixed_pool_alternative_from_0_10_2():
    model = "Qwen/Qwen2.5-7B-Instruct"
    new = tune(request(model, "A100-80GB", workload=Workload(500, 1000, 4000)))
    fixed = [o for o in new.options if o.fixed_pool]
    assert fixed and fixed[0].starts and fixed[0].meets_target
    assert fixed[0].settings.kv_cache_memory_bytes % (16 * MIB) == 0
    assert "--kv-cache-memory-bytes" in command(fixed[0], model)
    old = tune(request(model, "A100-80GB", workload=Workload(500, 1000, 4000),
                       vllm_version="0.9.2"))
    assert old.recommended is not None and not any(o.fixed_pool for o in old.options)


def test_activation_blocking_lowers_batched_tokens():
    """Where the default max_num_batched_tokens' activation peak leaves too little for one
    request, the tuner lowers max_num_batched_tokens (and the default would not meet it).
    Scans card sizes around weights + overheads so the window is hit whatever the fitted
    activation coefficients are."""
    from dataclasses import replace as dc_replace

    from vramguard.core.gpu import GpuSpec
    model = "meta-llama/Llama-3.1-8B-Instruct"
    probe = replan(spec(model), pinned(max_model_len=2048, max_num_seqs=1),
                   GpuSpec("TEST", 40 * GIB))
    t = probe.tightest
    base_bytes = t.weights.value_bytes + t.non_torch.value_bytes + t.cuda_graph.value_bytes
    found = None
    for step in range(0, 120, 2):
        total = int((base_bytes + step * 8 * MIB) / 0.95)
        gpu = GpuTarget(GpuSpec("TEST", total))
        res = tune(TuneRequest(spec(model), pinned(kv_cache_dtype="auto", tensor_parallel_size=1),
                               (gpu,), workload=Workload(2048, 2048, 2048), concurrency=1,
                               allow_quantization=False, allow_more_gpus=False, curve=False,
                               explain=False))
        rec = res.recommended
        if rec is not None and "max_num_batched_tokens" in rec.settings.user_set:
            found = rec
            break
    assert found is not None, "no card size where lowering batched tokens helps"
    assert found.plan.settings["max_num_batched_tokens"] < 2048
    assert any("max_num_batched_tokens lowered" in n for n in found.notes)
    default = dc_replace(found.settings, max_num_batched_tokens=None,
                         user_set=found.settings.user_set - {"max_num_batched_tokens"})
    p = replan(spec(model), default, found.gpu.spec)
    assert not p.outcome.ok or p.kv.max_concurrency * 0.7 < 1


def test_curve_is_monotone_and_ends_at_the_choice():
    res = tune(request("Qwen/Qwen2.5-7B-Instruct", "RTX-3090", workload=Workload(800, 2000, 6000)))
    xs = [x for x, _ in res.curve]
    ys = [y for _, y in res.curve]
    assert xs == sorted(xs) and xs[-1] == res.recommended.max_model_len
    assert ys == sorted(ys, reverse=True)


def test_no_workload_uses_the_longest_length_that_fits():
    res = tune(request("Qwen/Qwen2.5-0.5B", "H100-80GB"))
    assert res.recommended.max_model_len == 32768           # the model's own maximum
    assert any("no workload given" in n for n in res.notes)


def test_gpu_target_from_a_live_state():
    from vramguard.core.gpu import GpuState
    h100 = lookup_gpu("H100-80GB")
    st = GpuState(index=0, spec=h100, free_bytes=50 * GIB, free_min_bytes=45 * GIB)
    assert GpuTarget.from_state(st) == GpuTarget(h100, 45 * GIB)
    assert GpuTarget.from_state(GpuState(0, h100, 60 * GIB)).free_bytes == 60 * GIB


@pytest.mark.parametrize("model,gpu,version", [
    # vLLM's default 256 sequences x 248k vocabulary: the sampler warm-up does not fit the
    # headroom at the utilization the tuner picks
    ("Qwen/Qwen3.5-4B", "L4", None),
    # default 1024 sequences > the hybrid model's blocks: vLLM refuses to capture graphs
    ("Qwen/Qwen3.8-27B-FP8", "RTX-PRO-6000", "0.27.0"),
])
def test_failures_after_the_kv_allocation_are_cured_by_fewer_sequences(model, gpu, version):
    req = request(model, gpu, workload=Workload(1000, 2000, 4000), vllm_version=version)
    res = tune(req)
    assert res.recommended is not None, res.reason
    p = res.recommended.plan
    assert p.outcome.ok and not p.outcome.risks
    default = replan(spec(model), Settings(max_model_len=4096), gpus(gpu)[0].spec,
                     vllm_version=version).settings["max_num_seqs"]
    assert p.settings["max_num_seqs"] < default


def test_graphs_outside_the_budget_lower_the_utilization_not_add_gpus():
    """vLLM <= 0.17 captures CUDA graphs in the memory outside gpu_memory_utilization: at the
    0.95 the search starts from, a 2B model's graphs do not fit a T4's 5%; the tuner lowers
    the utilization (it used to propose 16 GPUs)."""
    model = "ibm-granite/granite-3.1-2b-instruct"
    res = tune(request(model, "T4", workload=Workload(1000, 2000, 4000), vllm_version="0.8.5"))
    rec = res.recommended
    assert rec is not None and not rec.needs_more_gpus
    assert rec.plan.outcome.ok and not rec.plan.outcome.risks
    assert rec.settings.gpu_memory_utilization < 0.95
    _, p = replanned(rec, model, res.request)
    assert p.outcome.ok and not p.outcome.risks


def test_model_without_kv_cache_is_limited_by_max_num_seqs_only():
    res = tune(request("BAAI/bge-m3", "L4", workload=Workload(1000, 2000, 4000)))
    rec = res.recommended
    assert rec is not None and rec.plan.kv is None and rec.plan.outcome.ok
    assert rec.max_num_seqs == rec.plan.settings["max_num_seqs"] == 256
    assert any("no KV cache" in n for n in rec.notes)
    assert all(o.settings.kv_cache_dtype == "auto" for o in res.options)   # nothing to shrink
    assert not any(o.fixed_pool for o in res.options)


@pytest.mark.parametrize("name", ["max_num_seqs", "max_num_batched_tokens",
                                  "gpu_memory_utilization", "kv_cache_memory_bytes"])
def test_a_flag_given_as_none_pins_nothing(name):
    """`--max-num-seqs None` (or an empty value) is vLLM's default, not a pin: the search
    sizes it (it crashed comparing None with numbers)."""
    model = "Qwen/Qwen2.5-0.5B-Instruct"
    got = tune(request(model, "RTX-5070Ti", base=pinned(**{name: None}),
                       workload=Workload(500, 1000, 2000)))
    plain = tune(request(model, "RTX-5070Ti", workload=Workload(500, 1000, 2000)))
    assert got.recommended is not None
    assert got.recommended.settings == plain.recommended.settings


# ---- the cyclic collector ------------------------------------------------------------------

def _varied_requests():
    """Requests that start, fail every candidate (a pin vLLM refuses) or explain."""
    yield request("Qwen/Qwen2.5-7B-Instruct", "RTX-3090", workload=Workload(800, 2000, 6000))
    yield request("meta-llama/Llama-3.3-70B-Instruct", "L4")                  # explains
    yield request("Qwen/Qwen2.5-7B-Instruct", "T4", vllm_version="0.6.6",
                  base=pinned(max_num_batched_tokens=1024))                  # v0: refused
    yield request("Qwen/Qwen2.5-7B-Instruct", "H100-80GB", base=pinned(quantization="awq"))
    yield request("google/gemma-2-9b-it", "A100-80GB", 2, concurrency=400)


def test_tune_pauses_the_cyclic_collector_and_restores_it():
    import gc
    seen = []
    for enabled in (True, False):
        gc.enable() if enabled else gc.disable()
        try:
            for req in _varied_requests():
                try:
                    tune(req)
                except UsageError:
                    pass
                seen.append(gc.isenabled())
        finally:
            gc.enable()
        assert seen == [enabled] * 5
        seen.clear()


def test_tune_leaves_no_reference_cycle_behind():
    """The collector is paused during a search: its records (and a validation error kept or
    raised) must be freed by reference counting alone."""
    import gc

    from vramguard.core import _memo
    reqs = list(_varied_requests())
    gc.collect()
    gc.disable()
    try:
        raised = 0
        for req in reqs:
            _memo.clear()
            try:
                tune(req)
            except UsageError:
                raised += 1
        _memo.clear()
        found = gc.collect()
    finally:
        gc.enable()
    assert raised >= 1 and found == 0


def test_gb10_without_a_measured_figure_stays_below_what_public_hosts_had_free():
    """A DGX Spark shares its memory with the host: the tuner's utilization keeps the request
    under the median free memory public GB10 startups logged (114.37 of 121.69 GiB), so the
    recommendation starts where 0.95 would meet vLLM's free-memory refusal; the note says so."""
    req = request("Qwen/Qwen3-8B", gpu="GB10")
    r = tune(req)
    assert r.recommended is not None and r.recommended.starts
    u = r.recommended.settings.gpu_memory_utilization
    assert u is not None and u * lookup_gpu("GB10").total_bytes <= 114.4 * GIB
    assert any("median of what public startups had free" in n for n in r.notes)
