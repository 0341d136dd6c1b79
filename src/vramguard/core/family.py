"""A plan's family: what the candidates of a search share when they differ only in the flags
it varies (`_memo.SEARCHED`): the version row with its engine fallback, vLLM's checks of the
other flags, the settings' fixed inputs, the CUDA context and the stage terms; and what the
families that differ only in the KV-cache dtype share. Split from `planner`, whose walk
starts from a family (`family_of`, memoized by `_memo.family`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import _memo
from . import activation as act
from .draft import check_draft, check_speculative, falls_back_to_v0
from .lora_checks import check_lora
from .quant_checks import check_bitsandbytes, check_fp8_moe, check_quant_act_dtype
from .effective import SettingsBase, settings_base
from .gpu import GpuSpec
from .gpu_catalog import uma_free_share
from .kv_quant import check_kv_dtype
from .model import ModelSpec
from .rules import NEWEST_VERSION, VllmRules
from .rules_env import apply_device, apply_env
from .runner import check_async_scheduling, check_eplb, check_mamba_prefix_caching
from .settings import Settings, is_pooling
from .stage_terms import base_terms, fixed_terms, runtime_base, runtime_fixed
from .validation import (check_backend_block_size, check_dtype_capability,
                         check_quant_capability, check_quant_schemes, check_rocm_quant, validate,
                         validate_searched)

__all__ = ["Family", "family_of", "family_base", "free_at_start", "free_bytes_at_start", "check",
           "check_family", "TERMS"]


def _pick_rules(version: str, engine: str | None, gpu: GpuSpec,
                spec: ModelSpec, settings: Settings) -> tuple[VllmRules, str | None]:
    """The version row, and why the default v1 engine falls back to v0 (None: it does not):
    compute capability < 8.0, Mamba/linear-attention layers (0.8.0-0.10.1), LoRA (0.8.0-0.8.2),
    an embedding model (0.8.0-0.9.1) or a drafter v1 does not run (up to 0.9.2)."""
    rules = _memo.resolve_rules(version, engine)
    if engine is not None or rules.engine != "v1":
        return rules, None
    cc = gpu.compute_capability
    if (rules.v1_falls_back_below_cc80 and gpu.vendor == "nvidia" and cc is not None
            and cc < (8, 0)):
        return _memo.resolve_rules(version, "v0"), f"compute capability {cc[0]}.{cc[1]} < 8.0"
    if rules.v1_falls_back_for_mamba and _memo.has_mamba(spec):
        return _memo.resolve_rules(version, "v0"), "Mamba/linear-attention layers"
    if rules.v1_falls_back_for_lora and settings.enable_lora:
        return _memo.resolve_rules(version, "v0"), "LoRA"
    if rules.v1_falls_back_for_pooling and is_pooling(spec, settings):
        return _memo.resolve_rules(version, "v0"), "an embedding (pooling) model"
    if falls_back_to_v0(spec, settings, rules):
        method = settings.speculative_method or "a draft model"
        return _memo.resolve_rules(version, "v0"), f"speculative decoding ({method})"
    return rules, None


_PLAIN_KV = frozenset({"auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"})


@dataclass(slots=True)
class Family:
    """What a plan derives from all but the flags a search varies (`_memo.SEARCHED`): the
    version row (the engine fallback, environment and device applied), whether the checks of
    the other flags passed, the settings' fixed inputs, the CUDA context and the stage terms
    (`terms`: `_memo.family_terms`). Shared by the candidates that differ only in the
    searched flags (`_memo.family`); made afresh for every plan when the memo is off."""

    rules: VllmRules
    fallback: str | None
    device: str
    context_bytes: int
    checked: bool = False
    base: SettingsBase | None = None
    terms: dict = field(default_factory=dict)
    graph_source: str | None = None     # where the CUDA-graph mode came from
    v2: bool | None = None              # Model Runner V2 runs the model (set from the terms:
                                        # `stage_terms.runtime_fixed` decides it)
    # NOTE: what the families that differ only in the KV-cache dtype share (`_memo.family`):
    # "core" (row, fallback, device, context), "base", "checked" and the runtime stage terms.
    shared: dict | None = None


# NOTE: the stage-term functions `_memo.family_terms` calls
TERMS = (runtime_fixed, fixed_terms, runtime_base, base_terms)


def _family(spec: ModelSpec, settings: Settings, gpu: GpuSpec, version: str,
            engine: str | None, env: dict[str, str] | None, shared: dict | None) -> Family:
    core = shared.get("core") if shared is not None else None
    if core is None:
        # NOTE: neither the row, its fallback nor the context reads the KV-cache dtype
        rules, fallback = _pick_rules(version, engine, gpu, spec, settings)
        rules = apply_device(apply_env(rules, env), gpu.vendor)
        device = "cpu" if gpu.vendor == "cpu" else "cuda"
        ctx = act.context_bytes(settings.world_size,
                                nccl_before_snapshot=rules.snapshot_after_nccl,
                                cublas_before_snapshot=rules.cublas_before_snapshot,
                                total_bytes=gpu.total_bytes, vendor=gpu.vendor)
        seen = uma_free_share(gpu)
        if seen is not None:
            # NOTE: on unified memory the host's own use (OS, other processes) is not free
            # either: the median of what public startups on this part had free
            ctx = max(ctx, int(gpu.total_bytes * (1 - seen[1])))
        core = (rules, fallback, device, ctx)
        if shared is not None:
            shared["core"] = core
    return Family(*core, shared=shared)


def check(spec: ModelSpec, settings: Settings, rules: VllmRules, gpu: GpuSpec,
          version: str) -> None:
    """vLLM's own checks of the settings, in its order (raises UsageError)."""
    validate(spec, settings, rules, version)
    check_backend_block_size(spec, settings, rules, gpu)
    check_quant_capability(spec, settings, gpu, version)
    check_rocm_quant(spec, settings, rules, gpu, version)
    act_dtype = (spec, settings, rules, gpu.compute_capability, gpu.vendor, version)
    if rules.quant_dtype_in_config:       # NOTE: 0.6.4+: in VllmConfig, before the worker
        check_quant_act_dtype(*act_dtype)
    check_dtype_capability(spec, settings, rules, gpu)
    if not rules.quant_dtype_in_config:   # NOTE: up to 0.6.3 at model load
        check_quant_act_dtype(*act_dtype)
    if spec.draft is not None:
        check_draft(spec, settings, rules)
    check_speculative(spec, settings, rules)
    check_lora(settings, rules)
    check_bitsandbytes(spec, settings, rules)
    check_fp8_moe(spec, settings, rules, gpu.compute_capability, gpu.vendor)
    check_mamba_prefix_caching(spec, settings, rules)
    check_async_scheduling(spec, settings, rules)
    check_eplb(settings, rules)
    if settings.kv_cache_dtype not in _PLAIN_KV or settings.kv_cache_dtype_skip_layers:
        check_kv_dtype(spec, settings, rules)
    if spec.quant is not None and spec.quant.linear_schemes:
        check_quant_schemes(spec, settings, gpu, version)    # NOTE: at model build


