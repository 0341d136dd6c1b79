"""Each startup outcome, with vLLM's own message for the version, by hand."""

import pytest

from core_specs import dense, llama31_8b, qwen3_next_kv_only
from vramguard.core import failures as F
from vramguard.core.gpu import GpuSpec
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import PlanHooks, plan
from vramguard.core.provenance import GIB
from vramguard.core.settings import Settings

H100 = lookup_gpu("H100")
HOOKS = PlanHooks(weights_bytes=int(14.99 * GIB), activation_bytes=int(1.2 * GIB),
                  non_torch_bytes=int(0.5 * GIB), cuda_graph_bytes=int(0.5 * GIB),
                  context_bytes=int(0.5 * GIB))


def test_weights_do_not_fit():
    small = GpuSpec(name="RTX-3080", total_bytes=10 * GIB, compute_capability=(8, 6))
    p = plan(llama31_8b(), Settings(max_model_len=4096), small, vllm_version="0.19.0")
    assert p.outcome.failure == F.WEIGHTS_OOM
    assert p.outcome.message.startswith("Failed to load model - not enough GPU memory.")
    assert "CUDA out of memory" in p.outcome.message
    assert p.fixes[0].flags == {"--tensor-parallel-size": "2"}
    p = plan(llama31_8b(), Settings(max_model_len=4096), small, vllm_version="0.12.0")
    assert p.outcome.message.startswith("CUDA out of memory")     # logged from 0.13 only
    # torch's text at the failing allocation: what the weights still need, nothing left free
    # (it said the whole free memory was free, beside an allocation larger than the rest)
    need = p.tightest.weights.value_bytes - p.tightest.free_at_start.value_bytes
    assert p.outcome.message == (f"CUDA out of memory. Tried to allocate {need / GIB:.2f} GiB. "
                                 "GPU 0 has a total capacity of 10.00 GiB of which 0.00 GiB is "
                                 "free.")


def test_profile_run_oom():
    p = plan(llama31_8b(), Settings(max_model_len=4096), H100, vllm_version="0.29.0",
             hooks=PlanHooks(weights_bytes=70 * GIB, activation_bytes=9 * GIB),
             free_bytes=78 * GIB)
    assert p.outcome.failure == F.PROFILE_RUN_OOM            # 70 + 9 GiB > 78 GiB free
    assert p.outcome.message.startswith("CUDA out of memory. Tried to allocate 9.00 GiB.")
    p = plan(llama31_8b(), Settings(max_model_len=4096, gpu_memory_utilization=0.9), H100,
             vllm_version="0.29.0", hooks=PlanHooks(weights_bytes=70 * GIB,
                                                      activation_bytes=9 * GIB),
             free_bytes=78 * GIB)
    assert p.outcome.failure == F.PROFILE_RUN_OOM


def test_no_kv_memory_and_null_block_from_029():
    # K between 0 and one page: fails only where the null block is reserved (0.29+)
    P = 2 << 20
    u = 0.5
    R = u * int(round(79.19 * GIB))
    k = P // 2
    hooks = PlanHooks(weights_bytes=int(R) - k, activation_bytes=0, non_torch_bytes=0,
                      cuda_graph_bytes=0, context_bytes=0)
    s = Settings(gpu_memory_utilization=u, max_model_len=16)
    p = plan(llama31_8b(), s, H100, vllm_version="0.28.0", hooks=hooks)
    assert p.outcome.failure == F.KV_BELOW_MAX_MODEL_LEN      # 0 blocks < one request
    p = plan(llama31_8b(), s, H100, vllm_version="0.29.0", hooks=hooks)
    assert p.outcome.failure == F.NO_KV_MEMORY
    assert p.outcome.message.startswith("No available memory for the cache blocks.")


def test_negative_kv_is_no_kv_memory():
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.10.1",
             hooks=PlanHooks(weights_bytes=72 * GIB, activation_bytes=GIB, non_torch_bytes=0,
                             context_bytes=int(0.5 * GIB)))
    assert p.outcome.failure == F.NO_KV_MEMORY
    assert p.tightest.kv_cache.value_bytes < 0


