"""Decode a PNG with the standard library (zlib) and numpy, to check a screenshot is not blank.

Supports what Chromium writes: 8-bit RGB/RGBA (and grey), non-interlaced, all five filters.
None/Up/Sub rows are whole-row numpy operations; Average/Paeth depend on the decoded pixel
to the left, so those rows run byte by byte in Python (a few seconds for a full page).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(path: str | Path) -> np.ndarray:
    """The pixels as a (height, width, channels) uint8 array."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or interlace or color not in _CHANNELS:
        raise ValueError(f"unsupported PNG (depth {depth}, colour {color}, interlace {interlace})")
    bpp = _CHANNELS[color]
    stride = width * bpp
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:]
        if kind == 0:
            cur = line.copy()
        elif kind == 2:
            cur = line + prev
        elif kind == 1:
            cur = (np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.int64) % 256).astype(
                np.uint8).reshape(-1)
        else:
            cur = _slow_row(kind, line.tolist(), prev.tolist(), bpp)
        out[y] = cur
        prev = out[y]
    return out.reshape(height, width, bpp)


def _slow_row(kind: int, line: list, prev: list, bpp: int) -> np.ndarray:
    cur = [0] * len(line)
    for i, x in enumerate(line):
        a = cur[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if kind == 1:
            cur[i] = (x + a) & 0xFF
        elif kind == 3:
            cur[i] = (x + ((a + b) >> 1)) & 0xFF
        elif kind == 4:
            cur[i] = (x + _paeth(a, b, c)) & 0xFF
        else:
            raise ValueError(f"bad filter {kind}")
    return np.array(cur, dtype=np.uint8)
