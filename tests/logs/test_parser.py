"""The parser on exact vLLM lines (reference §1b, §10, §11, §13) and the real CPU logs."""
import pytest

from vramguard.logs import extracted as X
from vramguard.logs.parser import parse, parse_args_dict, parse_text
from vramguard.logs.reader import clean, split_prefix

from .conftest import CPU


def err_kinds(ex):
    return [e.kind for e in ex.errors]


# ---- the real vLLM 0.32 CPU logs ---------------------------------------------------------

def test_cpu_startup_log():
    ex = parse(CPU / "startup.log")
    assert ex.version == "0.32.0" and ex.engine == "v1" and ex.device == "cpu"
    assert ex.model == "./tiny-llama" and ex.architecture == "LlamaForCausalLM"
    assert ex.non_default_args["max_model_len"] == 256
    assert ex.cpu_kv.kv_gib == 1.0 and ex.cpu_kv.explicit and ex.cpu_kv.node_total_gib == 10.46
    assert ex.kv_cache_tokens == 2_097_152 and ex.max_concurrency == 8192.0
    assert ex.concurrency_tokens_per_request == 256 and ex.max_model_len == 256
    assert ex.init_engine_seconds == 24.37 and ex.started and ex.phase == X.SERVING
    assert ex.stats.samples == 2 and ex.stats.max_running == 2
    assert ex.errors == () and ex.startups == 1
    assert ex.command_line is None           # "Restart vllm serve with ..." is not a command


def test_cpu_smallkv_log():
    ex = parse(CPU / "startup_smallkv.log")
    assert ex.blocks_override == (16384, 3)
    assert ex.kv_cache_tokens == 384 and ex.max_concurrency == 1.5
    assert ex.non_default_args["num_gpu_blocks_override"] == 3
    assert ex.stopped and ex.errors == ()    # the EngineDeadError of the shutdown is not a failure


def test_full_and_fast_paths_agree_on_real_logs():
    for name in ("startup.log", "startup_smallkv.log"):
        fast, full = parse(CPU / name), parse(CPU / name, full=True)
        assert fast.to_dict() | {"recognized_lines": 0} == full.to_dict() | {"recognized_lines": 0}


# ---- line shapes -------------------------------------------------------------------------

def test_prefixes_ansi_and_crlf():
    raw = (b"\x1b[36m(EngineCore_DP0 pid=6880)\x1b[0m INFO 10-31 15:07:49 [gpu_worker.py:298] "
           b"Available KV cache memory: 1.71 GiB\r\n"
           b"[my-prefix] (VllmWorker rank=0 pid=12) INFO 10-31 [kv_cache_utils.py:1] "
           b"GPU KV cache size: 1,000 tokens\r"
           b"(Worker_TP0 pid=444) INFO x Maximum concurrency for 8,192 tokens per request: 3.41x")
    ex = parse(raw)
    assert ex.available_kv_gib == 1.71 and ex.kv_cache_tokens == 1000
    assert ex.max_concurrency == 3.41 and ex.concurrency_tokens_per_request == 8192
    assert split_prefix("(Worker_TP0 pid=444) INFO x")[0] == "Worker_TP0:444"
    assert split_prefix("[pfx] (EngineCore_DP0 pid=1) INFO y") == ("EngineCore_DP0:1", "INFO y")
    assert clean(b"\x1b[1;31mERROR\x1b[0m bad \xff\xfe") == "ERROR bad \ufffd\ufffd"


def test_per_worker_duplicates_take_the_minimum():
    ex = parse_text("(Worker_TP0 pid=1) INFO GPU KV cache size: 2,000 tokens\n"
                    "(Worker_TP0 pid=1) INFO Maximum concurrency for 100 tokens per request: 20.00x\n"
                    "(Worker_TP1 pid=2) INFO GPU KV cache size: 1,500 tokens\n"
                    "(Worker_TP1 pid=2) INFO Maximum concurrency for 100 tokens per request: 15.00x\n"
                    "(Worker_TP0 pid=1) INFO Available KV cache memory: 3.2 GiB\n"
                    "(Worker_TP1 pid=2) INFO Available KV cache memory: 3.1 GiB\n")
    assert (ex.kv_cache_tokens, ex.max_concurrency, ex.available_kv_gib) == (1500, 15.0, 3.1)