def test_v0_fit_message():
    p = plan(llama31_8b(), Settings(gpu_memory_utilization=0.3), H100, vllm_version="0.6.5",
             hooks=HOOKS)
    assert p.engine == "v0" and p.outcome.failure == F.KV_BELOW_MAX_MODEL_LEN
    assert p.outcome.message.startswith("The model's max seq len (131072) is larger than the "
                                        "maximum number of tokens that can be stored in KV cache")


def test_whole_gpu_versions_charge_other_processes():
    s = Settings(max_model_len=8192)
    per = plan(llama31_8b(), s, H100, vllm_version="0.10.1", hooks=HOOKS,
               other_used_bytes=5 * GIB)
    whole = plan(llama31_8b(), s, H100, vllm_version="0.8.5", hooks=HOOKS,
                 other_used_bytes=5 * GIB)
    v064 = plan(llama31_8b(), s, H100, vllm_version="0.6.4", hooks=HOOKS,
                other_used_bytes=5 * GIB)
    k = lambda p: p.tightest.kv_cache.value_bytes  # noqa: E731
    assert k(per) - k(whole) == 5 * GIB + int(0.5 * GIB)      # others + CUDA context
    assert k(per) - k(v064) == 5 * GIB + int(0.5 * GIB)
    assert per.outcome.ok                                      # 73.69 GiB free >= 71.27


def test_mamba_blocks_below_max_num_seqs():
    g = lookup_gpu("H200")
    s = Settings(max_num_seqs=1024, gpu_memory_utilization=0.92)
    hooks = PlanHooks(weights_bytes=120 * GIB, activation_bytes=GIB, non_torch_bytes=0,
                      cuda_graph_bytes=0)
    p = plan(qwen3_next_kv_only(), s, g, vllm_version="0.20.0", hooks=hooks)
    assert p.kv.block_size == 544
    assert p.outcome.failure == F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS
    assert p.outcome.message.startswith(f"max_num_seqs (1024) exceeds available Mamba cache "
                                        f"blocks ({p.kv.num_blocks}).")
    assert p.fixes[0].flags == {"--max-num-seqs": str(p.kv.num_blocks)}
    assert ("Setting attention block size to 544 tokens to ensure that attention page size is "
            ">= mamba page size.") in p.log_lines
    eager = plan(qwen3_next_kv_only(), Settings(max_num_seqs=1024, enforce_eager=True,
                                                gpu_memory_utilization=0.92), g,
                 vllm_version="0.20.0", hooks=hooks)
    assert eager.outcome.ok                                   # no graphs: no check
    older = plan(qwen3_next_kv_only(), s, g, vllm_version="0.19.0", hooks=hooks)
    assert older.outcome.ok


def test_graphs_in_headroom_risk_and_failure_before_020():
    s = Settings(gpu_memory_utilization=0.99, max_model_len=8192)
    p = plan(llama31_8b(), s, H100, vllm_version="0.17.0",
             hooks=PlanHooks(cuda_graph_bytes=3 * GIB, context_bytes=int(0.5 * GIB),
                             activation_bytes=2 * GIB))
    assert p.outcome.failure == F.CUDA_GRAPH_OOM
    assert [f.flags for f in p.fixes[-2:]] == [{"--enforce-eager": ""},
                                               {"--max-cudagraph-capture-size": "128"}]
    old = plan(llama31_8b(), s, H100, vllm_version="0.11.0", engine="v1",
               hooks=PlanHooks(cuda_graph_bytes=3 * GIB, context_bytes=int(0.5 * GIB),
                               activation_bytes=2 * GIB))
    assert old.outcome.failure == F.CUDA_GRAPH_OOM          # no such flag before 0.12
    assert old.fixes[-1].flags == {"--enforce-eager": ""}
    p = plan(llama31_8b(), Settings(gpu_memory_utilization=0.97, max_model_len=8192,
                                    max_num_seqs=64), H100,
             vllm_version="0.17.0", hooks=PlanHooks(cuda_graph_bytes=int(3.5 * GIB),
                                                    context_bytes=int(0.5 * GIB),
                                                    activation_bytes=2 * GIB))
    assert p.outcome.ok and any(r.startswith(F.CUDA_GRAPH_OOM) for r in p.outcome.risks)


