"""Resolve a model reference (path or id) to a ModelSpec, most trusted source first.

1. a local folder: config.json (+ hf_quant_config.json, tokenizer_config.json) and the
   safetensors headers (or .bin sizes), or a folder holding one .gguf;
2. a config.json path; 3. a .gguf file;
4. a Hugging Face id in the local HF cache (see `hfcache.cache_dirs`);
5. the embedded catalog (ids and aliases, case-insensitive);
6. the hub through huggingface_hub, unless offline (or HF_HUB_OFFLINE) -- the config is
   downloaded into the HF cache, safetensors headers are read remotely.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ..core.model import CheckpointInfo, ModelSpec
from ..core.provenance import Source
from ..errors import SourceError
from . import catalog, hfcache
from .config import spec_from_config

MAX_CONFIG_BYTES = 64 << 20
_TOKENIZER_NONE = 10 ** 12          # transformers uses 1e30 for "no limit"


def read_json(path: Path, what: str = "config.json") -> dict:
    """A JSON object from a file, or SourceError (missing, unreadable, malformed, huge)."""
    where = str(path)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise SourceError(f"{what} is larger than {MAX_CONFIG_BYTES >> 20} MiB", where=where,
                              fix=f"Pass the model's real {what}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(f"{what} not found", where=where,
                          fix="Pass a model folder that holds config.json") from None
    except OSError as exc:
        raise SourceError(f"cannot read {what} ({exc.strerror or exc})", where=where,
                          fix="Check the path and its permissions") from None
    except UnicodeDecodeError:
        raise SourceError(f"{what} is not UTF-8 text", where=where,
                          fix=f"Pass the model's real {what}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{what} is not valid JSON ({str(exc)[:100]})", where=where,
                          fix="Fix or re-download the file") from None
    if not isinstance(data, dict):
        raise SourceError(f"{what} is a JSON {_json_type(data)}, not an object", where=where,
                          fix=f"Pass the model's real {what}")
    return data


def _looks_like_path(ref: str) -> bool:
    return (ref.startswith((".", "/", "~")) or ref.count("/") > 1
            or ref.lower().endswith((".json", ".gguf", ".safetensors", ".bin"))
            or (os.sep != "/" and os.sep in ref))


def load_model_spec(ref: str, *, offline: bool = False,
                    config_overrides: dict | None = None) -> ModelSpec:
    """The ModelSpec of a folder, config.json, .gguf, cached/catalog/hub id. SourceError else.

    `config_overrides` (vLLM's `--hf-overrides`, `--rope-scaling`, `--rope-theta`) change
    config.json before it is read, as vLLM applies them to the model's config (not to GGUF
    metadata: a note says so)."""
    ov = config_overrides or None
    if not isinstance(ref, str) or not ref.strip() or "\x00" in ref:
        raise SourceError("empty model reference", where="MODEL",
                          fix="Pass a Hugging Face id, a model folder, config.json or .gguf")
    ref = ref.strip()
    try:
        path = Path(ref).expanduser()
    except (RuntimeError, ValueError):                       # "~nosuchuser/...", bad unicode
        path = Path(ref)
    kind = _kind(path)
    if kind == "dir":
        return from_folder(path, overrides=ov)
    if kind == "file":
        return from_file(path, overrides=ov)
    if _looks_like_path(ref):
        if _exists(path):       # NOTE: a device, a FIFO, a socket: exists, not a model
            raise SourceError("not a regular file or folder", where=ref[:200],
                              fix="Pass a model folder, config.json, a .gguf file or a "
                                  "Hugging Face id")
        raise SourceError("no such file or folder", where=ref[:200],
                          fix="Check the path, or pass a Hugging Face id (org/name)")
    snap = hfcache.find_snapshot(ref)
    if snap is not None:
        return from_folder(snap, name=ref, source_ref=f"hf-cache:{snap}", overrides=ov)
    entry = catalog.get(ref)
    if entry is not None:
        spec = _from_config(entry.config, ov, name=entry.model_id,
                            source_ref=f"catalog:{entry.model_id}", origin=Source.CATALOG)
        if entry.published_params:
            spec = dataclasses.replace(spec, notes=spec.notes + (
                f"published parameter count: {entry.published_params}",))
        return spec
    from . import hub
    if offline or hub.offline_by_env():
        raise hub.not_found(ref, "offline mode is on (--offline or HF_HUB_OFFLINE)")
    folder, remote = hub.fetch_model(ref)
    spec = from_folder(folder, name=ref, source_ref=f"hub:{ref}", overrides=ov)
    if spec.checkpoint is None and remote is not None:
        spec = _with_checkpoint(spec, remote)
    return spec


def _from_config(config: dict, overrides: dict | None, **kw) -> ModelSpec:
    """spec_from_config after vLLM's config overrides, noted in the spec."""
    if not overrides:
        return spec_from_config(config, **kw)
    try:
        spec = spec_from_config(apply_overrides(config, overrides), **kw)
    except SourceError as exc:
        spec_from_config(config, **kw)      # NOTE: a bad config.json still gets its own error
        raise _override_error(exc, overrides) from None
    return dataclasses.replace(spec, notes=spec.notes + (
        "config.json overridden on the command line: " + ", ".join(sorted(overrides)),))