@pytest.mark.parametrize("line,version,engine", [
    ("INFO 04-01 api_server.py:1] vLLM API server version 0.6.3.post1", "0.6.3.post1", "v0"),
    ("INFO llm_engine.py:1] Initializing an LLM engine (v0.5.4) with config: model='m'",
     "0.5.4", "v0"),
    ("INFO Initializing a V0 LLM engine (v0.8.5) with config: model='m'", "0.8.5", "v0"),
    ("(EngineCore_DP0 pid=1) INFO [core.py:1] Initializing a V1 LLM engine (v0.11.0) with "
     "config: model='m', max_seq_len=4096, tensor_parallel_size=2, enforce_eager=True",
     "0.11.0", "v1"),
    ("(APIServer pid=1) INFO [utils.py:1]  \u2584\u2584 \u2584\u2588 \u2588  version 0.24.1",
     "0.24.1", "v1"),
])
def test_versions(line, version, engine):
    ex = parse_text(line)
    assert (ex.version, ex.engine) == (version, engine)


def test_engine_config_dump():
    ex = parse_text("INFO Initializing a V1 LLM engine (v0.11.0) with config: model='org/m', "
                    "dtype=torch.bfloat16, max_seq_len=4096, tensor_parallel_size=2, "
                    "pipeline_parallel_size=1, quantization=fp8, enforce_eager=True, "
                    "kv_cache_dtype=fp8")
    cfg = ex.engine_config
    assert cfg["max_model_len"] == 4096 and cfg["tensor_parallel_size"] == 2
    assert cfg["enforce_eager"] is True and cfg["dtype"] == "bfloat16"
    assert ex.model == "org/m" and ex.settings["quantization"] == "fp8"


def test_args_dict_is_parsed_safely():
    assert parse_args_dict("{'model': 'x', 'max_model_len': 8192, 'enforce_eager': True}") == \
        {"model": "x", "max_model_len": 8192, "enforce_eager": True}
    # elided / truncated dicts keep their readable pairs; code is never evaluated
    assert parse_args_dict("{'a': 1, ... 'b': 'q', 'c': __import__('os').system('x')}") == \
        {"a": 1, "b": "q"}
    assert parse_args_dict("{'x': " * 500) == {}


def test_weights_lines_all_versions():
    for line, w in (("Loading model weights took 14.9888 GB", 14.9888),
                    ("Model loading took 0.5151 GiB and 3.479114 seconds", 0.5151),
                    ("Model loading took 14.99 GiB memory and 14.429680 seconds", 14.99),
                    ("Model loading took 14.25GiB and 103.115380 seconds", 14.25)):
        ex = parse_text(line)
        assert ex.weights_gib == w and ex.phase == X.PROFILING


def test_v0_profiling_block():
    ex = parse_text(
        "INFO worker.py:1] Memory profiling takes 5.76 seconds\n"
        "INFO worker.py:1] the current vLLM instance can use total_gpu_memory (21.48GiB) x "
        "gpu_memory_utilization (0.93) = 19.98GiB\n"
        "INFO worker.py:1] model weights take 3.85GiB; non_torch_memory takes 0.20GiB; PyTorch "
        "activation peak memory takes 1.45GiB; the rest of the memory reserved for KV Cache is "
        "14.49GiB.\n"
        "INFO executor_base.py:1] # cuda blocks: 6495, # CPU blocks: 2340\n")
    assert (ex.total_gpu_gib, ex.gpu_memory_utilization, ex.requested_gib) == (21.48, 0.93, 19.98)
    assert (ex.weights_gib, ex.non_torch_gib, ex.activation_gib) == (3.85, 0.2, 1.45)
    assert ex.profile_kv_gib == 14.49 and ex.kv_pool_gib == 14.49
    assert (ex.num_gpu_blocks, ex.num_cpu_blocks, ex.engine) == (6495, 2340, "v0")


