"""The drafter of speculative decoding with a separate model (`--speculative-config`
"model"): read from its config and checkpoint headers, never its weights, into
`core.model.DraftModel`, attached to the target's ModelSpec (`ModelSpec.draft`).

What vLLM loads, from its released code (0.10-0.30; docs/accuracy.md, ninth session):
* a draft LM (`draft_model`) is loaded whole through its own class, nothing shared with the
  target, at the target's dtype, sharded over the target's TP ranks;
* an EAGLE head shares the target's embedding (and, EAGLE-1, its LM head) unless its
  checkpoint carries its own; EAGLE-3 keeps its own LM head over its draft vocabulary;
* Medusa heads have no attention layers; n-gram and suffix decoding load nothing, MTP uses the
  model's own layers (`ModelSpec.mtp_params`).
"""

from __future__ import annotations

from dataclasses import replace

from ..core.model import NONE, DraftModel, ModelSpec
from ..core.settings import Settings
from ..errors import SourceError

__all__ = ["attach_draft", "infer_method", "load_with_draft"]

# NOTE: methods that load no separate model (n-gram / suffix: none; MTP: the model's own).
NO_DRAFTER = frozenset({"ngram", "[ngram]", "ngram_gpu", "suffix", "mtp", "deepseek_mtp",
                        "qwen3_next_mtp", "glm4_moe_mtp", "ernie_mtp", "longcat_flash_mtp"})
HEAD_METHODS = frozenset({"eagle", "eagle3"})
NO_KV_METHODS = frozenset({"medusa", "mlp_speculator"})


def infer_method(ref: str, draft: ModelSpec) -> str:
    """The method vLLM infers when the flags name none (0.17+, `SpeculativeConfig`):
    "eagle-" / "eagle3" in the drafter's name, Medusa / MLP-speculator / MTP configs, else a
    draft LM."""
    name = ref.lower()
    if "eagle-" in name:
        return "eagle"
    if "eagle3" in name:
        return "eagle3"
    if draft.model_type in ("medusa", "mlp_speculator"):
        return draft.model_type
    if draft.model_type.endswith("_mtp"):
        return "mtp"
    return "draft_model"


def attach_draft(spec: ModelSpec, settings: Settings, *,
                 offline: bool = False) -> tuple[ModelSpec, list[str]]:
    """The target with its drafter attached (`spec.draft`), and notes. A drafter whose config
    cannot be read is noted, not counted."""
    ref = settings.speculative_model
    method = (settings.speculative_method or "").lower()
    if not ref or settings.num_speculative_tokens <= 0 or method in NO_DRAFTER:
        return spec, []
    if ref.lower() in NO_DRAFTER:
        return spec, []     # NOTE: `--speculative-model [ngram]` (up to 0.8.2): n-gram
    if not method and ref in (spec.name, settings.model):
        return spec, []     # NOTE: the model itself, no method: its own MTP layers
    from .resolve import load_model_spec
    try:
        d = load_model_spec(ref, offline=offline)
    except SourceError as exc:
        return spec, [f"drafter {ref}: {exc.line()}; its weights and KV layers are not "
                      "counted (the KV pool will be smaller than planned)"]
    method = method or infer_method(ref, d)
    if method in NO_DRAFTER:
        return spec, []
    weights, from_ckpt = _weights(d, method, settings)
    attention = () if method in NO_KV_METHODS else tuple(
        layer.attention for layer in d.layers if layer.attention.kind != NONE)
    draft = DraftModel(name=ref, method=method, weights_bytes=weights, attention=attention,
                       from_checkpoint=from_ckpt)
    notes = []
    if method in HEAD_METHODS and not from_ckpt:
        notes.append(f"drafter {ref}: EAGLE head weights estimated from its config (decoder "
                     "layers" + (" and its own LM head" if method == "eagle3" else
                                 "; embeddings and LM head shared") + ")")
    return replace(spec, draft=draft), notes


def _weights(d: ModelSpec, method: str, settings: Settings) -> tuple[int, bool]:
    """(bytes the drafter loads before TP sharding, read from its checkpoint)."""
    from ..core.weights import runtime_dtype_bytes, weights_per_rank
    if method not in HEAD_METHODS:
        # NOTE: a draft LM runs at the target's dtype (its ModelConfig takes the target's).
        dense = Settings(dtype=settings.dtype)
        w = weights_per_rank(d, dense)[0]
        return w.bytes - w.rope_cache_bytes, w.from_checkpoint
    if d.checkpoint is not None and d.checkpoint.total_bytes:
        return d.checkpoint.total_bytes, True
    params = sum(layer.params.total() for layer in d.layers) + d.final_norm_params
    if method == "eagle3":
        vocab = _config_int(d, "draft_vocab_size")
        params += (vocab * d.hidden_size if vocab else d.lm_head_params or d.embed_params)
    return params * runtime_dtype_bytes(settings), False


def _config_int(d: ModelSpec, key: str) -> int | None:
    """An integer of the drafter's config.json that the spec does not keep (EAGLE-3's
    `draft_vocab_size`), where the config is a local file (a folder, the HF cache)."""
    from pathlib import Path

    from .resolve import read_json
    ref = d.source_ref or ""
    path = Path(ref[len("hf-cache:"):] if ref.startswith("hf-cache:") else ref)
    if path.is_dir():
        path = path / "config.json"
    try:
        value = read_json(path).get(key) if path.is_file() else None
    except (SourceError, OSError):
        return None
    return value if isinstance(value, int) and 0 < value <= 1 << 24 else None


def load_with_draft(model: str, settings: Settings, *, offline: bool = False,
                    config_overrides: dict | None = None) -> tuple[ModelSpec, list[str]]:
    """`resolve.load_model_spec` of the launch's model with its drafter attached, and notes."""
    from .resolve import load_model_spec
    spec = load_model_spec(model, offline=offline, config_overrides=config_overrides)
    return attach_draft(spec, settings, offline=offline)
