"""compressed-tensors schemes against the GPU's compute capability, by vLLM release.

vLLM checks the whole method first (`CompressedTensorsConfig.get_min_capability`, 70 from
0.5.3: `quant_registry`), then each layer's scheme (`CompressedTensorsConfig.get_scheme` ->
`_check_scheme_supported(scheme.get_min_capability())`), with a fallback for some schemes
(`_get_scheme_from_parts`): FP8 weights and activations below compute capability 8.9 run as
FP8 Marlin weight-only (W8A16-FP8); NVFP4 below 10.0 runs as Marlin FP4 weight-only
(0.9.2-0.15.0). Read from each release's
`model_executor/layers/quantization/compressed_tensors/` (compressed_tensors.py and
schemes/*.py) and, from 0.17, `model_executor/kernels/linear/` (sixteenth session).

Not modelled: releases before 0.5.4 (0.5.3 does not enforce the per-scheme minimum; earlier
ones have other checks); Marlin's own refusal of int weights below 8.0 in 0.5.4-0.6.1 (its
text names the supported types); NVFP4 on compute capability < 7.5 in 0.16-0.19.1 (a
backend error); W4A8, 2:4 sparse and MXFP schemes; the MoE methods of expert layers.
"""

from __future__ import annotations

from .rules import parse_version

__all__ = ["SCHEME_ROWS", "scheme_refusal", "first_release_running"]

# (scheme, first release, last release or None, capability it runs at natively, capability
# of its fallback or None, the refusal's own text or None). Capabilities as major x 10 +
# minor. A GPU below the native one runs the fallback if it reaches it; else vLLM refuses
# with the minimum of the last scheme it tried (the fallback's when there is one), in
# `_check_scheme_supported`'s words unless the row has its own text.
SCHEME_ROWS: tuple[tuple[str, str, str | None, int, int | None, str | None], ...] = (
    # W8A8Fp8 (89) -> W8A16Fp8 FP8 Marlin (80; 75 from 0.16.0)
    ("W8A8-FP8", "0.5.4", "0.15.0", 89, 80, None),
    ("W8A8-FP8", "0.16.0", None, 89, 75, None),
    ("W8A16-FP8", "0.5.4", "0.15.0", 80, None, None),
    ("W8A16-FP8", "0.16.0", None, 75, None, None),
    ("W8A8-INT8", "0.5.4", None, 75, None, None),
    # WNA16: Marlin 80, Machete on 9.0; from 0.12.0 Exllama on 7.5, from 0.14.0 Marlin 75
    ("WNA16", "0.6.2", "0.11.2", 80, None, None),
    ("WNA16", "0.12.0", None, 75, None, None),
    # NVFP4: W4A4Fp4 (80 in 0.9.1, emulated below 10.0); 0.9.2-0.15.0 native on 10.0+ (CUDA
    # 12.8), else W4A16Fp4 Marlin (80); from 0.16.0 one scheme with kernels down to 7.5
    ("W4A4-FP4", "0.9.1", "0.9.1", 80, None, None),
    ("W4A4-FP4", "0.9.2", "0.15.0", 100, 80, None),
    ("W4A4-FP4", "0.20.0", None, 75, None, None),
    ("W4A16-FP4", "0.9.0", "0.15.0", 80, None, None),
    ("W4A16-FP4", "0.16.0", "0.22.1", 75, None, None),
    # NOTE: from 0.23.0 the scheme forces the Marlin FP4 kernel, whose check fails first
    ("W4A16-FP4", "0.23.0", None, 75, None,
     "Forced NVFP4 kernel MarlinNvFp4LinearKernel is not supported: Marlin FP4 not available"),
)

# NOTE: 0.20.0-0.24.0 have only the FP8 Marlin kernel for FP8 weight-only layers, and it
# refuses compute capability 8.9 and above unless forced (kernels/linear scaled_mm choice).
_FP8_MARLIN_HIGH_CC = ("0.20.0", "0.24.0", 89)
_FP8_MARLIN_TEXT = ("Failed to find a kernel that can implement the ScaledMM linear layer. "
                    "Reasons: \nMarlinFP8ScaledMMLinearKernel To apply FP8 Marlin on "
                    "high-capability GPUs, please set VLLM_TEST_FORCE_FP8_MARLIN=1.")
# NOTE: until 0.28.0 the RuntimeError has three arguments, printed as a tuple.
_PLAIN_TEXT_FROM = "0.29.0"


def _within(version: str, first: str, last: str | None) -> bool:
    v = parse_version(version)
    return parse_version(first) <= v and (last is None or v <= parse_version(last))


def _row(scheme: str, version: str):
    return next((r for r in SCHEME_ROWS if r[0] == scheme and _within(version, r[1], r[2])),
                None)


def _runs(row, capability: int) -> bool:
    native, fallback = row[3], row[4]
    return capability >= native or (fallback is not None and capability >= fallback)


def scheme_refusal(scheme: str, version: str, capability: int) -> str | None:
    """vLLM's error when `version` cannot run the compressed-tensors `scheme` on an NVIDIA
    GPU of `capability` (major x 10 + minor); None when it runs or is not modelled."""
    first, last, high = _FP8_MARLIN_HIGH_CC
    if scheme == "W8A16-FP8" and capability >= high and _within(version, first, last):
        return _FP8_MARLIN_TEXT
    row = _row(scheme, version)
    if row is None or _runs(row, capability):
        return None
    if row[5] is not None:
        return row[5]
    minimum = row[4] if row[4] is not None else row[3]
    if parse_version(version) >= parse_version(_PLAIN_TEXT_FROM):
        return ("Quantization scheme is not supported for the current GPU. "
                f"Min capability: {minimum}. Current capability: {capability}.")
    return ("('Quantization scheme is not supported for ', 'the current GPU. Min capability: "
            f"{minimum}. ', 'Current capability: {capability}.')")


def first_release_running(scheme: str, capability: int, releases: tuple[str, ...]) -> str | None:
    """The first of `releases` (oldest first) from which `scheme` runs at `capability` and
    goes on doing so (None: the newest does not). Releases without a row are skipped."""
    first = None
    for version in releases:
        if _row(scheme, version) is None:
            continue
        ok = scheme_refusal(scheme, version, capability) is None
        first = (first or version) if ok else None
    return first
