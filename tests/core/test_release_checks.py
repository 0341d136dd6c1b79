"""Startup checks and log lines whose release boundaries were read in the released code
(0.4.0-0.33.0 sdists/wheels): the v0 blocks override before the checks, v0's max-seq-len
check with pipeline parallelism, the 0.7.0 v1 capacity line, 0.4.0's override line,
0.20.1's override / token count, pipeline parallelism's releases, layer split and 0.14-0.16
whole-model fit check. Hand-built specs."""

from core_specs import llama31_8b
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings

L4 = lookup_gpu("L4")
H100 = lookup_gpu("H100-80GB")


def pinned(**flags):
    return Settings(**flags, user_set=frozenset(flags))


def test_v0_replaces_the_profiled_blocks_before_its_checks():
    low = dict(gpu_memory_utilization=0.3, max_model_len=4096)
    assert plan(llama31_8b(), pinned(**low), L4, vllm_version="0.6.5").outcome.failure == \
        "no_kv_memory"
    p = plan(llama31_8b(), pinned(**low, num_gpu_blocks_override=2000), L4, vllm_version="0.6.5")
    assert p.outcome.failure != "no_kv_memory" and p.kv.num_blocks == 2000
    assert "Overriding num_gpu_blocks=" in "\n".join(p.log_lines)


def test_v0_max_seq_len_check_counts_every_pp_engines_blocks_before_0_8():
    s = pinned(pipeline_parallel_size=2, max_model_len=131072, gpu_memory_utilization=0.95)
    old = plan(llama31_8b(), s, L4, vllm_version="0.6.5", engine="v0")
    new = plan(llama31_8b(), s, L4, vllm_version="0.8.0", engine="v0")
    tokens = old.kv.num_blocks * old.kv.block_size
    assert tokens // 2 < 131072 <= tokens          # the case where the two rules disagree
    assert old.outcome.ok
    assert new.outcome.failure == "kv_below_max_model_len"


def test_v1_0_7_0_logs_the_blocks_only():
    lines = plan(llama31_8b(), Settings(), H100, vllm_version="0.7.0", engine="v1").log_lines
    assert any(line.startswith("# GPU blocks: ") for line in lines)
    assert not any("Maximum concurrency" in line for line in lines)
    lines = plan(llama31_8b(), Settings(), H100, vllm_version="0.7.1", engine="v1").log_lines
    assert any("Maximum concurrency" in line for line in lines)


def test_0_4_0_forced_blocks_line():
    s = pinned(num_gpu_blocks_override=3000, max_model_len=4096)
    old = "\n".join(plan(llama31_8b(), s, H100, vllm_version="0.4.0").log_lines)
    assert "Replacing profiled num_gpu_blocks=" in old and "forced_num_gpu_blocks=3000" in old
    new = "\n".join(plan(llama31_8b(), s, H100, vllm_version="0.4.1").log_lines)
    assert "with num_gpu_blocks_override=3000" in new


def test_0_20_1_counts_tokens_as_concurrency_times_length():
    s = pinned(max_model_len=5000)
    for version, formula in (("0.20.0", "blocks"), ("0.20.1", "conc"), ("0.20.2", "conc")):
        kv = plan(llama31_8b(), s, H100, vllm_version=version).kv
        expect = (kv.num_blocks * kv.block_size if formula == "blocks"
                  else int(kv.max_concurrency * 5000))
        assert kv.tokens == expect, version


