"""Settings: the vLLM flags that matter for memory, with vLLM's own names.

`None` means "not given: the version's default applies". The planner resolves defaults
through the version rules and reports every effective value (and its source) in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from operator import attrgetter

from ._frozen import HASH_KEY as _HASH_KEY


@dataclass(frozen=True)
class Settings:
    """One vLLM launch configuration. Field names are vLLM's flag names with `_`."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    all2all_backend: str | None = None        # --all2all-backend (0.11.1+)
    decode_context_parallel_size: int = 1     # -dcp (0.11+): KV tokens sharded over TP ranks
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None          # None: derived from the model config
    max_model_len_auto: bool = False          # `--max-model-len auto` / -1 (0.14+)
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    dtype: str = "auto"
    quantization: str | None = None
    allow_deprecated_quantization: bool = False   # 0.14+: load a deprecated method anyway
    kv_cache_dtype: str = "auto"
    # --kv-cache-dtype-skip-layers (0.20+): layer indices ("0", "31") or "sliding_window"
    kv_cache_dtype_skip_layers: tuple[str, ...] | None = None
    block_size: int | None = None
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    cpu_offload_gb: float = 0.0
    kv_offloading_size: float | None = None   # GiB of host memory for KV offloading (0.11+)
    kv_offloading_backend: str | None = None  # "native" (default) | "lmcache"
    swap_space: float | None = None
    enable_chunked_prefill: bool | None = None
    enable_expert_parallel: bool = False
    disable_custom_all_reduce: bool = False
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None      # None: the version's default (on from 0.14)
    mamba_cache_mode: str | None = None       # "none" | "align" | "all" (0.15+); None: derived
    mamba_cache_dtype: str | None = None      # conv (and SSM) state dtype (0.10.1+); None: auto
    mamba_ssm_cache_dtype: str | None = None  # SSM state dtype (0.10.1+); None: auto
    max_cudagraph_capture_size: int | None = None   # the largest captured batch (0.11.1+)
    # CUDA graphs and compilation (`-O N`, `--optimization-level`, `--compilation-config` /
    # `-cc` keys; V1, core/stage_terms.py `cudagraph_mode` reads them by release):
    optimization_level: int | None = None     # `-O N`: before 0.12 the compilation level
    compilation_mode: int | None = None       # the compilation config's "level" / "mode"
    cudagraph_mode: str | None = None         # NONE | PIECEWISE | FULL | FULL_DECODE_ONLY | ...
    cudagraph_capture_sizes: tuple[int, ...] | None = None   # the batch sizes to capture
    cuda_graph_sizes: tuple[int, ...] | None = None   # --cuda-graph-sizes (0.9-0.12)
    performance_mode: str | None = None       # balanced | interactivity | throughput (0.17+)
    enable_lora: bool = False
    max_loras: int | None = None
    max_lora_rank: int | None = None
    max_cpu_loras: int | None = None          # vLLM checks it is >= max_loras
    lora_dtype: str | None = None             # --lora-dtype (None / auto: the model dtype)
    lora_extra_vocab_size: int | None = None  # up to 0.11.2 (default 256)
    fully_sharded_loras: bool = False         # LoRA A / B split over TP too
    specialize_active_lora: bool = False      # 0.16+: graphs per active-adapter count
    enable_eplb: bool = False                 # expert-parallel load balancing (0.9.2+)
    num_redundant_experts: int = 0            # EPLB's extra physical experts (all ranks)
    disable_sliding_window: bool = False
    disable_hybrid_kv_cache_manager: bool = False
    num_speculative_tokens: int = 0
    speculative_method: str | None = None     # --speculative-config "method" (mtp, ngram, ...)
    speculative_model: str | None = None      # --speculative-config "model": a separate drafter
    language_model_only: bool = False         # no multimodal encoder loaded or profiled
    # how vLLM runs the model: --runner (0.10.1+: generate | pooling | auto), --convert
    # (0.10.1+: embed | classify | reward | none | auto), --task (0.6.4-0.12.0: embed,
    # embedding, classify, score, reward, generate, ...); `is_pooling` reads them
    runner: str | None = None
    convert: str | None = None
    task: str | None = None
    # --limit-mm-per-prompt: items per prompt by modality, sorted (("image", 0), ("video", 0))
    limit_mm_per_prompt: tuple[tuple[str, int], ...] | None = None
    mm_encoder_tp_mode: str | None = None     # "weights" (shard the encoder) | "data" (0.10.2+)
    # 0.9.1-0.12.0: the switch that means --mm-encoder-tp-mode data (its own flag in vLLM)
    enable_multimodal_encoder_data_parallel: bool = False
    skip_mm_profiling: bool = False           # encoder not in the profile run's peak
    mm_ipc_gpu_memory_gb: float = 0.0         # GiB taken from the KV budget for the frontend's
                                              # GPU multimodal decoding (0.25+)
    # The model-config flags as given, (flag, JSON of what it sets): --hf-overrides,
    # --rope-scaling, --rope-theta. Their effect is in the ModelSpec (sources/resolve.py);
    # here for the release's own flag check and for writing the command back.
    config_overrides: tuple[tuple[str, str], ...] = ()
    # The flags whose spelling depends on the release, as given, (flag, value text), in order
    # (speculative decoding's, --device-memory-utilization; rules_changes.SPELLING_RELEASES):
    # their effect is in the fields they set; here for the release's own flag check.
    flag_spellings: tuple[tuple[str, str], ...] = ()
    entrypoint: str = "serve"                 # "serve" (vllm serve / api_server) or "llm" (LLM class)
    model: str | None = None                  # the model argument as given, if any
    user_set: frozenset[str] = field(default_factory=frozenset)   # flags the user gave

    def __hash__(self) -> int:
        # NOTE: a search hashes each candidate several times (its plan cache, the memo keys);
        # 57 fields are hashed once and the value kept (`_frozen.replace` drops it).
        d = self.__dict__
        h = d.get(_HASH_KEY)
        if h is None:
            h = d[_HASH_KEY] = hash(_field_values(self))
        return h

    @property
    def world_size(self) -> int:
        """GPUs per engine instance: TP x PP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def with_(self, **changes) -> "Settings":
        """A copy with `changes` applied and recorded as user-set."""
        return replace(self, user_set=self.user_set | frozenset(changes), **changes)


_field_values = attrgetter(*(f.name for f in fields(Settings)))


# architecture suffixes vLLM serves as pooling models by default (config.py
# `_SUFFIX_TO_DEFAULTS` 0.10.1+; `_get_preferred_task` 0.6.5-0.9.x)
POOLING_SUFFIXES = ("ForSequenceClassification", "ForRewardModel", "ForRewardModeling",
                    "EmbeddingModel", "ForTextEncoding", "ClassificationModel", "RewardModel")
_POOLING_TASKS = frozenset({"embed", "embedding", "classify", "score", "reward"})


def is_pooling(spec, settings: Settings) -> bool:
    """Whether vLLM runs the model as a pooling model (embed / classify / score / reward):
    an encoder-only model, `--runner pooling`, a pooling `--convert` or `--task`, or an
    architecture vLLM pools by default (`POOLING_SUFFIXES`) unless `--runner generate`.
    Pooling models run no sampler; a causal decoder keeps its KV cache."""
    runner = settings.runner
    if runner is None and settings.convert is None and settings.task is None:
        return spec.is_encoder_only or spec.architecture.endswith(POOLING_SUFFIXES)
    if spec.is_encoder_only or runner == "pooling":
        return True
    if runner == "generate":
        return False
    if (settings.convert or "none") not in ("none", "auto") or settings.task in _POOLING_TASKS:
        return True
    return spec.architecture.endswith(POOLING_SUFFIXES)


def uses_mtp(settings: Settings) -> bool:
    """Whether the speculative method drafts with the model's own MTP layers: "mtp" and the
    `*_mtp` names (config/speculative.py maps them to mtp), or no method named (the flags
    that name none); n-gram, suffix, EAGLE and draft LMs load no MTP layer."""
    m = (settings.speculative_method or "").lower()
    return not m or m == "mtp" or m.endswith("_mtp")
