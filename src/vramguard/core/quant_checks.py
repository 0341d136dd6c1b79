"""vLLM's refusals of a quantization method with a parallel layout or a model kind, by
release (`rules.bnb_*`), in vLLM's words. The methods' releases and minimum compute
capabilities are `quant_registry`'s; compressed-tensors schemes `quant_schemes`'."""

from __future__ import annotations

from .errors import UsageError
from .model import ModelSpec
from .rules import VllmRules
from .settings import Settings

__all__ = ["check_bitsandbytes", "check_fp8_moe"]

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
                     fix=f"Use vLLM 0.9.0 or newer (FP8 MoE as Marlin weight-only below "
                         f"compute capability 8.9), a GPU of 8.9+, or a 16-bit / int4 "
                         f"checkpoint")


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