def test_sampler_warmup_oom_with_big_vocab_and_many_seqs():
    """The V1 runner's sampler warm-up wraps the OOM in its own message; Model Runner V2
    (dense models from 0.25, every model from 0.29) warms its kernels up with 2-token prompts
    and raises torch's."""
    spec = dense(vocab=1_000_000, max_pos=8192, rope={"rope_type": "default"})
    s = Settings(gpu_memory_utilization=0.97, max_num_seqs=1024)
    hooks = PlanHooks(activation_bytes=0, cuda_graph_bytes=0)
    p = plan(spec, s, H100, vllm_version="0.16.0", hooks=hooks)
    assert p.outcome.failure == F.SAMPLER_WARMUP_OOM
    assert p.outcome.message.startswith("CUDA out of memory occurred when warming up sampler "
                                        "with 1024 dummy requests.")
    assert p.fixes[0].flags == {"--max-num-seqs": "512"}
    v2 = plan(spec, s, H100, vllm_version="0.29.0", hooks=hooks)
    assert v2.outcome.failure == F.SAMPLER_WARMUP_OOM
    assert v2.outcome.message.startswith("CUDA out of memory. Tried to allocate")


def test_to_dict_is_json_ready():
    import json
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.29.0")
    d = json.loads(json.dumps(p.to_dict()))
    assert d["kv_cache"]["num_blocks"] == p.kv.num_blocks
    assert d["settings_sources"]["gpu_memory_utilization"] == "vllm_default"
    assert d["startup"]["ok"] is True
    assert all(isinstance(a, str) for a in d["assumptions"])


def test_capacity_printed_per_pp_stage_up_to_0110():
    s = Settings(pipeline_parallel_size=2, max_model_len=8192)
    p = plan(llama31_8b(), s, H100, vllm_version="0.10.1")
    sizes = [l for l in p.log_lines if l.startswith("GPU KV cache size")]
    assert len(sizes) == 2 and p.kv.num_blocks == min(l.num_blocks for l in p.ledgers)
    p = plan(llama31_8b(), s, H100, vllm_version="0.11.1")
    assert len([l for l in p.log_lines if l.startswith("GPU KV cache size")]) == 1


def test_sampler_warmup_counts_the_captured_graph_pool_when_budgeted():
    """0.20+: the estimate is subtracted from the budget, but the pool is still allocated
    after the KV cache (~1.2x the estimate), before the sampler warm-up.

    Free after graphs ≈ (F − R) + A − 0.2·G = (0.03·79.19 − 0.5) + 0 − 0.2·4 ≈ 1.08 GiB;
    the warm-up needs 6 × 512 × 128,256 × 4 B ≈ 1.47 GiB > 1.25 × 1.08 GiB.
    """
    s = Settings(gpu_memory_utilization=0.97, max_model_len=8192, max_num_seqs=512)
    hooks = dict(weights_bytes=int(14.99 * GIB), activation_bytes=0,
                 non_torch_bytes=int(0.5 * GIB), context_bytes=int(0.5 * GIB))
    p = plan(llama31_8b(), s, H100, vllm_version="0.29.0",
             hooks=PlanHooks(cuda_graph_bytes=4 * GIB, **hooks))
    assert p.outcome.failure == F.SAMPLER_WARMUP_OOM
    p = plan(llama31_8b(), s, H100, vllm_version="0.29.0",
             hooks=PlanHooks(cuda_graph_bytes=0, **hooks))
    assert p.outcome.ok and not p.outcome.risks


