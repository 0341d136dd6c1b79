"""The version table (one assertion set per row) and vLLM's message texts by version."""

import re

import pytest

from core_specs import dense, llama31_8b
from vramguard.core import messages as msg
from vramguard.core.gpu import GpuSpec
from vramguard.core.gpu_catalog import list_gpus, lookup_gpu
from vramguard.core.maxlen import derive_max_model_len, parse_len, resolve_max_model_len
from vramguard.core.planner import NEWEST_VERSION, plan
from vramguard.core.provenance import GIB
from vramguard.core.rules import VERSION_TABLE, engines_for, parse_version, resolve_rules
from vramguard.core.sched import scheduler_defaults
from vramguard.core.rules_changes import FLAG_RELEASES, SPELLING_RELEASES
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

# version, engine -> the fields that define that row (§1a, §1b, §6, §9, §10)
ROWS = {
    ("0.4.0", "v0"): dict(override_log_forced=True,
                          whole_gpu=False, log_weights="loading_gb", log_capacity="v0_gpu_blocks",
                          v0_concurrency_log=False, default_util=0.9, draft_model="v0_in_budget",
                          block_size_choices=(8, 16, 32, 128), block_size_prog="api_server.py"),
    ("0.4.1", "v0"): dict(override_log_forced=False, log_weights="loading_gb",
                          block_size_choices=(8, 16, 32), block_size_prog="api_server.py"),
    ("0.4.2", "v0"): dict(v0_chunked_tokens=512, v0_pooling_min_tokens=0),
    ("0.4.3", "v0"): dict(v0_pooling_min_tokens=32768,
                          interleaved_swa_off=None,
                          log_weights="loading_gb", v0_chunked_prefill_auto=False,
                          v0_mm_profile_seqs=False),
    ("0.5.0", "v0"): dict(bnb_parallel="tp_or_pp"),
    ("0.5.1", "v0"): dict(interleaved_swa_off="always", msg_interleaved_swa="gemma2",
                          interleaved_swa_types=frozenset({"gemma2"}),
                          v0_mm_profile_seqs=True, v0_mm_dropped_when_long=False),
    ("0.5.3", "v0"): dict(v0_chunked_prefill_auto=True, v0_auto_chunk_blockers=frozenset(
                              {"sliding", "lora", "spec", "prefix_caching"})),
    ("0.5.4", "v0"): dict(v0_auto_chunk_blockers=frozenset(
                              {"sliding", "lora", "spec", "prefix_caching", "mamba"})),
    ("0.5.5", "v0"): dict(v0_chunked_prefill_auto=True,
                          block_size_choices=(8, 16, 32, 128, 256, 512, 1024, 2048)),
    ("0.6.0", "v0"): dict(block_size_choices=(8, 16, 32), block_size_prog="vllm serve"),
    ("0.6.1", "v0"): dict(v0_auto_chunk_blockers=frozenset({"sliding", "lora", "spec", "mamba"}),
                          v0_mm_min_tokens=4096),
    ("0.6.2", "v0"): dict(v0_auto_chunk_blockers=frozenset(
                              {"sliding", "lora", "spec", "mamba", "multimodal"})),
    ("0.6.3", "v0"): dict(v0_mm_min_tokens=5120, v0_concurrency_log=True, whole_gpu=False),
    ("0.6.4", "v0"): dict(interleaved_swa_off="always", msg_interleaved_swa="vllm",
                          block_size_choices=(8, 16, 32, 64, 128), whole_gpu=True, log_available="v0_064", v0_mamba_slots="round"),
    ("0.6.5", "v0"): dict(block_size_choices=(8, 16, 32),
                          interleaved_swa_off="backend", interleaved_swa_backends=("XFORMERS",),
                          msg_interleaved_swa="backend",
                          v0_mamba_slots="eager_8194", whole_gpu=False, log_available="v0_profile"),
    ("0.6.6", "v0"): dict(block_size_choices=(8, 16, 32, 64, 128)),
    ("0.7.0", "v0"): dict(log_capacity="v0_cuda_blocks", mla_supported=False,
                          v0_mm_dropped_when_long=True, draft_model="v0_outside"),
    ("0.7.1", "v0"): dict(mla_supported=True, transformers_fallback=False),
    ("0.7.2", "v0"): dict(v0_mla_align_bytes=256, mla_supported=True, transformers_fallback=True),
    ("0.7.3", "v0"): dict(log_capacity="v0_cuda_lower", v0_mla_align_bytes=256, bf16_msg_space=False,
                          v0_mamba_slots="capture"),
    ("0.8.0", "v0"): dict(v0_fit_divides_pp=True,
                          default_engine="v1", v0_chunked_prefill_auto=True, bf16_msg_space=True,
                          v0_mla_align_bytes=0),
    ("0.8.3", "v0"): dict(log_weights="model_gib", v0_mm_dropped_when_long=False),
    ("0.9.2", "v0"): dict(tokenizer_cap="encoder"),
    ("0.10.0", "v0"): dict(draft_model="none_0100", kv_cache_memory_flag=False),
    ("0.10.2", "v0"): dict(kv_cache_memory_flag=True, init_token_buffers=True),
    ("0.7.0", "v1"): dict(log_capacity="v1_blocks",
                          block_size_16="fa", block_size_prog="vllm serve",
                          whole_gpu=True, free_memory_check=False, msg_fit="v1_070",
                          default_engine="v0", draft_model="v1_fallback",
                          transformers_fallback=False),
    ("0.7.1", "v1"): dict(log_capacity="v1_070", interleaved_swa_backends=("XFORMERS", "FLASHINFER"),
                          interleaved_swa_types=frozenset({"gemma2", "cohere2"})),
    ("0.7.2", "v1"): dict(transformers_fallback=True, whole_gpu=True),
    ("0.7.3", "v1"): dict(whole_gpu=True, kv_group_max_ratio=1.0, transformers_fallback=True),
    ("0.8.0", "v1"): dict(interleaved_swa_types=frozenset({"gemma2", "gemma3", "gemma3_text",
                                                           "cohere2"}),
                          v1_falls_back_for_mamba=True, default_engine="v1", v1_falls_back_below_cc80=True,
                          log_capacity="two_lines", tokens_formula="blocks_x_b",
                          sched_defaults="v1_080", log_weights="model_gb", mla_block_size=16,
                          mla_block_hopper=64, mla_block_blackwell=None),
    ("0.8.1", "v1"): dict(sched_defaults="v1_080", spec_sampler_copies=7.0),
    ("0.8.2", "v0"): dict(spec_self_mtp_types=frozenset({"deepseek_v3"}),
                          msg_spec_no_model="without"),
    ("0.8.2", "v1"): dict(spec_self_mtp_types=frozenset({"deepseek_v3"}), v1_spec_methods=frozenset()),
    ("0.8.3", "v1"): dict(msg_fit="v1_083", log_weights="model_gib", sliding_inflight="batched"),
    ("0.8.4", "v1"): dict(sched_defaults="v1_081", msg_fit="v1_084", estimate_max_len="lost"),
    ("0.8.5", "v0"): dict(block_size_choices=(1, 8, 16, 32, 64, 128), block_size_16=None),
    ("0.8.5", "v1"): dict(sched_defaults="v1_085", block_size_choices=(1, 8, 16, 32, 64, 128),
                          cuda_graph_sizes_flag=None, cudagraph_control="eager_only"),
    ("0.9.0", "v1"): dict(interleaved_swa_types=None, interleaved_swa_off="backend",
                          sched_defaults="v1_090", whole_gpu=True, cuda_graph_sizes_flag="max",
                          cudagraph_control="eager_only"),
    ("0.9.0", "v0"): dict(cuda_graph_sizes_flag=None, cudagraph_control="eager_only",
                          auto_dtype_fallback=False),
    ("0.9.1", "v0"): dict(auto_dtype_fallback=True, bf16_msg_space=True, tokenizer_cap="all"),
    ("0.9.1", "v1"): dict(auto_dtype_fallback=True, whole_gpu=False, free_memory_check=True, msg_free_memory="no_device",
                          cudagraph_control="use_cudagraph",
                          msg_fit="v1_091", estimate_max_len="yes", log_available="avail_2f",
                          concurrency_formula="blocks_over_per_request",
                          log_capacity_per_worker=True),
    ("0.9.2", "v1"): dict(usage_metric="vllm:kv_cache_usage_perc", tokenizer_cap="encoder"),
    ("0.10.0", "v1"): dict(hybrid_page_unification=True, mm_dummy_at_max_len=True,
                           draft_model="none_0100", init_token_buffers=False),
    ("0.10.1", "v0"): dict(interleaved_swa_off="backend_v0",
                          mamba_dtype_choices=("auto", "float32"), init_token_buffers=True,
                           mm_zero_skips_tower=frozenset({
                               "llava", "mistral3", "llama4", "qwen2_vl", "qwen2_5_vl",
                               "qwen2_5_omni", "step3_vl"})),
    ("0.10.1", "v1"): dict(interleaved_swa_off="backend_v0",
                          interleaved_swa_backends=("XFORMERS", "FLASHINFER"),
                          mm_dummy_at_max_len=False, cudagraph_control="level",
                           init_token_buffers=True,
                           mamba_dtype_choices=("auto", "float32"), gdn_ssm_flag=False,
                           nemotron_ssm_default=None,
                           cudagraph_default="PIECEWISE"),
    ("0.10.2", "v1"): dict(v1_falls_back_for_mamba=False, kv_cache_memory_flag=True,
                           init_token_buffers=True, snapshot_after_nccl=False,
                           allreduce_in_n="always", lora_graph_specialize=False),
    ("0.11.0", "v1"): dict(snapshot_after_nccl=True, v1_falls_back_below_cc80=False,
                           mla_block_size=16, profile_sampler_copies=8.0, allreduce_in_n="none",
                           mla_block_blackwell=128, mla_block_sparse=64,
                           lora_graph_specialize=False, mm_dummy_at_max_len=True,
                           cudagraph_default="FULL_AND_PIECEWISE", capture_max_flag=False,
                           draft_model="none"),
    ("0.11.2", "v1"): dict(dcp="gqa", dcp_log="dcp", dcp_messages="v011", capture_max_flag=True),
    ("0.11.1", "v1"): dict(interleaved_swa_off=None, block_size_choices=(1, 8, 16, 32, 64, 128, 256),
                          capture_max_flag=True, cuda_graph_sizes_flag="list", dcp="mla",
                           log_weights="model_gib_memory", log_capacity_per_worker=False,
                           lora_graph_specialize=True),
    ("0.12.0", "v1"): dict(capture_max_flag=True, cudagraph_control="opt",
                           cuda_graph_sizes_flag="list",
                           block_size_choices=(1, 8, 16, 32, 64, 128, 256), block_size_16=None,
                           cpu_block_size=128, sched_clamp_by_len=True, kv_group_max_ratio=1.25,
                           model_runner_v2="off", log_weights_v2="model_gib"),
    ("0.13.0", "v1"): dict(block_size_16="no_common", msg_no_kv="docs", msg_fit="v1_013", msg_load_failure=True,
                           mamba_dtype_choices=("auto", "float32", "float16"),
                           nemotron_ssm_default="float16",
                           cudagraph_control="opt_piecewise", cuda_graph_sizes_flag=None,
                           async_scheduling_default=False),
    ("0.14.0", "v1"): dict(async_scheduling_default=True, profile_sampler_copies=8.0, request_ceil=True, msg_free_memory="device", msg_fit="v1_014",
                           auto_fit=True, log_weights="model_s", log_available="avail_s",
                           gib_two_decimals=False, graph_budget="headroom"),
    ("0.15.0", "v1"): dict(online_fp8_bf16_load_peak="whole",
                           mamba_cache_modes=True, mamba_all_mode=True,
                           mamba_mode_choices=("align", "all", "none"), mla_flashinfer_nope=(128,),
                           mla_block_flashinfer=64,
                           hybrid_prefix_caching_default=False, draft_model="explicit",
                           mm_zero_skips_tower=frozenset({"*"})),
    ("0.16.0", "v1"): dict(profile_assert_ge=True, graph_budget="headroom"),
    ("0.17.0", "v1"): dict(profile_sampler_copies=2.1, graph_budget="headroom", gdn_ssm_flag=True,
                           performance_mode_flag=True, draft_model="inferred"),
    ("0.18.0", "v1"): dict(block_size_choices=None, block_size_16=None,
                           block_size_positive=False, graph_budget="estimated", profile_assert_ge=True, default_util=0.9,
                           online_fp8_bf16_load_peak="layer", allreduce_in_n="graph_probe",
                           kv_group_max_ratio=1.5, mla_block_hopper=16,
                           mla_flashinfer_nope=(64, 128), mla_block_flashinfer=32),
    ("0.19.0", "v1"): dict(online_fp8_bf16_load_peak=None, graph_budget="estimated"),
    ("0.20.0", "v1"): dict(graph_budget="subtracted", default_util=0.92, model_runner_v2="off",
                           nemotron_ssm_default="float32",
                           log_weights_v2="model_s_v2",
                           mamba_blocks_check=True, override_before_check=False),
    ("0.20.1", "v1"): dict(override_before_check=True, tokens_formula="conc_x_len",
                           dcp_log=None, graph_budget="subtracted"),
    ("0.21.0", "v1"): dict(block_size_16="none", override_before_check=True, tokens_formula="conc_x_len",
                           msg_fit="v1_014", msg_no_kv="docs"),
    ("0.22.0", "v1"): dict(override_before_check=True, tokens_formula="conc_x_len",
                           mamba_dtype_choices=("auto", "float32", "float16", "bfloat16"),
                           msg_no_kv="cpu", msg_fit="v1_022", model_runner_v2="archs"),
    ("0.23.0", "v1"): dict(block_size_positive=True, model_runner_v2="archs", v2_dense_unquantized_only=True),
    ("0.24.0", "v1"): dict(model_runner_v2="archs", v2_dense_unquantized_only=False),
    ("0.25.0", "v1"): dict(model_runner_v2="dense", sliding_inflight="batched",
                           log_weights_v2="model_s_v2", mm_ipc_reserve="0.25"),
    ("0.26.0", "v1"): dict(sliding_inflight="batched_x_batches", consumed_model=False,
                           graph_probe_rocm=True,
                           csa_grouping="padded"),
    ("0.27.0", "v1"): dict(consumed_model=True, log_capacity="two_lines", mm_ipc_reserve="0.27",
                           csa_grouping="packed", csa_auto_kv_ok=False),
    ("0.28.0", "v1"): dict(hybrid_prefix_caching_default=True, log_capacity="one_line", sched_defaults="v1_028",
                           null_block_in_check=False, mamba_all_mode=False, log_weights_v2=None),
    ("0.29.0", "v1"): dict(null_block_in_check=True, model_runner_v2="all",
                           csa_grouping="balanced"),
    ("0.30.0", "v1"): dict(log_capacity="device_line", rope_yarn_excluded=True,
                           cudagraph_control="opt_decode",
                           csa_auto_kv_ok=True),
    ("0.31.0", "v1"): dict(v1_runner_spec_methods=frozenset({
        "ngram", "ngram_gpu", "suffix", "medusa", "mlp_speculator", "custom_class"})),
    ("0.32.0", "v1"): dict(mamba_mode_choices=("align", "none"), cublas_before_snapshot=False, mla_block_hopper=16, msg_autofit_kv=True),
    ("0.33.0", "v1"): dict(cublas_before_snapshot=True, modelopt_kv_auto_fp8=True,
                           sched_defaults="v1_033", sched_clamp_by_len=True,
                           mamba_all_mode=False),
}