def test_v064_results_and_v1_debug_summaries():
    ex = parse_text("Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage="
                    "15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB "
                    "non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90")
    assert (ex.peak_torch_gib, ex.non_torch_gib, ex.profile_kv_gib) == (17.06, 0.35, 3.81)
    assert ex.gpu_memory_utilization == 0.9
    ex = parse_text("DEBUG Memory profiling takes 31.20 seconds. Total non KV cache memory: "
                    "63.53GiB; torch peak memory increase: 2.04GiB; total consumed (from "
                    "mem_get_info): 61.49GiB; weights memory: 55.87GiB.")
    assert (ex.total_non_kv_gib, ex.activation_gib, ex.total_consumed_gib, ex.weights_gib) == \
        (63.53, 2.04, 61.49, 55.87)


def test_capacity_line_forms():
    ex = parse_text("INFO [kv_cache_utils.py:1] GPU KV cache size: 456,000 tokens, Maximum "
                    "concurrency for 131,072 tokens per request: 3.48x")
    assert (ex.kv_cache_tokens, ex.max_concurrency, ex.concurrency_tokens_per_request) == \
        (456000, 3.48, 131072)
    ex = parse_text("XPU KV cache size: 1,024 tokens, Maximum concurrency for 512 tokens per "
                    "request: 2.00x")
    assert ex.device == "xpu"
    for line, blocks in (("# GPU blocks: 5691, # CPU blocks: 2048", 5691),
                         ("# CUDA blocks: 36332, # CPU blocks: 9362", 36332),
                         ("# rocm blocks: 37011, # CPU blocks: 7281", 37011)):
        assert parse_text(line).num_gpu_blocks == blocks


def test_engine_initialized_block_count():
    """V1 0.9.0+ logs the pool's final block count once the engine is up
    (v1/metrics/loggers.py `log_engine_initialized`; "N Engines:" with data parallelism).
    Lines from a public 0.11.0 startup (4x RTX 3090, Qwen3-VL-30B-A3B)."""
    ex = parse_text(
        "(EngineCore_DP0 pid=41565) INFO 10-06 15:57:53 [kv_cache_utils.py:1087] GPU KV cache "
        "size: 100,752 tokens\n"
        "(APIServer pid=41428) INFO 10-06 15:58:17 [loggers.py:147] Engine 000: vllm "
        "cache_config_info with initialization after num_gpu_blocks is: 6297\n")
    assert ex.num_gpu_blocks == 6297 and ex.engine == "v1"
    assert ex.kv_cache_tokens == 100_752 and 6297 * 16 == 100_752
    assert parse_text("INFO [loggers.py:1] 2 Engines: vllm cache_config_info with "
                      "initialization after num_gpu_blocks is: 12,034").num_gpu_blocks == 12034


def test_suggestion_quoted_and_wrapped_at_70_columns():
    """vLLM's --kv-cache-memory suggestion quoted in a write-up and wrapped over 8 lines
    (0.10.2, a public L40S startup): the pool is the current KV memory, in bytes."""
    text = ('"Free memory on device (43.9/44.39 GiB) on startup. Desired\n'
            "  GPU memory utilization is (0.8, 35.51 GiB). Actual usage is 4.74 GiB\n"
            "  for weight, 0.23 GiB for peak activation, 0.02 GiB for non-torch\n"
            "  memory, and 0.62 GiB for CUDAGraph memory. Replace\n"
            "  gpu_memory_utilization config with `--kv-cache-memory=31966072012`\n"
            "  to fit into requested memory, or `--kv-cache-memory=40974729216` to\n"
            "  fully utilize gpu memory. Current kv cache memory in use is\n"
            '  32786058444 bytes".')
    ex = parse_text(text)
    assert ex.suggestion.requested_gib == 35.51 and ex.suggestion.cuda_graph_gib == 0.62
    assert ex.kv_pool_gib == 30.53                     # 32,786,058,444 B


