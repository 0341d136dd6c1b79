"""Sizes of PyTorch checkpoints (pytorch_model*.bin, *.pt) without unpickling anything.

Two sources, both approximate (flagged so): `pytorch_model.bin.index.json`'s
`metadata.total_size`, else the zip central directory of each file (torch.save writes a zip
whose `<name>/data/<n>` entries are the raw storages). Pickle bytes are never read, let
alone executed. The dtype is not known from these sizes; use config.json's torch_dtype.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from ..core.model import CheckpointInfo
from ..errors import SourceError

_SUFFIXES = (".bin", ".pt", ".pth")


def bin_paths(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES and p.is_file()
                      and not p.name.startswith(("training_args", "optimizer", "scheduler", "rng_state")))
    except OSError as exc:
        raise SourceError(f"cannot list folder ({exc.strerror or exc})", where=str(folder),
                          fix="Check the folder's permissions") from None


def _index_total(folder: Path) -> int | None:
    index = folder / "pytorch_model.bin.index.json"
    if not index.is_file():
        return None
    try:
        total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError):
        return None
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total
    return None


def storage_bytes(path: Path) -> int:
    """Sum of the `data/*` entries' sizes in one torch zip file (no decompression)."""
    where = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            return sum(i.file_size for i in zf.infolist()
                       if "/data/" in i.filename and not i.is_dir())
    except zipfile.BadZipFile:
        raise SourceError("not a zip-format PyTorch checkpoint (legacy pickle format?)",
                          where=where, fix="Convert it to safetensors, or pass config.json for "
                                           "an architecture-only estimate") from None
    except (OSError, ValueError, EOFError) as exc:
        raise SourceError(f"cannot read PyTorch checkpoint ({exc})"[:200], where=where,
                          fix="Check or re-download the file") from None


def read_checkpoint(folder: str | os.PathLike) -> CheckpointInfo | None:
    """Approximate checkpoint bytes of a folder's .bin/.pt files; None when there are none."""
    folder = Path(folder)
    total = _index_total(folder)
    paths = bin_paths(folder)
    if total is None:
        if not paths:
            return None
        total = sum(storage_bytes(p) for p in paths)
    return CheckpointInfo(format="pytorch_bin", total_bytes=total, num_params=None,
                          bytes_by_dtype={}, num_tensors=None, approximate=True, path=str(folder))
