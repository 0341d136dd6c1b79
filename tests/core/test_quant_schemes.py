"""core/quant_schemes.py: compressed-tensors schemes against the compute capability, by
release (read from each release's compressed_tensors/ and kernels/linear/)."""
import pytest

from vramguard.core.arch_registry import EXAMINED
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.quant_schemes import first_release_running, scheme_refusal
from vramguard.core.rules import parse_version
from vramguard.core.settings import Settings
from vramguard.errors import UsageError
from vramguard.sources.resolve import load_model_spec

TUPLE = ("('Quantization scheme is not supported for ', 'the current GPU. Min capability: {m}. ', "
         "'Current capability: {c}.')")
PLAIN = "Quantization scheme is not supported for the current GPU. Min capability: {m}. " \
        "Current capability: {c}."


@pytest.mark.parametrize("scheme,version,cc,minimum", [
    # FP8 W8A8: native from 8.9, else FP8 Marlin weight-only (8.0, 7.5 from 0.16.0)
    ("W8A8-FP8", "0.11.0", 90, None), ("W8A8-FP8", "0.11.0", 80, None),
    ("W8A8-FP8", "0.11.0", 75, 80), ("W8A8-FP8", "0.16.0", 75, None),
    ("W8A8-FP8", "0.16.0", 70, 75), ("W8A8-FP8", "0.5.3", 70, None),     # not enforced
    ("W8A16-FP8", "0.15.0", 75, 80), ("W8A16-FP8", "0.19.1", 90, None),
    ("W8A8-INT8", "0.6.0", 70, 75), ("W8A8-INT8", "0.6.0", 75, None),
    # int weight-only: Marlin 8.0; from 0.12.0 Exllama / Marlin on 7.5
    ("WNA16", "0.11.2", 75, 80), ("WNA16", "0.12.0", 75, None), ("WNA16", "0.12.0", 70, 75),
    ("WNA16", "0.6.1", 70, None),          # Marlin's own check first: not modelled
    # NVFP4: 0.9.2-0.15.0 native from 10.0, else Marlin FP4 (8.0); 7.5 from 0.20
    ("W4A4-FP4", "0.9.1", 75, 80), ("W4A4-FP4", "0.12.0", 90, None),
    ("W4A4-FP4", "0.12.0", 75, 80), ("W4A4-FP4", "0.20.0", 70, 75),
    ("W4A4-FP4", "0.17.0", 70, None),      # a backend error there: not modelled
    ("W4A16-FP4", "0.15.0", 75, 80), ("W4A16-FP4", "0.22.1", 75, None),
])
def test_scheme_refusal_by_release(scheme, version, cc, minimum):
    got = scheme_refusal(scheme, version, cc)
    if minimum is None:
        assert got is None
    else:
        text = PLAIN if parse_version(version) >= (0, 29, 0) else TUPLE
        assert got == text.format(m=minimum, c=cc)


def test_plain_text_from_029_and_kernel_refusals():
    assert scheme_refusal("W8A8-INT8", "0.29.0", 70) == PLAIN.format(m=75, c=70)
    assert scheme_refusal("W8A8-INT8", "0.28.0", 70) == TUPLE.format(m=75, c=70)
    # 0.20-0.24: FP8 weight-only has only FP8 Marlin, which refuses 8.9 and above
    for version in ("0.20.0", "0.24.0"):
        assert scheme_refusal("W8A16-FP8", version, 90).startswith(
            "Failed to find a kernel that can implement the ScaledMM linear layer.")
    assert scheme_refusal("W8A16-FP8", "0.25.0", 90) is None
    assert scheme_refusal("W8A8-FP8", "0.20.0", 90) is None      # native W8A8 there
    assert scheme_refusal("W4A16-FP4", "0.23.0", 70) == (
        "Forced NVFP4 kernel MarlinNvFp4LinearKernel is not supported: Marlin FP4 not available")


def test_first_release_running():
    assert first_release_running("W8A8-FP8", 75, EXAMINED) == "0.16.0"
    assert first_release_running("WNA16", 75, EXAMINED) == "0.12.0"
    assert first_release_running("W8A8-FP8", 70, EXAMINED) is None
    assert first_release_running("W8A8-FP8", 90, EXAMINED) == "0.5.4"


def test_plan_refuses_fp8_dynamic_on_old_gpus():
    """A compressed-tensors FP8-dynamic checkpoint: vLLM's refusal on V100 (all releases) and
    on T4 before 0.16, with the release that runs it; A100 runs it (FP8 Marlin)."""
    sp = load_model_spec("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", offline=True)
    s = Settings(tensor_parallel_size=8, max_model_len=4096)
    with pytest.raises(UsageError) as e:
        plan(sp, s, lookup_gpu("T4"), vllm_version="0.11.0")
    assert e.value.what == TUPLE.format(m=80, c=75)
    assert e.value.where == "quantization_config (W8A8-FP8)"
    assert "vLLM 0.16.0 and newer can" in e.value.fix
    with pytest.raises(UsageError, match="Min capability: 75. Current capability: 70"):
        plan(sp, s, lookup_gpu("V100-32GB"))
    assert plan(sp, s, lookup_gpu("A100-80GB"), vllm_version="0.11.0").outcome.ok
    assert plan(sp, s, lookup_gpu("T4"), vllm_version="0.16.0") is not None