def test_graphs_override_autofit_cpu():
    ex = parse_text(
        "Estimated CUDA graph memory: 0.84 GiB total\n"
        "Overriding num_gpu_blocks=16384 with num_gpu_blocks_override=3\n"
        "Auto-fit max_model_len: reduced from 131072 to 53776 to fit in available GPU memory "
        "(6.57 GiB available for KV cache)\n"
        "Graph capturing finished in 3 secs, took 0.91 GiB\n"
        "CUDA graph pool memory: 0.91 GiB (actual), 0.84 GiB (estimated), difference: 0.07 GiB "
        "(7.7%).\n"
        "Auto set (12.5/62.7) GiB for KV cache on node 0, with 57.7 GiB requested memory for the "
        "worker. 3.2 GiB memory was consumed by non-kv usages.\n")
    assert ex.cuda_graph_estimate_gib == 0.84 and ex.cuda_graph_gib == 0.91
    assert ex.blocks_override == (16384, 3) and ex.auto_fit == (131072, 53776)
    assert ex.max_model_len == 53776
    assert ex.cpu_kv.requested_gib == 57.7 and ex.cpu_kv.non_kv_gib == 3.2
    assert not ex.cpu_kv.explicit


def test_kv_cache_memory_suggestions_both_variants():
    old = parse_text(
        "Free memory on device (78.68/79.19 GiB) on startup. Desired GPU memory utilization is "
        "(0.95, 75.23 GiB). Actual usage is 14.99 GiB for weight, 1.89 GiB for peak activation, "
        "0.25 GiB for non-torch memory, and 0.91 GiB for CUDAGraph memory. Replace "
        "gpu_memory_utilization config with `--kv-cache-memory=61258029056` (57.05 GiB) to fit "
        "into requested memory, or `--kv-cache-memory=64959076352` (60.5 GiB) to fully utilize "
        "gpu memory. Current kv cache memory in use is 58.11 GiB.").suggestion
    assert (old.free_gib, old.total_gib, old.utilization, old.requested_gib) == \
        (78.68, 79.19, 0.95, 75.23)
    assert (old.weights_gib, old.activation_gib, old.non_torch_gib, old.cuda_graph_gib) == \
        (14.99, 1.89, 0.25, 0.91)
    assert (old.fit_bytes, old.full_bytes, old.current_kv_gib) == \
        (61258029056, 64959076352, 58.11)
    new = parse_text(
        "Free memory on device (191.36/191.69 GiB) on startup. Desired GPU memory utilization "
        "is (0.9, 172.52 GiB). Actual usage is 11.88 GiB for consumed memory (weights + "
        "non-torch), 5.59 GiB for peak activation, and 3.9 GiB for CUDAGraph memory. Replace "
        "gpu_memory_utilization config with `--kv-cache-memory=1` (1 GiB) to fit into requested"
        " memory, or `--kv-cache-memory=2` (2 GiB) to fully utilize gpu memory. Current kv "
        "cache memory in use is 155.04 GiB.").suggestion
    assert (new.consumed_gib, new.activation_gib, new.cuda_graph_gib, new.current_kv_gib) == \
        (11.88, 5.59, 3.9, 155.04)
    assert new.weights_gib is None
    bytes_form = parse_text(
        "Free memory on device (43.9/44.39 GiB) on startup. Desired GPU memory utilization is "
        "(0.8, 35.51 GiB). Actual usage is 4.74 GiB for weight, 0.23 GiB for peak activation, "
        "0.02 GiB for non-torch memory, and 0.62 GiB for CUDAGraph memory. Replace "
        "gpu_memory_utilization config with `--kv-cache-memory=31966072012` to fit into "
        "requested memory, or `--kv-cache-memory=40974729216` to fully utilize gpu memory. "
        "Current kv cache memory in use is 32786058444 bytes").suggestion
    assert bytes_form.current_kv_gib == 30.53


# ---- §10 errors, exact texts -------------------------------------------------------------

