"""vLLM's own validation of the settings, as each release words it: argparse errors for flags
the release does not have, pydantic / config checks (heads divisible by TP, utilization in
(0, 1], block sizes, the Mamba cache mode), before any memory is planned.

Split from `planner`, which calls `validate` and the GPU checks (`check_backend_block_size`,
`check_quant_capability`, `check_dtype_capability`) first; the argparse checks are in
`argparse_checks`.
"""

from __future__ import annotations

from . import _memo
from . import messages as msg
from .all2all import deepep_buffer_mb, uses_deepep
from .argparse_checks import (check_choice, check_flag_releases, check_flag_spellings,
                              check_override_flags, is_dev_build, unrecognized)
from .arch_registry import EXAMINED
from .arch_support import (first_release_for, native_releases, not_native,
                           quant_method_last_release, quant_method_refusal, quant_method_releases,
                           quant_min_capability, rocm_refuses)
from .errors import UsageError
from .gpu import GpuSpec
from .model import MAMBA, NONE, SLIDING, ModelSpec
from .rules import VllmRules
from .quant_schemes import first_release_running, scheme_refusal
from .settings import Settings

__all__ = ["validate", "validate_searched", "check_backend_block_size",
           "check_quant_method", "check_rocm_quant", "check_quant_capability",
           "check_quant_schemes", "check_dtype_capability", "bf16_refused"]


# NOTE: host memory figures beyond any machine (and beyond exact `int(x * GIB)`) are input
# errors, not plans.
_MAX_HOST_GIB = 1 << 20


def validate(spec: ModelSpec, s: Settings, rules: VllmRules, version: str | None = None) -> None:
    """vLLM's own checks of `s` for the release `version` (shown in the messages; default:
    the row's first release)."""
    version = version or rules.version
    # NOTE: argparse runs first: a flag the release does not have stops it before the model
    if s.entrypoint == "serve":
        check_flag_releases(s, version)
    _check_model_flags(spec, s, rules, version)
    _check_searched_memory(s, rules, version)
    _check_cache_flags(spec, s, rules, version)
    _check_scheduler(s)
    if rules.deepep_buffer_mb is not None:
        _check_deepep_env(spec, s, rules)


