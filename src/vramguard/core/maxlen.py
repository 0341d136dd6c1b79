"""`max_model_len` derivation, as vLLM does it for a given version (§7 of the reference)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError
from . import messages
from .model import FULL, SLIDING, ModelSpec
from .rules import VllmRules

# The config keys vLLM reads, in its order; the derived length is the minimum present.
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "model_max_length", "max_target_positions", "max_sequence_length",
                "max_seq_length", "seq_len")
DEFAULT_MAX_LEN = 2048
_NEVER_SCALED = ("su", "longrope", "llama3")
_YARN = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")


@dataclass(frozen=True)
class DerivedLen:
    value: int              # what vLLM uses when the user gives nothing
    limit: int              # the maximum a user may ask for without the env override
    key: str                # the config key that decided (for the error message)
    key_value: int          # that key's value
    note: str = ""
    # The length YaRN's factor would give (original positions x factor) in a release that
    # takes max_position_embeddings as already scaled (0.30+); None elsewhere.
    unscaled_yarn_len: int | None = None


# NOTE: vLLM names a model's text config in the warning (Gemma 3's is gemma3_text)
_TEXT_TYPE = {"gemma3": "gemma3_text"}


def swa_off(spec: ModelSpec, rules: VllmRules, env: dict[str, str] | None) -> str | None:
    """vLLM's warning when its ModelConfig turns the sliding windows of a model that
    interleaves sliding-window and full attention off itself, which caps max_model_len at the
    window (`rules.interleaved_swa_off`); None when it does not. The conditional releases read
    the environment variables only: `VLLM_ATTENTION_BACKEND` (not the backend vLLM picks by
    itself) and, from 0.10.1, `VLLM_USE_V1=0`."""
    mode = rules.interleaved_swa_off
    if mode is None:
        return None
    kinds = spec.attention_kinds()
    types = rules.interleaved_swa_types
    if SLIDING not in kinds or FULL not in kinds or (types is not None
                                                     and spec.model_type not in types):
        return None
    env = env or {}
    backend = env.get("VLLM_ATTENTION_BACKEND")
    if mode != "always" and (backend not in rules.interleaved_swa_backends or (
            mode == "backend_v0" and env.get("VLLM_USE_V1", "1").strip().lower()
            not in ("0", "false", "no", "off"))):
        return None
    window = min(l.attention.sliding_window_tokens for l in spec.layers
                 if l.attention.sliding_window_tokens)
    return messages.interleaved_swa_warning(rules, _TEXT_TYPE.get(spec.model_type,
                                                                   spec.model_type),
                                            backend, window)


def _rope(spec: ModelSpec) -> tuple[str | None, float]:
    rs = spec.rope_scaling or {}
    kind = rs.get("rope_type") or rs.get("type")
    factor = rs.get("factor")
    return (str(kind).lower() if kind else None), (float(factor) if factor else 1.0)


def derive_max_model_len(spec: ModelSpec, rules: VllmRules, *,
                         disable_sliding_window: bool = False,
                         sliding_window: int | None = None) -> DerivedLen:
    """The derived maximum model length and the value used when the user gives none."""
    present = [(k, int(spec.max_len_keys[k])) for k in MAX_LEN_KEYS
               if spec.max_len_keys.get(k) is not None]
    note = ""
    if present:
        key, derived = min(present, key=lambda kv: kv[1])
    else:
        key, derived = "max_position_embeddings", DEFAULT_MAX_LEN
        note = "no length key in the config: vLLM assumes 2048"
    if disable_sliding_window and sliding_window and sliding_window < derived:
        # NOTE: vLLM names the window as the limiting key (`_get_and_verify_max_len`)
        key, derived = "sliding_window", sliding_window
    key_value = derived
    if rules.tokenizer_cap == "encoder" and spec.is_encoder_only and spec.tokenizer_max_length:
        derived = min(derived, int(spec.tokenizer_max_length))
    kind, factor = _rope(spec)
    value = derived
    is_gemma3 = spec.model_type.startswith("gemma3")
    yarn_len = None
    if kind and not is_gemma3 and kind not in _NEVER_SCALED and kind != "mrope":
        if kind in _YARN:
            orig = (spec.rope_scaling or {}).get("original_max_position_embeddings")
            scaled = int((orig or derived) * factor)
            if not rules.rope_yarn_excluded:
                derived = scaled
            elif scaled > derived:
                yarn_len = scaled
        elif kind not in ("default",):
            derived = int(derived * factor)
        value = derived
    if kind == "longrope":
        orig = (spec.rope_scaling or {}).get("original_max_position_embeddings")
        if orig:
            value = int(orig)
    cap = tokenizer_cap_after(spec, rules)
    return DerivedLen(value=min(int(value), cap or int(value)), limit=int(derived), key=key,
                      key_value=key_value, note=note, unscaled_yarn_len=yarn_len)


def tokenizer_cap_after(spec: ModelSpec, rules: VllmRules) -> int | None:
    """0.9.1's cap: the tokenizer's model_max_length, applied to the length vLLM resolved
    (the user's too) after its check (`rules.tokenizer_cap` "all")."""
    if rules.tokenizer_cap == "all" and spec.tokenizer_max_length:
        return int(spec.tokenizer_max_length)
    return None


def resolve_max_model_len(spec: ModelSpec, rules: VllmRules, user_len: int | None, *,
                          disable_sliding_window: bool = False,
                          sliding_window: int | None = None) -> tuple[int, DerivedLen]:
    """The effective `max_model_len`; raises UsageError with vLLM's words when too long."""
    d = derive_max_model_len(spec, rules, disable_sliding_window=disable_sliding_window,
                             sliding_window=sliding_window)
    return apply_user_len(spec, d, user_len, allow_long=rules.allow_long_max_model_len,
                          cap_after=tokenizer_cap_after(spec, rules))


def apply_user_len(spec: ModelSpec, d: DerivedLen, user_len: int | None, *,
                   allow_long: bool = False, cap_after: int | None = None
                   ) -> tuple[int, DerivedLen]:
    """The effective `max_model_len` for the user's length against the derived one `d`
    (the second half of `resolve_max_model_len`); `allow_long`: VLLM_ALLOW_LONG_MAX_MODEL_LEN
    (a longer length is accepted, vLLM only warns); `cap_after`: a cap applied after the
    check (`tokenizer_cap_after`)."""
    if user_len is None or user_len == -1:
        return d.value, d
    if user_len <= 0:
        raise UsageError(f"max_model_len must be positive, got {user_len}",
                         where="--max-model-len", fix="Pass a positive length or `auto`")
    cfg_mml = spec.max_len_keys.get("model_max_length")
    if user_len > d.limit and not allow_long and not (cfg_mml is not None
                                                      and cfg_mml >= user_len):
        raise UsageError(messages.max_len_message(user_len, d.key, d.key_value,
                                                  spec.tokenizer_max_length),
                         where="--max-model-len", fix=_too_long_fix(d, user_len))
    return (min(int(user_len), cap_after) if cap_after else int(user_len)), d


def _too_long_fix(d: DerivedLen, user_len: int) -> str:
    """Use a shorter length; where YaRN is configured but the release no longer lengthens
    the maximum by its factor, say how to lengthen it (vLLM 0.30+ takes
    max_position_embeddings as already scaled, as Transformers' YaRN does)."""
    shorter = f"use --max-model-len {d.limit} or less"
    if d.unscaled_yarn_len is None or user_len > d.unscaled_yarn_len or d.key != \
            "max_position_embeddings":
        return shorter[0].upper() + shorter[1:]
    return (f"vLLM 0.30+ takes max_position_embeddings ({d.key_value}) as already scaled by "
            f"YaRN: add \"max_position_embeddings\": {d.unscaled_yarn_len} to --hf-overrides "
            f"next to the rope scaling, or {shorter}")


def parse_len(text: str) -> int | None:
    """'25.6k' -> 25600, '128K' -> 131072, 'auto'/-1 -> None (auto)."""
    t = str(text).strip()
    if t.lower() == "auto" or t == "-1":
        return None
    mult = {"k": 1000, "m": 1000 ** 2, "g": 1000 ** 3, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(float(t))