ERRORS = [
    ("ValueError: Free memory on device (60.85/79.19 GiB) on startup is less than desired GPU "
     "memory utilization (0.95, 75.23 GiB). Decrease GPU memory utilization or reduce GPU "
     "memory used by other processes.", "free_memory", X.FREE_MEMORY_CHECK),
    ("ValueError: Free memory on device cuda:0 (17.1/22.05 GiB) on startup is less than desired"
     " GPU memory utilization (0.92, 20.28 GiB). Decrease GPU memory utilization or reduce GPU "
     "memory used by other processes.", "free_memory", X.FREE_MEMORY_CHECK),
    ("Externally held weights on device cuda:0 (70.1/79.19 GiB) exceed the desired GPU memory "
     "utilization (0.8, 63.35 GiB). Increase GPU memory utilization or reduce GPU memory used "
     "by other processes.", "external_weights", X.FREE_MEMORY_CHECK),
    ("Free memory on device cuda:0 (40.0/79.19 GiB) on startup is less than the engine's budget"
     " after excluding external process's weights (0.9, 50.0 GiB). Decrease GPU memory "
     "utilization or reduce GPU memory used by other processes.", "engine_budget",
     X.FREE_MEMORY_CHECK),
    ("ValueError: No available memory for the cache blocks. Try increasing "
     "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory"
     " reservation on the CPU backend, despite its name). See https://docs.vllm.ai/en/latest/"
     "configuration/conserving_memory/ for more details.", "no_kv_memory", X.KV_ALLOCATION),
    ("ValueError: To serve at least one request with the model's max seq len (131072), (16.0 "
     "GiB KV cache is needed, which is larger than the available KV cache memory (6.57 GiB). "
     "Based on the available memory, the estimated maximum model length is 53776. Try "
     "increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) "
     "or decreasing `max_model_len` when initializing the engine. See https://docs.vllm.ai/en/"
     "latest/configuration/conserving_memory/ for more details.", "kv_fit", X.KV_ALLOCATION),
    ("ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GB "
     "KV cache is needed, which is larger than the available KV cache memory (2.50 GB). Try "
     "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
     "engine.", "kv_fit", X.KV_ALLOCATION),
    ("ValueError: To serve at least one request with the model's max seq len (32768), (4.00 GiB "
     "KV cache is needed, which is larger than the available KV cache memory (2.50 GiB). Based "
     "on the available memory,  Try increasing `gpu_memory_utilization`", "kv_fit",
     X.KV_ALLOCATION),
    ("ValueError: The model's max seq len (29000) is larger than the maximum number of tokens "
     "that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or "
     "decreasing `max_model_len` when initializing the engine.", "kv_fit_v0", X.KV_ALLOCATION),
    ("ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even "
     "a single token. Try increasing `gpu_memory_utilization`.", "autofit_fail", X.KV_ALLOCATION),
    ("ValueError: Error in memory profiling. Initial free memory 30.0 GiB, current free memory "
     "31.5 GiB. This happens when other processes sharing the same container release GPU "
     "memory while vLLM is profiling during initialization.", "profiling_error", X.PROFILING),
    ("AssertionError: Error in memory profiling. Initial free memory 84010434560, current free "
     "memory 84546846720. This happens when the GPU memory was not properly cleaned up before "
     "initializing the vLLM instance.", "profiling_error", X.PROFILING),       # 0.5.4-0.9.0
    ("AssertionError: Error in memory profiling. Initial used memory 2147483648, currently used "
     "memory 1073741824. This happens when the GPU memory was not properly cleaned up before "
     "initializing the vLLM instance.", "profiling_error", X.PROFILING),       # v0 0.7-0.10.2
    ("ERROR Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization "
     "to free memory for weights, increasing --tensor-parallel-size, or using --quantization. "
     "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips. "
     "(original error: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total "
     "capacity of 79.19 GiB of which 1.2 GiB is free.)", "weights_oom", X.WEIGHT_LOADING),
    ("RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy "
     "requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when "
     "initializing the engine.", "sampler_oom", X.SAMPLER_WARMUP),
    ("ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (939). Each decode "
     "sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. Please "
     "lower max_num_seqs to at most 939 or increase gpu_memory_utilization.", "mamba_blocks",
     X.CUDA_GRAPH_CAPTURE),
    ("ValueError: Too large swap space. 64.00 GiB out of the 62.00 GiB total CPU memory is "
     "allocated for the swap space.", "swap_space", None),
    ("ValueError: Available memory on node 0 (5.0/62.7 GiB) on startup is less than desired CPU"
     " memory utilization (0.92, 57.7 GiB). On the CPU backend, the `--gpu-memory-utilization`"
     " flag controls the fraction of CPU memory reserved", "free_memory", X.FREE_MEMORY_CHECK),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "distributed", None),
    ("[E ProcessGroupNCCL.cpp:1] [Rank 1] Watchdog caught collective operation timeout",
     "distributed", None),
    ("ERROR [core.py:708] EngineCore failed to start.", "engine_failed", None),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core "
     "proc(s): {'EngineCore_DP0': 1}", "engine_failed", None),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 191.98 GiB of which 0 bytes is free.", "torch_oom", None),
]


