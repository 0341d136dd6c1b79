"""The one JSON printer of the CLI: `--json` output of every command goes through here."""

from __future__ import annotations

import sys


def _default(obj):
    """Serialise what `to_dict()` methods may leave: enums, sets, tuples, dataclasses."""
    import dataclasses
    import enum
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        to_dict = getattr(obj, "to_dict", None)
        return to_dict() if callable(to_dict) else dataclasses.asdict(obj)
    if isinstance(obj, (bytes, complex)):
        return repr(obj)            # NOTE: literals of a dict a log printed (diagnose --json)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(obj):
    """Replace NaN/inf floats (not valid JSON) by None, recursively."""
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def dumps(data, *, indent: int | None = 2, ascii_only: bool = False) -> str:
    """`data` as JSON text: UTF-8 kept (`ascii_only`: as \\u escapes), key order kept, NaN/inf
    written as null."""
    import json
    try:
        return json.dumps(data, indent=indent, ensure_ascii=ascii_only, allow_nan=False,
                          default=_default)
    except ValueError:
        return json.dumps(_finite(data), indent=indent, ensure_ascii=ascii_only,
                          allow_nan=False, default=_default)


def print_json(data, *, stream=None, indent: int | None = 2) -> None:
    """Print `data` as JSON followed by a newline to `stream` (stdout by default)."""
    out = stream if stream is not None else sys.stdout
    text = dumps(data, indent=indent)
    try:
        text.encode(getattr(out, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        text = dumps(data, indent=indent, ascii_only=True)   # NOTE: \u escapes: still exact
    out.write(text + "\n")
