"""§14 of the reference: Llama-3.1-8B bf16 on an H100 80GB, by hand.

T = 79.19 GiB, W = 14.99 GiB, A = 1.2, N = 0.5, G = 0.5 (illustrative, pinned through
PlanHooks or a Calibration so every number below is hand-computable).
"""

import pytest

from core_specs import llama31_8b
from vramguard.core import failures as F
from vramguard.core.calibration import Calibration, CalibrationKey
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import PlanHooks, plan
from vramguard.core.provenance import GIB, Source
from vramguard.core.settings import Settings

H100 = lookup_gpu("NVIDIA H100 80GB HBM3")
HOOKS = PlanHooks(weights_bytes=int(14.99 * GIB), activation_bytes=int(1.2 * GIB),
                  non_torch_bytes=int(0.5 * GIB), cuda_graph_bytes=int(0.5 * GIB),
                  context_bytes=int(0.5 * GIB))


def run(version, **kw):
    return plan(llama31_8b(), Settings(**kw), H100, vllm_version=version, hooks=HOOKS)


@pytest.mark.parametrize("version", ["0.9.1", "0.11.0", "0.13.0", "0.14.0", "0.17.0"])
def test_left_column_u090_graphs_not_budgeted(version):
    p = run(version)
    assert p.outcome.ok and p.engine == "v1"
    assert p.settings["gpu_memory_utilization"] == 0.9
    assert round(p.tightest.requested.value_bytes / GIB, 2) == 71.27
    assert round(p.tightest.kv_cache.value_bytes / GIB, 2) == 54.58
    assert p.kv.num_blocks == 27945
    assert p.kv.tokens == 447120
    assert round(p.kv.max_concurrency, 2) == 3.41
    assert p.kv.page_size_bytes == 2 << 20
    assert p.kv.blocks_per_request == 8192
    assert "Available KV cache memory: 54.58 GiB" in p.log_lines
    assert "GPU KV cache size: 447,120 tokens" in p.log_lines
    assert "Maximum concurrency for 131,072 tokens per request: 3.41x" in p.log_lines


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0", "0.27.0"])
def test_right_column_two_lines(version):
    p = run(version)
    assert p.settings["gpu_memory_utilization"] == 0.92
    assert round(p.tightest.requested.value_bytes / GIB, 2) == 72.85
    assert round(p.tightest.kv_cache.value_bytes / GIB, 2) == 55.66
    assert (p.kv.num_blocks, p.kv.tokens, round(p.kv.max_concurrency, 2)) == (28500, 456000, 3.48)
    assert "Available KV cache memory: 55.66 GiB" in p.log_lines
    assert "GPU KV cache size: 456,000 tokens" in p.log_lines


@pytest.mark.parametrize("version", ["0.28.0", "0.29.0", "0.33.0"])
def test_right_column_one_line_from_028(version):
    p = run(version)
    assert p.kv.num_blocks == 28500
    assert ("GPU KV cache size: 456,000 tokens, Maximum concurrency for 131,072 tokens per "
            "request: 3.48x") in p.log_lines


def test_graphs_estimated_but_not_subtracted_018_019():
    p = run("0.19.0")
    assert round(p.tightest.kv_cache.value_bytes / GIB, 2) == 54.58
    assert p.tightest.cuda_graph.value_bytes == int(0.5 * GIB)


def test_fp8_kv_cache():
    p = run("0.29.0", kv_cache_dtype="fp8")
    assert p.kv.page_size_bytes == 1 << 20
    assert (p.kv.num_blocks, p.kv.tokens, round(p.kv.max_concurrency, 2)) == (57000, 912000, 6.96)


def test_tp2_halves_kv_per_token_and_weights():
    spec = llama31_8b()
    p1 = plan(spec, Settings(), H100, vllm_version="0.29.0")
    p2 = plan(spec, Settings(tensor_parallel_size=2), H100, vllm_version="0.29.0")
    assert p2.kv.bytes_per_token == 65536
    assert len(p2.ledgers) == 2
    w1, w2 = p1.tightest.weights.value_bytes, p2.tightest.weights.value_bytes
    assert 0.49 < w2 / w1 < 0.51
    assert p2.kv.num_blocks == min(l.num_blocks for l in p2.ledgers)


