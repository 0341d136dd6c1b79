"""vLLM version strings as the logs and the calibration store write them.

Kept apart from `logs.fields` (which loads every log pattern): `vramguard plan` reads the
calibration store on every run, and only needs this.
"""

from __future__ import annotations

import re

__all__ = ["version_tuple", "normalize_version"]


def version_tuple(text: str | None) -> tuple[int, int, int] | None:
    """'0.6.5.dev12+cu121' -> (0, 6, 5); None without at least X.Y."""
    nums = re.findall(r"\d+", text or "")[:3]
    if len(nums) < 2:
        return None
    return tuple(int(n) for n in (nums + ["0"])[:3])


def normalize_version(text: str | None) -> str | None:
    """'0.6.5.dev12+cu121' -> '0.6.5' (the form calibration keys use)."""
    v = version_tuple(text)
    return ".".join(map(str, v)) if v else None