def test_gpt_oss_captures_its_own_list_from_0101():
    """gpt-oss overrides the capture list whatever max_num_seqs is (models/config.py): up to
    1024 (83 graphs: 51 up to 512, 32 more in steps of 16) in 0.10.1-0.10.2 and from 0.11.1,
    up to 992 (81) in 0.11.0. Each graph beyond vLLM's 512 list adds one fitted graph's share
    (0.6 / 51) of the full list's pool; other models capture min(2 x max_num_seqs, 512)
    tokens' worth of sizes (2 sizes at 1 seq)."""
    from dataclasses import replace
    from vramguard.core import activation as act
    spec = replace(llama31_8b(), architecture="GptOssForCausalLM")
    s = Settings(max_model_len=8192, max_num_seqs=1)
    base = act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32

    def graphs(version, model=spec):
        return plan(model, s, H100, vllm_version=version).tightest.cuda_graph.value_bytes
    to_1024 = int(base * (0.4 + 0.6 * (1 + 32 / 51)))
    assert graphs("0.14.1") == graphs("0.10.1") == to_1024
    assert graphs("0.11.0") == int(base * (0.4 + 0.6 * (1 + 30 / 51)))
    small = graphs("0.10.0")
    assert small == act.cuda_graph_bytes(32, act.capture_sizes(2)) < base < to_1024
    assert graphs("0.14.1", llama31_8b()) == small


def test_blackwell_data_centre_parts_capture_up_to_1024_from_0_28():
    """config/vllm.py: the default largest size is min(2 x max_num_seqs, 1024) on compute
    capability 10.x from 0.28 (512 before, and on other GPUs): B200 with 1,024 sequences
    captures 83 graphs."""
    from vramguard.core import activation as act
    s = Settings(max_model_len=8192)
    b200, b300 = lookup_gpu("B200"), lookup_gpu("B300")
    base = act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32

    def graphs(gpu, version, settings=s):
        return plan(llama31_8b(), settings, gpu, vllm_version=version
                    ).tightest.cuda_graph.value_bytes
    assert graphs(b200, "0.28.0") == graphs(b300, "0.33.0") == int(
        base * (0.4 + 0.6 * (1 + 32 / 51)))
    assert graphs(b200, "0.27.1") == graphs(H100, "0.33.0") == base
    # 256 sequences: 512 either way
    assert graphs(b200, "0.33.0", s.with_(max_num_seqs=256)) == base


def test_lora_graphs_are_captured_twice_from_0111():
    """With --enable-lora vLLM 0.11.1+ captures every size with and without active LoRA
    (`cudagraph_specialize_lora`): the per-size part of the pool doubles (Llama-8B, 32 layers,
    512 seqs: (0.30 + 0.018 x 32) GiB x (0.4 + 0.6 x 2) instead of x 1.0)."""
    from vramguard.core import activation as act
    s = Settings(max_model_len=8192, max_num_seqs=512, enable_lora=True)
    full = act.capture_sizes(512)   # 512 sequences: the 512 list
    one = act.cuda_graph_bytes(32, full)
    assert one == act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32
    two = act.cuda_graph_bytes(32, full, lora_cases=2)
    assert two == int((act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32) * 1.6)
    # 0.11.0: no specialisation yet; 0.11.1-0.17: the doubled pool must fit the headroom
    assert plan(llama31_8b(), s, H100, vllm_version="0.11.0").tightest.cuda_graph.value_bytes \
        == one
    assert plan(llama31_8b(), s, H100, vllm_version="0.11.1").tightest.cuda_graph.value_bytes \
        == two
    plain = Settings(max_model_len=8192, max_num_seqs=512)
    assert plan(llama31_8b(), plain, H100, vllm_version="0.11.1").tightest.cuda_graph \
        .value_bytes == one


