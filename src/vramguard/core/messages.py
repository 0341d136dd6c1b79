"""vLLM's own message and log-line texts, by the variant names a `VllmRules` row selects.

Every function returns exactly what that vLLM version prints (§1b, §10, §11 of the
reference); numbers are formatted the way vLLM formats them: "%.2f" up to 0.13 and
`round(x, 2)` through `%s` from 0.14 (`16.0`, `72.85`), comma-grouped token counts in v1
capacity lines. Unknown run-time values (load seconds) are shown as `…`.
"""

from __future__ import annotations

from .rules import VllmRules

_GIB = 1 << 30
_DOCS = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def gib_text(n_bytes: float, rules: VllmRules) -> str:
    """A GiB figure as that version prints it in messages."""
    x = n_bytes / _GIB
    return f"{x:.2f}" if rules.gib_two_decimals else str(round(x, 2))


def _r2(n_bytes: float) -> str:
    """GiB as vLLM prints them (`round(b / GiB, 2)`; 0.27+'s `format_gib`)."""
    return str(round(n_bytes / _GIB, 2))


# ---- startup errors (§10) -------------------------------------------------------------

def free_memory_message(rules: VllmRules, free_bytes: int, total_bytes: int, util: float,
                        requested_bytes: float, device: str = "cuda:0") -> str:
    """`F_s < R` (v1 0.9.1+)."""
    dev = f" {device}" if rules.msg_free_memory == "device" else ""
    return (f"Free memory on device{dev} ({_r2(free_bytes)}/{_r2(total_bytes)} GiB) on startup "
            f"is less than desired GPU memory utilization ({util}, {_r2(requested_bytes)} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes.")


def no_kv_message(rules: VllmRules) -> str:
    """`K <= 0` (0.29+: `K - P <= 0`); v0 `num_gpu_blocks <= 0`."""
    if rules.msg_no_kv == "cpu":
        return ("No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine (this flag also controls "
                "CPU memory reservation on the CPU backend, despite its name)." + _DOCS)
    text = ("No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.")
    return text + (_DOCS if rules.msg_no_kv == "docs" else "")


