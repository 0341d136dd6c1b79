"""The effective settings of one plan: every flag vLLM reads, resolved by version (defaults
of the row, the derived max_model_len, the scheduler's defaults by GPU and entry point), with
where each value came from (the Source's text). Split from `planner`, which calls
`resolve_settings` for every candidate a search screens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from . import _memo
from .all2all import all2all_backend, batched_dp_moe
from .errors import UsageError
from .gpu import GpuSpec
from .maxlen import DerivedLen, apply_user_len
from .model import FULL, MAMBA, MLA, SLIDING, ModelSpec
from .provenance import GIB, Source
from .rules import VllmRules
from .sched import V0_CHUNKED_AUTO_ABOVE, v0_scheduler_defaults
from .lora_checks import check_lora_batched_tokens
from .settings import Settings, is_pooling

__all__ = ["Eff", "SettingsBase", "settings_base", "resolve_settings", "flag_dicts",
           "graph_mode_source", "GIVEN_FLAGS", "USER", "DEFAULT", "DERIVED"]

# NOTE: the walk records where each setting came from as the Source's text (what the Plan
# carries); `Enum.value` is a descriptor call, too slow for ~20 settings per candidate.
USER, DEFAULT, DERIVED = Source.USER.value, Source.VLLM_DEFAULT.value, Source.DERIVED.value


@dataclass(slots=True)
class Eff:
    """Effective settings and where each came from (the Source's text)."""

    values: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)

    def set(self, name: str, value, source: str) -> None:
        self.values[name] = value
        self.sources[name] = source


_FLAGS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
          "decode_context_parallel_size", "dtype",
          "quantization", "kv_cache_dtype", "kv_cache_dtype_skip_layers", "enforce_eager", "cpu_offload_gb",
          "kv_cache_memory_bytes", "num_gpu_blocks_override", "enable_expert_parallel",
          "enable_lora", "num_speculative_tokens", "disable_sliding_window",
          "disable_hybrid_kv_cache_manager", "disable_custom_all_reduce", "language_model_only",
          "skip_mm_profiling", "mamba_cache_mode", "max_cudagraph_capture_size",
          "optimization_level", "compilation_mode", "cudagraph_capture_sizes", "cuda_graph_sizes",
          "performance_mode", "mamba_cache_dtype", "mamba_ssm_cache_dtype", "limit_mm_per_prompt",
          "mm_encoder_tp_mode", "enable_multimodal_encoder_data_parallel", "kv_offloading_size",
          "kv_offloading_backend", "mm_ipc_gpu_memory_gb", "all2all_backend", "lora_dtype")


_flag_values = attrgetter(*_FLAGS)
GIVEN_FLAGS = frozenset(_FLAGS)   # the flags `flag_dicts` reads
_DEFAULT_VALUES = _flag_values(_memo.DEFAULT_SETTINGS)


def _flag_sources(s: Settings) -> dict[str, str]:
    """Where each of `_FLAGS` came from (shared: copy it): the user when `user_set` names
    it (without a user_set: when its value differs from vLLM's default), else the default."""
    user = s.user_set
    if user:
        out = dict.fromkeys(_FLAGS, DEFAULT)        # NOTE: in C; then the few given ones
        for name in user & GIVEN_FLAGS:
            out[name] = USER
        return out
    return {name: USER if value != default else DEFAULT
            for name, value, default in zip(_FLAGS, _flag_values(s), _DEFAULT_VALUES)}


@dataclass(frozen=True, slots=True)
class SettingsBase:
    """What `resolve_settings` reads besides the flags a search varies (`_memo.SEARCHED`):
    the model's first sliding window, the derived max_model_len (before the user's length is
    applied) and v1's scheduler defaults (batched tokens, sequences; None on v0, where they
    follow max_model_len)."""

    window: int | None
    derived: DerivedLen
    sched: tuple[int, int] | None
    pooling: bool = False           # `settings.is_pooling` (the family's runner flags)