def test_lora_graph_estimate_degenerates_and_the_pool_comes_on_top():
    """0.18+: vLLM's estimate samples the two largest descriptors, which with LoRA are the same
    size with and without LoRA, so the slope falls to 1 MiB: estimate = 0.4 x (0.30 + 0.018 x
    32) GiB + (2 x 67 - 2) MiB. From 0.20 that small estimate is subtracted while the pool
    (1.2 x the doubled model) is allocated after the KV cache; with little headroom the
    capture or the sampler warm-up runs out of memory."""
    from vramguard.core import activation as act
    # F - R = (79.19 - 0.5) - ceil(0.97 x 79.19) = 1.88 GiB; A = 0. After the KV cache
    # 1.88 + 0.47 (estimate) GiB are free; the pool takes 1.2 x 0.876 x 1.6 = 1.68 GiB, leaving
    # 0.67 GiB for a warm-up that needs 6 x 512 x 128,256 x 4 B = 1.47 GiB. Without LoRA the
    # estimate is the model's 0.876 GiB and 1.7 GiB stay free.
    hooks = PlanHooks(weights_bytes=int(14.99 * GIB), activation_bytes=0,
                      non_torch_bytes=int(0.5 * GIB), context_bytes=int(0.5 * GIB))
    s = Settings(max_model_len=8192, max_num_seqs=512, enable_lora=True,
                 gpu_memory_utilization=0.97)
    p = plan(llama31_8b(), s, H100, vllm_version="0.29.0", hooks=hooks)
    est = int((act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32) * 0.4) + 132 * (1 << 20)
    assert p.tightest.cuda_graph.value_bytes == est
    assert p.outcome.failure == F.SAMPLER_WARMUP_OOM
    plain = Settings(max_model_len=8192, max_num_seqs=512, gpu_memory_utilization=0.97)
    assert plan(llama31_8b(), plain, H100, vllm_version="0.29.0", hooks=hooks).outcome.ok
    roomy = Settings(max_model_len=8192, max_num_seqs=512, enable_lora=True,
                     gpu_memory_utilization=0.85)
    assert plan(llama31_8b(), roomy, H100, vllm_version="0.29.0", hooks=hooks).outcome.ok


def test_free_memory_message_names_the_cuda_device():
    """vLLM 0.14+ names the device in the free-memory message: the worker on the n-th GPU
    CUDA shows it prints cuda:n."""
    s = Settings(max_model_len=4096, gpu_memory_utilization=0.95)
    p = plan(llama31_8b(), s, H100, vllm_version="0.29.0", other_used_bytes=20 * GIB,
             cuda_ordinal=2)
    assert p.outcome.failure == F.FREE_MEMORY_BELOW_REQUEST
    assert p.outcome.message.startswith("Free memory on device cuda:2 (")
    p0 = plan(llama31_8b(), s, H100, vllm_version="0.29.0", other_used_bytes=20 * GIB)
    assert p0.outcome.message.startswith("Free memory on device cuda:0 (")


def test_assumptions_say_why_graphs_sampler_and_non_torch_are_what_they_are():
    """Every number shows where it came from: the LoRA graph pool, the dummy rejection
    sampler and the all-reduce memory in N are named in the plan's assumptions."""
    s = Settings(max_model_len=8192, tensor_parallel_size=2, enable_lora=True,
                 num_speculative_tokens=2, speculative_method="eagle3")
    # NOTE: 0.22: Llama still runs on the V1 runner (its profile has the rejection sampler)
    text = " ".join(plan(llama31_8b(), s, H100, vllm_version="0.22.0").assumptions)
    assert "captured twice" in text and "allocated after the KV cache" in text
    assert "dummy rejection sampler holds ~7 fp32 copies" in text
    assert "custom all-reduce memory counted" in text
    text = " ".join(plan(llama31_8b(), s, H100, vllm_version="0.11.0").assumptions)
    assert "set up before vLLM's snapshot: only a quarter" in text
    assert "captured twice" not in text
    off = " ".join(plan(llama31_8b(), s.with_(disable_custom_all_reduce=True), H100,
                        vllm_version="0.11.0").assumptions)
    assert "no custom all-reduce memory counted (turned off" in off
    one = " ".join(plan(llama31_8b(), Settings(max_model_len=8192), H100,
                        vllm_version="0.24.0").assumptions)
    assert "all-reduce" not in one and "rejection" not in one and "captured twice" not in one


