"""vLLM's refusals of a quantization method with a parallel layout or a model kind
(core/quant_checks.py), read in each release's config.py / model loader."""

import pytest

from core_specs import llama31_8b
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

H100 = lookup_gpu("H100-80GB")



def test_bitsandbytes_with_parallelism_and_moe():
    """0.5.0-0.6.1: bitsandbytes with TP or PP > 1 is refused (config.py); from 0.6.2 only a
    pre-quantized checkpoint with TP > 1 (model_loader), reworded in 0.7; from 0.10 a
    pre-quantized MoE checkpoint too."""
    from dataclasses import replace

    from vramguard.core.model import QuantSpec
    bnb = QuantSpec(method="bitsandbytes", bits=4, linear_bytes_per_param=0.53)
    pre = replace(llama31_8b(), quant=bnb)

    def what(spec, s, version):
        with pytest.raises(UsageError) as exc:
            plan(spec, s, H100, vllm_version=version)
        return exc.value.what
    tp2 = Settings(max_model_len=8192, tensor_parallel_size=2)
    online = tp2.with_(quantization="bitsandbytes")
    assert what(llama31_8b(), online, "0.6.1") == ("BitAndBytes quantization with TP or PP is "
                                                   "not supported yet.")
    plan(llama31_8b(), online, H100, vllm_version="0.6.2")
    assert what(pre, tp2, "0.6.2") == ("Prequant BitsAndBytes models with TP is not "
                                       "supported.Please try with PP.")
    assert what(pre, tp2, "0.20.0") == ("Prequant BitsAndBytes models with tensor parallelism "
                                        "is not supported. Please try with pipeline "
                                        "parallelism.")
    plan(pre, tp2.with_(tensor_parallel_size=1, pipeline_parallel_size=2), H100,
         vllm_version="0.20.0")
    from core_specs import dense
    from vramguard.core.model import MoESpec
    moe = replace(dense("m/moe"), quant=bnb,
                  moe=MoESpec(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024))
    assert what(moe, Settings(max_model_len=4096), "0.10.0").startswith("Prequant BitsAndBytes "
                                                                         "models with FusedMoE")


def test_fp8_moe_below_89_before_0_9():
    """Up to 0.8.5 FP8 MoE layers run only the Triton fp8e4nv kernel: on an A100 the profile
    run stops (vllm#17581); 0.9.0 runs them as Marlin weight-only."""
    from dataclasses import replace

    from core_specs import dense
    from vramguard.core.model import MoESpec, QuantSpec
    moe = replace(dense("q/moe-fp8"), quant=QuantSpec(method="fp8", linear_bytes_per_param=1.0),
                  moe=MoESpec(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024))
    a100 = lookup_gpu("A100-80GB")
    with pytest.raises(UsageError) as exc:
        plan(moe, Settings(max_model_len=4096), a100, vllm_version="0.8.5")
    assert exc.value.what.startswith("type fp8e4nv not supported in this architecture.")
    plan(moe, Settings(max_model_len=4096), a100, vllm_version="0.9.0")
    plan(moe, Settings(max_model_len=4096), H100, vllm_version="0.8.5")


def test_awq_gptq_kernels_take_float16_only():
    """AWQ's and GPTQ's own kernels take float16 activations (up to 0.23 / 0.21); Marlin takes
    bfloat16 too. vLLM converts a compatible checkpoint to Marlin unless --quantization names
    the plain method; a 3-bit GPTQ checkpoint cannot convert."""
    from dataclasses import replace

    from vramguard.core.model import QuantSpec
    a100, t4 = lookup_gpu("A100-80GB"), lookup_gpu("T4")
    awq = replace(llama31_8b(), quant=QuantSpec(method="awq", bits=4, group_size=128,
                                                linear_bytes_per_param=0.52))
    gptq3 = replace(llama31_8b(), quant=QuantSpec(method="gptq", bits=3, group_size=128,
                                                  linear_bytes_per_param=0.40))
    s = Settings(max_model_len=4096)

    def what(spec, settings, gpu, version):
        with pytest.raises(UsageError) as exc:
            plan(spec, settings, gpu, vllm_version=version)
        return exc.value.what
    refused = ("torch.bfloat16 is not supported for quantization method {}. Supported dtypes: "
               "[torch.float16]")
    plan(awq, s, a100, vllm_version="0.10.0")                          # awq_marlin
    explicit = s.with_(quantization="awq")
    assert what(awq, explicit, a100, "0.10.0") == refused.format("awq")
    plan(awq, explicit.with_(dtype="half"), a100, vllm_version="0.10.0")
    plan(awq, explicit, a100, vllm_version="0.24.0")                    # auto_awq
    assert what(gptq3, s, a100, "0.20.0") == refused.format("gptq")
    plan(gptq3, s, a100, vllm_version="0.22.0")                         # auto_gptq
    # Turing, below Marlin's 8.0 until 0.14: the plain kernel. 0.9.1+ fall back to float16
    # for a bfloat16 config; 0.6.4-0.9.0 check the quantization dtype first (VllmConfig),
    # 0.6.3 and older the GPU's bfloat16 first (the worker, before the model loader).
    plan(awq, s, t4, vllm_version="0.9.2")
    assert what(awq, s, t4, "0.8.5") == refused.format("awq")
    assert what(awq, s, t4, "0.6.3").startswith("Bfloat16 is only supported on GPUs")
    plan(awq, s.with_(dtype="float16"), t4, vllm_version="0.8.5")
    # an asymmetric GPTQ checkpoint (sym false: `marlin_compatible` False) stays off Marlin
    asym = replace(llama31_8b(), quant=QuantSpec(method="gptq", bits=4, group_size=128,
                                                 linear_bytes_per_param=0.52,
                                                 marlin_compatible=False))
    assert what(asym, s, a100, "0.20.0") == refused.format("gptq")
    plan(replace(asym, quant=replace(asym.quant, marlin_compatible=True)), s, a100,
         vllm_version="0.20.0")