@pytest.mark.parametrize("key", list(ROWS))
def test_version_rows(key):
    version, engine = key
    row = resolve_rules(version, engine)
    assert row.engine == engine and row.version == version
    for field, value in ROWS[key].items():
        assert getattr(row, field) == value, (key, field)


def test_changes_are_in_version_order():
    from vramguard.core.rules import _CHANGES
    versions = [parse_version(v) for v, *_ in _CHANGES]
    assert versions == sorted(versions)


def test_table_has_no_gaps_and_every_row_is_tested():
    for eng in ("v0", "v1"):
        rows = [r for r in VERSION_TABLE if r.engine == eng]
        for a, b in zip(rows, rows[1:]):
            assert a.until == b.since
    tested = {(v, e) for v, e in ROWS}
    assert {(r.version, r.engine) for r in VERSION_TABLE} <= tested


def test_engines_and_defaults():
    assert resolve_rules("0.7.2").engine == "v0"
    assert resolve_rules("0.8.0").engine == "v1"
    assert resolve_rules("0.11.0").engine == "v1"
    assert engines_for("0.9.0") == ("v0", "v1")
    assert engines_for("0.11.0") == ("v1",)
    assert resolve_rules(None).version == NEWEST_VERSION == "0.33.0"
    assert resolve_rules("0.40.1").version == "0.33.0"
    with pytest.raises(UsageError):
        resolve_rules("0.11.0", "v0")
    with pytest.raises(UsageError):
        resolve_rules("0.3.3")
    with pytest.raises(UsageError):
        parse_version("latest")
    assert parse_version("0.6.5.dev (PR branch)") == (0, 6, 5)
    assert parse_version("v0.11") == (0, 11, 0)



@pytest.mark.parametrize("engine", [None, "v0", "v1", "V1"])
def test_row_lookup_equals_a_scan_of_the_table(engine):
    """`resolve_rules` bisects each engine's rows: the same row as scanning the table in
    order (the first row covering the release picks the default engine)."""
    newest = parse_version(NEWEST_VERSION)
    for minor in range(4, 40):
        for patch in range(6):
            v = min((0, minor, patch), newest)
            eng = engine or next(r.default_engine for r in VERSION_TABLE if r.covers(v))
            want = next((r for r in VERSION_TABLE if r.engine == eng.lower() and r.covers(v)),
                        None)
            if want is None:
                with pytest.raises(UsageError, match="has no"):
                    resolve_rules(f"0.{minor}.{patch}", engine)
            else:
                assert resolve_rules(f"0.{minor}.{patch}", engine) is want