@pytest.mark.parametrize("line,kind,phase", ERRORS, ids=[e[1] + str(i) for i, e in
                                                        enumerate(ERRORS)])
def test_error_messages(line, kind, phase):
    ex = parse_text(line)
    assert err_kinds(ex) == [kind]
    if phase:
        assert ex.errors[0].phase == phase


def test_error_numbers():
    e = parse_text(ERRORS[1][0]).errors[0]
    assert e.numbers == {"device": "cuda:0", "free_gib": 17.1, "total_gib": 22.05,
                         "utilization": 0.92, "requested_gib": 20.28}
    e = parse_text(ERRORS[5][0]).errors[0]
    assert e.numbers == {"max_model_len": 131072, "needed_gib": 16.0, "available_gib": 6.57,
                         "estimated_max_model_len": 53776}
    assert parse_text(ERRORS[7][0]).errors[0].numbers.get("estimated_max_model_len") is None


def test_torch_oom_numbers_new_and_old_format():
    ex = parse_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 298.50 MiB is free. Process 51 has 500.00 MiB "
        "memory in use. Including non-PyTorch memory, this process has 78.89 GiB memory in use."
        " Of the allocated memory 72.02 GiB is allocated by PyTorch, and 1.62 GiB is reserved "
        "by PyTorch but unallocated.")
    o = ex.errors[0].oom
    assert (o.device, o.gpu_index, o.total_gib, o.process_in_use_gib) == ("CUDA", 0, 79.19, 78.89)
    assert o.tried_gib == pytest.approx(0.7676, abs=1e-3)
    assert o.free_gib == pytest.approx(0.2915, abs=1e-3)
    assert (o.allocated_gib, o.reserved_unallocated_gib) == (72.02, 1.62)
    assert o.other_processes_gib == (pytest.approx(0.4883, abs=1e-3),)
    old = parse_text("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; "
                     "15.78 GiB total capacity; 14.56 GiB already allocated; 3.44 MiB free; "
                     "14.57 GiB reserved in total by PyTorch)").errors[0].oom
    assert (old.total_gib, old.allocated_gib) == (15.78, 14.56)


def test_info_lines_that_mention_memory_are_not_errors():
    ex = parse_text(
        "INFO model_runner.py:1] CUDA graphs can take additional 1~3 GiB memory per GPU. If you "
        "are running out of memory, consider decreasing `gpu_memory_utilization` or switching "
        "to eager mode.\n"
        "WARNING Found ulimit of 20000 and failed to automatically increase with error current "
        "limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`.\n"
        # NOTE: vLLM 0.10.1 on A100 PCIe pairs; the server started (held-out dennislee logs)
        "(VllmWorker TP0) WARNING [custom_all_reduce.py:147] Custom allreduce is disabled "
        "because your platform lacks GPU P2P capability or P2P test failed.\n")
    assert ex.errors == ()