def test_the_fit_check_sums_what_each_release_sums():
    """v1/core/kv_cache_utils.py: 0.7-0.13 each layer's own spec (a sliding window keeps its
    cap even where the pool treats the layer as full; no padding layers), 0.14-0.18 the first
    group's blocks times the group count's pages, 0.19+ every group's blocks."""
    from core_specs import dense
    from vramguard.core import kv
    from vramguard.core.rules import resolve_rules
    from vramguard.core.stage_terms import fixed_terms
    gemma3 = dense(model_type="gemma3_text", window=1024, window_every=6, max_pos=131072,
                   layers=62)                  # 5 sliding : 1 full
    L, sliding, full = 131072, 52, 10
    bpt = 2 * 8 * 128 * 2                      # per layer: K and V, 8 heads x 128, bf16
    window_blocks = kv.cdiv(1024 - 1 + 2048, 16) + 1
    s = pinned(max_model_len=L)
    shape = fixed_terms(gemma3, s, resolve_rules("0.13.0"), H100, "cuda")[0][0][4]
    shape = kv.with_inflight(shape, 2048)
    assert shape.check_bytes(L, "layers") == (full * L + sliding * window_blocks * 16) * bpt
    first = shape.check_bytes(L, "first_group")
    assert first == window_blocks * shape.page_size_bytes
    assert first < shape.check_bytes(L, "layers") < shape.check_bytes(L, "groups")
    assert [resolve_rules(v, "v1").kv_fit_check for v in ("0.7.0", "0.13.0", "0.14.0",
                                                          "0.18.0", "0.19.0")] == \
        ["layers", "layers", "first_group", "first_group", "groups"]
    # the planner checks with the release's sum: a pool between the first group's need and
    # every group's starts on 0.14 and fails on 0.19
    for version, ok in (("0.14.0", True), ("0.19.0", False)):
        lay = kv.with_inflight(fixed_terms(gemma3, s, resolve_rules(version), H100,
                                           "cuda")[0][0][4], 2048)
        pool = (lay.check_bytes(L, "first_group") + lay.check_bytes(L, "groups")) // 2
        forced = pinned(max_model_len=L, kv_cache_memory_bytes=pool)
        assert plan(gemma3, forced, H100, vllm_version=version).outcome.ok is ok, version


def test_speculative_decoding_terms_by_release_and_method():
    """The model's own MTP layers draft only for the MTP methods (config/speculative.py); the
    capture sizes grow with the speculative tokens from 0.13 (decode_query_len); GDN's conv
    state keeps the speculative columns from 0.10.2, Mamba2's from 0.17 (mamba_utils.py); no
    compute-capability fallback to V0 from 0.10.2 (engine/arg_utils.py)."""
    from vramguard.core import activation as act
    from vramguard.core import kv
    from vramguard.core.model import MambaState
    from vramguard.core.rules import resolve_rules
    from vramguard.sources.resolve import load_model_spec
    qwen35 = load_model_spec("Qwen/Qwen3.5-4B", offline=True)
    assert qwen35.mtp_params

    def run(method, version="0.30.0"):
        s = Settings(num_speculative_tokens=2, speculative_method=method,
                     user_set=frozenset({"num_speculative_tokens", "speculative_method"}))
        return plan(qwen35, s, H100, vllm_version=version)
    mtp, ngram = run("mtp"), run("ngram")
    assert mtp.tightest.weights.value_bytes > ngram.tightest.weights.value_bytes
    assert mtp.kv.bytes_per_token > ngram.kv.bytes_per_token
    eight = load_model_spec("meta-llama/Llama-3.1-8B-Instruct", offline=True)
    s = Settings(max_num_seqs=32, num_speculative_tokens=3, speculative_method="ngram",
                 user_set=frozenset({"max_num_seqs", "num_speculative_tokens",
                                     "speculative_method"}))
    g12 = plan(eight, s, H100, vllm_version="0.12.0").tightest.cuda_graph.value_bytes
    g13 = plan(eight, s, H100, vllm_version="0.13.0").tightest.cuda_graph.value_bytes
    # 32 sequences: largest 2 x 32 = 64 in 0.12, x (1 + 3) = 256 from 0.13
    assert g12 == act.cuda_graph_bytes(32, act.capture_sizes(64)) < g13 == act.cuda_graph_bytes(
        32, act.capture_sizes(256))
    m2 = MambaState(kind="mamba2", conv_shape=(8192, 4), ssm_shape=(128, 64, 128))
    grow = [kv.mamba_page_bytes(m2, 1, (2, 4), 2, resolve_rules(v).conv_spec_kinds)
            for v in ("0.16.0", "0.17.0")]
    assert grow[0] < grow[1]
    t4 = lookup_gpu("T4")
    assert plan(eight, pinned(max_model_len=2048), t4, vllm_version="0.10.1").engine == "v0"
    assert plan(eight, pinned(max_model_len=2048), t4, vllm_version="0.10.2").engine == "v1"


