"""diagnose: causes and fixes computed from the log's numbers; the CLI's JSON and exit codes."""
import json

import pytest

from vramguard.cli import main
from vramguard.logs.diagnose import diagnose
from vramguard.logs.parser import parse_text

from .conftest import CPU, load_cases

CASES = {c["id"]: c for c in load_cases()}


def dx(text):
    return diagnose(parse_text(text))


def flags(d):
    out = {}
    for f in d.fixes:
        out.update(f.flags)
    return out


def test_free_memory_fix_is_the_utilization_that_passes():
    d = dx("ValueError: Free memory on device cuda:0 (66.69/79.19 GiB) on startup is less than "
           "desired GPU memory utilization (0.92, 72.85 GiB). Decrease GPU memory utilization "
           "or reduce GPU memory used by other processes.")
    assert d.failure == "free_memory_below_request" and d.confidence == "stated"
    assert "12.5 GiB" in d.cause and "another process" in d.cause
    u = float(flags(d)["--gpu-memory-utilization"])
    assert u * 79.19 <= 66.69 and u == 0.83          # passes vLLM's F >= u*T check


def test_kv_fit_uses_vllms_estimate_and_offers_fp8_and_utilization():
    d = dx("ValueError: To serve at least one request with the model's max seq len (131072), "
           "(16.0 GiB KV cache is needed, which is larger than the available KV cache memory "
           "(6.57 GiB). Based on the available memory, the estimated maximum model length is "
           "53776. Try increasing `gpu_memory_utilization`\n"
           "Free memory on device (78.7/79.19 GiB) on startup. Desired GPU memory utilization is"
           " (0.3, 23.76 GiB). Actual usage is 15.0 GiB for weight, 1.2 GiB for peak activation,"
           " 0.5 GiB for non-torch memory, and 0.5 GiB for CUDAGraph memory.")
    assert d.failure == "kv_below_max_model_len"
    assert "needs 16 GiB of KV cache" in d.cause and "6.57 GiB was left" in d.cause
    f = flags(d)
    assert f["--max-model-len"] in ("53776", "auto")
    assert any(x.flags.get("--max-model-len") == "53776" for x in d.fixes)
    assert "--kv-cache-dtype" not in f            # fp8 halves 16 -> 8 GiB: still > 6.57
    assert f["--gpu-memory-utilization"] == "0.43"  # 0.3 + (16 - 6.57)/79.19 + 0.01, ceil


def test_kv_fit_without_estimate_computes_one():
    d = dx("ValueError: To serve at least one request with the model's max seq len (32768), "
           "(4.00 GiB KV cache is needed, which is larger than the available KV cache memory "
           "(3.00 GiB). Try increasing `gpu_memory_utilization`")
    assert d.numbers["computed_max_model_len"] == 24576
    assert flags(d)["--kv-cache-dtype"] == "fp8"


def test_no_kv_memory_numbers_and_weights_dont_fit():
    d = dx(CASES["jetson-orin-qwen25vl-7b-awq-u045-fail"]["raw_log_excerpt"])
    assert d.failure == "no_kv_memory" and d.confidence == "inferred"
    assert "-0.22 GiB left" in d.cause
    assert flags(d)["--gpu-memory-utilization"] == "0.50"   # 0.45 + (0.22 + 1)/29.96
    d = dx("the current vLLM instance can use total_gpu_memory (23.58GiB) x "
           "gpu_memory_utilization (0.50) = 11.79GiB\n"
           "model weights take 14.99GiB; non_torch_memory takes 0.35GiB; PyTorch activation peak"
           " memory takes 1.20GiB; the rest of the memory reserved for KV Cache is -4.75GiB.")
    assert d.cause.startswith("The weights don't fit")


