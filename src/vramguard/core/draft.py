"""Speculative decoding with a separate drafter (`ModelSpec.draft`): which method vLLM runs,
whether a release runs it at all, and what the plan says about it.

The drafter's weights and KV layers themselves are terms of `weights.draft_bytes` and
`kv.draft_attention`; this module holds the release rules around them (`rules.draft_model`).
"""

from __future__ import annotations

from . import _memo
from . import messages as msg
from .errors import UsageError
from .model import NONE, DraftModel, ModelSpec
from .provenance import GIB
from .rules import VllmRules
from .settings import Settings

__all__ = ["draft_method", "uses_draft", "falls_back_to_v0", "check_draft", "check_speculative",
           "draft_note"]



def draft_method(s: Settings, draft: DraftModel) -> str:
    """The method vLLM runs: the flag's, else the one inferred from the drafter."""
    return s.speculative_method or draft.method


def uses_draft(spec: ModelSpec, s: Settings) -> bool:
    """Whether the launch speculates with a separate drafter (`spec.draft`)."""
    return spec.draft is not None and s.num_speculative_tokens > 0


def falls_back_to_v0(spec: ModelSpec, s: Settings, rules: VllmRules) -> bool:
    """v1 up to 0.9.2 falls back to v0 for a speculative method it does not run
    (`rules.v1_spec_methods`, engine/arg_utils.py `_is_v1_supported_oracle`: none in
    0.8.0-0.8.2, n-gram and EAGLE from 0.8.3, EAGLE-3 from 0.8.5, Medusa and DeepSeek MTP
    from 0.9.0); a config without a method counts as n-gram when its model is "[ngram]"."""
    methods = rules.v1_spec_methods
    if methods is None or not speculates(s):
        return False
    method = s.speculative_method or (
        "ngram" if (s.speculative_model or "") in ("ngram", "[ngram]") else "")
    return method not in methods


def check_draft(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """vLLM's refusal of a draft LM where the release has none (0.10-0.14) or needs the
    method named (0.15-0.16), in vLLM's words; and of v1 asked for explicitly where a drafter
    would make it fall back (up to 0.9.2). Raises UsageError."""
    if not uses_draft(spec, s) or draft_method(s, spec.draft) != "draft_model":
        return
    text = msg.draft_model_message(rules, explicit=s.speculative_method is not None)
    if text is not None:
        fix = ("Add \"method\": \"draft_model\" to --speculative-config"
               if rules.draft_model == "explicit" else
               "Use vLLM 0.15 or newer for a draft model, or an EAGLE / n-gram / MTP method")
        raise UsageError(text, where="--speculative-config", fix=fix)


def speculates(s: Settings) -> bool:
    """Whether the launch has a speculative config (a method or speculative tokens)."""
    return s.num_speculative_tokens > 0 or bool(s.speculative_method)


def check_speculative(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """vLLM's refusals of speculative decoding by engine and model: V0 from 0.10, and V1
    with Mamba / linear-attention layers (0.9.2-0.16). Raises UsageError."""
    if not speculates(s):
        return
    if rules.engine == "v1" and falls_back_to_v0(spec, s, rules):
        # NOTE: the default engine fell back already (`family._pick_rules`): v1 was asked for
        raise UsageError("VLLM_USE_V1=1 is not supported with Speculative Decoding.",
                         where="--engine", fix="Leave the engine to vLLM (it falls back to "
                         "v0), or use a method this release runs on V1")
    if rules.engine == "v0" and rules.v0_spec_refused:
        raise UsageError("Speculative decoding is not supported on vLLM V0.",
                         where="--speculative-config",
                         fix="Run on the V1 engine (compute capability 8.0+ and a model V1 "
                             "serves), or drop --speculative-config")
    _check_eagle3_target(spec, s, rules)
    _check_method_given(spec, s, rules)
    if rules.engine == "v1" and mamba_refuses(rules.mamba_spec_refused, spec):
        raise UsageError("Mamba with speculative decoding is not supported yet.",
                         where="--speculative-config",
                         fix="Drop --speculative-config, or use vLLM 0.17 or newer")


def _check_method_given(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """Speculative tokens with neither a method nor a model: a release's MTP model types
    draft with their own layers (0.8.2-0.10.2); otherwise SpeculativeConfig's error."""
    msg = rules.msg_spec_no_model
    if (msg is None or not s.num_speculative_tokens or s.speculative_method
            or s.speculative_model):
        return
    types = rules.spec_self_mtp_types
    if types is not None and spec.model_type in types:
        return
    text = ("num_speculative_tokens was provided without speculative model." if msg == "without"
            else "num_speculative_tokens was provided but without speculative model.")
    raise UsageError(text, where="--speculative-config",
                     fix='Name the method ("method": "mtp", "ngram", "eagle3", ...) or the '
                         "draft model")


def _check_eagle3_target(spec: ModelSpec, s: Settings, rules: VllmRules) -> None:
    """SpeculativeConfig's list of EAGLE-3 targets (a substring of the model type)."""
    targets, method = rules.eagle3_targets, s.speculative_method
    methods = ("eagle3", "extract_hidden_states") if rules.msg_eagle3 == "method" else ("eagle3",)
    if targets is None or method not in methods or any(t in spec.model_type for t in targets):
        return
    got = f"Got self.target_model_config.hf_text_config.model_type={spec.model_type!r}"
    head = {"llama": "Eagle3 is only supported for Llama models.",
            "list": f"Eagle3 is only supported for {list(targets)} models.",
            "method": f"{method} is only supported for {list(targets)} models."}[rules.msg_eagle3]
    raise UsageError(f"{head} {got}", where="--speculative-config",
                     fix="Use an EAGLE / MTP / n-gram method, or a release that takes EAGLE-3 "
                         "for this model")


def mamba_refuses(rule: str | None, spec: ModelSpec) -> bool:
    """Whether a refusal of Mamba layers (`rules.mamba_spec_refused` / `mamba_pc_refused`:
    "mamba2", "any", "not_qwen3_next") covers the model's recurrent layers."""
    if rule is None:
        return False
    kinds = _memo.mamba_kinds(spec)
    return bool(kinds) and not ((rule == "mamba2" and "mamba2" not in kinds) or (
        rule == "not_qwen3_next" and spec.model_type == "qwen3_next"))


def draft_note(draft: DraftModel, s: Settings, rules: VllmRules) -> str:
    """The plan's assumption about the drafter: its weights per rank and its KV layers."""
    tp = max(1, s.tensor_parallel_size)
    w = draft.weights_bytes // tp
    layers = sum(1 for a in draft.attention if a.kind != NONE)
    kv = (f"{layers} attention layer{'s' if layers != 1 else ''} in the KV cache" if layers
          else "no KV layers")
    src = "checkpoint" if draft.from_checkpoint else "config"
    method = draft_method(s, draft)
    text = (f"Speculative decoding with {draft.name} ({method}): {w / GIB:.2f} GiB of "
            f"weights per rank on the last stage ({src}), {kv}.")
    if rules.draft_model == "v0_outside":
        text += (" This release (v0) loads the drafter before profiling but does not deduct "
                 "its weights: they take memory outside gpu_memory_utilization.")
    return text
