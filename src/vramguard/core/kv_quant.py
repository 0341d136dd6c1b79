"""Quantized KV-cache formats of vLLM 0.20+ beyond fp8: TurboQuant, per-token-head int8 / fp8 /
int4, and nvfp4's buffers; the layers kept at the model dtype (`--kv-cache-dtype-skip-layers`,
TurboQuant's boundary layers); vLLM's checks, in its words.

Read in vLLM's released code (0.20-0.33): `model_executor/layers/quantization/turboquant/
config.py` (`slot_size_aligned`, `get_boundary_skip_layers`), `v1/kv_cache_interface.py` and
the Triton / TurboQuant backends' specs (page sizes), `engine/arg_utils.py` (the boundary
layers), `platforms/interface.py` `_align_heterogeneous_kv_block_size` (0.25+),
`model_executor/layers/attention/attention.py` (the skip rule; 0.20's TurboQuant buffers),
`v1/attention/backends/flashinfer.py` (nvfp4's FP8 output buffer, 0.21+).
"""

from __future__ import annotations

from math import ceil

from .errors import UsageError
from .model import SLIDING, ModelSpec
from .rules import VllmRules
from .settings import Settings

# (key bits, value bits): 8-bit keys are FP8; 3-4 bits are Lloyd-Max indices + an fp16 norm
TURBOQUANT = {"turboquant_k8v4": (8, 4), "turboquant_4bit_nc": (4, 4),
              "turboquant_k3v4_nc": (3, 4), "turboquant_3bit_nc": (3, 3)}
# bytes per element of the per-token-head formats (each side adds one fp32 scale per head)
PER_TOKEN_HEAD = {"int8_per_token_head": 1.0, "fp8_per_token_head": 1.0,
                  "int4_per_token_head": 0.5}
# every name this module adds to vLLM's base choices, with the release that added it
NEW_KV_DTYPES = {**{n: "0.20" for n in TURBOQUANT}, "int8_per_token_head": "0.20",
                 "fp8_per_token_head": "0.20", "nvfp4": "0.20", "int4_per_token_head": "0.25",
                 "nvfp4_4over6": "0.28", "nvfp4_ds_mla": "0.30"}
TQ_BOUNDARY_LAYERS = 2          # first and last layers kept at the model dtype (dense models)
TQ_KV_SPLITS = 32               # `tq_max_kv_splits_for_cuda_graph` (0.20's decode buffers)


def packed_head_bytes(name: str, k_dim: int, v_dim: int) -> int | None:
    """Bytes one token takes per KV head (K and V) in a packed format; None for a format
    sized by its element width (auto, fp8, nvfp4)."""
    bits = TURBOQUANT.get(name)
    if bits is not None:
        kb, vb = bits
        key = k_dim if kb == 8 else ceil(k_dim * kb / 8) + 2        # + the fp16 norm
        slot = key + ceil(k_dim * vb / 8) + 4                        # + fp16 scale and zero
        return slot + slot % 2                                       # slot_size_aligned
    per = PER_TOKEN_HEAD.get(name)
    if per is not None:
        return int(k_dim * per) + 4 + int(v_dim * per) + 4           # + an fp32 scale a side
    return None