def settings_base(spec: ModelSpec, s: Settings, rules: VllmRules, gpu: GpuSpec,
                  device: str) -> SettingsBase:
    """The `SettingsBase` of `s` (the same for settings that differ only in the searched
    flags: the planner keeps one per family of candidates)."""
    window = _memo.sliding_window(spec)
    derived = _memo.derived_max_model_len(spec, rules, s.disable_sliding_window, window)
    sched = None
    if rules.engine != "v0":
        d_tokens, d_seqs = _memo.scheduler_defaults(rules, gpu.name, gpu.total_bytes / GIB,
                                                    entrypoint=s.entrypoint, device=device,
                                                    world_size=s.world_size)
        if batched_dp_moe(s, rules):
            d_tokens = rules.batched_dp_moe_tokens
        if s.performance_mode == "throughput" and rules.performance_mode_flag:
            d_tokens, d_seqs = 2 * d_tokens, 2 * d_seqs
        sched = (d_tokens, d_seqs)
    return SettingsBase(window, derived, sched, is_pooling(spec, s))


def flag_dicts(s: Settings) -> tuple[dict, dict]:
    """The value and source of each flag the planner takes as given (`_FLAGS`), as two dicts
    (shared: copy them before changing them). Equal for settings with the same values of
    those flags and the same `user_set`."""
    vals = _flag_values(s)
    # NOTE: the values are read afresh (the Plan echoes them: 0 and 0.0 print differently);
    # only their sources are memoized (they depend on the values' equality and user_set).
    return dict(zip(_FLAGS, vals)), _memo.flag_sources(vals, s.user_set,
                                                       lambda: _flag_sources(s), GIVEN_FLAGS)


def resolve_settings(spec: ModelSpec, s: Settings, rules: VllmRules, gpu: GpuSpec,
                     device: str, base: SettingsBase | None = None,
                     flags: tuple[dict, dict] | None = None) -> tuple[Eff, object]:
    """The effective value and source of every flag the plan echoes, and the derived
    max_model_len (`maxlen.DerivedLen`). `base`: `settings_base(spec, s, rules, gpu,
    device)`, `flags`: `flag_dicts(s)`, when the caller has them. Raises UsageError for
    vLLM's own length checks."""
    if base is None:
        base = settings_base(spec, s, rules, gpu, device)
    # NOTE: the values and sources dicts filled directly (`_Eff.set` is a method call per
    # setting, on every screened candidate); same keys in the same order. Shared dicts are
    # copied (a dict copy is cheaper than building one; a search shares them).
    if flags is None:
        values, sources = flag_dicts(s)
        sources = sources.copy()
    else:
        values, sources = flags[0].copy(), flags[1].copy()
    U, D, X = USER, DEFAULT, DERIVED
    util = s.gpu_memory_utilization
    if util is not None:
        values["gpu_memory_utilization"], sources["gpu_memory_utilization"] = util, U
    else:
        values["gpu_memory_utilization"], sources["gpu_memory_utilization"] = rules.default_util, D
    auto = s.max_model_len_auto
    user_len = None if auto else s.max_model_len
    L, derived = apply_user_len(spec, base.derived, user_len, rules)
    values["max_model_len"], sources["max_model_len"] = L, (U if user_len not in (None, -1)
                                                             and L == user_len else X)
    values["max_model_len_auto"], sources["max_model_len_auto"] = auto, U if auto else D
    chunked_flag = s.enable_chunked_prefill
    if rules.engine == "v0":
        chunked = chunked_flag
        if chunked is None:
            chunked = bool(rules.v0_chunked_prefill_auto and L > V0_CHUNKED_AUTO_ABOVE
                           and not _auto_chunk_blocked(spec, s, rules, gpu, base.pooling))
            values["enable_chunked_prefill"], sources["enable_chunked_prefill"] = chunked, D
        else:
            values["enable_chunked_prefill"], sources["enable_chunked_prefill"] = chunked, U
        d_tokens, d_seqs = v0_scheduler_defaults(rules, L, chunked, pooling=base.pooling,
                                                 multimodal=spec.vision is not None)
    else:
        chunked, src = _v1_chunked(spec, s, rules, base.pooling)
        values["enable_chunked_prefill"], sources["enable_chunked_prefill"] = chunked, src
        d_tokens, d_seqs = base.sched
        if not chunked:
            d_tokens = _v1_unchunked_tokens(rules, L, d_tokens)
    user_seqs, user_tokens = s.max_num_seqs, s.max_num_batched_tokens
    seqs = user_seqs if user_seqs is not None else d_seqs
    tokens = user_tokens if user_tokens is not None else d_tokens
    if rules.sched_clamp_by_len and user_tokens is None:
        tokens = min(seqs * L, tokens)
    if (rules.sched_clamp_by_len or rules.sched_clamp_seqs) and user_seqs is None:
        seqs = min(seqs, tokens)
    values["max_num_seqs"], sources["max_num_seqs"] = seqs, U if user_seqs is not None else D
    values["max_num_batched_tokens"] = tokens
    sources["max_num_batched_tokens"] = U if user_tokens is not None else D
    if tokens < seqs:
        # NOTE: SchedulerConfig's check on the values it ends with (defaults included)
        raise UsageError(f"max_num_batched_tokens ({tokens}) must be greater than or equal to "
                         f"max_num_seqs ({seqs}).", where="--max-num-batched-tokens",
                         fix=f"Pass --max-num-seqs {tokens} or less, or --max-num-batched-tokens "
                             f"{seqs} or more")
    if rules.engine == "v0" and not chunked and tokens < L:
        raise UsageError(f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({L}). "
                         "This effectively limits the maximum sequence length to "
                         "max_num_batched_tokens and makes vLLM reject longer sequences. Please "
                         "increase max_num_batched_tokens or decrease max_model_len.",
                         where="--max-num-batched-tokens")
    if s.enable_lora and rules.lora_max_batched_tokens is not None:
        check_lora_batched_tokens(s, rules, tokens)
    if values["lora_dtype"] is None:
        values["lora_dtype"] = "auto"               # NOTE: LoRAConfig's default (the model's)
    if rules.all2all_default is not None:
        # NOTE: the release's backend: the flag, VLLM_ALL2ALL_BACKEND (derived) or the default
        backend = all2all_backend(s, rules)
        if backend != s.all2all_backend:
            values["all2all_backend"] = backend
            sources["all2all_backend"] = X if backend == rules.all2all_env_value else D
    return Eff(values, sources), derived