def _refusal(spec, s, version, env=None):
    import pytest

    from vramguard.core.errors import UsageError
    with pytest.raises(UsageError) as exc:
        plan(spec, s, H100, vllm_version=version, env=env)
    return str(exc.value)


def test_pipeline_parallelism_by_release_and_architecture():
    """0.4.0-0.5.0 refuse PP; 0.5.1-0.6.2 run it for config.py's list only (printed in its
    order); 0.6.3+ for any model class with SupportsPP (not modelled: every model)."""
    from dataclasses import replace
    pp2 = pinned(pipeline_parallel_size=2, max_model_len=4096)
    llama = llama31_8b()
    gemma = replace(llama, architecture="GemmaForCausalLM", model_type="gemma")
    assert "Pipeline parallelism is not supported yet." in _refusal(llama, pp2, "0.5.0")
    msg = _refusal(gemma, pp2, "0.5.1")
    assert ("Pipeline parallelism is only supported for the following  architectures: "
            "['AquilaModel', 'AquilaForCausalLM', 'InternLMForCausalLM', 'LlamaForCausalLM',"
            ) in msg
    assert plan(llama, pp2, H100, vllm_version="0.5.1").outcome.ok
    assert "'Qwen2VLForConditionalGeneration']." in _refusal(gemma, pp2, "0.6.2")
    assert plan(gemma, pp2, H100, vllm_version="0.6.3").outcome.ok
    assert plan(gemma, pinned(max_model_len=4096), H100, vllm_version="0.5.0").outcome.ok


def test_pp_layer_partition_is_checked_where_the_release_reads_it():
    """VLLM_PP_LAYER_PARTITION (0.5.4+): vLLM's errors at model build, at PP 1 too."""
    llama = llama31_8b()
    pp2 = pinned(pipeline_parallel_size=2, max_model_len=4096)
    env = {"VLLM_PP_LAYER_PARTITION": "10,10,12"}
    assert "len(partitions)=3 does not match pp_size=2." in _refusal(llama, pp2, "0.8.5", env)
    assert "sum(partitions)=20 does not match num_hidden_layers=32." in _refusal(
        llama, pp2, "0.8.5", {"VLLM_PP_LAYER_PARTITION": "10,10"})
    assert "Invalid partition string: 16;16" in _refusal(
        llama, pp2, "0.8.5", {"VLLM_PP_LAYER_PARTITION": "16;16"})
    assert "does not match pp_size=1." in _refusal(
        llama, pinned(max_model_len=4096), "0.33.0", env)
    assert plan(llama, pp2, H100, vllm_version="0.5.3", env=env).outcome.ok   # not read yet


