"""`vramguard run --adjust`: lower vLLM's memory settings until the launch passes the gate.

In order: --gpu-memory-utilization to the highest value the free memory allows, then
--max-model-len when one request no longer fits the KV cache (never below 1024 tokens), then
--max-num-seqs when the activation peak / sampler warm-up / Mamba blocks fail. Every
candidate is judged with the planner (through `probe.gate.judge_gpu`), so vLLM's version
rules apply. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..core import failures
from ..core.gpu import GpuState
from ..core.settings import Settings
from .gate import FREE_FAILURES, Margins, PlanFor, highest_utilization, judge_gpu

# Which knob addresses which failure.
_KNOB_FOR = {
    failures.KV_BELOW_MAX_MODEL_LEN: "max_model_len",
    failures.NO_KV_MEMORY: "max_num_seqs",
    failures.PROFILE_RUN_OOM: "max_num_seqs",
    failures.SAMPLER_WARMUP_OOM: "max_num_seqs",
    failures.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS: "max_num_seqs",
    failures.CUDA_GRAPH_OOM: "max_num_seqs",
}
# --adjust never lowers max_model_len below this (or the user's own value when smaller): a
# server that takes 16-token requests "starts" but is no use.
MIN_MAX_MODEL_LEN = 1024
_FLAG = {"gpu_memory_utilization": "--gpu-memory-utilization",
         "max_model_len": "--max-model-len", "max_num_seqs": "--max-num-seqs"}


@dataclass(frozen=True)
class Change:
    """One setting lowered by --adjust."""

    field: str
    old: object
    new: object
    reason: str

    @property
    def flag(self) -> str:
        return _FLAG[self.field]

    def describe(self) -> str:
        return f"{self.flag} {self.old} -> {self.new} ({self.reason})"

    def to_dict(self) -> dict:
        return {"flag": self.flag, "old": self.old, "new": self.new, "reason": self.reason}


def _failure(gpus: Sequence[GpuState], s: Settings, plan_for: PlanFor,
             margins: Margins) -> tuple[str | None, object]:
    """(the deciding failure kind or None when every GPU passes, the deciding plan)."""
    worst = None
    for n, g in enumerate(gpus):
        v = judge_gpu(g, s, plan_for, margins, n)
        if not v.ok and (worst is None or v.spare_bytes < worst.spare_bytes):
            worst = v
    if worst is None:
        return None, None
    kind = worst.problems[0].kind if worst.problems else worst.plan.outcome.failure
    return kind, worst.plan


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest v in [lo, hi] with ok(v), for ok true below some threshold; else None."""
    if hi < lo or not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _rounded(field: str, value: int) -> int:
    """Readable values: max_model_len in whole 1024s above 4096, 256s above 1024."""
    if field == "max_model_len":
        step = 1024 if value >= 4096 else 256 if value >= 1024 else 1
        return value // step * step
    return value


def adjust(gpus: Sequence[GpuState], settings: Settings, plan_for: PlanFor,
           margins: Margins = Margins()) -> tuple[Settings, tuple[Change, ...]]:
    """Settings lowered step by step until the launch passes on `gpus` (the GPUs vLLM will
    use), and the changes made. When no change helps, the partial result is returned: the
    caller judges it again and stays unsafe."""
    changes: list[Change] = []
    s = settings
    for _ in range(4):                       # each knob at most once or twice
        kind, plan = _failure(gpus, s, plan_for, margins)
        if kind is None:
            break
        if kind in FREE_FAILURES + ("headroom",) and not any(
                c.field == "gpu_memory_utilization" for c in changes):
            utils = [highest_utilization(g, s, plan_for, margins) for g in gpus]
            if any(u is None for u in utils):
                break
            u = min(utils)
            old = plan.settings.get("gpu_memory_utilization")
            if old is not None and u >= old:
                break
            changes.append(Change("gpu_memory_utilization", old, u,
                                  "the free GPU memory allows no more"))
            s = s.with_(gpu_memory_utilization=u)
            continue
        field = _KNOB_FOR.get(kind)
        if field is None or (field == "max_model_len" and s.max_model_len_auto):
            break
        current = plan.settings.get(field)
        if not isinstance(current, int) or current <= 1:
            break

        def fixed(v: int, field=field, kind=kind) -> bool:
            k, _ = _failure(gpus, s.with_(**{field: v}), plan_for, margins)
            return k != kind
        floor = min(current - 1, MIN_MAX_MODEL_LEN) if field == "max_model_len" else 1
        best = _largest(max(1, floor), current - 1, fixed)
        if best is None:
            break
        nice = _rounded(field, best)
        best = nice if nice >= 1 and fixed(nice) else best
        changes.append(Change(field, current, best, f"fixes {kind}"))
        s = s.with_(**{field: best})
    return s, tuple(changes)
