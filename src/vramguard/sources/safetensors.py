"""Safetensors headers -> CheckpointInfo, reading only the header of each shard.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON mapping
tensor names to {dtype, shape, data_offsets}, then the raw data. We read the first 8 + N
bytes, never the data, and check everything a hostile or truncated file could get wrong:
N within 100 MiB and the file, offsets inside the data section, sizes matching shape x
dtype, no overlaps.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..core.model import CheckpointInfo
from ..errors import SourceError

MAX_HEADER_BYTES = 100 << 20
# Bits per element of every safetensors dtype.
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
_FIX = "The file is truncated or corrupt: re-download it"


class MissingShards(SourceError):
    """The index names shards that are not in the folder (an incomplete download)."""


@dataclass(frozen=True)
class FileSummary:
    """What one safetensors header says."""

    path: str
    num_tensors: int
    num_params: int
    data_bytes: int
    bytes_by_dtype: dict[str, int] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)


def parse_header(buf: bytes, file_size: int, where: str) -> FileSummary:
    """Check and summarise a header given the file's first bytes (8 + N at least)."""
    if file_size < 8 or len(buf) < 8:
        raise SourceError(f"not a safetensors file ({file_size} bytes, need at least 8)",
                          where=where, fix=_FIX)
    (n,) = struct.unpack("<Q", buf[:8])
    if n > MAX_HEADER_BYTES:
        raise SourceError(f"safetensors header claims {n} bytes (limit {MAX_HEADER_BYTES})",
                          where=where, fix=_FIX)
    if 8 + n > file_size or len(buf) < 8 + n:
        raise SourceError(f"safetensors header of {n} bytes runs past the end of the "
                          f"{file_size}-byte file", where=where, fix=_FIX)
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SourceError(f"safetensors header is not valid JSON ({str(exc)[:80]})",
                          where=where, fix=_FIX) from None
    if not isinstance(header, dict):
        raise SourceError("safetensors header is not a JSON object", where=where, fix=_FIX)
    return _summarise(header, file_size - 8 - n, where)


def _summarise(header: dict, data_size: int, where: str) -> FileSummary:
    meta = header.get("__metadata__")
    spans: list[tuple[int, int, str]] = []
    by_dtype: dict[str, int] = {}
    params = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end, numel, dtype = _check_tensor(name, info, data_size, where)
        spans.append((begin, end, name))
        by_dtype[dtype] = by_dtype.get(dtype, 0) + end - begin
        params += numel
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise SourceError(f"tensors {n0!r:.60} and {n1!r:.60} overlap", where=where, fix=_FIX)
    return FileSummary(path=where, num_tensors=len(spans), num_params=params,
                       data_bytes=sum(by_dtype.values()), bytes_by_dtype=by_dtype,
                       metadata=meta if isinstance(meta, dict) else {})


def _check_tensor(name: str, info: object, data_size: int, where: str) -> tuple[int, int, int, str]:
    label = f"tensor {name!r:.80}"
    if not isinstance(info, dict):
        raise SourceError(f"{label} has no dtype/shape/data_offsets", where=where, fix=_FIX)
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise SourceError(f"{label} has unknown dtype {dtype!r:.20}", where=where,
                          fix="Update vramguard, or report the dtype")
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 48 for d in shape):
        raise SourceError(f"{label} has a bad shape {shape!r:.60}", where=where, fix=_FIX)
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(
            isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise SourceError(f"{label} has bad data_offsets {offsets!r:.60}", where=where, fix=_FIX)
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        raise SourceError(f"{label} data_offsets [{begin}, {end}] outside the "
                          f"{data_size}-byte data section", where=where, fix=_FIX)
    numel = 1
    for d in shape:
        numel *= d
    if numel > 1 << 48:
        raise SourceError(f"{label} is absurdly large ({numel} elements)", where=where, fix=_FIX)
    expected = (numel * DTYPE_BITS[dtype] + 7) // 8
    if end - begin != expected:
        raise SourceError(f"{label} spans {end - begin} bytes but shape x {dtype} needs "
                          f"{expected}", where=where, fix=_FIX)
    return begin, end, numel, dtype


def read_file(path: str | os.PathLike) -> FileSummary:
    """Read and check one .safetensors file's header (never its data)."""
    where = str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                return parse_header(head, size, where)
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                return parse_header(head, size, where)
            buf = head + fh.read(n)
    except OSError as exc:
        raise SourceError(f"cannot read safetensors file ({exc.strerror or exc})", where=where,
                          fix="Check the path and its permissions") from None
    return parse_header(buf, size, where)


def shard_paths(folder: Path) -> list[Path]:
    """The shards vLLM would load: from model.safetensors.index.json, else the *.safetensors."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
            weight_map = data["weight_map"]
            names = sorted({str(v) for v in weight_map.values()})
        except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError):
            raise SourceError("model.safetensors.index.json is unreadable or has no weight_map",
                              where=str(index), fix=_FIX) from None
        if any(Path(n).name != n or n in ("", ".", "..") for n in names):
            raise SourceError("model.safetensors.index.json names a file outside its folder",
                              where=str(index), fix=_FIX)
        paths = [folder / n for n in names]
        missing = [p.name for p in paths if not p.is_file()]
        if missing:
            raise MissingShards(f"{len(missing)} shard(s) listed in the index are missing "
                              f"(first: {missing[0]})", where=str(folder),
                              fix="The download is incomplete: download the missing shards")
        return paths
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".safetensors" and p.is_file())
    except OSError as exc:
        raise SourceError(f"cannot list folder ({exc.strerror or exc})", where=str(folder),
                          fix="Check the folder's permissions") from None
    hf_style = [p for p in files if not p.name.startswith("consolidated")]
    return hf_style or files


def read_checkpoint(folder: str | os.PathLike) -> CheckpointInfo | None:
    """Sum the headers of a folder's safetensors shards; None when there are none."""
    paths = shard_paths(Path(folder))
    if not paths:
        return None
    by_dtype: dict[str, int] = {}
    params = tensors = 0
    for path in paths:
        s = read_file(path)
        for dtype, nbytes in s.bytes_by_dtype.items():
            by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
        params += s.num_params
        tensors += s.num_tensors
    return CheckpointInfo(format="safetensors", total_bytes=sum(by_dtype.values()),
                          num_params=params, bytes_by_dtype=by_dtype, num_tensors=tensors,
                          path=str(folder))
