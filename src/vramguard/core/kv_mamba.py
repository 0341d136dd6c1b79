"""Mamba / linear-attention states in the KV cache: one request's state page by release
(its dtypes, the conv state's speculative columns), and the prefill-checkpoint rules of
"align" mode. Split out of `kv` (which lays the pages out with the attention layers)."""

from __future__ import annotations

from dataclasses import replace

from .model import DTYPE_BYTES, MambaState
from .rules import VllmRules
from .settings import Settings

__all__ = ["GDN_CHECKPOINT_ALIGN", "MAMBA_DEFAULT_CHUNK", "mamba_checkpoint_kinds",
           "mamba_page_bytes", "mamba_state_dtype_bytes"]


# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT (0.33 qwen_gdn_linear_attn.py): Gated DeltaNet's
# prefill checkpoints on FlashInfer land on 64-token boundaries, so in "align" mode the
# hybrid block is a multiple of lcm(kernel alignment, 64)
GDN_CHECKPOINT_ALIGN = 64
# ModelConfig.get_mamba_chunk_size's default when the config names none (Mamba1, Jamba)
MAMBA_DEFAULT_CHUNK = 2048


def mamba_checkpoint_kinds(rules: VllmRules, mamba_mode: str,
                           compute_capability: tuple[int, int] | None,
                           vendor: str = "nvidia") -> frozenset:
    """The state kinds that hold a prefill-checkpoint block (`rules.mamba_ckpt_kinds`): only
    in "align" mode; Gated DeltaNet only where FlashInfer's GDN prefill runs.

    NOTE: FlashInfer's GDN prefill runs on Hopper (SM90); on Blackwell only with a CUDA 13
    runtime and 128-wide key heads (`_resolve_gdn_prefill_backend`): the runtime is not
    known before launch, so Blackwell is planned with the Triton kernel (no checkpoint)."""
    kinds = rules.mamba_ckpt_kinds
    if not kinds or mamba_mode != "align":
        return frozenset()
    hopper = vendor == "nvidia" and compute_capability is not None and compute_capability[0] == 9
    return kinds if hopper else kinds - {"gdn"}


# recurrent states whose conv state keeps `kernel - 1 + num_speculative_tokens` columns (§4.2)
_CONV_GROWS_WITH_SPEC = ("mamba2", "gdn", "short_conv")


def mamba_page_bytes(state: MambaState, tp: int, dtype_bytes: tuple[int, int],
                     num_spec: int = 0, grows: frozenset | tuple = _CONV_GROWS_WITH_SPEC) -> int:
    """One request's recurrent state on one rank (`dtype_bytes`: conv and SSM bytes per
    element, `mamba_state_dtype_bytes`); with speculative decoding the Mamba2 / GDN conv
    state holds `k - 1 + spec` columns (vLLM `mamba_utils.*_state_shape(..., num_spec)`;
    Qwen3.8-27B at TP2 logs block size 784 without MTP and 800 with MTP k=2). `grows`: the
    state kinds whose conv state does so in the release (`rules.conv_spec_kinds`)."""
    if num_spec and state.kind in grows and state.conv_shape:
        conv = state.conv_shape[:-1] + (state.conv_shape[-1] + num_spec,)
        state = replace(state, conv_shape=conv)
    return state.page_bytes(tp, *dtype_bytes)


# state kinds with a single state that follows --mamba-cache-dtype (vLLM
# `MambaStateDtypeCalculator.linear_attention_state_dtype` / `short_conv_state_dtype`)
_ONE_DTYPE_KINDS = ("linear_attention", "short_conv")


def mamba_state_dtype_bytes(state: MambaState, settings: Settings, rules: VllmRules,
                            model_bytes: int) -> tuple[int, int]:
    """(conv, SSM) bytes per element of a V1 Mamba / linear-attention state, as vLLM resolves
    them (model_executor/layers/mamba/mamba_utils.py `MambaStateDtypeCalculator`, 0.10.1+):
    the conv state in `--mamba-cache-dtype` (auto: the model dtype); the SSM state in
    `--mamba-ssm-cache-dtype`, else the model's config hook (NemotronH 0.13+: its config's
    dtype or the release's default; Qwen3.5 0.17+: its config's `mamba_ssm_dtype`), else as
    the conv state. Gated DeltaNet reads the SSM flag from 0.17 only."""
    conv = DTYPE_BYTES.get(settings.mamba_cache_dtype or "", model_bytes)
    if state.kind in _ONE_DTYPE_KINDS or (state.kind == "gdn" and not rules.gdn_ssm_flag):
        return conv, conv
    flag = settings.mamba_ssm_cache_dtype
    if flag is not None and flag != "auto":
        return conv, DTYPE_BYTES[flag]
    hooked = None
    if state.ssm_hook == "nemotron_h" and rules.nemotron_ssm_default:
        hooked = state.ssm_dtype or rules.nemotron_ssm_default
    elif state.ssm_hook == "qwen3_5" and rules.gdn_ssm_flag:
        hooked = state.ssm_dtype
    return conv, DTYPE_BYTES.get(hooked or "", conv)
