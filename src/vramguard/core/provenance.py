"""Where a number came from, and how sure we are of it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ._frozen import maker


class Source(str, Enum):
    """The origin of a value. Shown next to every number so users can trust or correct it."""

    CHECKPOINT = "checkpoint"      # read from safetensors / GGUF headers
    CONFIG = "config"              # read from config.json
    CATALOG = "catalog"            # embedded catalog data (published config / GPU facts)
    DERIVED = "derived"            # computed from other fields by a fixed rule
    USER = "user"                  # a flag or value the user gave
    VLLM_DEFAULT = "vllm_default"  # the default of the selected vLLM version
    ESTIMATED = "estimated"        # a model of ours, with an uncertainty band
    CALIBRATED = "calibrated"      # learned from the user's own vLLM startup logs
    MEASURED = "measured"          # measured live (NVML, /metrics)


@dataclass(frozen=True)
class Estimate:
    """A byte quantity with a band [low_bytes, high_bytes] and its source."""

    value_bytes: int
    low_bytes: int
    high_bytes: int
    source: Source
    note: str = ""

    @classmethod
    def exact(cls, value_bytes: int, source: Source, note: str = "") -> "Estimate":
        """A value with no uncertainty (e.g. read from a header, or a user flag)."""
        v = int(value_bytes)
        return _new(cls, v, v, v, source, note)

    @classmethod
    def banded(cls, value_bytes: float, rel: float, source: Source, note: str = "",
               abs_bytes: float = 0.0) -> "Estimate":
        """A value with a symmetric band of `rel` (fraction) plus `abs_bytes`."""
        spread = abs(value_bytes) * rel + abs_bytes
        return _new(cls, int(value_bytes), int(value_bytes - spread), int(value_bytes + spread),
                    source, note)

    def __add__(self, other: "Estimate") -> "Estimate":
        src = self.source if self.source == other.source else Source.DERIVED
        return Estimate(self.value_bytes + other.value_bytes, self.low_bytes + other.low_bytes,
                        self.high_bytes + other.high_bytes, src)

    def to_dict(self) -> dict:
        return {"bytes": self.value_bytes, "low_bytes": self.low_bytes,
                "high_bytes": self.high_bytes, "source": self.source.value, "note": self.note}


def _new(cls, value_bytes: int, low_bytes: int, high_bytes: int, source: Source,
         note: str) -> Estimate:
    """`cls(...)` without the frozen dataclass's `__init__` for Estimate itself (_frozen.py):
    the same object, 2x faster.

    NOTE: the planner builds several per screened candidate; a subclass is constructed."""
    if cls is not Estimate:
        return cls(value_bytes, low_bytes, high_bytes, source, note)
    return _make_estimate(value_bytes=value_bytes, low_bytes=low_bytes, high_bytes=high_bytes,
                          source=source, note=note)


_make_estimate = maker(Estimate)

GIB = 1 << 30
MIB = 1 << 20


def gib(n_bytes: float) -> float:
    """Bytes to GiB as a float (for display and comparisons only)."""
    return n_bytes / GIB