def _check_deepep_env(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """VLLM_DEEPEP_BUFFER_SIZE_MB is read with int() when DeepEP's managers are created."""
    raw = rules.deepep_buffer_mb
    if uses_deepep(spec, s, rules) and deepep_buffer_mb(rules) is None:
        raise UsageError(f"invalid literal for int() with base 10: {raw!r}",
                         where="VLLM_DEEPEP_BUFFER_SIZE_MB",
                         fix="Give DeepEP's NVLink buffer in MiB as an integer (default 1024)")


def validate_searched(s: Settings, rules: VllmRules, version: str | None = None) -> None:
    """The checks of `validate` that read the flags a search varies (`_memo.SEARCHED`: the
    utilization, lengths, sequences, batched tokens, a fixed KV pool) or which flags were
    given (`user_set`), in `validate`'s order. For settings equal on every other field to
    settings that passed `validate` (same model, row and release), this is all of it: the
    other checks read none of those fields."""
    version = version or rules.version
    if s.entrypoint == "serve":
        check_flag_releases(s, version)
    _check_searched_memory(s, rules, version)
    _check_scheduler(s)


def _check_model_flags(spec: ModelSpec, s: Settings, rules: VllmRules, version: str) -> None:
    if s.config_overrides:
        check_override_flags(s, version)
    if s.flag_spellings and s.entrypoint == "serve":
        check_flag_spellings(s, version)       # NOTE: argparse's (LLM kwargs differ)
    if not rules.transformers_fallback:
        _check_architecture(spec, version)
    if spec.checkpoint is not None and spec.checkpoint.format == "gguf" and not rules.gguf_loader:
        # NOTE: the releases from the method table, which `rules.gguf_loader` follows
        last = quant_method_last_release("gguf")
        pick = f"--vllm-version {last}" if last else "a release that reads GGUF"
        raise UsageError(f"vLLM {version} cannot load a GGUF checkpoint: vLLM reads GGUF in "
                         f"{quant_method_releases('gguf')} only", where=spec.name,
                         fix=f"Plan with {pick} (the release you would run it with), or plan "
                             "the original safetensors checkpoint")
    check_quant_method(spec, s, rules, version)
    _check_quant_shapes(spec, s, rules)
    tp = s.tensor_parallel_size
    if tp < 1 or s.pipeline_parallel_size < 1:
        raise UsageError("tensor/pipeline parallel size must be >= 1", where="-tp/-pp")
    _check_pp(spec, s, rules)
    if spec.num_layers and s.pipeline_parallel_size > spec.num_layers:
        # NOTE: vLLM's `get_pp_indices` would give the extra stages no decoder layer
        raise UsageError(f"pipeline parallel size ({s.pipeline_parallel_size}) is larger than "
                         f"the model's {spec.num_layers} decoder layers",
                         where="--pipeline-parallel-size",
                         fix=f"Use at most {spec.num_layers} pipeline stages")
    for name in ("cpu_offload_gb", "swap_space"):
        value = getattr(s, name)
        if value and not 0 <= value <= _MAX_HOST_GIB:
            raise UsageError(f"{name} must be between 0 and {_MAX_HOST_GIB:,} GiB, got {value}",
                             where="--" + name.replace("_", "-"))
    if spec.num_attention_heads and spec.num_attention_heads % tp:
        raise UsageError(f"Total number of attention heads ({spec.num_attention_heads}) must be "
                         f"divisible by tensor parallel size ({tp}).",
                         where="--tensor-parallel-size",
                         fix="Use a tensor parallel size that divides the head count")


def _check_pp(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """Pipeline parallelism where the release runs it (config.py), and the layer counts of
    VLLM_PP_LAYER_PARTITION (`get_pp_indices`, at model build; read at PP 1 too)."""
    pp, archs = s.pipeline_parallel_size, rules.pp_archs
    if pp > 1 and archs is not None and spec.architecture not in archs:
        raise UsageError("Pipeline parallelism is not supported yet." if not archs else
                         "Pipeline parallelism is only supported for the following  "
                         f"architectures: {list(archs)}.", where="--pipeline-parallel-size",
                         fix="Use tensor parallelism, or a release that runs this model "
                             "with pipeline parallelism (0.6.3+ for most models)")
    raw, sizes = rules.pp_partition, rules.pp_layout
    if raw is None:
        return
    where, fix = "VLLM_PP_LAYER_PARTITION", "Give one layer count per pipeline stage"
    if not isinstance(sizes, tuple):
        raise UsageError(f"Invalid partition string: {raw}", where=where, fix=fix)
    if len(sizes) != pp:
        raise UsageError(f"len(partitions)={len(sizes)} does not match pp_size={pp}.",
                         where=where, fix=fix)
    if spec.num_layers and sum(sizes) != spec.num_layers:
        raise UsageError(f"sum(partitions)={sum(sizes)} does not match "
                         f"num_hidden_layers={spec.num_layers}.", where=where,
                         fix=f"Give counts that add up to the model's {spec.num_layers} layers")


def _check_searched_memory(s: Settings, rules: VllmRules, version: str) -> None:
    u = s.gpu_memory_utilization
    if u is not None and not (0 < u <= 1):
        raise UsageError(f"GPU memory utilization must be within (0, 1]. Got {u}.",
                         where="--gpu-memory-utilization", fix="Pass a fraction such as 0.9")
    if s.max_model_len_auto and s.max_model_len not in (None, -1):
        raise UsageError("--max-model-len auto and an explicit --max-model-len contradict",
                         where="--max-model-len", fix="Give one of them")
    if s.max_model_len_auto and not rules.auto_fit:
        raise UsageError(f"--max-model-len auto needs vLLM 0.14 or newer (got {version})",
                         where="--max-model-len", fix="Give an explicit length")
    if s.kv_cache_memory_bytes is not None and not rules.kv_cache_memory_flag:
        raise UsageError(f"--kv-cache-memory-bytes needs vLLM 0.10.2 or newer "
                         f"(got {version})", where="--kv-cache-memory-bytes")


def _check_cache_flags(spec: ModelSpec, s: Settings, rules: VllmRules, version: str) -> None:
    if s.block_size is not None:
        _check_block_size(s.block_size, rules, version)
    for flag, value, choices, since in (
            ("--mamba-cache-mode", s.mamba_cache_mode, rules.mamba_mode_choices, "0.15"),
            ("--mamba-cache-dtype", s.mamba_cache_dtype, rules.mamba_dtype_choices, "0.10.1"),
            ("--mamba-ssm-cache-dtype", s.mamba_ssm_cache_dtype, rules.mamba_dtype_choices,
             "0.10.1"),
            ("--all2all-backend", s.all2all_backend, rules.all2all_choices, "0.11.1"),
            ("--lora-dtype", s.lora_dtype, rules.lora_dtypes, "0.4.0")):
        if value is not None:
            check_choice(flag, value, choices, version, since)
    _check_graph_flags(s, rules, version)
    if s.decode_context_parallel_size != 1:
        _check_dcp(spec, s, rules, version)


_GROUPED_INT = ("awq", "gptq", "awq_marlin", "gptq_marlin", "marlin")


def _check_quant_shapes(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """Tensor-parallel splits a quantized checkpoint's layout cannot take, in vLLM's words:
    an AWQ/GPTQ row-parallel input (o_proj, down_proj) that is not a whole number of groups
    (awq.py / gptq.py create_weights; the Marlin paths fall back to them), and block-FP8
    MoE experts whose per-rank size is not a whole number of blocks (0.6.6-0.28)."""
    q, tp = spec.quant, s.tensor_parallel_size
    if q is None or tp * s.data_parallel_size <= 1:
        return
    if (q.method in _GROUPED_INT and q.group_size and q.group_size > 0 and spec.moe is None
            and tp > 1):
        q_in = spec.num_attention_heads * (spec.head_dim or 0) // tp
        inter = (spec.intermediate_size or 0) // tp
        if any(n and n % q.group_size for n in (q_in, inter)):
            raise UsageError("The input size is not aligned with the quantized weight shape. "
                             "This can be caused by too large tensor parallel size.",
                             where="--tensor-parallel-size",
                             fix=f"Use a tensor-parallel size that leaves each rank whole "
                                 f"groups of {q.group_size} inputs")
    if (rules.fp8_moe_block_check and q.block_shape and spec.moe is not None
            and not s.enable_expert_parallel):
        block_n, block_k = q.block_shape
        inter = spec.moe.moe_intermediate_size // (tp * s.data_parallel_size)
        where, fix = "--tensor-parallel-size", "Use a smaller --tensor-parallel-size or " \
                                               "--enable-expert-parallel"
        if inter % block_n:
            raise UsageError(f"The output_size of gate's and up's weight = {inter} is not "
                             f"divisible by weight quantization block_n = {block_n}.",
                             where=where, fix=fix)
        if inter % block_k:
            raise UsageError(f"The input_size of down's weight = {inter} is not divisible by "
                             f"weight quantization block_k = {block_k}.", where=where, fix=fix)


def _check_scheduler(s: Settings) -> None:
    if (s.max_num_batched_tokens is not None and s.max_num_seqs is not None
            and s.max_num_batched_tokens < s.max_num_seqs):
        raise UsageError(f"max_num_batched_tokens ({s.max_num_batched_tokens}) must be greater "
                         f"than or equal to max_num_seqs ({s.max_num_seqs}).",
                         where="--max-num-batched-tokens")


def _check_architecture(spec: ModelSpec, version: str) -> None:
    """Before 0.7.2 vLLM stops when its registry lacks the architecture (no Transformers
    fallback yet)."""
    arch = spec.architecture
    if is_dev_build(version) or not not_native(arch, version):
        return
    raise UsageError(msg.unsupported_arch_message(arch), where="--vllm-version",
                     fix=f"{arch} is implemented by vLLM {native_releases(arch)}; "
                         "use such a release")


# NOTE: names vramguard derives from a checkpoint's config (ModelOpt's quant_algo, GGUF
# files), not the quant_method vLLM reads there: judged by the loaders' own checks.
_DERIVED_METHODS = frozenset({"gguf", "modelopt", "modelopt_fp4", "modelopt_mixed",
                              "modelopt_mxfp8"})


def _asked_method(spec: ModelSpec, s: Settings) -> tuple[str | None, str]:
    """(the quantization method vLLM checks: --quantization when given, else the
    checkpoint's; where it comes from, for the error)."""
    if s.quantization:
        return s.quantization, "--quantization"
    return (spec.quant.method if spec.quant is not None else None), "quantization_config"


def _judged_method(spec: ModelSpec, s: Settings, version: str) -> tuple[str | None, str]:
    """`_asked_method`, None where the release's method lists cannot judge it: a name
    vramguard derives, a development build."""
    method, where = _asked_method(spec, s)
    if not method or method in _DERIVED_METHODS or is_dev_build(version):
        return None, where
    return method, where


def check_rocm_quant(spec: ModelSpec, s: Settings, rules: VllmRules, gpu: GpuSpec,
                     version: str) -> None:
    """The ROCm platform's check of the method against its list (`verify_quantization`; before
    0.6.5 `rocm_supported_quantization` in ModelConfig), on AMD GPUs."""
    if gpu.vendor != "amd":
        return
    method, where = _judged_method(spec, s, version)
    name = rocm_refuses(method, version) if method else None
    if name is None:
        return
    raise UsageError(msg.rocm_quant_message(s.quantization or name, rules), where=where,
                     fix=f"vLLM {version} on ROCm does not run {name}; the releases whose ROCm "
                         f"platform lists it: {quant_method_releases(name, 'rocm')}. Use such "
                         "a release, an NVIDIA GPU or another checkpoint")


def check_quant_method(spec: ModelSpec, s: Settings, rules: VllmRules, version: str) -> None:
    """vLLM's check of the quantization method against the release's lists
    (`arch_support.quant_method_refusal`): a method the release does not have (argparse's
    or ModelConfig's words) or a deprecated one without --allow-deprecated-quantization."""
    if s.allow_deprecated_quantization and not rules.allow_deprecated_quant_flag:
        raise unrecognized("--allow-deprecated-quantization", "",
                           f"vLLM {version} has no such flag (0.14+)")
    method, where = _judged_method(spec, s, version)
    found = quant_method_refusal(method, version) if method else None
    if found is None:
        return
    kind, name = found
    flag = s.quantization
    if kind == "deprecated":
        if not s.allow_deprecated_quantization:
            raise UsageError(msg.deprecated_quant_message(flag or name), where=where,
                             fix=f"vLLM {version} deprecates {name}: add "
                                 "--allow-deprecated-quantization, or use another checkpoint")
        return
    raise UsageError(msg.unknown_quant_message(flag or name, bool(flag), rules), where=where,
                     fix=f"vLLM {version} has no {name} quantization; the releases that have "
                         f"it: {quant_method_releases(name)}. Use such a release"
                         + (" or drop --quantization" if flag else " or another checkpoint"))


def _check_graph_flags(s: Settings, rules: VllmRules, version: str) -> None:
    """CUDA-graph flags the release does not have: argparse's error."""
    if s.max_cudagraph_capture_size is not None and not rules.capture_max_flag:
        raise unrecognized("--max-cudagraph-capture-size", s.max_cudagraph_capture_size,
                           f"vLLM {version} ({rules.engine}) has no such flag (V1 0.11.1+)")
    if s.performance_mode is not None and not rules.performance_mode_flag:
        raise unrecognized("--performance-mode", s.performance_mode,
                           f"vLLM {version} ({rules.engine}) has no such flag (0.17+)")
    if s.mm_ipc_gpu_memory_gb and rules.mm_ipc_reserve is None:
        raise unrecognized("--mm-ipc-gpu-memory-gb", f"{s.mm_ipc_gpu_memory_gb:g}",
                           f"vLLM {version} ({rules.engine}) has no such flag (V1 0.25+)")
    if rules.piecewise_assert and s.cudagraph_mode in _NEEDS_PIECEWISE and not s.enforce_eager:
        _check_piecewise_compile(s, rules.piecewise_assert)
    if s.cuda_graph_sizes is not None and not rules.cuda_graph_sizes_flag:
        raise unrecognized("--cuda-graph-sizes", " ".join(str(x) for x in s.cuda_graph_sizes),
                           f"vLLM {version} has no such flag (0.9-0.12); use "
                           "--cudagraph-capture-sizes (0.11.1+)")


_NEEDS_PIECEWISE = ("PIECEWISE", "FULL_AND_PIECEWISE")


def _check_piecewise_compile(s: Settings, wording: str) -> None:
    """VllmConfig's assert (0.10.1-0.11.2): a cudagraph_mode with piecewise graphs needs
    compilation level / mode 3 (`-O N` or the compilation config; 3 by default)."""
    level = next((x for x in (s.compilation_mode, s.optimization_level) if x is not None), 3)
    if level == 3:
        return
    what = ("Compilation level should be CompilationLevel.PIECEWISE" if wording == "level"
            else "Compilation mode should be CompilationMode.VLLM_COMPILE")
    shown = f"CUDAGraphMode.{s.cudagraph_mode}" if wording == "level" else s.cudagraph_mode
    raise UsageError(f"{what} when cudagraph_mode piecewise cudagraphs is used, "
                     f"cudagraph_mode={shown}", where="--compilation-config",
                     fix="Use compilation level 3 (-O3), or cudagraph_mode FULL_DECODE_ONLY "
                         "/ NONE")


def _check_dcp(spec: ModelSpec, s: Settings, rules: VllmRules, version: str) -> None:
    """--decode-context-parallel-size as vLLM checks it: the flag (V1 0.11+), TP divisible by
    it, no sliding-window layers, no hybrid model before 0.26, and for GQA/MQA models (0.11.2+;
    0.11.0-0.11.1 MLA only) more TP ranks than KV heads to shard over."""
    d, tp = s.decode_context_parallel_size, s.tensor_parallel_size
    where = "--decode-context-parallel-size"
    if rules.dcp is None:
        raise unrecognized(where, d, f"vLLM {version} ({rules.engine}) has no such flag (V1 "
                                     "0.11+)")
    if d < 1 or tp % d:
        raise UsageError(msg.dcp_tp_message(rules, tp, d), where=where,
                         fix="Use a DCP size that divides --tensor-parallel-size")
    kinds = spec.attention_kinds()
    text = None
    if SLIDING in kinds:
        text = "DCP not support sliding window."
    elif (MAMBA in kinds or len(kinds - {NONE}) > 1) and not rules.dcp_hybrid:
        text = "DCP not support hybrid attn now."
    elif not spec.uses_mla and rules.dcp == "mla":
        text = ("DCP requires attention impls to return the softmax lse for decode, but the "
                "impl FlashAttentionImpl does not return the softmax lse for decode.")
    elif not spec.uses_mla:
        text = msg.dcp_gqa_message(rules, tp, d, spec.num_attention_heads or 1,
                                   spec.num_kv_heads or 1)
    if text is not None:
        raise UsageError(text, where=where, fix="Set --decode-context-parallel-size 1")


def _check_block_size(block: int, rules: VllmRules, version: str) -> None:
    """vLLM's own --block-size validation (argparse choices; pydantic from 0.23)."""
    text = msg.block_size_message(rules, block)
    if text is not None:
        raise UsageError(text, where="--block-size",
                         fix="Use one of the sizes that release accepts (16 is the default)")
    if block <= 0:
        # NOTE: 0.18-0.22 take any int; a block must hold at least one token to be planned.
        raise UsageError(f"--block-size {block}: vLLM {version} does not check it, but "
                         "a KV block holds at least one token", where="--block-size",
                         fix="Use a positive multiple of 16")


def check_backend_block_size(spec: ModelSpec, s: Settings, rules: VllmRules,
                              gpu: GpuSpec) -> None:
    """v1's CUDA attention backends need a block size that is a multiple of 16 (non-MLA,
    non-hybrid models; MLA and Mamba layers pick their own kernels)."""
    block = s.block_size
    if (not block or block % 16 == 0 or rules.engine != "v1" or gpu.vendor != "nvidia"
            or spec.uses_mla or _memo.has_mamba(spec)):
        return
    text = msg.block_size_backend_message(rules, block)
    if text is not None:
        raise UsageError(text, where="--block-size",
                         fix="Use a multiple of 16 (vLLM's attention backends need one)")


def check_quant_capability(spec: ModelSpec, s: Settings, gpu: GpuSpec, version: str) -> None:
    """vLLM's check of the quantization method against the GPU's compute capability (NVIDIA;
    the method's config class's `get_min_capability()` in that release)."""
    method, where = _asked_method(spec, s)
    if not method or gpu.vendor != "nvidia" or gpu.compute_capability is None:
        return
    found = quant_min_capability(method, version)
    major, minor = gpu.compute_capability
    current = major * 10 + minor
    if found is None or current >= found[0]:
        return
    minimum, name = found
    later = first_release_for(method, current)
    raise UsageError(msg.quant_capability_message(name, minimum, current), where=where,
                     fix=f"{gpu.name} has compute capability {major}.{minor}; {method} needs "
                         f"{minimum // 10}.{minimum % 10} or newer in vLLM {version}"
                         + (f" (vLLM {later} and newer run it on this GPU)" if later else "")
                         + ". Use a newer GPU or a checkpoint without this quantization")


def check_quant_schemes(spec: ModelSpec, s: Settings, gpu: GpuSpec, version: str) -> None:
    """Each compressed-tensors scheme of the checkpoint's Linear layers as vLLM checks it
    against an NVIDIA GPU while building the model (`quant_schemes`; after the config's
    checks): the first layer whose scheme cannot run stops the load, in vLLM's words."""
    method, _ = _asked_method(spec, s)
    if (method != "compressed-tensors" or spec.quant is None or gpu.vendor != "nvidia"
            or gpu.compute_capability is None or is_dev_build(version)):
        return
    major, minor = gpu.compute_capability
    current = major * 10 + minor
    for scheme in spec.quant.linear_schemes:
        text = scheme_refusal(scheme, version, current)
        if text is None:
            continue
        later = first_release_running(scheme, current, EXAMINED)
        raise UsageError(text, where=f"quantization_config ({scheme})",
                         fix=f"vLLM {version} cannot run this checkpoint's compressed-tensors "
                             f"{scheme} layers on {gpu.name} (compute capability "
                             f"{current // 10}.{current % 10})"
                             + (f"; vLLM {later} and newer can" if later else "")
                             + ". Use another GPU, or a checkpoint with another scheme")


_BF16 = frozenset({"bfloat16", "bf16"})


def bf16_refused(spec: ModelSpec, dtype: str | None, rules: VllmRules, gpu: GpuSpec) -> bool:
    """Whether vLLM refuses bfloat16 here: an NVIDIA GPU below compute capability 8.0 and
    bfloat16 asked for with --dtype, or (before 0.9.1) a bfloat16 config with --dtype auto."""
    cc = gpu.compute_capability
    if cc is None or cc[0] >= 8 or gpu.vendor != "nvidia":
        return False
    asked = (dtype or "auto").lower()
    return asked in _BF16 or (asked == "auto" and spec.torch_dtype == "bfloat16"
                              and not rules.auto_dtype_fallback)


def check_dtype_capability(spec: ModelSpec, s: Settings, rules: VllmRules,
                           gpu: GpuSpec) -> None:
    """vLLM's refusal of bfloat16 where `bf16_refused`, in its words."""
    if not bf16_refused(spec, s.dtype, rules, gpu):
        return
    auto = (s.dtype or "auto").lower() == "auto"
    raise UsageError(msg.bf16_capability_message(rules, gpu.full_name or gpu.name,
                                                 *gpu.compute_capability),
                     where="config.json torch_dtype" if auto else "--dtype",
                     fix="Pass --dtype half" + (" (vLLM 0.9.1+ falls back to float16 itself)"
                                                if auto else ""))
