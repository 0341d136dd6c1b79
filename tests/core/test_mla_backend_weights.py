"""What vLLM's MLA backend keeps next to the weights (`weights.mla_backend_bytes`), inside
the "Loading model weights took" measurement: the dequantized kv_b_proj of a quantized
checkpoint (every release with MLA), and v0 0.7.1-0.7.3's absorbed decode matrices
(attention/backends/mla/utils.py, read in the 0.7.1, 0.7.2 and 0.7.3 sources)."""

import pytest

from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.rules import resolve_rules
from vramguard.core.settings import Settings
from vramguard.core.weights import mla_backend_bytes

H200 = lookup_gpu("H200")
A100_40 = lookup_gpu("A100-40GB")


def _spec(name):
    from vramguard.sources.resolve import load_model_spec
    return load_model_spec(name, offline=True)


def test_deepseek_r1_fp8_at_tp8_under_v0_073():
    """Per MLA layer at TP8 (16 of 128 heads): W_Q_UK 1536 x 16 x 512 and W_UV_O 16 x 512 x
    7168 requantized to FP8 (block-quantized weights stay FP8), W_QR 1536 x 16 x 64 in bf16,
    and the dequantized kv_b_proj 512 x 16 x (128 + 128) in bf16: 78,643,200 bytes."""
    r1 = _spec("deepseek-ai/DeepSeek-R1")
    s = Settings(tensor_parallel_size=8)
    per_layer = 1536 * 16 * 512 + 16 * 512 * 7168 + 1536 * 16 * 64 * 2 + 512 * 16 * 256 * 2
    assert per_layer == 78_643_200
    assert mla_backend_bytes(r1, s, 2, (0, 61), (9, 0), absorbed=True) == 61 * per_layer
    assert mla_backend_bytes(r1, s, 2, (0, 10), (9, 0), absorbed=True) == 10 * per_layer


def test_from_08_only_the_dequantized_kv_b_proj_stays():
    """mla/common.py (v0 and v1 0.8+, mla_attention.py in 0.33): "we just store fp16/bf16
    copies" of W_UK / W_UV for quantized weights; nothing is absorbed."""
    r1 = _spec("deepseek-ai/DeepSeek-R1")
    s = Settings(tensor_parallel_size=8)
    assert mla_backend_bytes(r1, s, 2, (0, 61), (9, 0)) == 61 * 512 * 16 * 256 * 2


def test_unquantized_model_absorbs_in_the_model_dtype():
    """DeepSeek-Coder-V2-Lite (no q_lora_rank: W_Q is q_proj over the 2,048 hidden size) at
    TP8, 2 of 16 heads: W_Q_UK 2048 x 2 x 512, W_UV_O 2 x 512 x 2048 and W_QR 2048 x 2 x 64,
    all bf16; kv_b_proj is not quantized, so W_UK / W_UV are views of it. From 0.8: none."""
    lite = _spec("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct")
    s = Settings(tensor_parallel_size=8)
    per_layer = (2048 * 2 * 512 + 2 * 512 * 2048 + 2048 * 2 * 64) * 2
    assert mla_backend_bytes(lite, s, 2, (0, 27), (8, 0), absorbed=True) == 27 * per_layer
    assert mla_backend_bytes(lite, s, 2, (0, 27), (8, 0)) == 0


def test_fp8_per_tensor_weights_on_ampere_absorb_in_bf16():
    """Below compute capability 8.9 per-tensor FP8 runs as Marlin (int32 weights): `is_fp8`
    is false, so v0 keeps the absorbed matrices in the model dtype; block FP8 never goes to
    Marlin and stays FP8."""
    from dataclasses import replace

    from vramguard.core.model import QuantSpec
    r1 = _spec("deepseek-ai/DeepSeek-R1")
    per_tensor = replace(r1, quant=QuantSpec(method="fp8", linear_bytes_per_param=1.0))
    s = Settings(tensor_parallel_size=8)
    ampere = mla_backend_bytes(per_tensor, s, 2, (0, 1), (8, 0), absorbed=True)
    hopper = mla_backend_bytes(per_tensor, s, 2, (0, 1), (9, 0), absorbed=True)
    absorbed = 1536 * 16 * 512 + 16 * 512 * 7168
    assert ampere - hopper == absorbed
    assert mla_backend_bytes(r1, s, 2, (0, 1), (8, 0), absorbed=True) == hopper


@pytest.mark.parametrize("version,engine,absorbed", [
    ("0.7.0", "v0", False), ("0.7.1", "v0", True), ("0.7.3", "v0", True),
    ("0.8.0", "v0", False), ("0.8.0", "v1", False), ("0.33.0", "v1", False)])
def test_the_absorption_by_release(version, engine, absorbed):
    assert resolve_rules(version, engine).v0_mla_absorbed is absorbed


def test_the_plan_counts_it_in_the_weights():
    """The 0.7.3 v0 plan of DeepSeek-R1 at TP8 carries 61 x 78,643,200 bytes more weights
    than the same plan under 0.8.0, whose dequantized kv_b_proj is 61 x 4,194,304; v0 0.7.0
    has no MLA (none)."""
    s = Settings(tensor_parallel_size=8, max_model_len=4096, gpu_memory_utilization=0.85)
    w = {v: plan(_spec("deepseek-ai/DeepSeek-R1"), s, H200, vllm_version=v,
                 engine="v0").tightest.weights.value_bytes for v in ("0.7.0", "0.7.3", "0.8.0")}
    assert w["0.7.3"] - w["0.8.0"] == 61 * (78_643_200 - 4_194_304)
    assert w["0.8.0"] - w["0.7.0"] == 61 * 4_194_304
