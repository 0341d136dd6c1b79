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
_YARN = ("yarn", "deepseek_yarn", "deepseek_llama_scaling")      # not multiplied from 0.30
# model types whose configs carry no RoPE parameters (absolute, ALiBi or no positions): vLLM
# 0.12+ multiplies every other model's derived length by 1.0 and prints it as a float
_NO_ROPE = frozenset({"gpt2", "opt", "bloom", "mpt", "gpt_bigcode", "gpt_neo", "bert",
                      "roberta", "xlm-roberta", "distilbert", "whisper", "mamba", "mamba2",
                      "falcon_mamba", "jamba", "t5"})


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
    shown: str = ""         # the derived length as vLLM's too-long message prints it
    no_key: bool = False    # no length key: vLLM takes a user's length unchecked


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


def _rope(spec: ModelSpec) -> tuple[str | None, float | int | None]:
    """The RoPE scaling type and its factor as the config writes it (None: no factor)."""
    rs = spec.rope_scaling or {}
    kind = rs.get("rope_type") or rs.get("type")
    return (str(kind).lower() if kind else None), rs.get("factor")


def _config_length(spec: ModelSpec, rules: VllmRules) -> tuple[str, int | None]:
    """(key, value): the smallest length key of the config, or its own model_max_length where
    the release lets it win (None: no key)."""
    keys = spec.max_len_keys
    present = [(k, int(keys[k])) for k in MAX_LEN_KEYS if keys.get(k) is not None]
    own = keys.get("model_max_length")
    if rules.cfg_model_max_length_wins and own:
        return "model_max_length", int(own)
    if present:
        return min(present, key=lambda kv: kv[1])
    return "max_position_embeddings", None


def derive_max_model_len(spec: ModelSpec, rules: VllmRules, *,
                         disable_sliding_window: bool = False,
                         sliding_window: int | None = None) -> DerivedLen:
    """The derived maximum model length and the value used when the user gives none."""
    key, derived = _config_length(spec, rules)
    if disable_sliding_window and sliding_window and (derived is None
                                                      or sliding_window < derived):
        # NOTE: vLLM names the window as the limiting key (`_get_and_verify_max_len`)
        key, derived = "sliding_window", sliding_window
    key_value = derived or DEFAULT_MAX_LEN
    if rules.tokenizer_cap == "encoder" and spec.is_encoder_only and spec.tokenizer_max_length:
        derived = min(derived or spec.tokenizer_max_length, int(spec.tokenizer_max_length))
    note, no_key = "", derived is None
    if no_key:
        derived, note = DEFAULT_MAX_LEN, "no length key in the config: vLLM assumes 2048"
    derived, as_float, yarn_len = _scaled(spec, rules, derived)
    if rules.encoder_max_seq_length and spec.encoder_max_seq_length:
        derived, as_float = int(spec.encoder_max_seq_length), False
    value = derived
    if rules.longrope_default_original and _rope(spec)[0] == "longrope":
        orig = (spec.max_len_keys.get("original_max_position_embeddings")
                or (spec.rope_scaling or {}).get("original_max_position_embeddings"))
        value = int(orig) if orig else derived
    cap = tokenizer_cap_after(spec, rules)
    return DerivedLen(value=min(int(value), cap or int(value)), limit=int(derived), key=key,
                      key_value=key_value, note=note, unscaled_yarn_len=yarn_len,
                      shown=f"{float(derived)}" if as_float else str(int(derived)),
                      no_key=no_key)


def _scaled(spec: ModelSpec, rules: VllmRules, derived: int) -> tuple[int, bool, int | None]:
    """(the length after RoPE scaling, whether vLLM prints it as a float, the YaRN length a
    0.30+ release no longer applies).

    NOTE: vLLM multiplies by the config's factor as written (an int keeps the length an
    int); from 0.12 every RoPE model is multiplied, by 1.0 when nothing else applies."""
    kind, raw = _rope(spec)
    if spec.model_type.startswith("gemma3"):
        return derived, False, None
    orig = (spec.rope_scaling or {}).get("original_max_position_embeddings")
    yarn_off = kind in _YARN and rules.rope_yarn_excluded
    if not kind or kind in _NEVER_SCALED or yarn_off:
        has_rope = spec.rope_scaling is not None or spec.model_type not in _NO_ROPE
        scaled = int((orig or derived) * float(raw or 1)) if yarn_off else 0
        return (derived, rules.max_len_float_rope and has_rope,
                scaled if scaled > derived else None)
    factor = raw if raw is not None else 1.0
    as_float = isinstance(factor, bool) or not isinstance(factor, int)
    # NOTE: only "yarn" starts from original_max_position_embeddings (deepseek_yarn in a
    # config is multiplied from max_position_embeddings); mrope is patched to "default" (x1.0)
    base = (orig or derived) if kind == "yarn" else derived
    if kind in ("default", "mrope"):
        return derived, True, None
    return int(base * float(factor)), as_float, None


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
    return apply_user_len(spec, d, user_len, rules)


def apply_user_len(spec: ModelSpec, d: DerivedLen, user_len: int | None,
                   rules: VllmRules) -> tuple[int, DerivedLen]:
    """The effective `max_model_len` for the user's length against the derived one `d`
    (the second half of `resolve_max_model_len`): VLLM_ALLOW_LONG_MAX_MODEL_LEN
    (`rules.allow_long_max_model_len`) accepts a longer one (vLLM only warns); a config
    without a length key takes it unchecked; 0.9.1 caps it afterwards
    (`tokenizer_cap_after`)."""
    if user_len is None or user_len == -1:
        return d.value, d
    if user_len <= 0:
        raise UsageError(f"max_model_len must be positive, got {user_len}",
                         where="--max-model-len", fix="Pass a positive length or `auto`")
    cfg_mml = spec.max_len_keys.get("model_max_length")
    if (user_len > d.limit and not d.no_key and not rules.allow_long_max_model_len
            and not (cfg_mml is not None and cfg_mml >= user_len)):
        raise UsageError(messages.max_len_message(rules, user_len, d.key, d.shown, cfg_mml),
                         where="--max-model-len", fix=_too_long_fix(d, user_len))
    cap_after = tokenizer_cap_after(spec, rules)
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