def test_oom_by_phase():
    loaded = "Model loading took 60.0 GiB memory and 1 s\n"
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a"
           " total capacity of 79.19 GiB of which 1.00 GiB is free.\n")
    assert dx(oom).failure == "weights_oom"
    assert dx(loaded + oom).failure == "profile_run_oom"
    assert dx(loaded + "Available KV cache memory: 5.0 GiB\nGPU KV cache size: 10 tokens\n"
              "Capturing CUDA graphs (decode, FULL): 10/67\n" + oom).failure == "cuda_graph_oom"
    d = dx(loaded + "init engine (profile, create kv cache, warmup model) took 9.00 seconds\n"
           + oom)
    assert d.failure == "runtime_oom" and d.phase == "serving"
    weights = dx(oom)
    assert flags(weights)["--tensor-parallel-size"] == "2"
    assert flags(weights)["--cpu-offload-gb"] == "4"       # 4 GiB asked, 1 free: 3 + 1


def test_mamba_sampler_distributed_other():
    mamba = flags(dx("ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks "
                     "(468)."))
    assert mamba["--max-num-seqs"] == "468"
    assert mamba["--compilation-config"] == '{"cudagraph_mode": "PIECEWISE"}'
    assert "--max-model-len" not in mamba      # the block count does not depend on it
    s = dx(CASES["llmdp-v0190-h100-gptoss20b-tp2-u095-sampler-oom"]["raw_log_excerpt"])
    assert flags(s)["--max-num-seqs"] == "512" and s.numbers["num_requests"] == 1024
    assert dx("RuntimeError: NCCL error: unhandled cuda error").failure == "distributed"
    assert dx("RuntimeError: Insufficient space in /dev/shm: 409594 MiB required, 204800 MiB "
              "free").failure == "other"


def test_started_summary_and_notes():
    d = diagnose(parse_text((CPU / "startup_smallkv.log").read_text()))
    assert d.status == "started" and d.failure is None
    assert d.summary["kv_cache_tokens"] == 384 and d.summary["max_concurrency"] == 1.5
    assert any("Only 1.5 requests" in n for n in d.notes)


def test_empty_and_incomplete_say_so():
    d = dx("hello\nworld\n")
    assert d.status == "empty" and "No vLLM startup lines" in d.cause
    d = dx("Model loading took 64.38 GiB memory and 14.380607 seconds")
    assert d.status == "incomplete" and d.phase == "profiling" and "ends during" in d.cause


# ---- the command -------------------------------------------------------------------------