def skip_layers(spec: ModelSpec, s: Settings, rules: VllmRules, kv_name: str) -> frozenset[int]:
    """The layers whose KV cache keeps the model dtype: `--kv-cache-dtype-skip-layers`
    (layer indices, or 'sliding_window' for every sliding-window layer) and, with
    TurboQuant, the first and last two layers of a model without Mamba layers."""
    if kv_name in ("auto", "bfloat16", "float16", "half", "float32") or not rules.kv_skip_layers:
        return frozenset()
    out = set()
    for item in s.kv_cache_dtype_skip_layers or ():
        if item == "sliding_window":
            out.update(i for i, l in enumerate(spec.layers) if l.attention.kind == SLIDING)
        elif item.isascii() and item.isdigit():     # NOTE: '²'.isdigit() is True too
            out.add(int(item))
    if kv_name in TURBOQUANT and not spec.is_hybrid:
        n = min(TQ_BOUNDARY_LAYERS, spec.num_layers // 2)
        out.update(range(n))
        out.update(range(spec.num_layers - n, spec.num_layers))
    return frozenset(out)


def aligned_block_size(block: int, skip_bpt: int, primary_bpt: int, kernel_min: int = 16) -> int:
    """0.25+: the block size that makes the quantized layers' page cover a skipped layer's
    page at the smallest kernel block (`_align_heterogeneous_kv_block_size`); unchanged when
    the pages per token are equal."""
    if not primary_bpt or skip_bpt <= primary_bpt:
        return block
    align = max(kernel_min, block)
    return max(block, align * -(-(skip_bpt * kernel_min) // (align * primary_bpt)))


def check_kv_dtype(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """vLLM's own refusals of these formats, in its words (UsageError)."""
    if s.kv_cache_dtype_skip_layers and not rules.kv_skip_layers:
        # NOTE: `vllm serve` stops in its argparse first (validation, FLAG_RELEASES); the LLM
        # class passes its keywords to EngineArgs.
        raise UsageError("EngineArgs.__init__() got an unexpected keyword argument "
                         "'kv_cache_dtype_skip_layers'", where="kv_cache_dtype_skip_layers",
                         fix="The setting exists from vLLM 0.19")
    name = (s.kv_cache_dtype or "auto").lower()
    since = NEW_KV_DTYPES.get(name)
    if since is None:
        return
    if name not in rules.kv_quant_dtypes:
        raise UsageError(f"invalid choice: '{name}' (vLLM's argument parser, before {since})",
                         where="--kv-cache-dtype",
                         fix=f"This KV-cache dtype exists from vLLM {since}; plan with "
                             f"--vllm-version {since}.0 or later, or use fp8")
    mla = spec.uses_mla
    if name.startswith("nvfp4") and name != "nvfp4_ds_mla":
        if mla:
            raise UsageError(_NVFP4_MLA_NEW if "nvfp4_ds_mla" in rules.kv_quant_dtypes
                             else _NVFP4_MLA, where="--kv-cache-dtype")
        if rules.nvfp4_kv == "unusable":
            raise UsageError("nvfp4 KV cache is not yet supported", where="--kv-cache-dtype",
                             fix="vLLM 0.20 lists nvfp4 but its FlashInfer backend refuses it "
                                 "(usable from 0.21)")
    if name == "nvfp4_ds_mla" and not mla:
        raise UsageError("No valid attention backend found for cuda: kv_cache_dtype "
                         "nvfp4_ds_mla needs a sparse MLA model (FLASHMLA_SPARSE)",
                         where="--kv-cache-dtype")
    if (name in TURBOQUANT or name in PER_TOKEN_HEAD) and mla:
        raise UsageError(f"No valid attention backend found for cuda with kv_cache_dtype "
                         f"{name}: MLA backends do not support it", where="--kv-cache-dtype",
                         fix="Use fp8 or auto for MLA models")
    if name in TURBOQUANT and spec.is_hybrid and rules.tq_hybrid == "refused":
        raise UsageError("TurboQuant KV cache is not supported for hybrid (attention + Mamba) "
                         "models. Boundary layer protection requires uniform attention layers.",
                         where="--kv-cache-dtype", fix="vLLM 0.21+ allows it without boundary "
                                                       "layers")
    d = spec.head_dim or 0
    if name == "int4_per_token_head" and d & (d - 1):
        raise UsageError(f"Requires power-of-2 dim, got {d}", where="--kv-cache-dtype",
                         fix="int4_per_token_head needs a power-of-2 head size")


_NVFP4_MLA = ("nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) backends. "
              "Please use a different --kv-cache-dtype (e.g., 'fp8' or 'auto') for MLA models "
              "such as DeepSeek.")
_NVFP4_MLA_NEW = ("nvfp4 KV cache is not supported with MLA (Multi-head Latent Attention) "
                  "backends. Please use a different --kv-cache-dtype (e.g., 'fp8', 'auto', or "
                  "'nvfp4_ds_mla' with a sparse MLA backend) for MLA models such as DeepSeek.")


def init_buffer_bytes(spec: ModelSpec, s: Settings, rules: VllmRules, kv_name: str,
                      quantized_layers: int, tokens: int, seqs: int) -> int:
    """Memory a stage's attention layers allocate at model init for the KV format (inside
    vLLM's weights figure): 0.20's TurboQuant decode buffers per quantized layer (max_num_seqs
    x query heads x 32 splits x (head + 1) fp32, the output and the LSE); 0.21+'s nvfp4 FP8
    output buffer per layer (max_num_batched_tokens x query heads x head bytes)."""
    tp = s.tensor_parallel_size
    heads = max(1, (spec.num_attention_heads or 0) // tp)
    d = spec.head_dim or 0
    if kv_name in TURBOQUANT and rules.tq_layer_buffers:
        per = 4 * seqs * heads * (TQ_KV_SPLITS * (d + 1) + d + 1)
        return per * quantized_layers
    if kv_name.startswith("nvfp4") and kv_name != "nvfp4_ds_mla" and rules.nvfp4_kv == "buffer":
        return tokens * heads * d * quantized_layers
    return 0
