"""The vLLM version table: every behaviour that changes between releases, as data.

`VERSION_TABLE` holds one frozen `VllmRules` row per (version range, engine). It is built
from `_CHANGES` (the data, in core/rules_changes.py), a chronological list of "from version
X on, for engine E, these fields change" entries (each with the reference section that says
so), so that a reader can see what changed when. Code elsewhere reads fields of the
resolved row; it never compares version numbers itself.

References (§n) are to docs of vLLM memory semantics (shared reference, sections 1-11).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, fields, replace

from .errors import UsageError
from .rules_changes import CHANGES

NEWEST_VERSION = "0.33.0"
OLDEST_VERSION = "0.4.0"


@dataclass(frozen=True)
class VllmRules:
    """One row of the version table. `since` is inclusive, `until` exclusive (None: open)."""

    since: tuple[int, int, int]
    until: tuple[int, int, int] | None
    engine: str                              # "v0" | "v1"
    # ---- engine selection (§1a) ----
    default_engine: str = "v0"               # the engine this release picks by default
    v1_falls_back_below_cc80: bool = False   # 0.8-0.10: v1 falls back to v0 on CC < 8.0
    # 0.8.0-0.10.1: models with Mamba/linear-attention layers fall back to v0 unless
    # VLLM_USE_V1=1 (engine/arg_utils.py _is_v1_supported_oracle; v1 by default from 0.10.2)
    v1_falls_back_for_mamba: bool = False
    v1_falls_back_for_pooling: bool = False  # 0.8.0-0.9.1: embedding models run on V0
    # 0.10.1+: a causal decoder served as a pooling model keeps chunked prefill on by default
    # (its default LAST pooling supports it; 0.9.2-0.10.0 only with a sentence-transformers
    # LAST pooling config, which the plan does not read)
    pooling_decoder_chunked: bool = False
    # 0.8.0-0.8.2: --enable-lora falls back to V0 unless VLLM_USE_V1=1 ("LORA is experimental
    # on VLLM_USE_V1=1. Falling back to V0 Engine.", engine/arg_utils.py)
    v1_falls_back_for_lora: bool = False
    # the speculative methods V1 runs (None: no fallback); others fall back to V0
    # (`draft.falls_back_to_v0`, 0.7.0-0.9.2)
    v1_spec_methods: frozenset | None = None
    # 0.16+: the MTP drafter's own LM head (shared_head.head) is freed for the target's
    mtp_head_shared: bool = False
    # a speculative config with tokens but no method and no model (SpeculativeConfig): the
    # model types that draft with their own MTP layers then (0.8.2-0.10.2; None: the release
    # refuses it for every model, 0.11+ "provided but without", or does not check, < 0.8.2)
    spec_self_mtp_types: frozenset | None = None
    msg_spec_no_model: str | None = None     # "without" (0.8.2-0.10.2) | "but" (0.11+)
    # EAGLE-3's target models (config/speculative.py: a substring of the target's model_type;
    # None: any, 0.22+) and the refusal's wording: "llama" (0.8.5-0.10.0), "list" (0.10.1-
    # 0.16), "method" (0.17-0.21, which also covers extract_hidden_states)
    eagle3_targets: tuple[str, ...] | None = None
    msg_eagle3: str = "list"
    # speculative decoding refused at startup ("... is not supported yet", model runner /
    # MambaBase.get_kv_cache_spec): on V1 with Mamba layers, "mamba2" (0.9.2: MambaMixer2
    # layers), "any" (0.10.0-0.10.1), "not_qwen3_next" (0.10.2-0.16), None; on V0 (0.10+:
    # platforms/cuda.py "Speculative decoding is not supported on vLLM V0.")
    mamba_spec_refused: str | None = None
    # prefix caching (on by default in V1) refused on Mamba layers: "Prefix caching is not
    # supported for Mamba yet." ("mamba2" 0.9.2, "any" 0.10.0-0.10.1; 0.10.2 turns it off)
    mamba_pc_refused: str | None = None
    v0_spec_refused: bool = False
    # A separate draft LM (`--speculative-config` "model", method draft_model): "v0_in_budget"
    # (v0 up to 0.6: its weights deducted with the target's), "v0_outside" (v0 0.7-0.9.2:
    # loaded before profiling, not deducted), "v1_fallback" (v1 up to 0.9.2: the engine falls
    # back to v0 unless the method is one v1 runs), "none_0100" / "none" (0.10-0.14: vLLM
    # refuses it), "explicit" (0.15-0.16: only with "method": "draft_model"), "inferred" (0.17+)
    draft_model: str = "v0_in_budget"
    # --limit-mm-per-prompt with every modality of the encoder at 0: the tower is not profiled
    # in any release; it is not loaded either for these model types ("*": every model, 0.15+
    # `SupportsMultiModal._mark_tower_model`; 0.10.1-0.14 the models that check the limit)
    mm_zero_skips_tower: frozenset[str] = frozenset()
    # --kv-offloading-size with the native backend: its host buffer is one mmap file in
    # /dev/shm from 0.20 (v1/kv_offload/cpu/shared_offload_region.py); pinned tensors before
    kv_offload_in_shm: bool = False
    # --decode-context-parallel-size (DCP, V1 0.11+): each token's KV on one rank of the DCP
    # group (the TP ranks), so a request needs cdiv(L, block x dcp) blocks per GPU. None: no
    # flag; "mla": MLA models only (0.11.0-0.11.1); "gqa": GQA/MQA too, with tp > KV heads
    # (0.11.2+). `dcp_messages`: "v011" (asserts, "divisible bydcp_size"), "v026" (the tp check
    # fixed), "v027" (the GQA checks as ValueErrors); `dcp_hybrid`: hybrid models (0.26+);
    # `dcp_log`: the "Multiplying the GPU KV cache size" line ("dcp" 0.11, "cp" 0.12-0.20)
    dcp: str | None = None
    dcp_messages: str = "v011"
    dcp_hybrid: bool = False
    dcp_log: str | None = None
    # v0: request slots of the Mamba state (models/mamba_cache.py), allocated in the profile
    # run's first forward: "round" (max_num_seqs rounded up to a CUDA-graph batch size, up to
    # 0.6.4), "eager_8194" (0.6.5-0.7.2: 8,194 slots with --enforce-eager, else rounded),
    # "capture" (0.7.3+: max_num_seqs with --enforce-eager, else rounded)
    v0_mamba_slots: str = "round"
    # ---- the budget (§1a) ----
    whole_gpu: bool = False                  # other processes' memory charged to K
    request_ceil: bool = False               # R = ceil(u*T) (0.14+) instead of u*T
    free_memory_check: bool = False          # F_s >= R at startup (v1 0.9.1+)
    snapshot_after_nccl: bool = False        # NCCL init lowers F_s, never N (0.11+)
    cublas_before_snapshot: bool = False     # 0.33: cuBLAS handles lower F_s
    graph_budget: str = "headroom"           # "headroom" | "estimated" (0.18-0.19, e=0) | "subtracted"
    consumed_model: bool = False             # 0.27+: K = ceil(uT) - (C + H) - G
    # 0.11.1+: on integrated GPUs (Jetson Orin 8.7, Thor 11.0, GB10 12.1; from 0.20
    # `is_integrated_gpu`) free memory is the host's available RAM (utils/mem_utils.py)
    uma_free_is_host_ram: bool = False
    # host bytes per (request x position) of the V1 model runner's token buffers, allocated
    # after the snapshot (gpu_input_batch.py: int32 token ids, from 0.11.1 also a bool
    # is-token-id mask); Model Runner V2's are pinned int32 (gpu/states.py). On unified
    # memory they are device memory and grow vLLM's non-torch figure.
    runner_token_host_bytes: int = 0
    # 0.32+: Model Runner V2 keeps every request's token ids on the GPU for n-gram
    # speculation (gpu/states.py `use_dense_all_token_ids`)
    v2_ngram_dense_tokens: bool = False
    profile_assert_ge: bool = False          # 0.16+: F_s >= free_after_profile
    # online FP8 (--quantization fp8 on a 16-bit checkpoint) while loading: "whole" (up to
    # 0.15: every layer's weights allocated in 16-bit at init), "layer" (0.16-0.18: each
    # layer materialized in 16-bit just in time), None (0.19+) (quantization/fp8.py)
    online_fp8_bf16_load_peak: str | None = "whole"
    # fp32 logit copies (reqs × vocab) the profile run's dummy sampler holds at its peak:
    # v0 samples with top_k = vocab − 1 (sort path); v1 ~2 copies, ~8 in 0.11-0.16 (fitted,
    # docs/accuracy.md; the same counts read from the code: the sort path's values, int64
    # indices and reverse indices plus the radix sort's buffers are 8 copies beyond the
    # logits; from 0.17 an in-place Triton top-k/top-p with a (SMs × vocab) buffer, 2 + SMs /
    # requests)
    profile_sampler_copies: float = 7.5
    # V1 0.7.x: no dummy sampler and no sampler warm-up; the profile run computes the logits
    # in the model dtype for every batched token ("tokens", 0.7.0-0.7.2) or one per dummy
    # request, max_num_seqs ("seqs", 0.7.3) (v1/worker/gpu_model_runner.py profile_run)
    v1_profile_logits: str | None = None
    default_util: float = 0.90
    # ---- scheduler defaults (§9) ----
    sched_defaults: str = "v0"               # key of SCHED_DEFAULTS: v0|v1_080|v1_081|...
    v0_chunked_prefill_auto: bool = False    # v0 0.5.3+: chunked prefill for L > 32768 ...
    # ... unless one of these holds (`effective._auto_chunk_blocked`): "sliding" (a sliding
    # window on every layer), "lora", "spec" (speculative decoding), "prefix_caching"
    # (0.5.3-0.6.0), "mamba" (0.5.4-0.6.2), "multimodal" (0.6.1.post1+), "pooling"
    # (0.6.5-0.10.1), "rocm" (0.6.5+), "mla" (0.8+) (engine/arg_utils.py)
    v0_auto_chunk_blockers: frozenset = frozenset()
    # v0's batched tokens with chunked prefill: None = max(L, 2048) as without it (0.4.0),
    # 768 (0.4.1), 512 (0.4.2-0.6.4), 2048 (0.6.5+) (config.py SchedulerConfig)
    v0_chunked_tokens: int | None = None
    v0_pooling_min_tokens: int = 0           # 0.4.3+: embedding models at least 32768
    v0_mm_min_tokens: int = 0                # 0.6.0+: multimodal at least 4096 (5120 from 0.6.3)
    # v1 turns chunked prefill on whatever the flag says: "all" (0.7-0.9.1), "non_pooling"
    # (0.9.2-0.11.0: pooling models default to off), None (0.11.1+: the flag is honoured;
    # off by default for pooling models)
    v1_forced_chunked: str | None = None
    # v1 batched tokens without chunked prefill: "max_l_2048" (up to 0.10.0), "l" (0.10.1-0.11.0),
    # "max_l_default" (0.11.1+: max(L, the default))
    v1_unchunked_tokens: str = "max_l_2048"
    sched_clamp_seqs: bool = False           # 0.10.1+: default seqs <= batched tokens
    sched_clamp_by_len: bool = False         # 0.11.1+: tokens <= seqs*L, seqs <= tokens
    # ---- blocks, groups, capacity (§4, §5, §6) ----
    cpu_block_size: int = 16                 # 128 from 0.12
    # --block-size: argparse choices (None from 0.18: any int), the program name argparse
    # prints, whether a value <= 0 is a pydantic error (0.23+), and what v1's CUDA attention
    # backends do with a size that is not a multiple of 16 (non-MLA, non-hybrid models):
    # "fa" (0.7-0.11 "Block size must be a multiple of 16."), "no_common" (0.13-0.17), "none"
    # (0.21+ no valid attention backend), None (accepted: FlexAttention in 0.12 and 0.19-0.20;
    # 0.18 and v0 not checked / XFormers)
    block_size_choices: tuple[int, ...] | None = (8, 16, 32, 128)
    block_size_prog: str = "api_server.py"
    block_size_positive: bool = False
    block_size_16: str | None = None
    mla_supported: bool = False              # MLA latent cache (v0 0.7.1+, v1 0.8+)
    mla_full_head_pad: bool = True           # without MLA: heads padded to 256 (up to 0.6)
    # v0 0.7.1-0.7.3: the MLA backend keeps absorbed W_Q_UK / W_UV_O and W_QR next to the
    # weights, inside the weights measurement (`weights.mla_backend_bytes`)
    v0_mla_absorbed: bool = False
    # chunked-local attention (Llama 4) in v1: its own spec from 0.10.0 (full attention
    # before); 0.10.1-0.13 turn the hybrid KV cache manager off for such models unless
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (`apply_env`), so full again
    chunked_local_spec: bool = False
    # the recurrent states whose conv state keeps k - 1 + num_speculative_tokens columns:
    # GDN from 0.10.2, Mamba2 from 0.17, short_conv from 0.29 (mamba_utils.py `num_spec`)
    conv_spec_kinds: frozenset = frozenset()
    capture_scales_with_spec: bool = False   # 0.13+: capture sizes x (1 + speculative tokens)
    lora_moe: bool = False                   # 0.11.1+: LoRA slots on every routed expert
    # LoRA on the embedding and LM head (`weights.lora_vocab_elems`): the extra vocabulary
    # (--lora-extra-vocab-size, 256 up to 0.11.2), a tied head wrapped twice (0.11.1+), and
    # the model classes with `embedding_modules` (Llama, Mixtral, Granite; Mistral through
    # Llama's class until 0.15; Qwen3 / Qwen3-MoE from 0.16)
    lora_extra_vocab: int = 256
    # LoRAConfig's checks: the ranks it takes (a ValueError up to 0.11.0, argparse's choices
    # from 0.11.1), the extra-vocabulary sizes (up to 0.11.2), the batched-token cap of the
    # custom LoRA kernel (0.4.0-0.5.4), no chunked prefill (0.5.1-0.6.4), no CPU offload
    # ("any" engine 0.7.0-0.8.2, "v0" 0.8.3+), the cpu-loras message's closing "." (0.14+)
    lora_ranks: tuple[int, ...] = (8, 16, 32, 64)
    # v0 0.7.0-0.7.3: the LoRA slots are created after the weights measurement and before the
    # profile's baseline (worker/model_runner.py load_model): outside the budget
    lora_outside_budget: bool = False
    lora_rank_argparse: bool = False
    lora_extra_vocab_choices: tuple[int, ...] = (0, 256, 512)
    lora_dtypes: tuple[str, ...] = ("auto", "float16", "bfloat16", "float32")   # --lora-dtype
    lora_max_batched_tokens: int | None = 65528
    lora_no_chunked: bool = False
    lora_no_cpu_offload: str | None = None
    msg_cpu_loras_dot: bool = False
    lora_tied_double: bool = False
    lora_embedding_archs: frozenset = frozenset({
        "LlamaForCausalLM", "MixtralForCausalLM", "GraniteForCausalLM", "MistralForCausalLM"})
    v2_kernel_warmup: bool = False           # 0.17+: Model Runner V2's warmup_kernels
    # 0.6.6-0.28: a block-FP8 MoE's per-rank expert size must be a multiple of the blocks
    # (quantization/fp8.py; 0.29 refines the block shape instead)
    fp8_moe_block_check: bool = False
    chunked_disables_hybrid: bool = False
    # MLA block size where no field below applies: v0, Ampere and older (Triton MLA), AMD,
    # unknown compute capability
    mla_block_size: int = 16
    # dense MLA per GPU family, from the attention backend vLLM picks (platforms/cuda.py; None:
    # mla_block_size): Hopper (FlashMLA forces 64, v0 and v1 from 0.8; from 0.18
    # FLASH_ATTN_MLA takes 16, and an fp8 KV cache, which it does not take, FlashMLA's 64),
    # Blackwell (CUTLASS_MLA forces 128 from 0.10.1, on compute capability 10.0 only until
    # 0.12; FLASHINFER_MLA for the qk_nope_head_dim sizes its kernel takes: 64 in 0.15-0.17,
    # 32 from 0.18); sparse (DSA indexer) MLA 64 from 0.11
    mla_block_hopper: int | None = None
    mla_block_hopper_fp8: int | None = None
    mla_block_blackwell: int | None = None
    mla_blackwell_cc100_only: bool = False
    # a user's --block-size on an MLA model: "replace" (0.8-0.11.1: the forcing backend's size
    # replaces it), "modulo" (0.11.2-0.17: unless a multiple of it; FlashInfer-MLA also keeps
    # 32), None (0.18+: kept) (platforms/cuda.py check_and_update_config)
    mla_user_block: str | None = None
    # the attention block alignment when a hybrid's pages are unified (models/config.py):
    # MLA 128 (before 0.11.1), 64 (0.11.1-0.19); head size 256 on Blackwell 32 ("cc100":
    # 10.0 only, 0.11.1-0.12; "family": 0.13-0.17), else 16; from 0.20 the backend's
    # smallest kernel block or the block size if larger (`hybrid_align_from_block`)
    mla_hybrid_align: int = 128
    hybrid_align_256_blackwell: str | None = None
    hybrid_align_from_block: bool = False
    mla_flashinfer_nope: tuple[int, ...] = ()
    mla_block_flashinfer: int | None = None
    mla_block_sparse: int | None = None
    # v0 0.7.2-0.7.3 on CUDA (worker/cache_engine.py, VLLM_CUDA_MEM_ALIGN_KV_CACHE, default on):
    # each MLA cache entry is rounded up to this many bytes of the model dtype (576 -> 640
    # elements in bf16), in the block size and in the allocation; 0 = not padded
    v0_mla_align_bytes: int = 0
    hybrid_page_unification: bool = False    # v1 0.10+: mamba page unification (§4.2)
    hybrid_kv_manager: bool = False          # v1: SW/chunked layers grouped, window-capped
    # "none" | "batched" (0.8.3-0.25) | "batched_x_batches" (0.26+)
    sliding_inflight: str = "none"
    # 0.14+: async scheduling on unless the user or the model rules it out (pooling models);
    # with it two batches are in flight at PP = 1 (config/vllm.py max_concurrent_batches)
    async_scheduling_default: bool = False
    # ... what else turns the default off (`stage_terms.async_scheduling`): speculative methods
    # beyond EAGLE / MTP kinds that keep it (ngram_gpu 0.18+, dspark 0.26+, draft_model and
    # dflash 0.32+), PP > 1 (0.14-0.15, and 0.32+ on the V1 runner only), a
    # Mamba cache mode (0.16), and from 0.33 only on the V1 model runner
    async_spec_ok: frozenset = frozenset()
    async_off_pp: str | None = None          # "any" (0.14-0.15) | "v1_runner" (0.32+)
    async_off_mamba_pc: bool = False
    async_v1_runner_only: bool = False
    # --async-scheduling given with speculation or PP: the speculative methods allowed beyond
    # EAGLE / MTP kinds (None: none at all, 0.10-0.11.0), the refusal's words, the PP refusal
    # (None: PP allowed), by release (engine/arg_utils.py 0.10-0.11.0, config/vllm.py after)
    async_explicit_ok: frozenset | None = None
    msg_async_spec: str | None = None
    msg_async_pp: str | None = None
    # 0.28+: prefix caching on by default for hybrid models, which sets mamba_cache_mode
    # "align": a request holds 2 + k blocks per Mamba group instead of 1 + k
    # (engine/arg_utils.py, models/config.py, MambaSpec.max_memory_usage_bytes)
    hybrid_prefix_caching_default: bool = False
    # 0.15+: prefix caching on a Mamba/linear-attention model picks a mamba_cache_mode by model
    # ("align" unless the model caches Mamba state per block, "all"; stage_terms)
    mamba_cache_modes: bool = False
    # 0.11.1-0.14: an explicit --enable-prefix-caching keeps a Mamba state per chunk-aligned
    # block for the models with Mamba prefix caching (MambaModelConfig; no mode name yet)
    mamba_pc_per_block: bool = False
    # 0.15-0.32: models that cache Mamba state per block (SupportsMambaPrefixCaching: mamba,
    # mamba2, jamba, zamba2, nemotron_h, granitemoehybrid, falcon_h1) get mode "all"; 0.33
    # defaults every model to "align" (MambaModelConfig)
    mamba_all_mode: bool = False
    # --mamba-cache-mode (0.15+): the values argparse accepts ("all" dropped in 0.32)
    mamba_mode_choices: tuple[str, ...] = ()
    # the mamba_cache_modes in which speculative tokens add Mamba blocks to a request
    # (MambaSpec.max_memory_usage_bytes: none of them 0.10.2-0.14, "none"/"align" 0.15-0.21,
    # "all" too from 0.22)
    mamba_spec_block_modes: frozenset[str] = frozenset()
    # MambaModelConfig's asserts in "align" mode: chunked prefill required ("align" text
    # 0.15-0.32, "prefix" text 0.33), and no speculative decoding (0.15-0.16)
    msg_mamba_chunked: str | None = None
    # 0.20-0.21: prefix caching with speculative decoding defaults models with per-block
    # Mamba state to "align", not "all" (MambaModelConfig)
    mamba_spec_prefers_align: bool = False
    mamba_align_refuses_spec: bool = False
    # state kinds that hold one more block in "align" mode for a prefill checkpoint
    # (num_prefill_checkpoint_blocks: Mamba2 0.32+; Gated DeltaNet 0.33+ where FlashInfer's
    # GDN prefill runs, which also aligns the block to 64 tokens, `kv_mamba.GDN_CHECKPOINT_ALIGN`)
    mamba_ckpt_kinds: frozenset[str] = frozenset()
    # --mamba-cache-dtype / --mamba-ssm-cache-dtype (0.10.1+): the values accepted (config/
    # cache.py MambaDType); Gated DeltaNet reads the SSM one from 0.17 (before: the conv
    # dtype); NemotronH's config hook defaults the SSM state (0.13-0.19 float16, 0.20+ float32)
    mamba_dtype_choices: tuple[str, ...] = ()
    gdn_ssm_flag: bool = False
    nemotron_ssm_default: str | None = None
    null_block_in_check: bool = False        # 0.29+: avail = K - P
    override_before_check: bool = False      # 0.20.1+: num_gpu_blocks_override applied first
    tokens_formula: str = "none"             # "none" | "blocks_x_b" | "conc_x_len" (0.20.1+)
    # v0's "max seq len ... stored in KV cache" check: the blocks per PP virtual engine (0.8+);
    # before, all the blocks (worker.py raise_if_cache_size_invalid)
    v0_fit_divides_pp: bool = False
    override_log_forced: bool = False        # 0.4.0: "Replacing profiled ... forced_num_gpu_blocks"
    # the --kv-cache-memory-bytes line's numbers: "v0_0102" | "v1_0102" (0.10.2-0.11.0) |
    # "v1_0111" (0.11.1-0.13; from 0.14 `format_gib`, `gib_two_decimals` off)
    kv_memory_log: str = "v0_0102"
    # hybrid / mixed-attention grouping: the group size is the largest layer count when it is
    # below this many times the smallest, else the smallest (kv_cache_utils.py: v1 up to 0.11
    # always the smallest, 0.12-0.17 1.25, 0.18+ 1.5)
    kv_group_max_ratio: float = 1.25
    concurrency_formula: str = "blocks_b_over_len"   # | "blocks_over_per_request" (0.9.1+)
    estimate_max_len: str = "none"           # "none" | "lost" (0.8.4-0.9.0) | "yes"
    # what v1's fit check sums (`kv.KvLayout.check_bytes`): "layers" (0.7-0.13: each layer's
    # own spec), "first_group" (0.14-0.18: group 0's blocks), "groups" (0.19+: every group)
    kv_fit_check: str = "groups"
    # 0.14-0.16 with PP: the check (and auto-fit) reads the whole model's groups against the
    # smallest worker's memory (kv_cache_utils.py `get_kv_cache_configs`); 0.17+ projects
    # the groups to each worker's layers
    kv_fit_whole_model: bool = False
    group_aware_check: bool = False          # 0.14+
    auto_fit: bool = False                   # --max-model-len auto (0.14+)
    mamba_blocks_check: bool = False         # 0.20+: max_num_seqs <= mamba blocks
    # gpt-oss's own largest capture size whatever max_num_seqs is (models/config.py
    # GptOssForCausalLMConfig): 1024 (0.10.1-0.10.2, 0.11.1+), 992 (0.11.0); 0: none
    gpt_oss_capture_max: int = 0
    # the default largest capture size, min(2 x max_num_seqs x query length, this), on
    # data-centre Blackwell (compute capability 10.x; 512 elsewhere): 1024 from 0.28
    # (config/vllm.py `_set_cudagraph_sizes`)
    graph_cap_sm10x: int = 512
    # 0.29+: the default list also holds the uniform decode widths, n x query length (and
    # max_num_seqs with one token per request) (config/vllm.py `request_counts`)
    capture_decode_widths: bool = False
    # 0.20.1+: a default list capped by max_num_batched_tokens also captures that size itself
    # when it is off the grid ("ensure max_num_tokens is captured", config/vllm.py)
    capture_tokens_appended: bool = False
    # --max-cudagraph-capture-size and --cudagraph-capture-sizes (V1 0.11.1+; a user's list
    # then keeps the sizes <= max_num_batched_tokens)
    capture_max_flag: bool = False
    # --cuda-graph-sizes (SchedulerConfig): "max" (0.9.0-0.11.0: one value is the largest of
    # the default sizes, several are the list), "list" (0.11.1-0.12: an alias of
    # --cudagraph-capture-sizes), None (not a flag: before 0.9 and from 0.13)
    cuda_graph_sizes_flag: str | None = None
    # What turns V1's CUDA graphs off besides --enforce-eager (config/vllm.py,
    # config/compilation.py; stage_terms.cudagraph_mode): "eager_only" (V0; V1 up to 0.9.0
    # forces compilation level 3), "use_cudagraph" (0.9.1-0.10.0: `use_cudagraph: false`),
    # "level" (0.10.1-0.11.x: no graphs unless the compilation level/mode is 3 or a
    # cudagraph_mode is given), "opt" (0.12: `-O N` is the optimization level, O0 has no
    # graphs; a compilation mode other than 3 turns every graph mode off), "opt_piecewise"
    # (0.13-0.29: only the modes that need piecewise compilation), "opt_decode" (0.30+:
    # PIECEWISE off, FULL_AND_PIECEWISE down to FULL_DECODE_ONLY)
    cudagraph_control: str = "eager_only"
    # 0.10.1-0.11.2: an explicit cudagraph_mode that needs piecewise compilation without
    # compilation level/mode 3 fails vLLM's assert, worded "level" (0.10.1-0.11.0) or "mode"
    piecewise_assert: str | None = None
    cudagraph_default: str = "PIECEWISE"     # the default mode (0.11+: FULL_AND_PIECEWISE)
    # what the model and parallelism do to the mode (`stage_terms.cudagraph_mode`):
    dp_forces_eager: bool = False            # v1 0.8.0-0.9.0: --data-parallel-size > 1, no graphs
    graph_mamba_full: bool = False           # 0.10.2: Mamba/hybrid default FULL_AND_PIECEWISE
    # pooling models: full graphs become PIECEWISE ("default": only the default, 0.11.0;
    # "any": any full mode, 0.11.1+)
    graph_pooling_piecewise: str | None = None
    graph_dcp_piecewise: bool = False        # 0.11.1-0.12: DCP > 1 turns full graphs PIECEWISE
    # --performance-mode (0.17+): "throughput" doubles the default max_num_batched_tokens and
    # max_num_seqs, "interactivity" captures every batch size from 1 to 32
    performance_mode_flag: bool = False
    # v1 builds the profile run's dummy multimodal item at max_model_len (0.10.0 at the item's
    # own maximum, 0.11+ at max_model_len; 0.7-0.9 and 0.10.1-0.10.2 at the batched tokens):
    # Qwen2/2.5-VL's worst-case video then grows with the length (gpu_model_runner
    # `_get_mm_dummy_batch`, multimodal/registry.py `get_dummy_mm_inputs`)
    mm_dummy_at_max_len: bool = False
    # 0.10.2+: buffers sized by max_num_batched_tokens allocated at model init, inside the
    # weights measurement (ModelSpec.token_buffer_*: Gemma-3n/4 per-layer embeddings,
    # gemma3n_mm.py 0.10.2; the DSA top-k index buffer, deepseek_v2.py 0.11)
    init_token_buffers: bool = False
    # DeepSeek-V4 (CSA) KV-cache grouping (core/kv_csa.py; kv_cache_utils.py): "padded" (0.26:
    # sliding pages padded to a full-attention page, page-weighted concurrency), "packed"
    # (0.27-0.28: no padding, the widest group sets the block), "balanced" (0.29+: bucket
    # grouping, null block reserved); `csa_auto_kv_ok`: `--kv-cache-dtype auto` maps to
    # fp8_ds_mla (0.30+; before, the FlashMLA sparse path asserts at model init)
    csa_grouping: str = "padded"
    csa_auto_kv_ok: bool = False
    lora_graph_specialize: bool = False      # 0.11.1+: with LoRA every size captured twice
    lora_active_counts: bool = False         # 0.16+: --specialize-active-lora
    # where TP > 1 custom all-reduce memory shows up in the profile run's non-torch growth N:
    # "always" (up to 0.10.2 the snapshot precedes the all-reduce/NCCL set-up), "none"
    # (0.11-0.17: set up before the snapshot), "graph_probe" (0.18+: the CUDA-graph memory
    # probe inside the profiling window registers its pool with the peers, whose IPC mappings
    # keep it resident after it is freed; not with enforce_eager)
    allreduce_in_n: str = "always"
    # fp32 (reqs x vocab) copies at the peak of the dummy rejection sampler that the v1
    # runner's profile run and sampler warm-up add with speculative decoding (0.8.1+, PR
    # 14930: 2R-row input, bonus logprobs, target fp32 + clone, probs, exponential noise and
    # its reciprocal; counted from rejection_sampler.py, not fitted); 0 = not run
    spec_sampler_copies: float = 0.0
    # Model Runner V2 (its profile run has no rejection sampler), by default for: "none" (no
    # V2) | "off" (0.12-0.21: only with VLLM_USE_V2_MODEL_RUNNER=1, or turned off by =0) |
    # "archs" (0.22-0.24: the architectures in `v2_archs`; 0.22-0.23 not MoE or quantized) |
    # "dense" (0.25-0.28: no Mamba/GDN layers, not attention-free, and no experts unless the
    # architecture is in `v2_archs`) | "all" (0.29+); config/vllm.py
    # `_is_default_v2_model_runner_model`
    model_runner_v2: str = "none"
    # Model Runner V2's profile run encodes a multimodal dummy batch (0.27+: on the first PP
    # rank; 0.12-0.26 it ran the text forward and the sampler only)
    v2_profiles_encoder: bool = False
    # 0.33+: with Model Runner V2 only the first PP stage builds the multimodal towers
    # (models/interfaces.py `_mark_tower_model`); V1's model classes build them on every stage
    v2_tower_first_stage: bool = False
    v2_archs: frozenset[str] = frozenset()
    # speculative methods Model Runner V2 hands back to the V1 runner (config/vllm.py
    # `_get_v2_model_runner_unsupported_features`): 0.22-0.30 all but EAGLE/EAGLE-3/MTP (and
    # 0.29's DFlash/DSpark), 0.31 draft models run on V2, 0.32 n-gram too, 0.33 Medusa and
    # MLP speculators too
    v1_runner_spec_methods: frozenset[str] = frozenset({
        "ngram", "ngram_gpu", "draft_model", "suffix", "medusa", "mlp_speculator",
        "custom_class"})
    v2_dense_unquantized_only: bool = False
    # v0 multimodal profile run (model_runner.profile_run, 0.5.1+): the dummy batch has
    # max(1, min(max_num_seqs, max_num_batched_tokens // worst-case mm tokens)) sequences,
    # so the dummy sampler runs that many requests, not min(max_num_seqs, tokens)
    v0_mm_profile_seqs: bool = False
    # VLLM_FUSED_MOE_CHUNK_SIZE's default: the fused-MoE kernel's workspace holds this many
    # tokens at most (65,536 in 0.5.1-0.5.x, 32,768 0.6-0.11, 16,384 0.12-0.17; no chunking
    # from 0.18, fused_moe/fused_moe.py)
    moe_chunk_tokens: int | None = None
    # data parallelism's MoE all-to-all (`all2all.py`): the default backend (naive 0.9.0,
    # allgather_reducescatter 0.11.0), how VLLM_ALL2ALL_BACKEND applies ("only" 0.9.0-0.11.0,
    # "fallback" to the flag 0.11.1-0.13, "override" 0.14, gone from 0.15) and its value
    # (`rules_env.apply_env`), --all2all-backend's choices (0.11.1+), DeepEP's managers
    # (0.9.1+) and NVLink buffer (VLLM_DEEPEP_BUFFER_SIZE_MB from 0.11), the batched-DP
    # default of max_num_batched_tokens (0.20+)
    all2all_default: str | None = None
    all2all_env: str | None = None
    all2all_env_value: str | None = None
    all2all_choices: tuple[str, ...] = ()
    deepep: bool = False
    deepep_buffer_env: bool = False
    deepep_buffer_mb: str | None = None      # VLLM_DEEPEP_BUFFER_SIZE_MB as given
    batched_dp_moe_tokens: int | None = None
    # the naive all-to-all (multicast + all-reduce) runs when asked for, up to 0.19 (0.20+
    # rewrites it to allgather_reducescatter); the fused-MoE caches' layout: "fused" (the
    # functional kernel up to 0.13), "modular" (TritonExperts' workspaces from 0.14)
    naive_all2all: bool = True
    moe_ws_layout: str = "fused"
    # MXFP4 MoE kernels (`weights.mxfp4_layout`): Hopper's ("marlin" before 0.12, whose
    # Triton kernels were not bundled; "triton" from 0.12), FlashInfer's intermediate step on
    # Blackwell (256, 128 from 0.27)
    mxfp4_hopper: str = "marlin"
    # bitsandbytes with parallelism: "tp_or_pp" (0.5.0-0.6.1: any bnb with TP or PP > 1),
    # "prequant_tp" (0.6.2-0.6.6) / "prequant_tp_long" (0.7+: a pre-quantized checkpoint
    # with TP > 1); pre-quantized MoE refused from 0.10 (model_loader)
    bnb_parallel: str | None = None
    bnb_prequant_moe: bool = False
    # up to 0.8.5 FP8 MoE layers have no Marlin path: below compute capability 8.9 the
    # Triton kernel fails in the profile run (fp8e4nv unsupported; Marlin from 0.9.0)
    fp8_moe_needs_89: bool = True
    # methods whose own kernels take float16 activations only (AWQ up to 0.23, GPTQ up to
    # 0.21; auto_awq / auto_gptq take bfloat16 too), those a Marlin override may convert
    # (GPTQ from 0.4.2, AWQ from 0.5.3), and whether the dtype check runs in the config
    # (0.6.4+: before the worker's bfloat16 check) or at model load
    half_only_quant: frozenset = frozenset({"awq", "gptq"})
    marlin_override: frozenset = frozenset()
    quant_dtype_in_config: bool = False
    # EPLB (0.9.2+): where its working set lands ("peak": the profile run's rearrangement,
    # 0.9.2-0.11; "outside": allocated after the weights are measured, beyond the budget,
    # 0.12-0.19; "weights": inside the weights measurement, 0.20+), and its checks' release
    # ("v092": redundant experts need EPLB; "v0100": EPLB needs expert parallelism and
    # TP x DP > 1 too; "v0102": reworded)
    eplb_buffer: str | None = None
    eplb_checks: str | None = None
    mxfp4_fi_inter: int = 256
    # V1's encoder dummy batch (`activation.v1_mm_items`): "cdiv" (0.7-0.9.2), "floor"
    # (0.10.0), "per_prompt" (0.10.1+); the per-prompt image limit when none is given (1,
    # 999 from 0.8.4); 0.11.0-0.11.2 pad each dummy output to the encoder budget's rows
    # (`profile_run`: new_zeros((encoder_budget, hidden))) and keep them alive
    mm_items_formula: str | None = None
    mm_default_limit: int = 1
    mm_outputs_padded: bool = False
    # v0 0.7.0-0.8.2 (multimodal/profiling.py): a worst-case multimodal prompt longer than the
    # profiling sequence is replaced by a text-only one (multi_modal_data=None), so the
    # encoder is not profiled; 0.8.3 keeps the multimodal data (warning only)
    v0_mm_dropped_when_long: bool = False
    kv_cache_memory_flag: bool = False       # --kv-cache-memory-bytes (0.10.2+)
    # 0.7.2+: an architecture outside the model registry falls back to the Transformers backend
    # (registry.py `_normalize_archs`); before, vLLM stops: "... are not supported for now"
    transformers_fallback: bool = False
    # bf16 on an NVIDIA GPU below compute capability 8.0 (worker `_check_if_gpu_supports_dtype`,
    # later platforms/cuda.py): refused when asked for; with --dtype auto a bfloat16 config
    # falls back to float16 from 0.9.1 (`_resolve_auto_dtype`), before it is refused too.
    # The message's "setting the`dtype`" lacks a space before 0.8.0.
    auto_dtype_fallback: bool = False
    # GGUF checkpoints load in 0.5.5-0.23 (quantization/gguf.py, the GGUF loader); 0.24 removed
    # them from the tree (no `gguf` method, loader or config patching in its sources)
    gguf_loader: bool = False
    bf16_msg_space: bool = False
    # quantization methods (core/quant_registry.py by release): --allow-deprecated-quantization
    # exists from 0.14 (deprecated methods are refused without it); before 0.17 --quantization
    # takes only the release's names (argparse choices), from 0.17 any text, which
    # ModelConfig then checks ("Unknown quantization method")
    allow_deprecated_quant_flag: bool = False
    quant_flag_any_text: bool = False
    # the platform in ROCm's refusal of a method (config.py "ROCm"; from 0.6.5 the platform's
    # device_name, "rocm")
    rocm_quant_platform: str = "ROCm"
    # --mm-ipc-gpu-memory-gb (0.25+): taken from the KV budget of a multimodal model after the
    # "Available KV cache memory" line; "0.25" | "0.27" (the refusal's wording)
    mm_ipc_reserve: str | None = None
    # quantized KV formats beyond fp8 (core/kv_quant.py; config/cache.py `CacheDType`): the
    # names this release accepts; TurboQuant on hybrid models "refused" (0.20) | "unprotected"
    # (0.21+: no boundary layers); 0.20's per-layer TurboQuant decode buffers; nvfp4
    # "unusable" (0.20: the FlashInfer builder raises) | "buffer" (0.21+: an FP8 output buffer
    # per layer); 0.25+ aligns the block size when skipped layers share the pool
    kv_quant_dtypes: frozenset[str] = frozenset()
    # --kv-cache-dtype-skip-layers (0.19+): the listed layers (or every sliding-window one) keep
    # the model dtype under a quantized KV cache (model_executor/layers/attention/attention.py)
    kv_skip_layers: bool = False
    tq_hybrid: str = "refused"
    tq_layer_buffers: bool = False
    nvfp4_kv: str = "unusable"
    kv_skip_align: bool = False
    modelopt_kv_auto_fp8: bool = False       # 0.33: ModelOpt kv_cache_quant_algo -> fp8
    # ---- max_model_len derivation (§7) ----
    rope_yarn_excluded: bool = False         # 0.30+: yarn not multiplied
    # 0.8.3+: a config's own model_max_length (Command-R) replaces the minimum over the keys
    cfg_model_max_length_wins: bool = False
    # 0.11.1+: LongRoPE models default to the config's original_max_position_embeddings
    longrope_default_original: bool = False
    # 0.6.4+: a sentence-transformers config's max_seq_length replaces the derived length
    encoder_max_seq_length: bool = False
    # 0.12+: the derived length is multiplied by the RoPE factor (1.0 by default) for every
    # model with RoPE parameters, so vLLM prints it as a float ("131072.0")
    max_len_float_rope: bool = False
    # the too-long message's tail: "v040" (0.4.0-0.5.3), "v054" (0.5.4-0.10.1), "v0102"
    msg_max_len: str = "v040"
    allow_long_env: bool = False             # 0.5.4+: VLLM_ALLOW_LONG_MAX_MODEL_LEN exists
    # the architectures pipeline parallelism runs (config.py `_PP_SUPPORTED_MODELS`, in its
    # order): () none (0.4.0-0.5.0), a list (0.5.1-0.6.2), None any (0.6.3+: the model
    # class's SupportsPP interface, not modelled)
    pp_archs: tuple[str, ...] | None = ()
    # how `get_pp_indices` splits the layers: None (0.8+: n // pp each, the remainder on the
    # stages before the last), "last" (0.5.1-0.7.3: the remainder on the last stage), or
    # the sizes VLLM_PP_LAYER_PARTITION gives (0.5.4+, `apply_env`)
    pp_layout: str | tuple[int, ...] | None = None
    pp_partition_env: bool = False           # 0.5.4+: VLLM_PP_LAYER_PARTITION exists
    pp_partition: str | None = None          # its value (`apply_env`), checked by validation
    # the tokenizer_config's model_max_length caps the length: "all" (0.9.1: every model, the
    # resolved length after its check, the user's too), "encoder" (0.9.2+: pooling models
    # only; 0.10+ those with absolute position embeddings: the BERT-style encoders), None
    tokenizer_cap: str | None = None
    # vLLM's ModelConfig turns the sliding windows off itself, capping max_model_len at the
    # window, for models that interleave sliding-window and full attention: "always"
    # (0.5.1-0.6.4), "backend" (only with VLLM_ATTENTION_BACKEND in `interleaved_swa_backends`,
    # 0.6.5-0.10.0), "backend_v0" (that and VLLM_USE_V1=0, 0.10.1-0.11.0), None (never). It
    # reads the environment variable, not the backend vLLM picks by itself (`maxlen.swa_off`).
    interleaved_swa_off: str | None = None
    interleaved_swa_backends: tuple[str, ...] = ()
    # the model types the rule names (None: any model whose layers mix the two, 0.9+)
    interleaved_swa_types: frozenset | None = None
    msg_interleaved_swa: str = "backend"     # "gemma2" (0.5.1-0.6.3) | "vllm" | "backend"
    # ---- messages and log lines (§1b, §10, §11) ----
    msg_free_memory: str = "none"            # "none" | "no_device" | "device"
    msg_no_kv: str = "base"                  # "base" | "docs" (0.13-0.21) | "cpu" (0.22+)
    # "v0" | "v1_070" | "v1_083" | "v1_084" | "v1_091" | "v1_013" | "v1_014" | "v1_022"
    msg_fit: str = "v0"
    msg_autofit: bool = False
    # 0.32+: auto-fit lines say "available KV cache memory (X GiB GPU)" (0.14-0.31: "available
    # GPU memory", the reduced line adding "(X GiB available for KV cache)")
    msg_autofit_kv: bool = False
    msg_load_failure: bool = False           # 0.13+: "Failed to load model - not enough GPU memory"
    # "loading_gb" | "model_gb" | "model_gib" | "model_gib_memory" | "model_s" | "model_s_v2"
    log_weights: str = "loading_gb"
    # Model Runner V2's own weights line where it differs (no "memory": "model_gib" 0.12-0.13,
    # "model_s_v2" 0.14-0.27)
    log_weights_v2: str | None = None
    # "none" | "v0_064" | "v0_profile" | "avail_2f" | "avail_s"
    log_available: str = "none"
    # "v0_gpu_blocks" | "v0_cuda_blocks" | "v0_cuda_lower" | "v1_blocks" (0.7.0) | "v1_070"
    # | "two_lines" | "one_line"
    # | "device_line"
    log_capacity: str = "v0_gpu_blocks"
    log_capacity_per_worker: bool = False    # ≤0.11.0: one line per worker (take the min)
    v0_concurrency_log: bool = False         # v0 0.6.3+: "Maximum concurrency ..." line
    gib_two_decimals: bool = True            # ≤0.13 "%.2f"; 0.14+ round(x, 2) via %s
    usage_metric: str = "vllm:gpu_cache_usage_perc"
    # set by the launch's environment (`apply_env`), not by a version row:
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 turns the "greater than the derived max_model_len"
    # error into a warning (config.py `_get_and_verify_max_len`, every examined release)
    allow_long_max_model_len: bool = False
    # the CUDA-graph memory probe runs on ROCm too (0.26+: `is_cuda_alike()`; 0.18-0.25
    # probed CUDA only, so on AMD the graphs were neither estimated nor budgeted)
    graph_probe_rocm: bool = False

    @property
    def version(self) -> str:
        return ".".join(map(str, self.since))

    def covers(self, v: tuple[int, int, int]) -> bool:
        return self.since <= v and (self.until is None or v < self.until)


# (version, engines, changes, why): core/rules_changes.py.
_CHANGES = CHANGES

# The last release of the v0 engine (removed in 0.11.0).
_V0_LAST = (0, 10, 2)
_V1_FIRST = (0, 7, 0)


def parse_version(text: str) -> tuple[int, int, int]:
    """'0.6.5.dev+cu121' / 'v0.11' -> (0, 6, 5). Raises UsageError for junk."""
    raw = (text or "").strip().lstrip("vV")
    parts: list[int] = []
    for piece in raw.replace("-", ".").replace("+", ".").split("."):
        if not (piece.isascii() and piece.isdigit() and len(piece) <= 6):
            break
        parts.append(int(piece))
        if len(parts) == 3:
            break
    if not parts:
        raise UsageError(f"cannot read vLLM version {text!r}", where="--vllm-version",
                         fix="Give a release such as 0.11.0")
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def _build_table() -> tuple[VllmRules, ...]:
    rows: list[VllmRules] = []
    for engine, first, last in (("v0", (0, 4, 0), _V0_LAST), ("v1", _V1_FIRST, None)):
        state: dict = {}
        points = []
        for ver, eng, changes, _why in _CHANGES:
            v = parse_version(ver)
            if eng not in (engine, "both"):
                continue
            if v < first:
                state.update(changes)       # inherited history (e.g. v1 starts with v0 facts)
                continue
            if last is not None and v > last:
                continue
            points.append((v, changes))
        # merge changes at the same version
        merged: list[tuple[tuple[int, int, int], dict]] = []
        for v, ch in points:
            if merged and merged[-1][0] == v:
                merged[-1][1].update(ch)
            else:
                merged.append((v, dict(ch)))
        if not merged or merged[0][0] != first:
            merged.insert(0, (first, {}))
        for i, (v, ch) in enumerate(merged):
            state.update(ch)
            nxt = merged[i + 1][0] if i + 1 < len(merged) else (
                None if last is None else (last[0], last[1], last[2] + 1))
            rows.append(VllmRules(since=v, until=nxt, engine=engine, **state))
    return tuple(rows)


VERSION_TABLE: tuple[VllmRules, ...] = _build_table()
# NOTE: each engine's rows in release order, found by bisection (a cold `tune` resolves a
# row per process; scanning the table with `covers` cost ~70 µs).
def _by_engine() -> dict[str, tuple[list, list]]:
    out: dict[str, tuple[list, list]] = {}
    for row in sorted(VERSION_TABLE, key=lambda r: r.since):
        sinces, rows = out.setdefault(row.engine, ([], []))
        sinces.append(row.since)
        rows.append(row)
    return out


_BY_ENGINE = _by_engine()
_TABLE_POS = {id(r): i for i, r in enumerate(VERSION_TABLE)}


def _row_at(v: tuple[int, int, int], engine: str) -> VllmRules | None:
    """The `engine` row covering release `v`, or None."""
    hit = _BY_ENGINE.get(engine)
    if hit is None:
        return None
    i = bisect_right(hit[0], v) - 1
    if i < 0 or not hit[1][i].covers(v):
        return None
    return hit[1][i]


def engines_for(vllm_version: str | None) -> tuple[str, ...]:
    """The engines a release ships (v0 until 0.10.2, v1 from 0.7.0)."""
    v = parse_version(vllm_version or NEWEST_VERSION)
    return tuple(e for e in ("v0", "v1")
                 if any(r.engine == e and r.covers(v) for r in VERSION_TABLE))


def resolve_rules(vllm_version: str | None = None, engine: str | None = None) -> VllmRules:
    """The row for `vllm_version` (default newest) and `engine` (default: that release's).

    Versions newer than the newest examined release use the newest row; older than 0.4.0
    raise UsageError. An engine the release does not have raises UsageError.
    """
    v = parse_version(vllm_version or NEWEST_VERSION)
    if v < parse_version(OLDEST_VERSION):
        raise UsageError(f"vLLM {vllm_version} is older than {OLDEST_VERSION}",
                         where="--vllm-version", fix=f"Use {OLDEST_VERSION} or newer")
    newest = parse_version(NEWEST_VERSION)
    if v > newest:
        v = newest
    if engine is None:
        # NOTE: the first row of the table covering the release says (as a scan would).
        covering = [r for r in (_row_at(v, e) for e in _BY_ENGINE) if r is not None]
        engine = min(covering, key=lambda r: _TABLE_POS[id(r)]).default_engine
    row = _row_at(v, engine.lower())
    if row is not None:
        return row
    have = ", ".join(engines_for(".".join(map(str, v))))
    raise UsageError(f"vLLM {'.'.join(map(str, v))} has no {engine} engine",
                     where="--engine", fix=f"Use one of: {have}")


def rules_fields() -> tuple[str, ...]:
    """Names of the row fields (for documentation and tests)."""
    return tuple(f.name for f in fields(VllmRules))


def with_overrides(rules: VllmRules, **changes) -> VllmRules:
    """A copy of a row with some fields changed (tests, env-var emulation)."""
    return replace(rules, **changes)