def test_phases_advance_with_milestones():
    assert parse_text("Starting to load model meta-llama/X...").phase == X.WEIGHT_LOADING
    assert parse_text("Model loading took 1.0 GiB memory and 1 s").phase == X.PROFILING
    assert parse_text("Available KV cache memory: 5 GiB").phase == X.KV_ALLOCATION
    assert parse_text("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 45/70").phase \
        == X.CUDA_GRAPH_CAPTURE
    assert parse_text("Graph capturing finished in 3 secs, took 0.91 GiB").phase == \
        X.SAMPLER_WARMUP
    ex = parse_text("init engine (profile, create kv cache, warmup model) took 84.91 s "
                    "(compilation: 30.98 s)")
    assert ex.phase == X.SERVING and ex.started and ex.init_engine_seconds == 84.91


def test_oom_phase_follows_the_last_milestone():
    ex = parse_text("Model loading took 60.0 GiB memory and 1 s\n"
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.")
    assert ex.errors[0].phase == X.PROFILING


def test_stats_lines_v1_and_v0():
    ex = parse_text(
        "Engine 000: Avg prompt throughput: 14.1 tokens/s, Avg generation throughput: 146.8 "
        "tokens/s, Running: 2 reqs, Waiting: 4 reqs, GPU KV cache usage: 99.1%, Prefix cache "
        "hit rate: 0.0%\n"
        "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 1.0 "
        "tokens/s, Running: 1 reqs, Waiting: 0 reqs, Preemptions: 7, CPU KV cache usage: 50.0%,"
        " Prefix cache hit rate: 0.0%\n"
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.0 tokens/s, Running: "
        "3 reqs, Swapped: 1 reqs, Pending: 2 reqs, GPU KV cache usage: 10.0%, CPU KV cache "
        "usage: 0.0%.\n")
    st = ex.stats
    assert (st.samples, st.max_running, st.max_waiting, st.preemptions) == (3, 3, 4, 7)
    assert st.max_kv_usage_pct == 99.1 and st.max_swapped == 1


def test_wrapped_excerpt_is_joined():
    ex = parse_text("ValueError: To serve at least one request with the model's max seq len\n"
                    "  (131072), 8.18 GiB KV cache is needed, which is larger than the available\n"
                    "  KV cache memory (7.04 GiB). Based on the available memory, the estimated\n"
                    "  maximum model length is 112896.\n")
    assert ex.errors[0].numbers["estimated_max_model_len"] == 112896


def test_restart_keeps_the_last_startup():
    one = ("(APIServer pid=1) INFO vLLM API server version 0.9.2\n"
           "(APIServer pid=1) INFO non-default args: {'model': 'a/b', 'max_model_len': 4096}\n"
           "(EngineCore pid=2) INFO Model loading took 10.0 GiB and 1.0 seconds\n"
           "(EngineCore pid=2) ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to "
           "allocate 8.00 GiB.\n")
    two = ("(APIServer pid=3) INFO vLLM API server version 0.9.2\n"
           "(APIServer pid=3) INFO non-default args: {'model': 'a/b', 'max_model_len': 2048}\n"
           "(EngineCore pid=4) INFO Model loading took 10.0 GiB and 1.0 seconds\n"
           "(EngineCore pid=4) INFO Available KV cache memory: 20.0 GiB\n"
           "(APIServer pid=3) INFO Starting vLLM API server on http://0.0.0.0:8000\n")
    ex = parse_text(one + two)
    assert ex.startups == 2 and ex.errors == () and ex.started
    assert ex.max_model_len == 2048 and ex.available_kv_gib == 20.0


def test_command_line_gives_settings_when_no_args_line():
    ex = parse_text("python -m vllm.entrypoints.openai.api_server --model data/Qwen1.5-14B-Chat"
                    " --host 0.0.0.0 --port 30005 --dtype half --gpu-memory-utilization 0.95\n")
    assert ex.settings["gpu_memory_utilization"] == 0.95 and ex.model == "data/Qwen1.5-14B-Chat"


def test_empty_and_garbage():
    assert parse(b"").empty and parse(b"").lines == 0
    ex = parse(b"\x00\xff" * 1000 + b"\nhello world\n")
    assert ex.empty and ex.errors == ()


def test_every_handler_anchor_is_seen_by_the_fast_scanner():
    """The fast path only feeds lines holding a FULL anchor: each handler/wrap anchor must
    contain one, or the fast and the every-line paths would disagree."""
    from vramguard.logs.parser import _HANDLERS, _WRAPPABLE
    from vramguard.logs.reader import FULL_ANCHORS
    anchors = [a for group, _ in _HANDLERS for a in group] + [a for a, _ in _WRAPPABLE]
    assert [a for a in anchors if not any(f.decode() in a for f in FULL_ANCHORS)] == []


@pytest.mark.parametrize("line,name", [
    ("|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |", "H100-80GB"),
    ("GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)", "RTX-4090"),
    ("device name: AMD Instinct MI300X", "MI300X"),
    ("Using NVIDIA A100-SXM4-80GB", "A100-80GB"),
])
def test_gpu_named_in_the_log(line, name):
    from vramguard.logs.compare import gpu_for_log
    spec, why = gpu_for_log(parse_text(line))
    assert spec is not None and spec.name == name, why


def test_prompts_echoed_in_info_lines_are_not_errors():
    ex = parse_text("(APIServer pid=1) INFO 11-29 [logger.py:1] Received request cmpl-1: prompt:"
                    " 'why does NCCL error: unhandled system error happen? RuntimeError: CUDA "
                    "out of memory. Tried to allocate 2.00 GiB No available memory for the "
                    "cache blocks', params: SamplingParams(n=1)\n")
    assert ex.errors == ()


def test_custom_all_reduce_turned_off_is_a_setting_for_the_plan():
    """vLLM's warning that it turned custom all-reduce off (no P2P between the ranks) is a
    fact about the launch: the side-by-side plan then counts no custom all-reduce buffers."""
    from vramguard.logs.compare import settings_for_log
    ex = parse_text(
        "non-default args: {'model': 'Qwen2-7B-Instruct', 'tensor_parallel_size': 2}\n"
        "(VllmWorker TP0) WARNING 08-25 10:00:00 [custom_all_reduce.py:147] Custom allreduce is "
        "disabled because your platform lacks GPU P2P capability or P2P test failed.\n"
        "(VllmWorker TP0) INFO 08-25 10:00:09 [gpu_worker.py:276] Available KV cache memory: "
        "12.02 GiB\n")
    assert ex.custom_all_reduce_off and ex.errors == ()
    s, why = settings_for_log(ex)
    assert why is None and s.disable_custom_all_reduce and s.tensor_parallel_size == 2
    assert not parse_text("INFO [gpu_worker.py:276] Available KV cache memory: 1.0 GiB\n"
                          ).custom_all_reduce_off


def test_a_colour_code_inside_an_anchor_is_read_by_both_paths():
    """Found by the stream fuzz test: "GPU K\\x1b[31mV cache size" has no raw "KV cache"; the
    fast scanner now takes coloured startup lines as candidates, like the every-line path."""
    from vramguard.logs.parser import parse
    data = (b"(EngineCore pid=469) INFO 04-23 00:28:17 [v1/core/kv_cache_utils.py:1319] GPU "
            b"K\x1b[31mV cache size: 365,968 tokens")
    fast, full = parse(data).to_dict(), parse(data, full=True).to_dict()
    assert fast["phase"] == full["phase"] == "kv_allocation"
    assert fast["kv_cache_tokens"] == full["kv_cache_tokens"] == 365968


def test_the_older_profiling_asserts_keep_their_figures():
    """v0 0.5.4-0.6.6 and v1 0.7.0-0.9.0 print the free memory in bytes, v0 0.7.0-0.10.2 the
    used memory (worker.py / gpu_worker.py)."""
    ex = parse_text("AssertionError: Error in memory profiling. Initial free memory 84010434560, "
                    "current free memory 84546846720. This happens when the GPU memory was not "
                    "properly cleaned up before initializing the vLLM instance.\n")
    assert ex.errors[0].numbers == {"initial_free_gib": 78.24, "current_free_gib": 78.74}
    ex = parse_text("AssertionError: Error in memory profiling. Initial used memory 2147483648, "
                    "currently used memory 1073741824. This happens when ...\n")
    assert ex.errors[0].numbers == {"initial_used_gib": 2.0, "current_used_gib": 1.0}