def test_max_cudagraph_capture_size_sets_the_largest_captured_size():
    """--max-cudagraph-capture-size (V1 0.12+) replaces vLLM's largest size (min(2 x seqs,
    512)), capped by max_num_batched_tokens: 1, 2, 4, 8..64 = 11 sizes here, and a smaller
    graph term; before 0.12 vLLM has no such flag."""
    from vramguard.core import activation as act
    from vramguard.errors import UsageError
    assert act.capture_sizes(64) == 11
    h100 = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB), compute_capability=(9, 0))
    spec = llama31_8b()
    base = plan(spec, Settings(max_model_len=4096), h100, vllm_version="0.33.0")
    small = plan(spec, Settings(max_model_len=4096, max_cudagraph_capture_size=64), h100,
                 vllm_version="0.33.0")
    g = base.tightest.cuda_graph.value_bytes
    assert small.tightest.cuda_graph.value_bytes == int(g * (0.4 + 0.6 * 11 / 67))
    assert small.kv.num_blocks > base.kv.num_blocks
    assert small.settings["max_cudagraph_capture_size"] == 64
    assert small.settings_sources["max_cudagraph_capture_size"] == "user"
    assert base.settings["max_cudagraph_capture_size"] is None
    capped = plan(spec, Settings(max_model_len=4096, max_cudagraph_capture_size=4096,
                                 max_num_batched_tokens=64), h100, vllm_version="0.33.0")
    assert capped.tightest.cuda_graph.value_bytes == small.tightest.cuda_graph.value_bytes
    with pytest.raises(UsageError, match="unrecognized arguments: --max-cudagraph-capture-size"):
        plan(spec, Settings(max_model_len=4096, max_cudagraph_capture_size=64), h100,
             vllm_version="0.11.0")


def test_uniform_decode_widths_join_the_capture_list_from_0_29():
    """config/vllm.py 0.29+: with a query length q > 1 the default list also holds n x q for
    n on the request-count grid (1, 2, 4, 8..248, 256..) while n x q <= the largest size. At
    256 sequences and k = 2 (q = 3, largest 512): 3, 6, 12 are new (1 unit each) and six
    widths above 256 are off the 16-step grid (264, 312, 360, 408, 456, 504: 2 units each):
    15 units. With one token per request a max_num_seqs off the grid is one more size."""
    from vramguard.core import activation as act
    assert act.off_grid_units(act.decode_widths(256, 3, 512, 8192, 512)) == 15
    assert act.off_grid_units(act.decode_widths(256, 3, 512, 256, 512)) == 3  # <= the tokens
    assert act.off_grid_units(act.decode_widths(100, 1, 200, 8192, 512)) == 1
    assert act.off_grid_units(act.decode_widths(128, 1, 256, 8192, 512)) == 0  # on the grid
    s = Settings(max_model_len=8192, max_num_seqs=256, num_speculative_tokens=2,
                 speculative_method="ngram")
    base = act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32

    def graphs(version):
        return plan(llama31_8b(), s, H100, vllm_version=version).tightest.cuda_graph.value_bytes
    assert graphs("0.29.0") == int(base * (0.4 + 0.6 * (1 + 15 / 102)))
    assert graphs("0.28.0") == base


def test_the_batched_tokens_join_a_capture_list_they_cap_from_0_20_1():
    """config/vllm.py 0.20.1+ ("ensure max_num_tokens is captured"): when
    max_num_batched_tokens caps the default list, that size is captured too. 300 tokens at
    256 sequences: the grid up to 300 is 1, 2, 4, 8..248, 256, 272, 288 (40 units); 300 is
    off it and above 256: 2 units more. On the grid (256) or above the largest size (8
    sequences: largest 16) nothing is added; a decode width of the same size counts once."""
    from vramguard.core import activation as act
    base = act.GRAPH_BASE + act.GRAPH_PER_LAYER * 32

    def graphs(version, seqs=256, tokens=300):
        s = Settings(max_model_len=4096, max_num_seqs=seqs, max_num_batched_tokens=tokens)
        return plan(llama31_8b(), s, H100, vllm_version=version).tightest.cuda_graph.value_bytes

    assert graphs("0.20.0") == int(base * (0.4 + 0.6 * 40 / 67))
    assert graphs("0.20.1") == graphs("0.21.0") == int(base * (0.4 + 0.6 * 42 / 67))
    assert graphs("0.20.1", tokens=256) == graphs("0.20.0", tokens=256)
    assert graphs("0.20.1", seqs=8) == graphs("0.20.0", seqs=8)
    # 0.29+: max_num_seqs 300 is also a decode width of 300: one size, 2 units
    assert graphs("0.29.0", seqs=300) == int(base * (0.4 + 0.6 * 42 / 67))