def test_other_process_12_gib_free_memory_message():
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.29.0", hooks=HOOKS,
             other_used_bytes=12 * GIB)
    assert not p.outcome.ok
    assert p.outcome.failure == F.FREE_MEMORY_BELOW_REQUEST
    assert p.outcome.message == (
        "Free memory on device cuda:0 (66.69/79.19 GiB) on startup is less than desired GPU "
        "memory utilization (0.92, 72.85 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes.")
    assert p.fixes[0].flags == {"--gpu-memory-utilization": "0.83"}


def test_free_memory_message_without_device_before_014():
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.11.0", hooks=HOOKS,
             free_bytes=int(66.69 * GIB))
    assert p.outcome.message.startswith("Free memory on device (66.69/79.19 GiB) on startup")


def _fit_message(est):
    return ("To serve at least one request with the model's max seq len (131072), (16.0 GiB KV "
            "cache is needed, which is larger than the available KV cache memory (6.57 GiB). "
            "Based on the available memory, the estimated maximum model length is "
            f"{est}. Try increasing `gpu_memory_utilization` (which also controls CPU memory on "
            "the CPU backend) or decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


def test_u030_fit_message_029_plus():
    p = run("0.29.0", gpu_memory_utilization=0.30)
    assert round(p.tightest.requested.value_bytes / GIB, 2) == 23.76
    assert round(p.tightest.kv_cache.value_bytes / GIB, 2) == 6.57
    assert p.outcome.failure == F.KV_BELOW_MAX_MODEL_LEN
    assert p.outcome.message == _fit_message(53776)
    assert p.kv.estimated_max_model_len == 53776
    flags = [f.flags for f in p.fixes]
    assert {"--max-model-len": "53776"} in flags
    assert p.fixes[0].flags == {"--gpu-memory-utilization": "0.42"}


def test_u030_fit_message_before_029():
    p = run("0.28.0", gpu_memory_utilization=0.30)
    assert p.outcome.message == _fit_message(53792)


def test_u030_auto_fit():
    p = run("0.29.0", gpu_memory_utilization=0.30, max_model_len_auto=True)
    assert p.outcome.ok
    assert p.kv.max_model_len == 53776
    assert p.settings["max_model_len"] == 53776
    assert p.settings_sources["max_model_len"] == "derived"
    assert any(l.startswith("Auto-fit max_model_len: reduced from 131072 to 53776")
               for l in p.log_lines)


def test_calibration_terms_are_used_and_marked():
    key = CalibrationKey("H100-80GB", "0.29.0", "llama")
    cal = Calibration(key, activation_bytes=int(1.2 * GIB), non_torch_bytes=int(0.5 * GIB),
                      cuda_graph_bytes=int(0.5 * GIB), weights_bytes=int(14.99 * GIB),
                      max_num_batched_tokens=8192)
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.29.0", calibration=cal)
    assert p.calibrated
    assert p.tightest.activation.source == Source.CALIBRATED
    assert p.kv.num_blocks == 28500


def test_calibration_scales_activation_with_batched_tokens():
    key = CalibrationKey("H100-80GB", "0.29.0", "llama")
    cal = Calibration(key, activation_bytes=int(1.2 * GIB), max_num_batched_tokens=4096)
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.29.0", calibration=cal)
    assert abs(p.tightest.activation.value_bytes - 2.4 * GIB) < 2


def test_calibration_for_another_key_is_ignored():
    cal = Calibration(CalibrationKey("A100-80GB", "0.29.0", "llama"), activation_bytes=1)
    p = plan(llama31_8b(), Settings(), H100, vllm_version="0.29.0", calibration=cal)
    assert not p.calibrated
    assert p.tightest.activation.source == Source.ESTIMATED