def test_v1_falls_back_to_v0_below_cc80_in_08_to_010():
    v100 = GpuSpec(name="V100-32GB", total_bytes=int(31.74 * GIB), compute_capability=(7, 0))
    spec = dense(max_pos=4096, rope={"rope_type": "default"})
    assert plan(spec, Settings(), v100, vllm_version="0.9.2").engine == "v0"
    assert plan(spec, Settings(), v100, vllm_version="0.11.0").engine == "v1"
    assert plan(spec, Settings(), v100, vllm_version="0.9.2", engine="v1").engine == "v1"


# ---- scheduler defaults (§9) -----------------------------------------------------------
@pytest.mark.parametrize("version,gpu,entry,expect", [
    ("0.8.0", "H100-80GB", "serve", (8192, 1024)), ("0.8.0", "A10G", "serve", (2048, 1024)),
    ("0.8.0", "H100-80GB", "llm", (16384, 1024)), ("0.8.2", "L4", "serve", (2048, 1024)),
    ("0.8.5", "A100-80GB", "serve", (8192, 1024)), ("0.9.0", "A100-80GB", "serve", (2048, 256)),
    ("0.19.0", "H100-80GB", "serve", (8192, 1024)), ("0.28.0", "B200", "serve", (16384, 1024)),
    # GB10: NVML has no memory query there; up to 0.32 the query raised -> "memory 0" -> the
    # small tier (0.11 / 0.13 logs print max_num_batched_tokens=2048); 0.33 excludes it
    ("0.11.0", "GB10", "serve", (2048, 256)), ("0.28.0", "GB10", "serve", (2048, 256)),
    ("0.33.0", "GB10", "serve", (2048, 256)), ("0.28.0", "GH200", "serve", (8192, 1024)),
    ("0.33.0", "H200", "llm", (16384, 1024)), ("0.33.0", "RTX-4090", "serve", (2048, 256)),
])
def test_scheduler_defaults(version, gpu, entry, expect):
    g = lookup_gpu(gpu)
    assert scheduler_defaults(resolve_rules(version), g.name, g.total_bytes / GIB,
                              entrypoint=entry) == expect


def test_v0_defaults_follow_max_model_len():
    g = lookup_gpu("A100-40GB")
    spec = dense(max_pos=8192, rope={"rope_type": "default"})
    p = plan(spec, Settings(), g, vllm_version="0.6.5")
    assert (p.settings["max_num_batched_tokens"], p.settings["max_num_seqs"]) == (8192, 256)
    spec = dense(max_pos=65536, rope={"rope_type": "default"})
    p = plan(spec, Settings(), g, vllm_version="0.7.2")
    assert p.settings["enable_chunked_prefill"] is True
    assert p.settings["max_num_batched_tokens"] == 2048         # 0.6.5+ (512 in 0.4.2-0.6.4)


# ---- messages (§10, §1b) ---------------------------------------------------------------
R = resolve_rules


