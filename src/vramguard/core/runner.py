"""How vLLM runs a model, by release: the Mamba cache mode that prefix caching sets on a
hybrid model, async scheduling's default and refusals, and whether Model Runner V2 runs it
(with vLLM's refusals around them). Read by the stage terms, the checks and the report; split
out of `stage_terms`.
"""

from __future__ import annotations

from . import _memo
from .draft import mamba_refuses, speculates
from .errors import UsageError
from .gpu import GpuSpec
from .model import MAMBA, NONE, ModelSpec
from .rules import VllmRules
from .settings import Settings, is_pooling

__all__ = ["MAMBA_ALL_MODE_ARCHS", "mamba_cache_mode", "check_mamba_prefix_caching",
           "async_scheduling", "check_async_scheduling", "model_runner_v2", "check_eplb",
           "token_buffer_bytes", "token_buffer_term"]


def check_eplb(s: Settings, rules: VllmRules) -> None:
    """ParallelConfig's EPLB checks by release (`rules.eplb_checks`): redundant experts need
    EPLB; EPLB needs expert parallelism and TP x DP > 1 (0.10+). Raises UsageError."""
    mode, n = rules.eplb_checks, s.num_redundant_experts
    if mode is None:
        return
    if not s.enable_eplb:
        if n:
            text = (f"num_redundant_experts should be used with EPLB.{n}." if mode != "v0102"
                    else f"num_redundant_experts is set to {n} but EPLB is not enabled. "
                         "Either enable EPLB or unset num_redundant_experts.")
            raise UsageError(text, where="--eplb-config", fix="Add --enable-eplb, or drop the "
                                                              "redundant experts")
        return
    if mode == "v092":
        return
    if not s.enable_expert_parallel:
        raise UsageError("enable_expert_parallel must be True to use EPLB.",
                         where="--enable-eplb", fix="Add --enable-expert-parallel")
    tp, dp = s.tensor_parallel_size, s.data_parallel_size
    if tp * dp <= 1:
        raise UsageError("EPLB requires tensor_parallel_size or data_parallel_size to be "
                         f"greater than 1, but got TP={tp},DP={dp}.", where="--enable-eplb",
                         fix="Use EPLB with TP or DP over several GPUs")


# NOTE: models whose Mamba layers support prefix caching at every block ("all" mode, vLLM
# `SupportsMambaPrefixCaching` in 0.26-0.32: mamba, mamba2, jamba, zamba2, nemotron_h,
# granitemoehybrid, falcon_h1; bamba until its removal in 0.24); the others (Gated DeltaNet, linear
# attention) get "align", and from 0.33 every model does (`rules.mamba_all_mode`).
MAMBA_ALL_MODE_ARCHS = frozenset({
    "MambaForCausalLM", "Mamba2ForCausalLM", "JambaForCausalLM", "Zamba2ForCausalLM",
    "NemotronHForCausalLM", "GraniteMoeHybridForCausalLM", "FalconH1ForCausalLM",
    "BambaForCausalLM"})


def mamba_cache_mode(spec: ModelSpec, s: Settings, rules: VllmRules) -> str:
    """vLLM's `mamba_cache_mode` ("none" | "align" | "all") with prefix caching on a model with
    Mamba / linear-attention layers (models/config.py `MambaModelConfig`, 0.15+): prefix
    caching is the user's flag, on by default for hybrid models from 0.28; an explicit
    --mamba-cache-mode replaces the default mode while prefix caching is on."""
    # NOTE: `_memo.has_mamba` (once per model): this runs for every family of a search
    if not _memo.has_mamba(spec):
        return "none"
    if not rules.mamba_cache_modes:
        # NOTE: 0.11.1-0.14: --enable-prefix-caching keeps a Mamba state per (chunk-aligned)
        # block for the models that support it, "all" in all but name; others turn it off
        return ("all" if rules.mamba_pc_per_block and s.enable_prefix_caching
                and spec.architecture in MAMBA_ALL_MODE_ARCHS else "none")
    on = s.enable_prefix_caching
    if on is None:
        # NOTE: the default covers hybrids only (attention-free models default off:
        # ModelConfig.is_prefix_caching_supported).
        on = rules.hybrid_prefix_caching_default and spec.is_hybrid
    if not on:
        return "none"      # NOTE: an explicit mode without prefix caching is reset (a warning)
    supports_all = spec.architecture in MAMBA_ALL_MODE_ARCHS
    explicit = s.mamba_cache_mode
    if explicit in (None, "none"):
        if rules.mamba_spec_prefers_align and s.num_speculative_tokens > 0:
            return "align"
        return "all" if rules.mamba_all_mode and supports_all else "align"
    # NOTE: an explicit "all" on a model without Mamba prefix caching falls back to "align".
    return "align" if explicit == "all" and not supports_all else explicit


