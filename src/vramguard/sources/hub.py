"""The Hugging Face Hub, reached through huggingface_hub (the only module importing it).

Downloads only small files (config.json and friends) into the normal HF cache, and reads
safetensors headers remotely (HTTP range requests; no tensor data). Any failure becomes a
SourceError that says which cache folders were searched and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.model import CheckpointInfo
from ..errors import SourceError
from .hfcache import cache_dirs

_SMALL_FILES = ("tokenizer_config.json", "hf_quant_config.json", "generation_config.json",
               "sentence_bert_config.json")


def offline_by_env() -> bool:
    """True when HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE ask for no network."""
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
               for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def not_found(model_id: str, why: str) -> SourceError:
    looked = ", ".join(str(p) for p in cache_dirs())
    model_id = model_id[:200]
    return SourceError(f"model {model_id!r} is not in the local HF cache ({looked}) or the "
                       f"catalog, and {why}", where=model_id,
                       fix="Pass a local folder or config.json, run `huggingface-cli download "
                           f"{model_id} config.json`, or see `vramguard model list`")


def fetch_model(model_id: str, *, timeout_s: float = 10.0) -> tuple[Path, CheckpointInfo | None]:
    """Download config.json (+ small side files) and read remote safetensors headers.

    Returns the local snapshot folder and the checkpoint facts (None if the repo has no
    safetensors or the headers could not be read).
    """
    try:
        import huggingface_hub as hf
    except ImportError:
        raise not_found(model_id, "huggingface_hub is not installed (pip install "
                                  "'vramguard[hub]')") from None
    if not _reachable(timeout_s=min(timeout_s, 3.0)):
        raise not_found(model_id, f"the hub ({_endpoint()}) is unreachable (offline?)")
    try:
        config_path = Path(hf.hf_hub_download(model_id, "config.json", etag_timeout=timeout_s))
    except Exception as exc:                                  # NOTE: translate every hub error
        raise _translate(model_id, exc) from None
    for name in _SMALL_FILES:
        try:
            hf.hf_hub_download(model_id, name, etag_timeout=timeout_s)
        except Exception:                                     # optional files
            pass
    return config_path.parent, _remote_checkpoint(hf, model_id, timeout_s)


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _reachable(timeout_s: float) -> bool:
    """One TCP connect to the hub's host. NOTE: huggingface_hub retries a dead network
    for ~20 s with backoff; an offline user should get the answer at once."""
    import socket
    from urllib.parse import urlsplit
    parts = urlsplit(_endpoint())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _translate(model_id: str, exc: Exception) -> SourceError:
    kind = type(exc).__name__
    if kind == "GatedRepoError":
        return SourceError(f"model {model_id!r} is gated on the hub", where=model_id,
                           fix="Accept its license on huggingface.co and set HF_TOKEN, or pass "
                               "a local config.json")
    if kind in ("RepositoryNotFoundError", "RevisionNotFoundError"):
        return not_found(model_id, "the hub has no such model (check the spelling; private "
                                   "repos need HF_TOKEN)")
    if kind in ("HFValidationError", "ValueError"):
        return not_found(model_id, "it is not a valid Hugging Face id (org/name)")
    if kind == "EntryNotFoundError":
        return not_found(model_id, "the hub repo has no config.json (a GGUF-only repo? "
                                   "download the .gguf and pass its path)")
    return not_found(model_id, f"the hub is unreachable ({kind})")


def _remote_checkpoint(hf, model_id: str, timeout_s: float) -> CheckpointInfo | None:
    """Checkpoint facts from the repo's safetensors headers (None when unavailable)."""
    try:
        meta = hf.get_safetensors_metadata(model_id, timeout=timeout_s)
        by_dtype: dict[str, int] = {}
        params = tensors = 0
        for file_meta in meta.files_metadata.values():
            for info in file_meta.tensors.values():
                n = 1
                for dim in info.shape:
                    n *= int(dim)
                start, end = info.data_offsets
                dtype = str(info.dtype)
                by_dtype[dtype] = by_dtype.get(dtype, 0) + int(end) - int(start)
                params += n
                tensors += 1
    except Exception:                                         # NOTE: optional facts only
        return None
    if not tensors:
        return None
    return CheckpointInfo(format="safetensors", total_bytes=sum(by_dtype.values()),
                          num_params=params, bytes_by_dtype=by_dtype, num_tensors=tensors,
                          path=f"hub:{model_id}")
