"""Property: every recommendation, printed as a `vllm serve` command and parsed back with
`sources.vllm_args`, re-planned with `planner.plan`, starts and keeps its KV-usage target at
the recommended concurrency — over many catalog models x GPUs x workloads x versions.
Also: the `--config` YAML says the same, and pinned flags survive unchanged."""

from __future__ import annotations

from functools import lru_cache

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan as replan
from vramguard.core.provenance import GIB
from vramguard.core.settings import Settings
from vramguard.core.tuner import GpuTarget, TuneRequest, tune
from vramguard.core.workload import Workload
from vramguard.errors import UsageError
from vramguard.render.tune_text import command_for, config_yaml
from vramguard.sources.resolve import load_model_spec
from vramguard.sources.vllm_args import parse_vllm_command, settings_from_mapping

MODELS = (
    "Qwen/Qwen2.5-0.5B", "meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.2",
    "google/gemma-2-9b-it", "google/gemma-3-27b-it", "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-32B-FP8", "deepseek-ai/DeepSeek-V2-Lite-Chat", "Qwen/Qwen2.5-VL-7B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1", "microsoft/Phi-3-mini-4k-instruct",
    "Qwen/Qwen3-Next-80B-A3B-Instruct", "openai/gpt-oss-20b", "tiiuae/falcon-mamba-7b",
    "meta-llama/Llama-3.3-70B-Instruct", "ibm-granite/granite-3.3-2b-instruct",
    "Qwen/Qwen3.5-4B", "BAAI/bge-m3",
)
GPUS = ("RTX-3090", "RTX-4090", "L4", "L40S", "A100-40GB", "A100-80GB", "H100-80GB", "H200",
        "T4", "MI300X")
VERSIONS = (None, "0.33.0", "0.20.0", "0.11.0", "0.10.2", "0.9.2", "0.8.5", "0.6.6")


@lru_cache(maxsize=None)
def spec(model_id):
    return load_model_spec(model_id, offline=True)


@st.composite
def requests(draw):
    model = draw(st.sampled_from(MODELS))
    gpu = lookup_gpu(draw(st.sampled_from(GPUS)))
    n = draw(st.sampled_from((1, 1, 2, 4)))
    shared = draw(st.booleans())
    free = int(gpu.total_bytes * draw(st.floats(0.5, 0.95))) if shared else None
    p99 = draw(st.integers(256, 32768))
    p90 = draw(st.integers(128, p99))
    p50 = draw(st.integers(64, p90))
    workload = draw(st.one_of(st.none(), st.just(Workload(p50, p90, p99))))
    concurrency = draw(st.one_of(st.none(), st.integers(1, 256)))
    pins = draw(st.sampled_from(({}, {}, {"kv_cache_dtype": "auto"}, {"tensor_parallel_size": 1},
                                 {"enforce_eager": True})))
    base = Settings(**pins, user_set=frozenset(pins))
    return TuneRequest(spec=spec(model), base=base,
                       gpus=tuple(GpuTarget(gpu, free) for _ in range(n)),
                       workload=workload, concurrency=concurrency,
                       target_kv_usage=draw(st.sampled_from((0.5, 0.7, 0.9, 1.0))),
                       vllm_version=draw(st.sampled_from(VERSIONS)),
                       allow_more_gpus=draw(st.booleans()), curve=False, explain=False)