def test_no_kv_messages():
    base = ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine.")
    docs = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    assert msg.no_kv_message(R("0.6.5")) == base
    assert msg.no_kv_message(R("0.12.0")) == base
    assert msg.no_kv_message(R("0.13.0")) == base + docs
    assert msg.no_kv_message(R("0.22.0")) == (
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine (this flag also controls CPU memory reservation on the CPU "
        "backend, despite its name)." + docs)


def test_fit_messages_by_version():
    need, avail = int(16 * GIB), int(6.5 * GIB)
    m = msg.fit_message(R("0.7.0", "v1"), 131072, need, avail, None)
    assert m.startswith("To serve at least one request with the models's max seq len (131072), "
                        "(16.00 GB KV cache is needed")
    assert msg.fit_message(R("0.8.3"), 131072, need, avail, 5).count("GiB") == 2
    # vLLM's typo "models's" in every v1 release up to 0.21 (kv_cache_utils.py), fixed in 0.22
    for version in ("0.8.4", "0.10.2", "0.13.0", "0.14.0", "0.19.0", "0.21.0"):
        assert "with the models's max seq len" in msg.fit_message(R(version), 8, need, avail,
                                                                   None), version
    assert "with the model's max seq len" in msg.fit_message(R("0.22.0"), 8, need, avail, None)
    m = msg.fit_message(R("0.8.4"), 131072, need, avail, 52000)
    assert "(6.50 GiB). Based on the available memory,  Try increasing" in m
    m = msg.fit_message(R("0.9.1"), 131072, need, avail, 52000)
    assert ("(6.50 GiB). Based on the available memory, the estimated maximum model length is "
            "52000. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine.") in m and m.endswith("engine.")
    assert "GiB).  Try" in msg.fit_message(R("0.9.1"), 131072, need, avail, None)
    assert msg.fit_message(R("0.13.0"), 131072, need, avail, 1).endswith("for more details.")
    m = msg.fit_message(R("0.14.0"), 131072, need, avail, None)
    assert "(16.0 GiB KV cache is needed" in m and "(6.5 GiB). Try increasing" in m
    assert "(which also controls CPU memory" not in m
    assert "(which also controls CPU memory" in msg.fit_message(R("0.22.0"), 1, need, avail, 1)


def test_v0_fit_and_other_messages():
    assert msg.v0_fit_message(32768, 4464) == (
        "The model's max seq len (32768) is larger than the maximum number of tokens that can "
        "be stored in KV cache (4464). Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine.")
    assert msg.mamba_blocks_message(1024, 939).startswith(
        "max_num_seqs (1024) exceeds available Mamba cache blocks (939). Each decode sequence "
        "requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower "
        "max_num_seqs to at most 939 or increase gpu_memory_utilization.")
    assert msg.sampler_oom_message(1024).startswith(
        "CUDA out of memory occurred when warming up sampler with 1024 dummy requests.")
    assert msg.autofit_fail_message().startswith("Cannot auto-fit max_model_len: not enough GPU")
    assert msg.weights_oom_message("X").startswith(
        "Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization")
    assert msg.weights_oom_message("X").endswith("(original error: X)")


def test_free_memory_messages():
    args = (int(60.85 * GIB), int(79.19 * GIB), 0.95, 0.95 * 79.19 * GIB)
    assert msg.free_memory_message(R("0.11.0"), *args).startswith(
        "Free memory on device (60.85/79.19 GiB) on startup is less than desired GPU memory "
        "utilization (0.95, 75.23 GiB).")
    assert msg.free_memory_message(R("0.19.0"), *args, device="cuda:1").startswith(
        "Free memory on device cuda:1 (60.85/79.19 GiB)")


def test_log_line_variants():
    w = int(14.9888 * GIB)
    assert msg.weights_log(R("0.6.5"), w) == "Loading model weights took 14.9888 GB"
    assert msg.weights_log(R("0.8.0"), w).startswith("Model loading took 14.9888 GB and ")
    assert msg.weights_log(R("0.10.1"), w).startswith("Model loading took 14.9888 GiB and ")
    assert msg.weights_log(R("0.11.1"), w).startswith("Model loading took 14.9888 GiB memory")
    assert msg.weights_log(R("0.19.0"), w).startswith("Model loading took 14.99 GiB memory and")
    k = int(42.8 * GIB)
    assert msg.available_kv_log(R("0.10.1"), k) == ("Available KV cache memory: 42.80 GiB",)
    assert msg.available_kv_log(R("0.19.0"), k) == ("Available KV cache memory: 42.8 GiB",)
    assert msg.available_kv_log(R("0.8.5"), k) == ()
    assert msg.capacity_log(R("0.10.0", "v0"), 190100, 0, 32768, 92.82) == (
        "# cuda blocks: 190100, # CPU blocks: 0",
        "Maximum concurrency for 32768 tokens per request: 92.82x")
    assert msg.capacity_log(R("0.7.1", "v0"), 5, 0, 1, 1.0)[0] == "# CUDA blocks: 5, # CPU blocks: 0"
    assert msg.capacity_log(R("0.19.0"), 29751, 476016, 8192, 58.107) == (
        "GPU KV cache size: 476,016 tokens",
        "Maximum concurrency for 8,192 tokens per request: 58.11x")
    assert msg.capacity_log(R("0.30.0"), 1, 9026017, 32768, 275.45, device="XPU") == (
        "XPU KV cache size: 9,026,017 tokens, Maximum concurrency for 32,768 tokens per "
        "request: 275.45x",)


# ---- max_model_len (§7) ----------------------------------------------------------------
def test_llama3_rope_not_scaled():
    assert derive_max_model_len(llama31_8b(), R("0.33.0")).value == 131072


def test_yarn_multiplied_before_030_not_after():
    spec = dense(max_pos=32768, rope={"rope_type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 32768})
    assert derive_max_model_len(spec, R("0.29.0")).limit == 131072
    assert derive_max_model_len(spec, R("0.30.0")).limit == 32768


@pytest.mark.parametrize("flag, value, version, fix", [
    ("--rope-scaling", '{"factor": 2.0, "rope_type": "linear"}', "0.11.1",
     "vLLM 0.11.1 has no such flag (0.4.3-0.11.0): write it as --hf-overrides "
     '\'{"rope_scaling": {"factor": 2.0, "rope_type": "linear"}}\''),
    ("--rope-theta", "1000000.0", "0.33.0",
     "vLLM 0.33.0 has no such flag (0.5.0-0.11.0): write it as --hf-overrides "
     '\'{"rope_theta": 1000000.0}\''),
    ("--rope-theta", "1000000.0", "0.4.3", "vLLM 0.4.3 has no such flag (0.5.0-0.11.0)"),
    ("--hf-overrides", '{"rope_theta": 5}', "0.6.3",
     "vLLM 0.6.3 has no such flag (0.6.4 on): --rope-scaling (and --rope-theta from 0.5.0) "
     "set those keys"),
])
def test_config_flags_the_release_does_not_have(flag, value, version, fix):
    """argparse's error for --rope-scaling / --rope-theta (0.4.3 / 0.5.0 to 0.11.0) and
    --hf-overrides (0.6.4 on) outside their releases; inside them the plan is made."""
    s = Settings(config_overrides=((flag, value),), max_model_len=4096)
    with pytest.raises(UsageError) as e:
        plan(dense(), s, lookup_gpu("H100"), vllm_version=version)
    assert e.value.what == f"vllm serve: error: unrecognized arguments: {flag} {value}"
    assert (e.value.where, e.value.fix) == (flag, fix)
    for ok in ("0.6.4", "0.11.0") if flag != "--hf-overrides" else ("0.6.4", "0.33.0"):
        assert plan(dense(), s, lookup_gpu("H100"), vllm_version=ok).outcome.ok


def around(first: str, last: str | None) -> tuple[list[str], list[str]]:
    """(the examined releases just before `first` and just after `last`, `first` and `last`
    where examined)."""
    from vramguard.core.arch_registry import EXAMINED as EXAMINED_VERSIONS
    releases = [v for v in EXAMINED_VERSIONS if parse_version(v) >= (0, 4, 0)]
    before = [v for v in releases if parse_version(v) < parse_version(first)]
    after = [v for v in releases if last and parse_version(v) > parse_version(last)]
    return before[-1:] + after[:1], [v for v in (first, last) if v and v in releases]


def refused_around(given: Settings, flag: str, shown: str, first: str, last: str | None):
    """`given` is refused with argparse's "unrecognized arguments: `shown`" just outside
    [first, last] and not by argparse at `first` and `last`; [(release, fix)] of the refusals."""
    g = lookup_gpu("H100")
    outside, inside = around(first, last)
    fixes = []
    for version in outside:
        with pytest.raises(UsageError) as e:
            plan(dense(), given, g, vllm_version=version)
        assert e.value.what == f"vllm serve: error: unrecognized arguments: {shown}"
        assert e.value.where == flag and f"vLLM {version} has no such flag" in e.value.fix
        fixes.append((version, e.value.fix))
    for version in inside:
        try:
            plan(dense(), given, g, vllm_version=version)
        except UsageError as e:          # another check may refuse, never argparse
            assert "unrecognized arguments" not in e.what, version
    return fixes


@pytest.mark.parametrize("name, value, first, last", [
    (name, value, first, last)
    for name, value in (("swap_space", 4.0), ("cpu_offload_gb", 2.0),
                        ("disable_sliding_window", True), ("enable_expert_parallel", True),
                        ("async_scheduling", True), ("skip_mm_profiling", True),
                        ("language_model_only", True), ("kv_offloading_size", 8.0),
                        ("enable_multimodal_encoder_data_parallel", True),
                        ("mm_encoder_tp_mode", "data"), ("kv_cache_dtype_skip_layers", ("0", "1")))
    for _flag, first, last in [FLAG_RELEASES[name]]])
def test_flags_by_release(name, value, first, last):
    """A flag outside the releases whose argparse has it: "unrecognized arguments" before
    anything else; at the first and last release it is accepted."""
    flag = FLAG_RELEASES[name][0]
    given = Settings(max_model_len=4096, **{name: value}, user_set=frozenset({name}))
    shown = ("" if value is True else f" {value:g}" if isinstance(value, float)
             else " " + " ".join(value) if isinstance(value, tuple) else f" {value}")
    refused_around(given, flag, flag + shown, first, last)


def test_flag_check_reads_the_launch():
    """No user_set: a value off the default is given; the LLM class has no argparse."""
    g = lookup_gpu("H100")
    with pytest.raises(UsageError, match="--swap-space 4. vLLM 0.33.0 has no such flag "
                                         r"\(0.4.0-0.17.1\): drop it: V1 preempts"):
        plan(dense(), Settings(swap_space=4.0, max_model_len=4096), g)
    assert plan(dense(), Settings(swap_space=4.0, max_model_len=4096, entrypoint="llm"),
                g).outcome.ok
    assert plan(dense(), Settings(max_model_len=4096), g, vllm_version="0.4.0").outcome.ok


def test_flag_releases_name_the_parsers_flags():
    """Each listed flag is the one the command-line parser maps to that Settings field."""
    from vramguard.sources.vllm_flags import FLAGS
    for name, (flag, first, last) in FLAG_RELEASES.items():
        assert FLAGS[flag].field == name
        assert last is None or parse_version(first) < parse_version(last)


def test_yarn_not_lengthening_says_how_to_lengthen():
    """0.30+: asking for the YaRN length gets vLLM's error with the override that gives it;
    a length beyond it, or no YaRN, the plain fix."""
    spec = dense(max_pos=32768, rope={"rope_type": "yarn", "factor": 4.0,
                                      "original_max_position_embeddings": 32768})
    assert derive_max_model_len(spec, R("0.29.0")).unscaled_yarn_len is None
    assert derive_max_model_len(spec, R("0.30.0")).unscaled_yarn_len == 131072
    with pytest.raises(UsageError) as e:
        resolve_max_model_len(spec, R("0.30.0"), 131072)
    assert e.value.fix == ('vLLM 0.30+ takes max_position_embeddings (32768) as already scaled '
                           'by YaRN: add "max_position_embeddings": 131072 to --hf-overrides '
                           'next to the rope scaling, or use --max-model-len 32768 or less')
    for s, n in ((spec, 131073), (dense(max_pos=32768), 131072)):
        with pytest.raises(UsageError) as e:
            resolve_max_model_len(s, R("0.30.0"), n)
        assert e.value.fix == "Use --max-model-len 32768 or less"


def test_linear_scaling_and_gemma3_exception():
    spec = dense(max_pos=4096, rope={"type": "linear", "factor": 2.0})
    assert derive_max_model_len(spec, R("0.33.0")).value == 8192
    g3 = dense(max_pos=131072, model_type="gemma3_text", rope={"rope_type": "linear", "factor": 8})
    assert derive_max_model_len(g3, R("0.33.0")).value == 131072


def test_min_over_keys_and_default():
    from dataclasses import replace
    spec = replace(dense(), max_len_keys={"max_position_embeddings": 32768, "seq_length": 8192})
    d = derive_max_model_len(spec, R("0.33.0"))
    assert (d.value, d.key) == (8192, "seq_length")
    assert derive_max_model_len(replace(dense(), max_len_keys={}), R("0.33.0")).value == 2048


def test_user_len_above_derived_raises_vllm_words():
    with pytest.raises(UsageError) as e:
        resolve_max_model_len(llama31_8b(), R("0.33.0"), 200000)
    assert ("User-specified max_model_len (200000) is greater than the derived max_model_len "
            "(max_position_embeddings=131072") in str(e.value)


def test_disabled_sliding_window_caps_the_length_and_is_named_as_vllm_names_it():
    from dataclasses import replace
    spec = replace(dense(), max_len_keys={"max_position_embeddings": 32768})
    d = derive_max_model_len(spec, R("0.33.0"), disable_sliding_window=True, sliding_window=4096)
    assert (d.value, d.limit, d.key, d.key_value) == (4096, 4096, "sliding_window", 4096)
    kept = derive_max_model_len(spec, R("0.33.0"), sliding_window=4096)
    assert (kept.limit, kept.key) == (32768, "max_position_embeddings")
    with pytest.raises(UsageError) as e:
        resolve_max_model_len(spec, R("0.33.0"), 6144, disable_sliding_window=True,
                              sliding_window=4096)
    assert "derived max_model_len (sliding_window=4096.0 or" in str(e.value)    # 0.12+: x1.0


def test_parse_len_suffixes():
    assert parse_len("25.6k") == 25600 and parse_len("128K") == 131072
    assert parse_len("auto") is None and parse_len("-1") is None and parse_len("4096") == 4096


# ---- validation ------------------------------------------------------------------------
def test_validation_errors():
    h100 = lookup_gpu("H100")
    with pytest.raises(UsageError, match="divisible by tensor parallel size"):
        plan(llama31_8b(), Settings(tensor_parallel_size=3), h100)
    for bad in (0, 1.2, -0.5):
        with pytest.raises(UsageError, match="GPU memory utilization"):
            plan(llama31_8b(), Settings(gpu_memory_utilization=bad), h100)
    with pytest.raises(UsageError, match="contradict"):
        plan(llama31_8b(), Settings(max_model_len=4096, max_model_len_auto=True), h100)
    with pytest.raises(UsageError, match="0.14"):
        plan(llama31_8b(), Settings(max_model_len_auto=True), h100, vllm_version="0.11.0")


# ---- GPU catalog -----------------------------------------------------------------------
def test_catalog_lookup_loose_and_suggestions():
    assert lookup_gpu("NVIDIA H100 80GB HBM3").name == "H100-80GB"
    assert lookup_gpu("nvidia geforce rtx 4090").name == "RTX-4090"
    assert lookup_gpu("a100-sxm4-80gb").name == "A100-80GB"
    assert lookup_gpu("Tesla T4").name == "T4"
    assert round(lookup_gpu("H100").total_bytes / GIB, 2) == 79.19
    assert lookup_gpu("H100-NVL").source.startswith("derived")
    with pytest.raises(UsageError) as e:
        lookup_gpu("RTX 4091")
    assert "RTX-4090" in str(e.value)
    names = {g.name for g in list_gpus()}
    assert {"A100-40GB", "H200", "B200", "L40S", "T4", "MI300X", "GB10", "Jetson-AGX-Orin",
            "RTX-PRO-6000", "V100-16GB", "RTX-2080Ti"} <= names
    assert lookup_gpu("GB10").uma and lookup_gpu("MI300X").vendor == "amd"


def test_graph_estimate_env_switches_the_budget():
    from vramguard.core.rules import resolve_rules
    from vramguard.core.rules_env import apply_env
    env0 = {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}
    env1 = {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"}
    assert apply_env(resolve_rules("0.30.0"), env0).graph_budget == "estimated"
    assert apply_env(resolve_rules("0.19.0"), env1).graph_budget == "subtracted"
    assert apply_env(resolve_rules("0.17.0"), env1).graph_budget == "headroom"
    assert apply_env(resolve_rules("0.30.0"), {}).graph_budget == "subtracted"


def test_tp_all_reduce_memory_in_non_torch_by_version():
    """TP > 1 on NVLink parts: custom all-reduce memory lands in N up to 0.10.2 (set up after
    the snapshot) and from 0.18 (the graph-memory probe's pool stays mapped by the peers; not
    with --enforce-eager), not in 0.11-0.17 (set up before the snapshot; N 0.55 GiB in 0.11.0
    logs vs 2.07 GiB in 0.19). Without custom all-reduce (--disable-custom-all-reduce) no TP
    share at all (logged: 0.2 GiB at TP4 on Turing PCIe cards, 0.09 GiB at TP4 on A30s)."""
    from vramguard.core import activation as act
    h100 = lookup_gpu("H100")
    tp2 = Settings(tensor_parallel_size=2, max_model_len=8192)
    full = act.NON_TORCH_BASE + act.NON_TORCH_TP
    small = act.NON_TORCH_BASE + act.NON_TORCH_TP // 4

    def n(version, s=tp2):
        return plan(llama31_8b(), s, h100, vllm_version=version).tightest.non_torch.value_bytes
    assert n("0.10.2") == full
    assert n("0.11.0") == n("0.17.1") == small
    assert n("0.18.0") == n("0.26.0") == full
    state = act.v2_sampler_state_bytes(llama31_8b(), 1024)     # 0.27+: V2 sampler state
    assert n("0.30.0") == full + state
    assert n("0.19.0", tp2.with_(enforce_eager=True)) == small
    assert n("0.19.0", tp2.with_(disable_custom_all_reduce=True)) == act.NON_TORCH_BASE
    assert n("0.10.2", tp2.with_(disable_custom_all_reduce=True)) == act.NON_TORCH_BASE
    assert n("0.19.0", Settings(max_model_len=8192)) == act.NON_TORCH_BASE


def test_custom_all_reduce_follows_the_measured_peer_link_and_group_size():
    """vLLM's CustomAllreduce runs for TP groups of 2/4/6/8(/16) only; on NVIDIA it needs every
    pair over NVLink, or two GPUs with peer access. A measured `peer_link` (vramguard check,
    NVML) decides; unknown, the GPU's class does (H100: on, L40S: off). Off, N has no TP
    share."""
    from dataclasses import replace
    from vramguard.core import activation as act
    full = act.NON_TORCH_BASE + act.NON_TORCH_TP
    small = act.NON_TORCH_BASE
    h100, l40s = lookup_gpu("H100"), lookup_gpu("L40S")

    def n(gpu, tp=2, link=None):
        g = replace(gpu, peer_link=link) if link else gpu
        s = Settings(tensor_parallel_size=tp, max_model_len=8192)
        return plan(llama31_8b(), s, g, vllm_version="0.19.0").tightest.non_torch.value_bytes
    assert (n(h100), n(l40s)) == (full, small)                  # by class
    assert n(h100, link="none") == n(h100, link="p2p", tp=4) == small
    assert n(l40s, link="p2p") == n(l40s, link="nvlink", tp=4) == full
    assert n(h100, link="nvlink", tp=8) == full
    p = plan(llama31_8b(), Settings(tensor_parallel_size=2, max_model_len=8192),
             replace(h100, peer_link="none"), vllm_version="0.19.0")
    assert any("measured peer link: none" in a for a in p.assumptions)


def test_custom_all_reduce_group_sizes():
    from vramguard.core.stage_terms import custom_all_reduce_runs
    h100 = lookup_gpu("H100")
    runs = [t for t in range(1, 17)
            if custom_all_reduce_runs(Settings(tensor_parallel_size=t), h100)]
    assert runs == [2, 4, 6, 8, 16]


def test_rejection_sampler_in_the_profile_run_with_speculative_decoding():
    """v1 runner, 0.8.1+: with speculation the dummy sampler also runs the rejection sampler,
    ~7 fp32 (reqs x vocab) copies at its peak instead of 2.1 (0.14+). Model Runner V2 profiles
    the plain sampler only: Llama from 0.23, dense models from 0.25, every model from 0.29.
    Qwen3-Next at 256
    sequences: 256 x 151,936 x 4 B x 7."""
    from core_specs import qwen3_next_kv_only
    from vramguard.core import activation as act
    h100 = lookup_gpu("H100")
    base = Settings(max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=8192)
    spec = qwen3_next_kv_only()

    def sampler(version, s, model=spec):
        p = plan(model, s, h100, vllm_version=version)
        return p.tightest.activation.value_bytes

    def logits(copies):
        return int(256 * 151936 * 4 * copies)
    k2 = base.with_(num_speculative_tokens=2, speculative_method="mtp")
    for version in ("0.20.0", "0.28.0"):            # hybrid: still the v1 runner up to 0.28
        assert sampler(version, k2) - sampler(version, base) == logits(7.0) - logits(2.1)
    assert sampler("0.29.0", k2) == sampler("0.29.0", base)          # Model Runner V2
    # n-gram, draft models, suffix, Medusa, MLP speculators run on the v1 runner (0.30
    # `_get_v2_model_runner_unsupported_features`): its rejection sampler is back
    ngram = k2.with_(speculative_method="ngram")
    assert sampler("0.29.0", ngram) - sampler("0.29.0", base) == logits(7.0) - logits(2.1)
    assert sampler("0.29.0", k2.with_(speculative_method="mtp")) == sampler("0.29.0", base)
    dense8b = llama31_8b()
    assert sampler("0.22.0", k2, dense8b) > sampler("0.22.0", base, dense8b)
    assert sampler("0.23.0", k2, dense8b) == sampler("0.23.0", base, dense8b)   # V2: Llama
    assert act.sampler_warmup_bytes(spec, 256, 7.0) == logits(7.0)
    assert act.sampler_warmup_bytes(spec, 256) == logits(act.SAMPLER_WARMUP_COPIES)


def test_model_runner_v2_env_switch():
    """VLLM_USE_V2_MODEL_RUNNER picks the runner where V2 exists (0.12+; a default from
    0.22): with V2 the profile run has no rejection sampler; =0 brings the v1 runner's back."""
    from core_specs import qwen3_next_kv_only
    from vramguard.core.rules import resolve_rules
    from vramguard.core.rules_env import apply_env
    assert apply_env(resolve_rules("0.30.0"), {"VLLM_USE_V2_MODEL_RUNNER": "0"}) \
        .model_runner_v2 == "off"
    assert apply_env(resolve_rules("0.26.0"), {"VLLM_USE_V2_MODEL_RUNNER": "1"}) \
        .model_runner_v2 == "all"
    assert apply_env(resolve_rules("0.20.0"), {"VLLM_USE_V2_MODEL_RUNNER": "1"}) \
        .model_runner_v2 == "all"
    assert apply_env(resolve_rules("0.12.0"), {"VLLM_USE_V2_MODEL_RUNNER": "1"}) \
        .model_runner_v2 == "all"
    assert apply_env(resolve_rules("0.11.1"), {"VLLM_USE_V2_MODEL_RUNNER": "1"}) \
        .model_runner_v2 == "none"
    h100 = lookup_gpu("H100")
    s = Settings(max_model_len=8192, max_num_seqs=256, num_speculative_tokens=2,
                 speculative_method="mtp")

    def act(env):
        return plan(qwen3_next_kv_only(), s, h100, vllm_version="0.30.0",
                    env=env).tightest.activation.value_bytes
    assert act({"VLLM_USE_V2_MODEL_RUNNER": "0"}) - act({}) \
        == int(256 * 151936 * 4 * 7.0) - int(256 * 151936 * 4 * 2.1)


def test_v0_multimodal_profile_run_sequences_and_dropped_encoder():
    """v0 (0.5.1+) profiles a multimodal model with max(1, min(max_num_seqs, tokens //
    worst-case mm tokens)) dummy sequences, so its dummy sampler sees that many requests;
    0.7.0-0.8.2 drop the mm dummy data when the worst-case prompt is longer than the
    profiling sequence (no encoder in the peak), 0.8.3 keeps it (vLLM wheels' profiling.py).
    A dynamic tower's worst image is 65,536 patches = 16,384 tokens after the 2x2 merge."""
    from dataclasses import replace as dc_replace

    from core_specs import llama31_8b
    from vramguard.core import activation as act
    from vramguard.core.model import VisionSpec
    from vramguard.core.rules import resolve_rules
    vlm = dc_replace(llama31_8b(), vision=VisionSpec(num_params=600_000_000, hidden_size=1280))
    a100 = lookup_gpu("A100-80GB")
    assert act.vision_max_tokens(vlm) == 16384
    assert act.mm_profile(vlm, 5120, 256, True, True) == (1, False)     # 16384 > 5120 // 1
    assert act.mm_profile(vlm, 5120, 256, True, False) == (1, True)
    assert act.mm_profile(vlm, 40000, 256, True, True) == (2, True)     # 40000 // 16384 = 2
    assert act.mm_profile(vlm, 5120, 256, False, False) == (256, True)  # v1: min(seqs, tokens)
    assert act.mm_profile(llama31_8b(), 5120, 256, True, True) == (256, True)   # text-only
    for version, drops in (("0.6.6", False), ("0.7.0", True), ("0.8.2", True),
                           ("0.8.3", False), ("0.10.2", False)):
        r = resolve_rules(version, "v0")
        assert r.v0_mm_profile_seqs and r.v0_mm_dropped_when_long is drops, version
    assert not resolve_rules("0.10.1", "v1").v0_mm_profile_seqs
    s = Settings(max_model_len=3072, max_num_batched_tokens=5120, max_num_seqs=256)

    def act_bytes(version):
        return plan(vlm, s, a100, vllm_version=version, engine="v0").tightest.activation \
            .value_bytes
    hidden = int(5120 * 4096 * act.ACT_BYTES_PER_TOKEN_HIDDEN["v0"])
    one_req = int(1 * 128256 * 4 * 7.5)                          # v0 dummy sampler, 1 request
    encoder = int(65536 * 1280 * act.VISION_BYTES_PER_PATCH_HIDDEN["v0"])
    assert act_bytes("0.8.2") == hidden + one_req
    assert act_bytes("0.8.3") == hidden + one_req + encoder


def test_language_model_only_and_skip_mm_profiling():
    """--language-model-only: no encoder weights (vision params / TP x 2 B) and no encoder in
    the profile run; --skip-mm-profiling: the weights stay, the encoder leaves the peak (v1
    takes max(text forward, encoder batch): here the encoder is the peak at 512 tokens)."""
    from dataclasses import replace as dc_replace

    from core_specs import llama31_8b
    from vramguard.core import activation as act
    from vramguard.core.model import VisionSpec
    vlm = dc_replace(llama31_8b(), vision=VisionSpec(num_params=600_000_000, hidden_size=1280))
    h100 = lookup_gpu("H100-80GB")
    base = Settings(max_model_len=4096, max_num_batched_tokens=512, max_num_seqs=8,
                    tensor_parallel_size=2)
    p0 = plan(vlm, base, h100, vllm_version="0.30.0").tightest
    lm = plan(vlm, base.with_(language_model_only=True), h100, vllm_version="0.30.0").tightest
    sk = plan(vlm, base.with_(skip_mm_profiling=True), h100, vllm_version="0.30.0").tightest
    encoder = int(65536 * 1280 * act.VISION_BYTES_PER_PATCH_HIDDEN["v1"] / 2 ** 0.5)
    text = int(512 * 4096 * act.ACT_BYTES_PER_TOKEN_HIDDEN["v1"]) + int(8 * 128256 * 4 * 2.1)
    assert p0.activation.value_bytes == encoder > text
    assert lm.activation.value_bytes == sk.activation.value_bytes == text
    assert p0.weights.value_bytes - lm.weights.value_bytes == 600_000_000 // 2 * 2
    assert sk.weights.value_bytes == p0.weights.value_bytes


def test_qwen_vl_dummy_video_note():
    """v1 0.10.0 and 0.11+ build the dummy video at max_model_len: Qwen2/2.5-VL's grows by one
    16,384-token frame pair (65,536 patches) per 16,384 tokens, up to 7; the plan says so
    (not modelled); 0.10.1-0.10.2, short lengths, --language-model-only: no note."""
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("Qwen/Qwen2.5-VL-7B-Instruct", offline=True)
    h100 = lookup_gpu("H100-80GB")

    def note(version, **flags):
        s = Settings().with_(**flags) if flags else Settings()
        found = [a for a in plan(spec, s, h100, vllm_version=version).assumptions
                 if "worst-case video" in a]
        return found[0] if found else None

    assert "~458,752 vision patches, 7x" in note("0.33.0")              # 128,000 tokens
    assert "~131,072 vision patches, 2x" in note("0.11.0", max_model_len=32768)
    assert "~393,216 vision patches, 6x" in note("0.10.0", max_model_len=100000)
    assert note("0.10.2") is None and note("0.8.5") is None
    assert note("0.33.0", max_model_len=16384) is None
    assert note("0.33.0", language_model_only=True) is None
    assert note("0.25.0") is None and note("0.27.0")       # V2 profiles no encoder before 0.27


def test_unified_memory_notes():
    """GB10: from 0.11.1 the free memory is the host's available RAM (utils/mem_utils.py),
    and on v1 the profile run's non-torch growth is larger than the term (stated; only the
    model runner's token buffers are in the numbers). GH200's HBM is a discrete device: no
    such note."""
    s = Settings(max_model_len=8192)
    gb10, h100 = lookup_gpu("GB10"), lookup_gpu("H100")

    def notes(gpu, version):
        return " ".join(plan(llama31_8b(), s, gpu, vllm_version=version).assumptions)
    assert "host's available RAM" in notes(gb10, "0.20.0")
    assert "host's available RAM" in notes(gb10, "0.13.0")
    assert "host's available RAM" not in notes(gb10, "0.11.0")
    assert "profile run can count as non-torch memory" in notes(gb10, "0.13.0")
    assert "unified memory" not in notes(h100, "0.20.0")
    assert "unified memory" not in notes(lookup_gpu("GH200"), "0.20.0")
    a = plan(llama31_8b(), s, gb10, vllm_version="0.13.0").tightest.non_torch.value_bytes
    b = plan(llama31_8b(), s, h100, vllm_version="0.13.0").tightest.non_torch.value_bytes
    assert a - b == 256 * 8192 * 5       # only the runner's token buffers (in host memory)


def test_default_batched_tokens_clamped_by_seqs_times_length():
    """From 0.11.1 (engine/arg_utils.py) a default max_num_batched_tokens is at most
    max_num_seqs x max_model_len, and a default max_num_seqs at most the batched tokens."""
    h100 = lookup_gpu("H100")

    def sched(version, **kw):
        p = plan(llama31_8b(), Settings(max_model_len=4096, **kw), h100, vllm_version=version)
        return p.settings["max_num_batched_tokens"], p.settings["max_num_seqs"]
    assert sched("0.11.0", max_num_seqs=1) == (8192, 1)
    assert sched("0.12.0", max_num_seqs=1) == sched("0.26.0", max_num_seqs=1) == (4096, 1)
    assert sched("0.19.0", max_num_batched_tokens=512) == (512, 512)
    assert sched("0.11.0", max_num_batched_tokens=512, max_num_seqs=256) == (512, 256)


def test_v2_sampler_state_is_charged_from_027():
    """Model Runner V2 keeps an int32 count per request x vocabulary entry (and a 1-bit prompt
    mask) for penalties, allocated after the weights are measured; from 0.27 the budget charges
    all memory consumed since the snapshot, so it is in the non-KV terms (last PP rank only).
    Llama-3.1-8B, 256 requests: 256 x 4 x (128,256 + 4,008) = 135,438,336 bytes."""
    from vramguard.core import activation as act
    assert act.v2_sampler_state_bytes(llama31_8b(), 256) == 256 * 4 * (128256 + 4008)
    l4 = lookup_gpu("L4")
    s = Settings(max_model_len=8192, max_num_seqs=256)

    def n(version, settings=s):
        return [l.non_torch.value_bytes for l in
                plan(llama31_8b(), settings, l4, vllm_version=version).ledgers]
    assert n("0.27.0")[0] - n("0.26.0")[0] == 135_438_336        # dense: V2 from 0.25
    first, last = n("0.30.0", s.with_(pipeline_parallel_size=2))
    assert last - first == 135_438_336


def test_mamba_blocks_check_covers_pure_mamba_models():
    """0.20+: with full decode CUDA graphs vLLM needs a Mamba block per sequence whenever the
    KV config has Mamba layers (`kv_cache_config.has_mamba_layers`), hybrid or not."""
    from vramguard.sources.resolve import load_model_spec
    spec = load_model_spec("tiiuae/falcon-mamba-7b", offline=True)       # attention-free
    s = Settings(max_num_seqs=1024, gpu_memory_utilization=0.5)
    p = plan(spec, s, lookup_gpu("L40S"), vllm_version="0.30.0")
    assert p.outcome.failure == "mamba_blocks_below_max_num_seqs"
    assert f"exceeds available Mamba cache blocks ({p.kv.num_blocks})" in p.outcome.message
    assert plan(spec, s, lookup_gpu("L40S"), vllm_version="0.19.0").outcome.ok
    assert plan(spec, s.with_(enforce_eager=True), lookup_gpu("L40S"),
                vllm_version="0.30.0").outcome.ok


def test_no_graph_estimate_on_rocm_before_026():
    """0.18-0.25 probed CUDA-graph memory on CUDA only (gpu_worker.py): on AMD the graphs are
    not subtracted from the budget (they must fit in the headroom); from 0.26 they are."""
    mi300x = lookup_gpu("MI300X")
    s = Settings(max_model_len=8192)

    def budget(version, gpu=mi300x):
        """What the budget subtracts besides weights, activation and non-torch: G or 0."""
        t = plan(llama31_8b(), s, gpu, vllm_version=version).tightest
        return (t.requested.value_bytes - t.weights.value_bytes - t.activation.value_bytes
                - t.non_torch.value_bytes - t.kv_cache.value_bytes)
    assert budget("0.20.0") == budget("0.25.0") == 0                   # G not subtracted
    assert budget("0.26.0") > 0 and budget("0.20.0", lookup_gpu("H100")) > 0


def test_model_runner_v2_weights_line():
    """Model Runner V2 printed "Model loading took X GiB and Y seconds" (no "memory") in
    0.12-0.27 (gpu/model_runner.py), "GiB memory" like V1 from 0.28."""
    from core_specs import qwen3_next_kv_only
    h100 = lookup_gpu("H100")
    s = Settings(max_model_len=8192)

    def line(version, spec):
        return plan(spec, s, h100, vllm_version=version).log_lines[0]
    assert re.fullmatch(r"Model loading took [\d.]+ GiB and … seconds",
                        line("0.27.0", llama31_8b()))
    assert re.fullmatch(r"Model loading took [\d.]+ GiB memory and … seconds",
                        line("0.28.0", llama31_8b()))
    assert "GiB memory" in line("0.27.0", qwen3_next_kv_only())        # hybrid: V1 runner


def test_auto_fit_log_lines_by_version():
    """0.14-0.31: "... fit in available GPU memory (X GiB available for KV cache)" and a full
    fit without a figure; 0.32+: "... available KV cache memory (X GiB GPU)" (kv_cache_utils)."""
    old, new = R("0.31.0"), R("0.32.0")
    kv = int(6.57 * GIB)
    assert msg.autofit_log(old, 131072, 53776, kv) == (
        "Auto-fit max_model_len: reduced from 131072 to 53776 to fit in available GPU memory "
        "(6.57 GiB available for KV cache)")
    assert msg.autofit_full_log(old, 8192, kv) == (
        "Auto-fit max_model_len: full model context length 8192 fits in available GPU memory")
    assert msg.autofit_log(new, 131072, 53776, kv) == (
        "Auto-fit max_model_len: reduced from 131072 to 53776 to fit in available KV cache "
        "memory (6.57 GiB GPU)")
    assert msg.autofit_full_log(new, 8192, kv, "CPU").endswith("KV cache memory (6.57 GiB CPU)")
    from vramguard.logs.parser import parse_text
    for version in (old, new):
        assert parse_text(msg.autofit_log(version, 131072, 53776, kv)).auto_fit == (131072, 53776)


def test_cublas_handles_before_the_snapshot_leave_n_in_033():
    """0.33 creates the cuBLAS(Lt) handles before the memory snapshot (gpu_worker.py): they
    are in the context, and the profile run's non-torch growth no longer holds them."""
    from vramguard.core import activation as act
    h100 = lookup_gpu("H100")
    s = Settings(max_model_len=8192, max_num_seqs=256)

    def n(version):
        return plan(llama31_8b(), s, h100, vllm_version=version).tightest.non_torch.value_bytes
    assert n("0.32.0") - n("0.33.0") == act.CUBLAS_BEFORE_SNAPSHOT


def test_kv_cache_memory_bytes_logs_no_available_line():
    """With --kv-cache-memory-bytes vLLM returns from determine_available_memory after its
    "reserved … for KV Cache" line: no "Available KV cache memory" line (0.10.2+)."""
    h100 = lookup_gpu("H100")
    # NOTE: the figures by release (gpu_worker.py): 0.10.2-0.11.0 "20.00GiB" and "does does",
    # 0.11.1-0.13 "20.00 GiB", 0.14+ format_gib "20.0 GiB"
    for version, text in (("0.10.2", "reserved 20.00GiB memory for KV Cache"),
                          ("0.12.0", "reserved 20.00 GiB memory for KV Cache"),
                          ("0.19.0", "reserved 20.0 GiB memory for KV Cache"),
                          ("0.33.0", "reserved 20.0 GiB memory for KV Cache")):
        p = plan(llama31_8b(), Settings(max_model_len=8192, kv_cache_memory_bytes=20 * GIB),
                 h100, vllm_version=version)
        assert any(text in l for l in p.log_lines), version
        assert not any(l.startswith("Available KV cache memory") for l in p.log_lines)
    line = next(l for l in plan(llama31_8b(), Settings(kv_cache_memory_bytes=20 * GIB), h100,
                                vllm_version="0.10.2").log_lines if "reserved" in l)
    assert "This does does not respect" in line and "Initial free memory 78.6" in line
    p = plan(llama31_8b(), Settings(max_model_len=8192), h100, vllm_version="0.33.0")
    assert any(l.startswith("Available KV cache memory") for l in p.log_lines)


def test_model_runner_v2_by_release_and_architecture():
    """config/vllm.py `_is_default_v2_model_runner_model`: 0.22 Qwen3 (dense, unquantized),
    0.23 + Llama/Mistral, 0.24 six architectures (MoE and quantized too), 0.25-0.28 every
    model without Mamba layers or experts plus three MoE architectures, 0.29 every model;
    0.12-0.21 only with VLLM_USE_V2_MODEL_RUNNER=1."""
    from dataclasses import replace
    from core_specs import qwen3_next_kv_only
    from vramguard.core.model import MoESpec, QuantSpec
    from vramguard.core.rules_env import apply_env
    from vramguard.core.stage_terms import model_runner_v2
    s = Settings()
    llama = llama31_8b()
    qwen3 = replace(llama, architecture="Qwen3ForCausalLM")
    moe = MoESpec(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=512)
    dsv2 = replace(llama, architecture="DeepseekV2ForCausalLM", moe=moe)
    mixtral = replace(llama, architecture="MixtralForCausalLM", moe=moe)
    q_qwen3 = replace(qwen3, quant=QuantSpec(method="awq", bits=4, linear_bytes_per_param=0.5))
    pure_mamba = replace(qwen3_next_kv_only(), layers=tuple(
        l for l in qwen3_next_kv_only().layers if l.attention.kind == "mamba"))

    def v2(version, spec):
        return model_runner_v2(spec, s, R(version))
    assert [v2("0.22.0", m) for m in (qwen3, llama, q_qwen3)] == [True, False, False]
    assert [v2("0.23.0", m) for m in (qwen3, llama, dsv2)] == [True, True, False]
    assert [v2("0.24.0", m) for m in (q_qwen3, dsv2, mixtral)] == [True, True, False]
    assert [v2("0.25.0", m) for m in (llama, dsv2, mixtral, pure_mamba,
                                      qwen3_next_kv_only())] == [True, True, False, False, False]
    assert v2("0.29.0", mixtral) and not v2("0.21.0", llama)
    assert model_runner_v2(llama, s, apply_env(R("0.21.0"), {"VLLM_USE_V2_MODEL_RUNNER": "1"}))


# ---- --block-size: argparse choices, pydantic, attention backends ----------------------
_H100 = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB), compute_capability=(9, 0))


@pytest.mark.parametrize("version,engine,block,text", [
    ("0.4.0", "v0", 64, "api_server.py: error: argument --block-size: invalid choice: 64 "
                        "(choose from 8, 16, 32, 128)"),
    ("0.6.0", "v0", 64, "vllm serve: error: argument --block-size: invalid choice: 64 "
                        "(choose from 8, 16, 32)"),
    ("0.10.0", "v1", 7, "vllm serve: error: argument --block-size: invalid choice: 7 "
                        "(choose from 1, 8, 16, 32, 64, 128)"),
    ("0.10.0", "v1", 256, "vllm serve: error: argument --block-size: invalid choice: 256 "
                          "(choose from 1, 8, 16, 32, 64, 128)"),
    ("0.9.2", "v1", 8, "Block size must be a multiple of 16."),
    ("0.15.0", "v1", 8, "No common block size for 8. "),
    ("0.33.0", "v1", 7, "No valid attention backend found for cuda"),
    ("0.23.0", "v1", 0, "1 validation error for CacheConfig block_size: Input should be "
                        "greater than 0 [type=greater_than, input_value=0, input_type=int]"),
    ("0.20.0", "v1", -16, "--block-size -16: vLLM 0.20.0 does not check it"),
])
def test_block_size_rejected_in_vllms_words(version, engine, block, text):
    with pytest.raises(UsageError) as err:
        plan(llama31_8b(), Settings(block_size=block, max_model_len=4096), _H100,
             vllm_version=version, engine=engine)
    assert text in err.value.what and err.value.where == "--block-size"


@pytest.mark.parametrize("version,engine,block", [
    ("0.9.2", "v0", 8),        # v0 falls back to XFormers
    ("0.12.0", "v1", 8),       # FlexAttention takes any size
    ("0.19.0", "v1", 7),
    ("0.12.0", "v1", 256),
    ("0.33.0", "v1", 48),      # any multiple of 16 from 0.18
    ("0.33.0", "v1", 4096),
])
def test_block_size_accepted(version, engine, block):
    p = plan(llama31_8b(), Settings(block_size=block, max_model_len=4096), _H100,
             vllm_version=version, engine=engine)
    assert p.kv.block_size == block


def test_block_size_backend_rule_leaves_mla_models_alone():
    from core_specs import deepseek_v3_kv_only
    p = plan(deepseek_v3_kv_only(), Settings(block_size=8, max_model_len=4096), _H100,
             vllm_version="0.33.0")
    assert p.kv.block_size == 8


SPEC_JSON = '{"method": "ngram", "num_speculative_tokens": 3}'


@pytest.mark.parametrize("flags, accepted, refused", [
    ((("--speculative-model", "[ngram]"), ("--num-speculative-tokens", "3")),
     ("0.4.1", "0.8.2"), ("0.8.3", "0.9.0")),
    ((("--speculative-config", SPEC_JSON),), ("0.8.2", "0.33.0"), ("0.8.1", "0.7.3")),
    ((("--spec-method", "ngram"), ("--spec-tokens", "3")), ("0.22.0", "0.33.0"),
     ("0.21.0", "0.8.2", "0.7.3")),
])
def test_flag_spellings_by_release(flags, accepted, refused):
    """Each spelling of the speculative flags in the releases whose argparse has it
    (rules_changes.SPELLING_RELEASES); outside them "unrecognized arguments" with
    the spelling that release has."""
    g = lookup_gpu("H100")
    given = Settings(max_model_len=4096, flag_spellings=flags,
                     user_set=frozenset({"max_model_len", "flag_spellings"}))
    for version in accepted:
        try:
            plan(dense(), given, g, vllm_version=version)
        except UsageError as e:          # another check may refuse, never argparse
            assert "unrecognized arguments" not in e.what, version
    for version in refused:
        with pytest.raises(UsageError) as e:
            plan(dense(), given, g, vllm_version=version)
        flag, value = flags[0]
        assert e.value.what == f"vllm serve: error: unrecognized arguments: {flag} {value}"
        assert f"vLLM {version} has no such flag" in e.value.fix
        hint = ("--speculative-model" if parse_version(version) < (0, 8, 2)
                else "--speculative-config")
        assert hint in e.value.fix, (version, e.value.fix)


def test_spec_flag_and_the_same_json_key_are_exclusive():
    """0.22+: --spec-tokens beside "num_speculative_tokens" in the JSON is EngineArgs'
    ValueError; other keys combine."""
    g = lookup_gpu("H100")
    both = (("--spec-tokens", "3"), ("--speculative-config", SPEC_JSON))
    s = Settings(max_model_len=4096, flag_spellings=both)
    with pytest.raises(UsageError, match=r"--spec-tokens and --speculative-config\["
                                         r"'num_speculative_tokens'\] are mutually exclusive"):
        plan(dense(), s, g)
    apart = (("--spec-tokens", "3"), ("--speculative-config", '{"method": "ngram"}'))
    assert plan(dense(), Settings(max_model_len=4096, flag_spellings=apart), g)


def test_legacy_flag_spellings_bound_the_release():
    """A log started with --speculative-model ran 0.8.2 at most."""
    from vramguard.core.argparse_checks import last_release_with_flags
    s = Settings(flag_spellings=(("--num-speculative-tokens", "3"),))
    assert last_release_with_flags(s) == "0.8.2"
    assert last_release_with_flags(Settings(flag_spellings=(("--spec-tokens", "3"),))) is None


def test_device_memory_utilization_from_031():
    """--device-memory-utilization is --gpu-memory-utilization's second name from 0.31.0."""
    from vramguard.sources.vllm_args import parse_vllm_command
    g = lookup_gpu("H100")
    s = parse_vllm_command("vllm serve m --max-model-len 4096 "
                           "--device-memory-utilization 0.8").settings
    assert s.gpu_memory_utilization == 0.8
    assert plan(dense(), s, g, vllm_version="0.31.0").settings["gpu_memory_utilization"] == 0.8
    with pytest.raises(UsageError) as e:
        plan(dense(), s, g, vllm_version="0.30.0")
    assert e.value.what == ("vllm serve: error: unrecognized arguments: "
                            "--device-memory-utilization 0.8")
    assert "write it --gpu-memory-utilization" in e.value.fix


@pytest.mark.parametrize("flag", sorted(SPELLING_RELEASES))
def test_every_spelling_by_release(flag):
    """Each flag of SPELLING_RELEASES: argparse's refusal just outside its releases, with
    what to write instead; accepted at its first and last release (the value as typed)."""
    first, last = SPELLING_RELEASES[flag]
    value = {"-O": "-O3", "--speculative-config": SPEC_JSON}.get(flag, "3")
    given = Settings(max_model_len=4096, flag_spellings=((flag, value),))
    shown = value if flag == "-O" else f"{flag} {value}"
    for version, fix in refused_around(given, flag, shown, first, last):
        assert fix.startswith(f"vLLM {version} has no such flag (")
        assert len(fix.split(": ", 1)[1]) > 10          # what to write instead


def test_compilation_spellings_are_recorded_as_typed():
    from vramguard.sources.vllm_args import parse_vllm_command
    s = parse_vllm_command("vllm serve m -O3 -cc.mode=3 --optimization-level 2").settings
    assert s.flag_spellings == (("-O", "-O3"), ("-cc", "3"), ("--optimization-level", "2"))


def test_unified_memory_default_free_is_what_public_startups_had():
    """On GB10 the host shares the memory: without a measured figure the free memory at the
    snapshot is the median share public startups logged (105.9-116.1 GiB of 121.69:
    (112.26/119.63 + 114.54/121.69) / 2 = 0.93982 of the total), so the 0.92 default starts
    and 0.95 meets vLLM's free-memory refusal (0.20+); a given figure wins; a part without
    such data keeps total minus the CUDA context."""
    from vramguard.core.gpu_catalog import uma_free_share
    gb10 = lookup_gpu("GB10")
    lo, mid, hi = uma_free_share(lookup_gpu("GB10"))
    assert uma_free_share(lookup_gpu("H100")) is None
    assert lo == pytest.approx(105.9 / 121.69) and hi == pytest.approx(116.05 / 121.69)
    assert mid == pytest.approx((112.26 / 119.63 + 114.54 / 121.69) / 2)
    s = Settings(max_model_len=8192)
    p = plan(llama31_8b(), s, gb10, vllm_version="0.33.0")
    t = gb10.total_bytes
    assert p.outcome.ok
    assert p.tightest.free_at_start.value_bytes == t - int(t * (1 - mid))
    assert (p.tightest.free_at_start.low_bytes, p.tightest.free_at_start.high_bytes) == (
        int(lo * t), int(hi * t))              # the band: the lowest and highest seen
    assert "public GB10 startups had free at vLLM's start, 105.9-116.1 GiB" in " ".join(
        p.assumptions)
    high = plan(llama31_8b(), s.with_(gpu_memory_utilization=0.95), gb10, vllm_version="0.33.0")
    assert high.outcome.failure == "free_memory_below_request"
    given = plan(llama31_8b(), s.with_(gpu_memory_utilization=0.95), gb10,
                 vllm_version="0.33.0", free_bytes=120 << 30)
    assert given.outcome.ok
    orin = lookup_gpu("Jetson-AGX-Orin")
    o = plan(llama31_8b(), s.with_(gpu_memory_utilization=0.5), orin, vllm_version="0.33.0")
    assert "CUDA context" in " ".join(o.assumptions)