def check_family(fam: Family, spec: ModelSpec, settings: Settings, rules: VllmRules,
                 gpu: GpuSpec, version: str) -> None:
    """`check` for a family's first candidate (its others need only `validate_searched`);
    raises UsageError. A family whose KV dtype no check reads (`_PLAIN_KV`) is checked by a
    KV-dtype sibling's pass: only its searched flags' checks run."""
    shared = fam.shared
    plain = settings.kv_cache_dtype in _PLAIN_KV and not settings.kv_cache_dtype_skip_layers
    if plain and shared is not None and shared.get("checked"):
        validate_searched(settings, rules, version)
    else:
        check(spec, settings, rules, gpu, version)
        if plain and shared is not None:
            shared["checked"] = True
    fam.checked = True


def family_base(fam: Family, spec: ModelSpec, settings: Settings, gpu: GpuSpec) -> SettingsBase:
    """`effective.settings_base` of the family's settings, kept in the family (and shared by
    its KV-dtype siblings: it reads no KV setting)."""
    shared = fam.shared
    base = shared.get("base") if shared is not None else None
    if base is None:
        base = settings_base(spec, settings, fam.rules, gpu, fam.device)
        if shared is not None:
            shared["base"] = base
    fam.base = base
    return base


def family_of(spec: ModelSpec, settings: Settings, gpu: GpuSpec, vllm_version: str | None = None,
              engine: str | None = None, env: dict[str, str] | None = None) -> Family:
    """What the plans of `settings` share with every candidate that differs from it only in
    the searched flags (memoized, `_memo.family`): pass it to `screen` as `family`."""
    version = vllm_version or NEWEST_VERSION
    return _memo.family(spec, settings, gpu, version, engine, env,
                        lambda shared: _family(spec, settings, gpu, version, engine, env, shared))


def free_at_start(gpu: GpuSpec, free_bytes: int | None, family: Family,
                  other_used_bytes: int = 0) -> int:
    """The free memory at vLLM's snapshot that the plans of `family` on `gpu` start from (their
    ledgers' `free_at_start`): `free_bytes` when given, else the total less the family's CUDA
    context and what other processes use."""
    return free_bytes_at_start(gpu.total_bytes, free_bytes, family.context_bytes,
                               other_used_bytes)


def free_bytes_at_start(total: int, free_bytes: int | None, context: int, other_used: int) -> int:
    """`free_bytes` when given, else `total` less the CUDA `context` and `other_used`."""
    return int(free_bytes) if free_bytes is not None else total - context - other_used