_MAMBA_CHUNKED = {"align": "Chunked prefill is required for mamba cache mode 'align'.",
                  "prefix": "Chunked prefill is required for Mamba prefix caching."}


def check_mamba_prefix_caching(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """vLLM's refusals of prefix caching on Mamba / linear-attention layers: V1 0.9.2-0.10.1
    (on by default there; `rules.mamba_pc_refused`), and "align" mode's asserts from 0.15
    (chunked prefill turned off; speculative decoding in 0.15-0.16). Raises UsageError."""
    if rules.engine != "v1" or not _memo.has_mamba(spec):
        return
    if s.enable_prefix_caching is not False and mamba_refuses(rules.mamba_pc_refused, spec):
        raise UsageError("Prefix caching is not supported for Mamba yet.",
                         where="--enable-prefix-caching",
                         fix="Pass --no-enable-prefix-caching, or leave the engine to vLLM "
                             "(it runs Mamba models on V0 in this release)")
    if mamba_cache_mode(spec, s, rules) != "align":
        return
    if rules.msg_mamba_chunked and s.enable_chunked_prefill is False:
        raise UsageError(_MAMBA_CHUNKED[rules.msg_mamba_chunked],
                         where="--no-enable-chunked-prefill",
                         fix="Keep chunked prefill on, or pass --no-enable-prefix-caching")
    if rules.mamba_align_refuses_spec and speculates(s):
        raise UsageError("Mamba cache mode 'align' is currently not compatible with "
                         "speculative decoding.", where="--enable-prefix-caching",
                         fix="Pass --no-enable-prefix-caching, or use vLLM 0.17 or newer")


# speculative methods of vLLM's EagleModelTypes (EAGLE, EAGLE-3, MTP kinds, DFlash)
_EAGLE_KINDS = frozenset({"eagle", "eagle3", "extract_hidden_states", "mtp", "dflash"})


def async_scheduling(spec: ModelSpec, s: Settings, rules: VllmRules,
                     v2: bool | None = None) -> bool:
    """Whether the engine schedules asynchronously: the flag, else the version's default
    (0.14+; config/vllm.py): off for pooling models, for speculative methods other than
    EAGLE / MTP kinds and the release's `async_spec_ok`, with PP (0.14-0.15; the V1 runner
    from 0.32) and with a Mamba cache mode (0.16). From 0.33 only the V1 model runner turns
    it off for speculation or PP (`v2`: whether Model Runner V2 runs, when known)."""
    if rules.engine != "v1":
        return False
    if s.async_scheduling is not None:
        return s.async_scheduling
    if not rules.async_scheduling_default or is_pooling(spec, s):
        return False
    spec_off = bool(s.num_speculative_tokens) and not _async_spec_ok(s, rules)
    pp_off = s.pipeline_parallel_size > 1 and rules.async_off_pp is not None
    if spec_off or pp_off:
        # NOTE: 0.33 turns it off for the V1 model runner only; 0.32 for PP on it only
        v1_only = rules.async_v1_runner_only or (pp_off and not spec_off
                                                  and rules.async_off_pp == "v1_runner")
        if not v1_only:
            return False
        return model_runner_v2(spec, s, rules) if v2 is None else v2
    return not (rules.async_off_mamba_pc and mamba_cache_mode(spec, s, rules) != "none")


def check_async_scheduling(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """An explicit --async-scheduling with what the release cannot run with it: speculation
    beyond the methods it allows, PP (`rules.async_explicit_ok`, `msg_async_*`), a Mamba
    cache mode (0.16); from 0.33 only on the V1 model runner. Raises UsageError."""
    if not s.async_scheduling or rules.engine != "v1" or rules.msg_async_spec is None:
        return
    if rules.async_v1_runner_only and model_runner_v2(spec, s, rules):
        return
    method = s.speculative_method or "mtp"
    allowed = rules.async_explicit_ok
    spec_bad = bool(s.num_speculative_tokens) and (
        allowed is None or not _async_method_ok(method, allowed))
    if spec_bad:
        raise UsageError(rules.msg_async_spec.format(method=method), where="--async-scheduling",
                         fix="Drop --async-scheduling (vLLM then schedules synchronously)")
    if s.pipeline_parallel_size > 1 and rules.msg_async_pp:
        raise UsageError(rules.msg_async_pp, where="--async-scheduling",
                         fix="Drop --async-scheduling, or use tensor parallelism")
    if rules.async_off_mamba_pc and mamba_cache_mode(spec, s, rules) != "none":
        raise UsageError("Currently, async scheduling is not compatible with prefix caching for "
                         "Mamba models.", where="--async-scheduling",
                         fix="Drop --async-scheduling, or turn prefix caching off "
                             "(--no-enable-prefix-caching)")


def _async_spec_ok(s: Settings, rules: VllmRules) -> bool:
    return _async_method_ok(s.speculative_method or "mtp", rules.async_spec_ok)


def _async_method_ok(method: str, allowed: frozenset[str]) -> bool:
    """A speculative method async scheduling runs with: EAGLE / MTP kinds, or `allowed`
    (the release's list for the default, or for an explicit flag)."""
    return method in _EAGLE_KINDS or method.endswith("_mtp") or method in allowed


def model_runner_v2(spec: ModelSpec, s: Settings, rules: VllmRules,
                    mamba_mode: str | None = None) -> bool:
    """Whether Model Runner V2 runs the model (`mamba_mode`: `mamba_cache_mode`, when the
    caller has it)."""
    mode = rules.model_runner_v2
    if mode in ("none", "off"):
        return False
    # NOTE: speculative methods Model Runner V2 does not run fall back to the V1 runner, as
    # mamba_cache_mode "all" does
    if s.num_speculative_tokens and s.speculative_method in rules.v1_runner_spec_methods:
        return False
    if (mamba_mode or mamba_cache_mode(spec, s, rules)) == "all":
        return False
    if mode == "all":
        return True
    listed = spec.architecture in rules.v2_archs
    if mode == "archs":
        return listed and not (rules.v2_dense_unquantized_only
                               and (spec.moe is not None or spec.quant is not None
                                    or bool(s.quantization)))
    kinds = spec.attention_kinds()
    if MAMBA in kinds or not kinds - {MAMBA, NONE}:        # hybrid or attention-free: V1
        return False
    return listed or spec.moe is None


NGRAM_METHODS = frozenset({"ngram", "ngram_gpu"})


def _pinned(n_bytes: int) -> int:
    """What torch's pinned-host caching allocator takes for `n_bytes`: the next power of two
    (ATen CachingHostAllocator `PowerOf2Ceil`)."""
    return 1 << (n_bytes - 1).bit_length() if n_bytes > 0 else 0


def _uses_mrope(spec: ModelSpec) -> bool:
    return bool(spec.rope_scaling) and "mrope_section" in spec.rope_scaling


def token_buffer_bytes(spec: ModelSpec, s: Settings, rules: VllmRules, v2: bool, seqs: int,
                       max_model_len: int) -> tuple[int, int]:
    """(GPU bytes, host bytes) of the model runner's per-request token buffers, which V1
    builds after its memory snapshot, so that the profile counts what lands on the device.

    V1's runner keeps `max_num_seqs x max_model_len` token ids (and from 0.11.1 a mask) in
    host memory; Model Runner V2 keeps them pinned (UVA), and an M-RoPE model's prefill
    positions (3 per token) too, each rounded up to a power of two by torch's pinned
    allocator. On unified memory the host bytes are device memory. From 0.32, n-gram
    speculation on Model Runner V2 keeps the token ids on the GPU instead.
    """
    if rules.engine != "v1" or not rules.runner_token_host_bytes:
        return 0, 0
    cells = seqs * max_model_len
    if not v2:
        return 0, cells * rules.runner_token_host_bytes
    dense = (rules.v2_ngram_dense_tokens and s.num_speculative_tokens > 0
             and s.speculative_method in NGRAM_METHODS)
    host = _pinned(cells * 3 * 4) if _uses_mrope(spec) else 0
    return (cells * 4, host) if dense else (0, host + _pinned(cells * 4))


def token_buffer_term(spec: ModelSpec, s: Settings, rules: VllmRules, v2: bool | None,
                      gpu: GpuSpec, device: str, seqs: int,
                      max_model_len: int) -> tuple[int, str] | None:
    """(bytes, note) the token buffers add to each rank's non-torch term, or None: those on
    the GPU (n-gram on Model Runner V2, 0.32+), and the host's where unified memory makes
    them the device's."""
    # NOTE: most plans (a discrete GPU, no n-gram on 0.32+) have neither: no call
    if device != "cuda" or not (gpu.uma or (rules.v2_ngram_dense_tokens
                                            and s.num_speculative_tokens)):
        return None
    dev, host = token_buffer_bytes(spec, s, rules, bool(v2), seqs, max_model_len)
    if not gpu.uma:
        host = 0
    if not dev + host:
        return None
    where = "on the GPU" if dev else "in host memory, which is this GPU's"
    return dev + host, f" + the model runner's token buffers ({seqs} x {max_model_len}, {where})"