def _auto_chunk_blocked(spec: ModelSpec, s: Settings, rules: VllmRules, gpu: GpuSpec,
                        pooling: bool) -> bool:
    """What stops v0 from turning chunked prefill on for a long context in this release
    (`rules.v0_auto_chunk_blockers`; engine/arg_utils.py)."""
    b = rules.v0_auto_chunk_blockers
    if not b:
        return False
    kinds = spec.attention_kinds()
    # NOTE: vLLM's get_sliding_window(): a model whose every layer slides (interleaved
    # windows are turned off or moved aside by its ModelConfig)
    return bool(
        ("sliding" in b and SLIDING in kinds and FULL not in kinds
         and not s.disable_sliding_window)
        or ("lora" in b and s.enable_lora)
        or ("spec" in b and (s.num_speculative_tokens or s.speculative_model))
        or ("prefix_caching" in b and s.enable_prefix_caching)
        or ("mamba" in b and MAMBA in kinds)
        or ("multimodal" in b and spec.vision is not None)
        or ("pooling" in b and pooling)
        or ("rocm" in b and gpu.vendor == "amd")
        or ("mla" in b and MLA in kinds and rules.mla_supported))


def _v1_chunked(spec: ModelSpec, s: Settings, rules: VllmRules,
                pooling: bool) -> tuple[bool, str]:
    """v1's chunked prefill and its source: forced on (0.7-0.11.0, pooling models aside from
    0.9.2), else the flag, else on; pooling models off from 0.9.2, except causal decoders
    from 0.10.1 (their default LAST pooling supports chunked prefill)."""
    flag = s.enable_chunked_prefill
    forced = rules.v1_forced_chunked
    if forced == "all" or (forced == "non_pooling" and not pooling):
        return True, (DEFAULT if flag is None else USER if flag else DERIVED)
    if flag is not None:
        return flag, USER
    return not pooling or (not spec.is_encoder_only and rules.pooling_decoder_chunked), DEFAULT


def _v1_unchunked_tokens(rules: VllmRules, max_model_len: int, default: int) -> int:
    """v1's batched tokens without chunked prefill (`rules.v1_unchunked_tokens`)."""
    mode = rules.v1_unchunked_tokens
    if mode == "l":
        return max_model_len
    if mode == "max_l_2048":
        return max(max_model_len, 2048)
    return max(max_model_len, default)


def graph_mode_source(s: Settings, graph_mode: str) -> str:
    """Where the CUDA-graph mode `graph_mode` of settings `s` came from (the plan's source)."""
    if s.cudagraph_mode is not None and s.cudagraph_mode == graph_mode:
        return USER
    if (s.enforce_eager or s.cudagraph_mode is not None or s.optimization_level is not None
            or s.compilation_mode is not None):
        return DERIVED
    return DEFAULT