def _override_error(exc: SourceError, overrides: dict) -> SourceError:
    """The error of a config made invalid by the command-line overrides, blamed on them.

    NOTE: called only when the config alone is valid, so the overridden value is at fault,
    not the file (whose fix, "re-download config.json", would not help).
    """
    return SourceError(f"{exc.what} (after the command-line config overrides: "
                       f"{', '.join(sorted(overrides))})", where=exc.where,
                       fix="Fix the value given to --hf-overrides, --rope-scaling or --rope-theta")


def apply_overrides(config: dict, overrides: dict) -> dict:
    """config.json with vLLM's `hf_overrides` applied: a key is set; a nested model config
    (`text_config`, `vision_config`, ...) takes a dict override key by key, as vLLM updates
    a sub-config's attributes (a plain dict attribute such as `rope_scaling` is replaced)."""
    out = dict(config)
    for key, value in overrides.items():
        old = out.get(key)
        if key.endswith("_config") and isinstance(old, dict) and isinstance(value, dict):
            out[key] = apply_overrides(old, value)
        else:
            out[key] = value
    return out


def _gguf_note(spec: ModelSpec, overrides: dict | None) -> ModelSpec:
    if not overrides:
        return spec
    return dataclasses.replace(spec, notes=spec.notes + (
        "config overrides (" + ", ".join(sorted(overrides)) + ") not applied: the model is "
        "read from GGUF metadata",))