def test_cli_json(capsys):
    assert main(["diagnose", str(CPU / "startup.log"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("phase", "failure", "cause", "fixes", "extracted", "plan"):
        assert key in out
    assert out["extracted"]["kv_cache_tokens"] == 2_097_152 and out["plan"] is None
    assert "./tiny-llama" in out["plan_note"]


def test_cli_text_stdin_and_failure(capsys, monkeypatch, tmp_path):
    import io
    import sys
    text = CASES["llmdp-v0190-h100-kimi-dev-72b-tp4-busy-gpu"]["raw_log_excerpt"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["diagnose", "-", "--no-plan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("FAILED during the free-memory check")
    assert "--gpu-memory-utilization 0.76" in out


def test_cli_exit_codes(capsys, tmp_path):
    assert main(["diagnose", str(tmp_path / "missing.log")]) == 2
    assert "cannot read the log" in capsys.readouterr().err
    assert main(["diagnose", str(tmp_path)]) == 2
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert main(["diagnose", str(empty)]) == 0
    assert "NOTHING TO DIAGNOSE" in capsys.readouterr().out


def test_cli_plan_side_by_side(capsys):
    """A log naming a catalog model: vramguard's plan for the same settings, side by side."""
    log = CASES["llmdp-v0190-h100-llama31-8b-tp1"]["raw_log_excerpt"]
    log = "(APIServer pid=1) INFO vLLM API server version 0.19.0\n" + log
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as fh:
        fh.write(log)
    assert main(["diagnose", fh.name, "--json", "--gpu", "H100-80GB"]) == 0
    out = json.loads(capsys.readouterr().out)
    if out["plan"] is None:
        pytest.skip(f"model not loadable offline here: {out['plan_note']}")
    rows = {r["what"]: r for r in out["side_by_side"]}
    assert rows["KV pool GiB"]["log"] == 58.11
    assert abs(rows["KV pool GiB"]["plan"] - 58.11) < 2.0


# Traceback frames place a raw OOM: shaped like public reports (vLLM issue 12539, Qwen issue
# 458: the v0 cache engine's per-layer torch.zeros; v1's gpu_model_runner allocation).
_V0_ALLOC = """\
INFO 01-28 22:58:10 worker.py:266] the current vLLM instance can use total_gpu_memory (21.96GiB) x gpu_memory_utilization (0.90) = 19.76GiB
INFO 01-28 22:58:10 worker.py:266] model weights take 14.99GiB; non_torch_memory takes 0.10GiB; PyTorch activation peak memory takes 1.20GiB; the rest of the memory reserved for KV Cache is 3.47GiB.
INFO 01-28 22:58:11 executor_base.py:110] # CUDA blocks: 1776, # CPU blocks: 2048
ERROR 01-28 22:58:15 engine.py:387] Traceback (most recent call last):
ERROR 01-28 22:58:15 engine.py:387]   File "/usr/local/lib/python3.12/dist-packages/vllm/engine/llm_engine.py", line 427, in _initialize_kv_caches
ERROR 01-28 22:58:15 engine.py:387]     self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)
ERROR 01-28 22:58:15 engine.py:387]   File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py", line 308, in initialize_cache
ERROR 01-28 22:58:15 engine.py:387]     self._init_cache_engine()
ERROR 01-28 22:58:15 engine.py:387]   File "/usr/local/lib/python3.12/dist-packages/vllm/worker/cache_engine.py", line 103, in _allocate_kv_cache
ERROR 01-28 22:58:15 engine.py:387]     layer_kv_cache = torch.zeros(alloc_shape,
ERROR 01-28 22:58:15 engine.py:387] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB. GPU 0 has a total capacity of 21.96 GiB of which 40.06 MiB is free. Process 2 has 2.90 GiB memory in use.
"""

_V1_CAPTURE = """\
(EngineCore_DP0 pid=8) INFO 03-11 11:58:40 [gpu_worker.py:298] Available KV cache memory: 60.0 GiB
(EngineCore_DP0 pid=8) INFO 03-11 11:58:41 [kv_cache_utils.py:1087] GPU KV cache size: 491,520 tokens
(EngineCore_DP0 pid=8) ERROR 03-11 11:58:53 [core.py:1100] Traceback (most recent call last):
(EngineCore_DP0 pid=8) ERROR 03-11 11:58:53 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 263, in _initialize_kv_caches
(EngineCore_DP0 pid=8) ERROR 03-11 11:58:53 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 400, in compile_or_warm_up_model
(EngineCore_DP0 pid=8) ERROR 03-11 11:58:53 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3600, in capture_model
(EngineCore_DP0 pid=8) ERROR 03-11 11:58:53 [core.py:1100] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 0.50 GiB is free.
"""


def test_oom_in_the_kv_allocation_frames_is_no_kv_memory():
    d = dx(_V0_ALLOC)
    assert d.failure == "no_kv_memory" and d.phase == "kv_allocation"
    assert d.confidence == "stated"
    assert "Allocating the KV cache ran out of memory (_allocate_kv_cache)" in d.cause
    assert "another process" in d.cause
    assert flags(d)["--gpu-memory-utilization"] == "0.87"   # 0.90 - (0.07 + 0.5) / 21.96
    v1 = _V1_CAPTURE.replace("compile_or_warm_up_model", "initialize_from_config").replace(
        "capture_model", "initialize_kv_cache_tensors")
    assert dx(v1).failure == "no_kv_memory"
    v2 = _V1_CAPTURE.replace("compile_or_warm_up_model", "init_kv_cache").replace(
        "capture_model", "allocate_kv_cache")        # Model Runner V2 (0.33 worker/utils.py)
    assert dx(v2).failure == "no_kv_memory"
    forced = dx("non-default args: {'kv_cache_memory_bytes': 64424509440}\n" + v1)
    assert "--kv-cache-memory-bytes" in forced.cause
    assert "--kv-cache-memory-bytes" in flags(forced)
    assert "--gpu-memory-utilization" not in flags(forced)     # a byte pool ignores it


def test_oom_in_the_capture_frames_stays_a_graph_oom():
    assert dx(_V1_CAPTURE).failure == "cuda_graph_oom"
    logged = dx("INFO vLLM API server version 0.30.0\n" + _V1_CAPTURE)
    assert flags(logged)["--max-cudagraph-capture-size"] == "128"      # 0.12+ only
    assert "--max-cudagraph-capture-size" not in flags(dx(
        "INFO vLLM API server version 0.11.0\n" + _V1_CAPTURE))
    # the frames of an earlier traceback do not place the OOM of a later one
    first = _V0_ALLOC.split("ERROR 01-28 22:58:15 engine.py:387] torch.")[0]
    later = ("Traceback (most recent call last):\n"
             '  File "/x/vllm/model_executor/models/llama.py", line 340, in forward\n'
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n")
    assert dx(first + later).failure == "cuda_graph_oom"       # by phase, as before
    assert dx(_V1_CAPTURE.split("ERROR")[0] + "torch.OutOfMemoryError: CUDA out of memory. "
              "Tried to allocate 1.00 GiB.").failure == "cuda_graph_oom"


@pytest.mark.parametrize("line,size", [
    ("vllm serve: error: argument --block-size: invalid choice: 7 (choose from 1, 8, 16, 32, "
     "64, 128)", 7),
    ("vllm serve: error: argument --block-size: invalid choice: '7' (choose from 1, 8)", 7),
    ("(EngineCore_DP0 pid=8) ValueError: Block size must be a multiple of 16.", 8),
    ("ValueError: No common block size for 8. ", 8),
    ("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(...). "
     "Reasons: {FLASH_ATTN: [block_size not supported]}", 8),
])
def test_block_size_rejections_are_named(line, size):
    d = dx("non-default args: {'block_size': 8}\n" + line)
    assert d.failure == "other" and d.phase == "startup"
    assert f"does not accept --block-size {size}" in d.cause
    assert d.fixes[0].flags == {"--block-size": "<omit>"} and flags(d)["--block-size"] == "16"


def test_shm_too_small_for_the_kv_offloading_buffer():
    """0.20+: the KV offloading buffer is one /dev/shm file; the numbers vLLM prints size
    the fixes."""
    d = dx("RuntimeError: Insufficient space in /dev/shm: 409594 MiB required, 204800 MiB free")
    assert (d.numbers["required_mib"], d.numbers["free_mib"]) == (409594, 204800)
    assert flags(d) == {"docker": "--shm-size=401g", "--kv-offloading-size": "199"}
    assert "--kv-offloading-size" in d.cause


@pytest.mark.parametrize("line, kind", [
    ("NotImplementedError: Draft model speculative decoding is not supported yet. Please "
     "consider using other speculative decoding methods such as ngram, medusa, eagle, or mtp.",
     "spec_config"),
    ("NotImplementedError: Unsupported speculative method: 'None'", "spec_config"),
    ("NotImplementedError: VLLM_USE_V1=1 is not supported with Speculative Decoding.",
     "spec_config"),
    ("AssertionError: tp_size=8 must be divisible bydcp_size=3.", "dcp_config"),
    ("ValueError: tp_size=8 must be divisible by dcp_size=3.", "dcp_config"),
    ("AssertionError: DCP not support sliding window.", "dcp_config"),
    ("ValueError: Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` (8) "
     "to be greater than the model's total number of KV heads (8).", "dcp_config"),
])
def test_config_refusals_are_named_before_memory(line, kind):
    """vLLM's refusals of a draft LM or a DCP size: a configuration error at start-up, not a
    memory failure, with the flag that lifts it."""
    d = dx(line)
    assert d.failure == "other" and d.phase == "startup"
    assert any(e.kind == kind for e in d.extracted.errors)
    key = "--speculative-config" if kind == "spec_config" else "--decode-context-parallel-size"
    assert key in flags(d)


# NOTE: vLLM's v0 multiprocessing engine logs the exception first (`logger.exception`), then
# its traceback: the frames that follow place the OOM.
_MSG_FIRST = """\
ERROR 04-27 09:07:04 [engine.py:160] OutOfMemoryError('CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 44.53 GiB of which 263.25 MiB is free.')
ERROR 04-27 09:07:04 [engine.py:160] Traceback (most recent call last):
ERROR 04-27 09:07:04 [engine.py:160]   File "/x/vllm/engine/multiprocessing/engine.py", line 158, in start
ERROR 04-27 09:07:04 [engine.py:160]     self.run_engine_loop()
ERROR 04-27 09:07:04 [engine.py:160]   File "/x/vllm/engine/multiprocessing/engine.py", line 221, in run_engine_loop
ERROR 04-27 09:07:04 [engine.py:160]     request_outputs = self.engine_step()
ERROR 04-27 09:07:04 [engine.py:160]   File "/x/vllm/engine/multiprocessing/engine.py", line 247, in engine_step
ERROR 04-27 09:07:04 [engine.py:160]     raise e
"""


def test_an_oom_logged_before_its_traceback_is_placed_by_the_frames():
    d = dx(_MSG_FIRST)
    assert (d.failure, d.phase) == ("runtime_oom", "serving")
    load = _MSG_FIRST.replace("run_engine_loop", "load_model").replace("engine_step",
                                                                       "load_weights")
    assert dx(load).failure == "weights_oom"
    # a later, unrelated traceback does not move it
    later = (_MSG_FIRST.split("ERROR 04-27 09:07:04 [engine.py:160]   File")[0]
             + 'ERROR 04-27 09:07:05 [engine.py:160]   File "/x/y.py", line 1, in f\n'
             "ERROR 04-27 09:07:05 [engine.py:160] Traceback (most recent call last):\n"
             'ERROR 04-27 09:07:05 [engine.py:160]   File "/x/w.py", line 2, in capture_model\n')
    assert dx(later).phase != "cuda_graph_capture"


def test_an_oom_right_after_the_profile_runs_warning_is_the_profile_run():
    text = ("WARNING 04-27 16:27:59 [profiling.py:245] The sequence length used for profiling "
            "(max_num_batched_tokens / max_num_seqs = 20000) is too short to hold the "
            "multi-modal embeddings in the worst case (98304 tokens in total).\n"
            "ERROR 04-27 16:28:02 [engine.py:448] CUDA out of memory. Tried to allocate "
            "800.00 MiB. GPU 0 has a total capacity of 15.56 GiB of which 442.62 MiB is free.\n")
    d = dx(text)
    assert (d.failure, d.phase) == ("profile_run_oom", "profiling")


def test_a_collectors_prefix_in_front_of_vllms_records():
    prefix = "INFO 2025-11-19T20:16:36.09667Z [resource.labels.containerName: vllm] "
    line = ("(EngineCore_DP0 pid=270) ERROR 11-19 12:16:36 [core.py:842] ValueError: Free "
            "memory on device cuda:0 (22.1/23.56 GiB) on startup is less than desired GPU "
            "memory utilization (0.95, 22.38 GiB). Decrease GPU memory utilization or reduce "
            "GPU memory used by other processes.")
    d = dx(prefix + line + "\n")
    assert d.failure == "free_memory_below_request" and d.status == "failed"


def test_a_fit_message_cut_short_still_names_the_failure():
    d = dx("(EngineCore pid=316) ValueError: To serve at least one request with the model's "
           "max seq len (100000), (4.26 GiB KV cach\n")
    assert (d.failure, d.phase) == ("kv_below_max_model_len", "kv_allocation")
    assert d.cause == ("One request of max_model_len 100000 does not fit in the KV cache that "
                       "was left.")