def fit_message(rules: VllmRules, max_model_len: int, needed_bytes: int, avail_bytes: int,
                estimated_max_len: int | None) -> str:
    """One request of `max_model_len` does not fit (v1 'To serve at least one request...')."""
    v = rules.msg_fit
    L = max_model_len
    if v in ("v1_070", "v1_083", "v1_084", "v1_091", "v1_013"):
        unit = "GB" if v == "v1_070" else "GiB"
        # NOTE: vLLM's own typo "models's", in every v1 release up to 0.21 (fixed in 0.22)
        head = (f"To serve at least one request with the models's max seq len ({L}), "
                f"({needed_bytes / _GIB:.2f} {unit} KV cache is needed, which is larger than the "
                f"available KV cache memory ({avail_bytes / _GIB:.2f} {unit}).")
        tail = ("Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                "initializing the engine.")
        if v in ("v1_070", "v1_083"):
            return f"{head} {tail}"
        if v == "v1_084":
            mid = " Based on the available memory,  " if estimated_max_len else "  "
            return head + mid + tail
        if estimated_max_len:
            mid = (f" Based on the available memory, the estimated maximum model length is "
                   f"{estimated_max_len}. ")
        else:
            mid = "  "
        return head + mid + tail + (_DOCS if v == "v1_013" else "")
    # 0.14+: round() numbers
    model = "model's" if v == "v1_022" else "models's"
    head = (f"To serve at least one request with the {model} max seq len ({L}), "
            f"({_r2(needed_bytes)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({_r2(avail_bytes)} GiB).")
    if estimated_max_len:
        mid = (f" Based on the available memory, the estimated maximum model length is "
               f"{estimated_max_len}. ")
    else:
        mid = " "
    if v == "v1_022":
        tail = ("Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
                "CPU backend) or decreasing `max_model_len` when initializing the engine.")
    else:
        tail = ("Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                "initializing the engine.")
    return head + mid + tail + _DOCS


def v0_fit_message(max_model_len: int, max_tokens: int) -> str:
    """v0: `L > b * num_gpu_blocks`."""
    return (f"The model's max seq len ({max_model_len}) is larger than the maximum number of "
            f"tokens that can be stored in KV cache ({max_tokens}). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")


def autofit_fail_message() -> str:
    return ("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
            "single token. Try increasing `gpu_memory_utilization`.")


def weights_oom_message(torch_text: str) -> str:
    """Logged from 0.13 when the torch OOM happens while loading weights."""
    return ("Failed to load model - not enough GPU memory. Try lowering --gpu-memory-utilization "
            "to free memory for weights, increasing --tensor-parallel-size, or using "
            "--quantization. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
            f"for more tips. (original error: {torch_text})")


def torch_oom_text(alloc_bytes: int, total_bytes: int, free_bytes: int) -> str:
    """The shape of torch's OOM text (values are predictions)."""
    return (f"CUDA out of memory. Tried to allocate {alloc_bytes / _GIB:.2f} GiB. GPU 0 has a "
            f"total capacity of {total_bytes / _GIB:.2f} GiB of which "
            f"{max(free_bytes, 0) / _GIB:.2f} GiB is free.")


def unsupported_arch_message(arch: str) -> str:
    """vLLM before 0.7.2 for an architecture outside its registry (the registry's list of
    names that follows in vLLM's text is left out)."""
    return (f"Model architectures ['{arch}'] are not supported for now. Supported "
            "architectures: [...]")


def unknown_quant_message(name: str, flag: bool, rules: VllmRules) -> str:
    """vLLM's refusal of a quantization method the release does not have: argparse's for
    `--quantization` before 0.17 (its choices were the release's names), else ModelConfig's;
    the list of names that follows is left out."""
    if flag and not rules.quant_flag_any_text:
        return f"argument --quantization/-q: invalid choice: '{name}' (choose from ...)"
    return f"Unknown quantization method: {name}. Must be one of [...]."


def rocm_quant_message(name: str, rules: VllmRules) -> str:
    """vLLM's refusal of a method the ROCm platform does not list (every release)."""
    return f"{name} quantization is currently not supported in {rules.rocm_quant_platform}."


def deprecated_quant_message(name: str) -> str:
    """vLLM 0.14+'s refusal of a deprecated quantization method. NOTE: vLLM passes the name as
    a second ValueError argument (logging style), so the text it prints is the tuple."""
    return ("('The quantization method %s is deprecated and will be removed in future versions "
            "of vLLM. To bypass, set `--allow-deprecated-quantization`.', " + repr(name) + ")")


def quant_capability_message(name: str, minimum: int, current: int) -> str:
    """vLLM's refusal of a quantization method the GPU is too old for (every release)."""
    return (f"The quantization method {name} is not supported for the current GPU. Minimum "
            f"capability: {minimum}. Current capability: {current}.")


def bf16_capability_message(rules: VllmRules, gpu_name: str, major: int, minor: int) -> str:
    """vLLM's refusal of bfloat16 on a GPU below compute capability 8.0."""
    return ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
            f"Your {gpu_name} GPU has compute capability {major}.{minor}. You can use float16 "
            "instead by explicitly setting the" + (" " if rules.bf16_msg_space else "")
            + "`dtype` flag in CLI, for example: --dtype=half.")


def sampler_oom_message(num_reqs: int) -> str:
    return (f"CUDA out of memory occurred when warming up sampler with {num_reqs} dummy requests. "
            "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing "
            "the engine.")


def mamba_blocks_message(max_num_seqs: int, blocks: int) -> str:
    return (f"max_num_seqs ({max_num_seqs}) exceeds available Mamba cache blocks ({blocks}). "
            "Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot "
            f"proceed. Please lower max_num_seqs to at most {blocks} or increase "
            "gpu_memory_utilization.")


def block_size_message(rules: VllmRules, block_size: int) -> str | None:
    """vLLM's rejection of `--block-size` at argument parsing or config validation (None:
    that release accepts the value there)."""
    choices = rules.block_size_choices
    if choices is not None and block_size not in choices:
        return (f"{rules.block_size_prog}: error: argument --block-size: invalid choice: "
                f"{block_size} (choose from {', '.join(map(str, choices))})")
    if rules.block_size_positive and block_size <= 0:
        return ("1 validation error for CacheConfig block_size: Input should be greater than 0 "
                f"[type=greater_than, input_value={block_size}, input_type=int]")
    return None


def block_size_backend_message(rules: VllmRules, block_size: int) -> str | None:
    """What v1's CUDA attention backends say of a block size that is not a multiple of 16
    (None: accepted, e.g. by FlexAttention)."""
    kind = rules.block_size_16
    if kind == "fa":
        return "Block size must be a multiple of 16."
    if kind == "no_common":
        return f"No common block size for {block_size}. "
    if kind == "none":
        return ("No valid attention backend found for cuda with AttentionSelectorConfig(…). "
                "Reasons: {FLASH_ATTN: [block_size not supported], …}")
    return None


def max_len_message(rules: VllmRules, user_len: int, key: str, derived: str,
                    model_max_length: int | None) -> str:
    """User `max_model_len` above the derived maximum: `derived` as vLLM prints it (the final
    value, a float where a RoPE factor multiplied it), `model_max_length` the config's own
    key (None when it has none), the tail by release."""
    head = (f"User-specified max_model_len ({user_len}) is greater than the derived "
            f"max_model_len ({key}={derived} or model_max_length={model_max_length} in model's "
            "config.json).")
    if rules.msg_max_len == "v040":
        return (f"{head} This may lead to incorrect model outputs or CUDA errors. Make sure the "
                "value is correct and within the model context size.")
    if rules.msg_max_len == "v054":
        return (f"{head} This may lead to incorrect model outputs or CUDA errors. To allow "
                "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    return (f"{head} To allow overriding this maximum, set the env var "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
            "extreme caution. If the model uses relative position encoding (RoPE), positions "
            "exceeding derived_max_model_len lead to nan. If the model uses absolute position "
            "encoding, positions exceeding derived_max_model_len will cause a CUDA array "
            "out-of-bounds error.")


# ---- log lines (§1b, §6, §11) ---------------------------------------------------------

def weights_log(rules: VllmRules, weights_bytes: int, v2_runner: bool = False) -> str:
    """vLLM's weights line (`v2_runner`: Model Runner V2 loads the model)."""
    x = weights_bytes / _GIB
    form = rules.log_weights_v2 if v2_runner and rules.log_weights_v2 else rules.log_weights
    return {
        "loading_gb": f"Loading model weights took {x:.4f} GB",
        "model_gb": f"Model loading took {x:.4f} GB and … seconds",
        "model_gib": f"Model loading took {x:.4f} GiB and … seconds",
        "model_gib_memory": f"Model loading took {x:.4f} GiB memory and … seconds",
        "model_s": f"Model loading took {round(x, 2)} GiB memory and … seconds",
        "model_s_v2": f"Model loading took {round(x, 2)} GiB and … seconds",
    }[form]


def available_kv_log(rules: VllmRules, kv_bytes: int, *, total_bytes: int = 0, util: float = 0.0,
                     weights_bytes: int = 0, non_torch_bytes: int = 0,
                     activation_bytes: int = 0) -> tuple[str, ...]:
    """The line(s) that state the KV budget, if this version prints one."""
    k = kv_bytes / _GIB
    v = rules.log_available
    if v == "avail_2f":
        return (f"Available KV cache memory: {k:.2f} GiB",)
    if v == "avail_s":
        return (f"Available KV cache memory: {round(k, 2)} GiB",)
    if v == "v0_profile":
        t = total_bytes / _GIB
        return ("Memory profiling takes … seconds",
                f"the current vLLM instance can use total_gpu_memory ({t:.2f}GiB) x "
                f"gpu_memory_utilization ({util:.2f}) = {t * util:.2f}GiB",
                f"model weights take {weights_bytes / _GIB:.2f}GiB; non_torch_memory takes "
                f"{non_torch_bytes / _GIB:.2f}GiB; PyTorch activation peak memory takes "
                f"{activation_bytes / _GIB:.2f}GiB; the rest of the memory reserved for KV Cache "
                f"is {k:.2f}GiB.")
    if v == "v0_064":
        return (f"Memory profiling results: total_gpu_memory={total_bytes / _GIB:.2f}GiB "
                f"initial_memory_usage=… peak_torch_memory=… memory_usage_post_profile=… "
                f"non_torch_memory={non_torch_bytes / _GIB:.2f}GiB kv_cache_size={k:.2f}GiB "
                f"gpu_memory_utilization={util:.2f}",)
    return ()


def capacity_log(rules: VllmRules, num_blocks: int, tokens: int, max_model_len: int,
                 concurrency: float, *, num_cpu_blocks: int = 0, device: str = "GPU") -> tuple[str, ...]:
    """The KV capacity line(s): blocks (v0), tokens and maximum concurrency (v1)."""
    v = rules.log_capacity
    conc_v0 = f"Maximum concurrency for {max_model_len} tokens per request: {concurrency:.2f}x"
    if v in ("v0_gpu_blocks", "v0_cuda_blocks", "v0_cuda_lower"):
        label = {"v0_gpu_blocks": "GPU", "v0_cuda_blocks": "CUDA", "v0_cuda_lower": "cuda"}[v]
        lines = [f"# {label} blocks: {num_blocks}, # CPU blocks: {num_cpu_blocks}"]
        if rules.v0_concurrency_log:
            lines.append(conc_v0)
        return tuple(lines)
    if v == "v1_070":
        return (f"# GPU blocks: {num_blocks}", conc_v0)
    if v == "v1_blocks":
        return (f"# GPU blocks: {num_blocks}",)
    size = f"{tokens:,}"
    conc = (f"Maximum concurrency for {max_model_len:,} tokens per request: "
            f"{concurrency:.2f}x")
    if v == "two_lines":
        return (f"GPU KV cache size: {size} tokens", conc)
    if v == "one_line":
        return (f"GPU KV cache size: {size} tokens, {conc}",)
    return (f"{device} KV cache size: {size} tokens, {conc}",)


# NOTE: vLLM's per-API-server decoder budget when no GPU video backend is set (128 MiB decoder
# cache + a 1.8 GiB CUDA context; printed, not reserved)
MM_IPC_PER_SERVER_BYTES = 128 * (1 << 20) + int(1.8 * 1024 * (1 << 20))


def mm_ipc_log(reserved_bytes: int, remaining_bytes: int) -> str:
    """The reservation line of --mm-ipc-gpu-memory-gb (0.25+; one API server, no GPU video
    decoder)."""
    r = _r2(reserved_bytes)
    return (f"Reserving {r} GiB of GPU memory for frontend multimodal decoding ({r} GiB "
            f"raw-frame semaphore budget, 0.0 GiB decoder+CUDA-context across 1 API server(s) "
            f"@ {_r2(MM_IPC_PER_SERVER_BYTES)} GiB/server); KV cache memory reduced to "
            f"{_r2(remaining_bytes)} GiB.")


def mm_ipc_message(rules: VllmRules, reserved_bytes: int, kv_bytes: int) -> str:
    """vLLM's refusal when the reservation leaves no KV cache memory."""
    fix = ("Reduce mm_ipc_gpu_memory_gb or hw_decoders, use a different video backend, or "
           if rules.mm_ipc_reserve == "0.27" else
           "Reduce mm_ipc_gpu_memory_gb, use a different video backend, or ")
    r = _r2(reserved_bytes)
    return (f"frontend multimodal GPU decoding reserves {r} GiB ({r} GiB raw-frame "
            f"budget, 0.0 GiB decoder cache budget), but only {_r2(kv_bytes)} GiB is "
            f"available for the KV cache. {fix}increase gpu_memory_utilization.")


def kv_memory_bytes_log(free_bytes: int, kv_bytes: int, rules: VllmRules | None = None) -> str:
    """`--kv-cache-memory-bytes` (0.10.2+): profiling result ignored. The numbers by release
    (worker.py / gpu_worker.py): v0 0.10.2 `%.2f` and "reserved X.XXGiB"; v1 0.10.2-0.11.0
    the free memory unrounded; 0.11.1-0.13 `%.2f` both; 0.14+ `format_gib`."""
    if rules is None or rules.gib_two_decimals is False:
        free, kv, sep, does = _r2(free_bytes), _r2(kv_bytes), " ", "does"
    elif rules.kv_memory_log == "v1_0102":
        free, kv, sep, does = str(free_bytes / _GIB), f"{kv_bytes / _GIB:.2f}", "", "does does"
    elif rules.kv_memory_log == "v0_0102":
        free, kv = f"{free_bytes / _GIB:.2f}", f"{kv_bytes / _GIB:.2f}"
        sep, does = "", "does does"
    else:
        free, kv, sep, does = f"{free_bytes / _GIB:.2f}", f"{kv_bytes / _GIB:.2f}", " ", "does"
    return (f"Initial free memory {free} GiB, reserved {kv}{sep}GiB memory for KV Cache as "
            "specified by kv_cache_memory_bytes config and skipped memory profiling. This "
            f"{does} not respect the gpu_memory_utilization config. …")


def autofit_log(rules: VllmRules, reduced_from: int, to: int, kv_bytes: int,
                device: str = "GPU") -> str:
    """`--max-model-len auto` shortened the length (`kv_bytes`: the limiting worker's)."""
    head = f"Auto-fit max_model_len: reduced from {reduced_from} to {to} to fit in available "
    if rules.msg_autofit_kv:
        return head + f"KV cache memory ({_r2(kv_bytes)} GiB {device})"
    return head + f"GPU memory ({_r2(kv_bytes)} GiB available for KV cache)"


def autofit_full_log(rules: VllmRules, length: int, kv_bytes: int, device: str = "GPU") -> str:
    """`--max-model-len auto` kept the model's whole length."""
    head = f"Auto-fit max_model_len: full model context length {length} fits in available "
    if rules.msg_autofit_kv:
        return head + f"KV cache memory ({_r2(kv_bytes)} GiB {device})"
    return head + "GPU memory"


def override_log(computed: int, override: int, rules: VllmRules | None = None) -> str:
    if rules is not None and rules.override_log_forced:
        return f"Replacing profiled num_gpu_blocks={computed} with forced_num_gpu_blocks={override}"
    return f"Overriding num_gpu_blocks={computed} with num_gpu_blocks_override={override}"


def block_size_log(block_size: int) -> str:
    return (f"Setting attention block size to {block_size} tokens to ensure that attention page "
            "size is >= mamba page size.")


def mamba_padding_log(pct: float) -> str:
    return (f"Padding mamba page size by {pct:.2f}% to ensure that mamba page size and attention "
            "page size are exactly equal.")


def interleaved_swa_warning(rules: VllmRules, model_type: str, backend: str | None,
                            window: int) -> str:
    """vLLM's warning when its ModelConfig turns an interleaved model's sliding windows off
    (`rules.interleaved_swa_off`)."""
    tail = ("Disabling sliding window and capping the max length to the sliding window size "
            f"({window}).")
    if rules.msg_interleaved_swa == "gemma2":
        return ("Gemma 2 uses sliding window attention for every odd layer, which is currently "
                f"not supported by vLLM. {tail}")
    by = "vLLM" if rules.msg_interleaved_swa == "vllm" else f"the {backend} backend"
    return f"{model_type} has interleaved attention, which is currently not supported by {by}. {tail}"


def graph_headroom_warning() -> str:
    return ("CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of "
            "memory, consider decreasing `gpu_memory_utilization` or switching to eager mode. "
            "You can also reduce the `max_num_seqs` as needed to decrease memory usage.")


def draft_model_message(rules: VllmRules, explicit: bool) -> str | None:
    """vLLM's refusal of a separate draft LM (`rules.draft_model`), None where it runs one:
    0.10-0.14 refuse it (the argument check words it one way for an explicit "method":
    "draft_model" from 0.11, the config's inference another); 0.15-0.16 need the method."""
    mode = rules.draft_model
    if mode == "explicit":
        return None if explicit else "Unsupported speculative method: 'None'"
    if mode not in ("none_0100", "none"):
        return None
    others = "ngram, medusa, eagle, or " + ("deepseek_mtp" if mode == "none_0100" else "mtp")
    head = ("Draft model speculative decoding is not supported yet. Please consider using "
            if explicit and mode == "none" else
            "Speculative decoding with draft model is not supported yet. Please consider using ")
    return f"{head}other speculative decoding methods such as {others}."


def dcp_tp_message(rules: VllmRules, tp: int, dcp: int) -> str:
    """vLLM's check that TP divides the DCP size (the words joined without a space up to
    0.25)."""
    gap = " " if rules.dcp_messages != "v011" else ""
    return f"tp_size={tp} must be divisible by{gap}dcp_size={dcp}."


def dcp_gqa_message(rules: VllmRules, tp: int, dcp: int, heads: int, kv_heads: int) -> str | None:
    """vLLM's checks of DCP on a GQA/MQA model (0.11.2+), None when they pass."""
    new = rules.dcp_messages == "v027"
    if tp <= kv_heads:
        return (f"Decode context parallelism for GQA/MQA requires `--tensor-parallel-size` "
                f"({tp}) to be greater than the model's total number of KV heads ({kv_heads}). "
                "Increase `--tensor-parallel-size` or set `--decode-context-parallel-size 1`."
                if new else f"tensor parallel size {tp} must be greater than total num kv "
                f"heads {kv_heads} when enable decode context parallel for GQA/MQA")
    top = tp // kv_heads
    if dcp > top:
        return (f"`--decode-context-parallel-size` ({dcp}) exceeds the maximum supported value "
                f"({top}) for `--tensor-parallel-size` ({tp}) and {kv_heads} model KV heads."
                if new else f"decode context parallel size must less than or equal to (tensor "
                f"parallel size {tp} // total num kv heads {kv_heads}) = {top}, but got {dcp}")
    q = heads // kv_heads
    if q % dcp:
        return (f"The model's number of query heads per KV head ({q}) must be divisible by "
                f"`--decode-context-parallel-size` ({dcp}) for GQA/MQA." if new else
                f"Total number of q per kv attn heads ({q}) must be divisible by dcp world "
                f"size when enable decode context parallel for GQA ({dcp}).")
    return None


def dcp_multiply_log(rules: VllmRules, dcp: int) -> str | None:
    """The line 0.11-0.20 print before the KV cache size when DCP > 1."""
    if rules.dcp_log == "dcp":
        return f"Multiplying the GPU KV cache size by the dcp_world_size {dcp}."
    if rules.dcp_log == "cp":
        return (f"Multiplying the GPU KV cache size by the cp_world_size {dcp} "
                f"(pcp_world_size 1 * dcp_world_size {dcp}).")
    return None
