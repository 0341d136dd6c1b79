"""vLLM's refusals of a quantization method with a parallel layout, a model kind or an
activation dtype, by release (`rules.bnb_*`, `rules.half_only_quant`), in vLLM's words. The
methods' releases and minimum compute capabilities are `quant_registry`'s; compressed-tensors
schemes `quant_schemes`'."""

from __future__ import annotations

from .arch_support import quant_min_capability
from .errors import UsageError
from .model import MARLIN_BITS, MARLIN_GROUPS, ModelSpec
from .rules import VllmRules
from .settings import Settings

__all__ = ["check_bitsandbytes", "check_fp8_moe", "check_quant_act_dtype"]

_BNB_PARALLEL = {
    "tp_or_pp": "BitAndBytes quantization with TP or PP is not supported yet.",
    "prequant_tp": "Prequant BitsAndBytes models with TP is not supported.Please try with PP.",
    "prequant_tp_long": "Prequant BitsAndBytes models with tensor parallelism is not supported. "
                        "Please try with pipeline parallelism."}


def check_fp8_moe(spec: ModelSpec, s: Settings, rules: VllmRules,
                  compute_capability: tuple[int, int] | None, vendor: str) -> None:
    """FP8 MoE layers below compute capability 8.9 up to 0.8.5: no Marlin fallback, and the
    Triton kernel cannot compile fp8e4nv there (the profile run stops). Raises UsageError."""
    cc = compute_capability
    if (not rules.fp8_moe_needs_89 or spec.moe is None or vendor != "nvidia" or cc is None
            or cc >= (8, 9)):
        return
    method = (spec.quant.method if spec.quant is not None else (s.quantization or "")).lower()
    if method not in ("fp8", "fbgemm_fp8"):
        return
    raise UsageError("type fp8e4nv not supported in this architecture. The supported fp8 "
                     "dtypes are ('fp8e4b15', 'fp8e5')", where="--quantization",
                     fix="Use vLLM 0.9.0 or newer (FP8 MoE as Marlin weight-only below "
                         "compute capability 8.9), a GPU of 8.9+, or a 16-bit / int4 "
                         "checkpoint")


def check_bitsandbytes(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """bitsandbytes with TP / PP (0.5.0-0.6.1: any; 0.6.2+: a pre-quantized checkpoint with
    TP > 1) and a pre-quantized MoE checkpoint (0.10+). Raises UsageError."""
    prequant = spec.quant is not None and spec.quant.method == "bitsandbytes"
    online = (s.quantization or "").lower() == "bitsandbytes"
    if not (prequant or online):
        return
    mode = rules.bnb_parallel
    tp, pp = s.tensor_parallel_size, s.pipeline_parallel_size
    if (mode == "tp_or_pp" and (tp > 1 or pp > 1)) or (
            mode in ("prequant_tp", "prequant_tp_long") and prequant and tp > 1):
        raise UsageError(_BNB_PARALLEL[mode], where="--tensor-parallel-size",
                         fix="Use pipeline parallelism (-pp), or a checkpoint quantized "
                             "another way")
    if rules.bnb_prequant_moe and prequant and spec.moe is not None:
        raise UsageError("Prequant BitsAndBytes models with FusedMoE is not supported yet.",
                         where=spec.name, fix="Serve the model unquantized with "
                                              "--quantization bitsandbytes, or another format")


def _plain_kernel(spec: ModelSpec, s: Settings, rules: VllmRules,
                  cc: tuple[int, int], version: str) -> str | None:
    """The half-only method (awq / gptq) when vLLM surely runs the checkpoint with it, not
    converted to Marlin: asked for by name with --quantization, or not Marlin-compatible
    (the checkpoint config's keys, `QuantSpec.marlin_compatible`; the GPU below Marlin's
    minimum). None otherwise, and when nothing read decides it."""
    q = spec.quant
    method = (s.quantization or (q.method if q else "") or "").lower()
    if method not in rules.half_only_quant or q is None or q.method.lower() != method:
        return None
    if s.quantization or method not in rules.marlin_override or q.marlin_compatible is False:
        return method
    marlin = quant_min_capability(method + "_marlin", version)
    if marlin is None:
        return None
    if cc[0] * 10 + cc[1] < marlin[0]:
        return method
    if q.marlin_compatible is None:     # NOTE: no checkpoint config read: by bits and groups
        if q.bits is None or q.group_size is None:
            return None
        return None if q.bits in MARLIN_BITS[method] and q.group_size in MARLIN_GROUPS \
            else method
    return None


def check_quant_act_dtype(spec: ModelSpec, s: Settings, rules: VllmRules,
                          compute_capability: tuple[int, int] | None, vendor: str,
                          version: str) -> None:
    """bfloat16 with AWQ / GPTQ's own kernels, which take float16 activations only (their
    `get_supported_act_dtypes`, up to 0.21 for GPTQ and 0.23 for AWQ; Marlin takes both).
    Raises UsageError in vLLM's words."""
    cc = compute_capability
    if not rules.half_only_quant or vendor != "nvidia" or cc is None:
        return
    asked = (s.dtype or "auto").lower()
    bf16 = asked in ("bfloat16", "bf16") or (
        asked == "auto" and spec.torch_dtype == "bfloat16"
        and not (cc[0] < 8 and rules.auto_dtype_fallback))
    method = _plain_kernel(spec, s, rules, cc, version) if bf16 else None
    if method is None:
        return
    fix = "Pass --dtype half"
    if s.quantization and method in rules.marlin_override:
        fix += f", or drop --quantization {method} so that vLLM may use {method}_marlin"
    raise UsageError(f"torch.bfloat16 is not supported for quantization method {method}. "
                     "Supported dtypes: [torch.float16]",
                     where="--dtype" if asked != "auto" else "config.json torch_dtype",
                     fix=fix)
