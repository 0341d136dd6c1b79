"""Durations as the command line writes them: `500ms`, `60s`, `60` (seconds), `5m`, `1h`,
`7d`, `2w`. One parser for every command (check/run windows and polls, watch intervals,
report ranges), so the units and the messages agree."""

from __future__ import annotations

import re

from .errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
           "w": 604800.0}
# NOTE: beyond any window, history or wait a monitoring tool keeps (and `time.sleep` takes).
MAX_DURATION_S = 10 * 365 * 86400.0
_FIX = "Use a number with ms, s, m, h, d or w, e.g. 1s or 7d."


def parse_duration(text: str | float | int, *, flag: str, allow_zero: bool = False) -> float:
    """Seconds from a duration (a bare number is seconds). Raises UsageError naming `flag`
    for text it cannot read, a duration <= 0 (unless `allow_zero`, then < 0) or one over
    ten years."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _DURATION.match(str(text))
        if not match:
            raise UsageError(f"cannot read duration {text!r}", where=flag, fix=_FIX)
        value = float(match.group(1)) * _UNIT_S[match.group(2)]
    if value != value or value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"duration must be {'>= 0' if allow_zero else 'positive'}, got "
                         f"{text!r}", where=flag, fix=_FIX)
    if value > MAX_DURATION_S:
        raise UsageError(f"duration {text!r} is longer than ten years", where=flag, fix=_FIX)
    return value