def _limit_len(req):
    return req.workload.p99_tokens if req.workload else None


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(requests())
def test_recommendation_replans_to_a_start_within_the_target(req):
    try:
        res = tune(req)
    except Exception as exc:       # only vramguard's own, one-line errors are acceptable
        from vramguard.errors import UsageError
        assert isinstance(exc, UsageError), repr(exc)
        event("bad input")
        return
    rec = res.recommended
    if rec is None:
        assert res.reason
        event("nothing fits")
        return
    event("recommended" + (" (needs more GPUs)" if rec.needs_more_gpus else ""))
    model = req.spec.name
    cmd = parse_vllm_command(command_for(rec, model))
    s = cmd.settings
    p = replan(req.spec, s, rec.gpu.spec, vllm_version=req.vllm_version, engine=req.engine,
               free_bytes=rec.gpu.free_bytes)
    assert p.outcome.ok and not p.outcome.risks, (command_for(rec, model), p.outcome)
    seqs = p.settings["max_num_seqs"]
    if p.kv is not None:        # NOTE: a model without a KV cache has no KV target
        assert seqs <= req.target_kv_usage * p.kv.max_concurrency + 1e-6
    if req.concurrency:
        assert seqs >= req.concurrency
    if req.workload:
        assert p.settings["max_model_len"] >= req.workload.p99_tokens
    for name in req.base.user_set:
        assert getattr(s, name) == getattr(req.base, name), name
    if rec.gpu.free_bytes is not None and "gpu_memory_utilization" in s.user_set:
        assert s.gpu_memory_utilization * rec.gpu.spec.total_bytes <= rec.gpu.free_bytes
    # the --config YAML holds the same flags
    doc = yaml.safe_load(config_yaml(rec, model))
    assert doc.pop("model") == model
    from_yaml = settings_from_mapping(doc)
    for name in s.user_set - {"model"}:
        assert getattr(from_yaml, name) == getattr(s, name), name


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.integers(1, 64))
def test_every_option_that_starts_replans_the_same(model, gpu, conc):
    """Not only the recommendation: each ranked option's command gives the same plan."""
    req = TuneRequest(spec=spec(model), base=Settings(), gpus=(GpuTarget(lookup_gpu(gpu)),),
                      workload=Workload(500, 1000, 2048), concurrency=conc, curve=False,
                      explain=False, allow_more_gpus=False)
    try:
        res = tune(req)
    except UsageError as exc:
        # NOTE: vLLM's own refusal of every candidate, e.g. gpt-oss's mxfp4 needs compute
        # capability 8.0 (a T4 is 7.5)
        assert "not supported for the current GPU" in exc.what, exc.what
        event("refused by vLLM")
        return
    for o in res.options[:6]:
        s = parse_vllm_command(command_for(o, model)).settings
        p = replan(req.spec, s, o.gpu.spec, free_bytes=o.gpu.free_bytes)
        assert p.outcome.ok == o.plan.outcome.ok
        if p.kv and o.plan.kv:
            assert p.kv.num_blocks == o.plan.kv.num_blocks
        assert abs((p.tightest.kv_cache.value_bytes - o.plan.tightest.kv_cache.value_bytes)) < GIB


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.sampled_from(MODELS), st.sampled_from(GPUS), st.sampled_from(VERSIONS),
       st.sampled_from((Workload(500, 1000, 2048), Workload(2000, 6000, 16000), None)))
def test_when_vllm_defaults_start_the_tuner_recommends_on_the_gpu_given(model, gpu, version,
                                                                          workload):
    """If `vllm serve` with vLLM's defaults (and the workload's p99 as max_model_len) starts
    on one card without a risk, the tuner must find a setting on that card (it once proposed
    16 T4s for a 2B model, and "nothing fits" for a 4B model on an L4)."""
    g = lookup_gpu(gpu)
    length = workload.p99_tokens if workload else None
    from vramguard.errors import UsageError
    try:
        p = replan(spec(model), Settings(max_model_len=length), g, vllm_version=version,
                   detail=False)
    except UsageError:
        return
    if not p.outcome.ok or p.outcome.risks:
        return
    res = tune(TuneRequest(spec=spec(model), base=Settings(), gpus=(GpuTarget(g),),
                           workload=workload, vllm_version=version, curve=False,
                           explain=False))
    rec = res.recommended
    assert rec is not None and not rec.needs_more_gpus, (model, gpu, version, res.reason)
    assert rec.plan.outcome.ok and not rec.plan.outcome.risks