def _json_type(value) -> str:
    """JSON's name for a decoded value's type (null, array, string, number, boolean)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {list: "array", str: "string", int: "number", float: "number"}.get(
        type(value), type(value).__name__)


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _kind(path: Path) -> str | None:
    """"dir", "file" or None (missing, or a name the OS refuses, e.g. too long)."""
    try:
        if path.is_dir():
            return "dir"
        return "file" if path.is_file() else None
    except (OSError, ValueError):
        return None


def from_file(path: Path, *, overrides: dict | None = None) -> ModelSpec:
    """A config.json (or any .json config) or a .gguf file."""
    if path.suffix.lower() == ".gguf":
        from .gguf import spec_from_gguf
        return _gguf_note(spec_from_gguf(path), overrides)
    if path.suffix.lower() == ".json":
        config = read_json(path)
        return _from_config(config, overrides, name=_name_of(config, path.parent),
                            source_ref=str(path))
    if path.suffix.lower() in (".safetensors", ".bin", ".pt", ".pth"):
        return _from_checkpoint_file(path, overrides)
    raise SourceError(f"unsupported file type {path.suffix or '(none)'}", where=str(path),
                      fix="Pass a model folder, config.json or .gguf file")


def _from_checkpoint_file(path: Path, overrides: dict | None) -> ModelSpec:
    """A checkpoint file (.safetensors, .bin, ...) is read as its folder, with config.json.

    NOTE: without config.json, from_folder would fall back to a .gguf in the same folder,
    an unrelated model; a checkpoint file alone does not describe the model.
    """
    if not os.path.lexists(path.parent / "config.json"):
        raise SourceError("its folder has no config.json", where=str(path),
                          fix="Pass the model folder (with config.json) or its config.json")
    return from_folder(path.parent, overrides=overrides)


def _name_of(config: dict, folder: Path) -> str:
    name = config.get("_name_or_path")
    if isinstance(name, str) and name and not name.startswith(("/", ".")):
        return name
    return folder.name or str(folder)


def from_folder(folder: Path, *, name: str | None = None, source_ref: str | None = None,
                overrides: dict | None = None) -> ModelSpec:
    """A model folder: config.json + checkpoint headers, or a single .gguf."""
    try:
        names = set(os.listdir(folder))
    except OSError as exc:
        raise SourceError(f"cannot read folder ({exc.strerror or exc})", where=str(folder),
                          fix="Check the path and its permissions") from None
    if "config.json" not in names:
        ggufs = sorted(n for n in names if n.endswith(".gguf") and not n.startswith("mmproj"))
        if ggufs:
            from .gguf import spec_from_gguf
            spec = _gguf_note(spec_from_gguf(folder / ggufs[0]), overrides)
            if len(ggufs) > 1:
                spec = dataclasses.replace(spec, notes=spec.notes + (
                    f"the folder holds {len(ggufs)} .gguf files; read {ggufs[0]} (pass a file "
                    "path to choose another)",))
            return spec
        raise SourceError("folder has no config.json", where=str(folder),
                          fix="Pass the folder that holds config.json (a snapshot folder), "
                              "or a .gguf file")
    config = read_json(folder / "config.json")
    if "hf_quant_config.json" in names and "quantization_config" not in config:
        config = dict(config, quantization_config=read_json(folder / "hf_quant_config.json",
                                                            "hf_quant_config.json"))
    spec = _from_config(config, overrides, name=name or _name_of(config, folder),
                        source_ref=source_ref or str(folder))
    tok = _tokenizer_max_length(folder, names)
    if tok is not None:
        spec = dataclasses.replace(spec, tokenizer_max_length=tok,
                                   provenance={**spec.provenance, "tokenizer_max_length": Source.CONFIG})
    seq = _sentence_max_seq_length(folder, names)
    if seq is not None:
        spec = dataclasses.replace(spec, encoder_max_seq_length=seq, provenance={
            **spec.provenance, "encoder_max_seq_length": Source.CONFIG})
    from .safetensors import MissingShards
    try:
        checkpoint = _checkpoint(folder, names)
    except MissingShards as exc:
        # NOTE: a partial download still has a usable config: say so instead of failing.
        return dataclasses.replace(spec, notes=spec.notes + (
            f"checkpoint incomplete ({exc.what}): sizes are derived from config.json",))
    return _with_checkpoint(spec, checkpoint) if checkpoint else spec


def _tokenizer_max_length(folder: Path, names: set[str]) -> int | None:
    if "tokenizer_config.json" not in names:
        return None
    try:
        value = read_json(folder / "tokenizer_config.json", "tokenizer_config.json") \
            .get("model_max_length")
    except SourceError:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < _TOKENIZER_NONE:
        return int(value)
    return None


# NOTE: the sentence-transformers configs vLLM reads (transformers_utils/config.py
# get_sentence_transformer_tokenizer_config), in its order
_SENTENCE_CONFIGS = ("sentence_bert_config.json", "sentence_roberta_config.json",
                     "sentence_distilbert_config.json", "sentence_camembert_config.json",
                     "sentence_albert_config.json", "sentence_xlm-roberta_config.json",
                     "sentence_xlnet_config.json")


def _sentence_max_seq_length(folder: Path, names: set[str]) -> int | None:
    """A sentence-transformers config's max_seq_length (vLLM 0.6.4+ takes it as the model's
    length)."""
    for name in _SENTENCE_CONFIGS:
        if name not in names:
            continue
        try:
            value = read_json(folder / name, name).get("max_seq_length")
        except SourceError:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < _TOKENIZER_NONE:
            return value
        return None
    return None


def _checkpoint(folder: Path, names: set[str]) -> CheckpointInfo | None:
    if any(n.endswith(".safetensors") for n in names) or "model.safetensors.index.json" in names:
        from .safetensors import read_checkpoint
        return read_checkpoint(folder)
    if any(n.endswith((".bin", ".pt", ".pth")) for n in names):
        from .torchbin import read_checkpoint as read_bin
        return read_bin(folder)
    return None


def _with_checkpoint(spec: ModelSpec, checkpoint: CheckpointInfo) -> ModelSpec:
    return dataclasses.replace(spec, checkpoint=checkpoint,
                               provenance={**spec.provenance, "checkpoint": Source.CHECKPOINT})