def test_v1_0_14_to_0_16_check_the_whole_model_against_each_pp_worker():
    """0.14-0.16 (get_kv_cache_configs): with PP the one-request check and auto-fit read the
    whole model's groups against the smallest worker's memory; 0.13 checked each worker's
    own layers, 0.17+ the groups projected to them. Llama-3.1-8B over 2 stages: 16 layers
    x 4,096 B per token per stage, 32 x 4,096 for the whole model; 131,072 tokens need
    8 GiB on a stage, 16 GiB for the whole model; each worker has 12 GiB."""
    from vramguard.core.planner import PlanHooks
    from vramguard.core.provenance import GIB
    gpu = lookup_gpu("A100-80GB")
    s = pinned(pipeline_parallel_size=2, max_model_len=131072, enforce_eager=True)
    requested = int(gpu.total_bytes * 0.9)
    hooks = PlanHooks(weights_bytes=requested - 12 * GIB - 2 * GIB, activation_bytes=GIB,
                      non_torch_bytes=GIB, cuda_graph_bytes=0)

    def run(version, **flags):
        return plan(llama31_8b(), s.with_(**flags) if flags else s, gpu, vllm_version=version,
                    hooks=hooks, engine="v1")
    for version in ("0.13.0", "0.17.0"):
        assert run(version).outcome.ok
    for version in ("0.14.0", "0.16.0"):
        p = run(version)
        assert p.outcome.failure == "kv_below_max_model_len"
        assert "(16.0 GiB KV cache is needed" in p.outcome.message
        assert p.kv.num_blocks == 12 * GIB // (16 * 16 * 4096)    # the pool stays per worker
    auto = run("0.16.0", max_model_len=-1, max_model_len_auto=True)
    assert auto.outcome.ok and auto.settings["max_model_len"] == 12 * GIB // (32 * 4096)


def test_v1_0_7_profiles_logits_without_a_sampler():
    """V1 0.7.0-0.7.2's profile run computes the logits of every batched token, 0.7.3 of
    each dummy request, in the model dtype, with no dummy sampler; 0.8.0 adds the sampler
    (fp32 copies) and its warm-up. Llama-3.1-8B bf16, vocabulary 128,256."""
    s = pinned(max_model_len=8192, max_num_batched_tokens=4096, max_num_seqs=64)

    def act(version):
        p = plan(llama31_8b(), s, H100, vllm_version=version, engine="v1")
        return p.tightest.activation.value_bytes
    vocab = 128256
    assert act("0.7.2") - act("0.7.3") == 4096 * vocab * 2 - 64 * vocab * 2
    assert act("0.8.0") - act("0.7.3") == int(64 * vocab * 4 * 2.1) - 64 * vocab * 2


def test_v1_0_7_warms_no_sampler_up():
    """A pool that leaves no room for the sampler warm-up: 0.8.0 fails it, 0.7.3 has none."""
    from vramguard.core.planner import PlanHooks
    from vramguard.core.provenance import GIB
    s = pinned(max_model_len=4096, max_num_seqs=1024, max_num_batched_tokens=8192,
               gpu_memory_utilization=0.99)
    hooks = PlanHooks(weights_bytes=40 * GIB, activation_bytes=GIB, non_torch_bytes=GIB,
                      cuda_graph_bytes=0)
    new = plan(llama31_8b(), s, H100, vllm_version="0.8.0", engine="v1", hooks=hooks)
    old = plan(llama31_8b(), s, H100, vllm_version="0.7.3", engine="v1", hooks=hooks)
    assert new.outcome.failure == "sampler_warmup_oom"
    assert old.outcome.ok


def test_lora_falls_back_to_v0_in_0_8_0_to_0_8_2():
    """engine/arg_utils.py `_is_v1_supported_oracle`: "LORA is experimental on
    VLLM_USE_V1=1. Falling back to V0 Engine." (0.8.0-0.8.2; VLLM_USE_V1=1 keeps V1)."""
    lora = pinned(max_model_len=8192, enable_lora=True)
    assert plan(llama31_8b(), lora, H100, vllm_version="0.8.2").engine == "v0"
    assert any("LoRA" in a for a in plan(llama31_8b(), lora, H100,
                                         vllm_version="0.8.0").assumptions)
    assert plan(llama31_8b(), lora, H100, vllm_version="0.8.2", engine="v1").engine == "v1"
    assert plan(llama31_8b(), lora, H100, vllm_version="0.8.3").engine == "v1"
    assert plan(llama31_8b(), pinned(max_model_len=8192), H100,
                vllm_version="0.8.2").engine == "v1"
