"""Workload: how long requests are (prompt + output tokens), as percentiles.

The tuner sizes max_model_len from the tail (p99), not from the model's maximum, and the
KV pool from the typical request (p50/p90).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil


@dataclass(frozen=True)
class Workload:
    """Token lengths per request (prompt + output), as percentiles."""

    p50_tokens: int
    p90_tokens: int
    p99_tokens: int
    num_requests: int | None = None     # how many requests the percentiles came from
    source: str = "user"                # "user" (--workload) or a file path

    def __post_init__(self) -> None:
        if not 0 < self.p50_tokens <= self.p90_tokens <= self.p99_tokens:
            raise ValueError("workload percentiles must satisfy 0 < p50 <= p90 <= p99, "
                             f"got p50={self.p50_tokens} p90={self.p90_tokens} p99={self.p99_tokens}")

    @classmethod
    def from_lengths(cls, lengths: list[int], source: str = "file") -> "Workload":
        """Nearest-rank percentiles of per-request token counts."""
        if not lengths:
            raise ValueError("no requests")
        ordered = sorted(lengths)
        return cls(_rank(ordered, 50), _rank(ordered, 90), _rank(ordered, 99),
                   num_requests=len(ordered), source=source)

    def to_dict(self) -> dict:
        return {"p50_tokens": self.p50_tokens, "p90_tokens": self.p90_tokens,
                "p99_tokens": self.p99_tokens, "num_requests": self.num_requests,
                "source": self.source}


def _rank(ordered: list[int], pct: int) -> int:
    """Nearest-rank percentile: the smallest value with at least pct% of values <= it."""
    idx = max(1, ceil(pct / 100 * len(ordered)))
    return ordered[idx - 1]
