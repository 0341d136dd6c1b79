"""vLLM's scheduler defaults by release (§9): v1's tiers by GPU and entry point, v0's from
max_model_len and chunked prefill. The rows (`rules.VllmRules.sched_defaults`, the v0
fields) say which apply; split from rules.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .rules import VllmRules

# ---- scheduler defaults (§9) -------------------------------------------------------------
# key -> tiers, first match wins: (min total GiB, name must contain any of, name must not
# contain any of, serve tokens, LLM-class tokens, max_num_seqs)
# NOTE: GB10 (DGX Spark) takes the small tier in every release: NVML has no device-memory
# query on this integrated part, so up to 0.32 `get_device_total_memory` raised and the
# defaults fell back to "device memory 0" (engine/arg_utils.py); 0.33 reads the total from
# CUDA but excludes GB10 by its compute capability 12.1 (`is_gb10`). Logs of 0.11 and 0.13
# containers on GB10 print max_num_batched_tokens=2048.
SCHED_DEFAULTS: dict[str, tuple[tuple[float, tuple[str, ...], tuple[str, ...], int, int, int], ...]] = {
    "v1_080": ((0, ("h100", "h200"), (), 8192, 16384, 1024), (0, (), (), 2048, 8192, 1024)),
    "v1_081": ((0, ("h100", "h200"), (), 8192, 16384, 1024), (0, (), (), 2048, 8192, 256)),
    "v1_085": ((70, (), ("gb10",), 8192, 16384, 1024), (0, (), (), 2048, 8192, 256)),
    "v1_090": ((70, (), ("a100", "gb10"), 8192, 16384, 1024), (0, (), (), 2048, 8192, 256)),
    "v1_028": ((160, (), (), 16384, 16384, 1024), (70, (), ("a100", "gb10"), 8192, 16384, 1024),
               (0, (), (), 2048, 8192, 256)),
    "v1_033": ((160, (), (), 16384, 16384, 1024), (70, (), ("a100", "gb10"), 8192, 16384, 1024),
               (0, (), (), 2048, 8192, 256)),
}
V0_MAX_NUM_SEQS = 256
V0_MIN_BATCHED_TOKENS = 2048
V0_CHUNKED_AUTO_ABOVE = 32768
CPU_TOKENS_PER_WORKER = (2048, 4096)      # serve, LLM class
CPU_SEQS_PER_WORKER = (128, 256)


def scheduler_defaults(rules: VllmRules, gpu_name: str, total_gib: float, *,
                       entrypoint: str = "serve", device: str = "cuda",
                       world_size: int = 1) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) defaults of a v1 release (§9).

    v0 defaults depend on max_model_len and chunked prefill; see `v0_scheduler_defaults`.
    """
    llm = entrypoint == "llm"
    if device == "cpu":
        return (CPU_TOKENS_PER_WORKER[llm] * world_size, CPU_SEQS_PER_WORKER[llm] * world_size)
    name = (gpu_name or "").lower()
    for min_gib, need, avoid, serve_t, llm_t, seqs in SCHED_DEFAULTS[rules.sched_defaults]:
        if total_gib < min_gib:
            continue
        if need and not any(n in name for n in need):
            continue
        if any(a in name for a in avoid):
            continue
        return (llm_t if llm else serve_t), seqs
    return 2048, 256


def v0_scheduler_defaults(rules: VllmRules, max_model_len: int, chunked_prefill: bool, *,
                          pooling: bool = False, multimodal: bool = False) -> tuple[int, int]:
    """v0: (max_num_batched_tokens, max_num_seqs): max(L, 2048), or the release's chunked
    prefill default (`rules.v0_chunked_tokens`); at least 32768 for embedding models and
    4096/5120 for multimodal ones where the release says so."""
    if chunked_prefill and rules.v0_chunked_tokens is not None:
        tokens = rules.v0_chunked_tokens
    else:
        tokens = max(max_model_len, V0_MIN_BATCHED_TOKENS)
    if pooling:
        tokens = max(tokens, rules.v0_pooling_min_tokens)
    if multimodal:
        tokens = max(tokens, rules.v0_mm_min_tokens)
    return tokens, V0_MAX_NUM_SEQS
