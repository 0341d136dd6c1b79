"""The launch gate: live GPU state + the planner -> a verdict per GPU, problems and fixes.

Pure (no I/O): the planner comes in as `plan_for(settings, gpu_state, cuda_ordinal=0) -> Plan`
(`cuda_ordinal`: the GPU's position among those CUDA shows vLLM, named in its messages), so the
command passes the real `core.planner.plan` and tests pass a hand-built one. vLLM's own
rules (the free >= utilization x total check, whole-GPU versions, ...) live in the planner and
the version table; this module adds the safety margins and turns failures into fixes:
the highest --gpu-memory-utilization that passes, or which PIDs to stop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..core import failures
from ..core.gpu import GpuState
from ..core.plan import Plan
from ..core.settings import Settings
from .host import HostNeed, HostState
from .verdict import ERROR, WARNING, Problem
from .window import Window

GIB = 1 << 30
DEFAULT_HEADROOM_BYTES = GIB // 2
PlanFor = Callable[..., Plan]      # (settings, gpu_state, cuda_ordinal=0) -> Plan
# Failures that free memory decides (the free-memory check, or no room for the weights).
FREE_FAILURES = (failures.FREE_MEMORY_BELOW_REQUEST, failures.WEIGHTS_OOM)


@dataclass(frozen=True)
class Margins:
    """The user's safety margins: every selected GPU keeps `headroom_bytes` free beyond what
    vLLM takes, and shows at least `min_free_bytes` free."""

    headroom_bytes: int = DEFAULT_HEADROOM_BYTES
    min_free_bytes: int = 0


@dataclass(frozen=True)
class GpuVerdict:
    """One selected GPU: its plan, what vLLM takes from it and what would be left."""

    gpu: GpuState
    plan: Plan
    takes_bytes: int            # what this vLLM will take on the GPU (CUDA context included)
    spare_bytes: int            # free - takes (negative: short)
    ok: bool
    problems: tuple[Problem, ...] = ()

    def to_dict(self) -> dict:
        return {"index": self.gpu.index, "uuid": self.gpu.uuid, "ok": self.ok,
                "takes_bytes": self.takes_bytes, "spare_bytes": self.spare_bytes,
                "startup": self.plan.outcome.to_dict(),
                "problems": [p.kind for p in self.problems]}


@dataclass(frozen=True)
class CheckResult:
    """Everything `vramguard check` found. `ok` is False when any ERROR problem exists."""

    ok: bool
    visible: tuple[GpuState, ...]
    verdicts: tuple[GpuVerdict, ...]          # the GPUs vLLM will use, in CUDA order
    needed_gpus: int
    problems: tuple[Problem, ...]
    adjustments: tuple = ()                   # probe.adjust.Change: lowered settings that pass
    host: HostState | None = None
    host_need: HostNeed | None = None
    window: Window | None = None
    notes: tuple[str, ...] = ()

    @property
    def tightest(self) -> GpuVerdict | None:
        """The GPU that decides: the least spare memory (then the least free)."""
        if not self.verdicts:
            return None
        return min(self.verdicts, key=lambda v: (v.ok, v.spare_bytes, v.gpu.free_bytes))

    @property
    def suggested(self) -> dict[str, object]:
        """Settings (vLLM field names) that make the GPU side pass, from `adjustments`."""
        return {c.field: c.new for c in self.adjustments}

    @property
    def plan(self) -> Plan | None:
        t = self.tightest
        return t.plan if t else None

    def to_dict(self) -> dict:
        selected = {id(v.gpu): v for v in self.verdicts}
        gpus = []
        for g in self.visible:
            v = selected.get(id(g))
            gpus.append({
                "index": g.index, "uuid": g.uuid, "name": g.spec.full_name or g.spec.name,
                "catalog_name": g.spec.name, "spec_source": g.spec.source,
                "total_bytes": g.spec.total_bytes, "free_bytes": g.free_bytes,
                "free_min_bytes": g.free_min_bytes, "free_median_bytes": g.free_median_bytes,
                "free_max_bytes": g.free_max_bytes, "used_bytes": g.used_bytes,
                "utilization_pct": g.utilization_pct,
                "processes": [{"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes}
                              for p in g.processes],
                "notes": list(g.notes), "selected": v is not None,
                "verdict": v.to_dict() if v else None})
        t = self.tightest
        return {"ok": self.ok, "needed_gpus": self.needed_gpus,
                "tightest_index": t.gpu.index if t else None,
                "tightest_uuid": t.gpu.uuid if t else None,
                "gpus": gpus, "plan": self.plan.to_dict() if self.plan else None,
                "problems": [p.to_dict() for p in self.problems],
                "suggested": dict(self.suggested),
                "adjustments": [c.to_dict() for c in self.adjustments],
                "host": self.host.to_dict() if self.host else None,
                "host_need": self.host_need.to_dict() if self.host_need else None,
                "window": self.window.to_dict() if self.window else None,
                "notes": list(self.notes)}


# ---- per GPU ---------------------------------------------------------------------------
def _whole_gpu(plan: Plan) -> bool:
    from ..core.rules import resolve_rules
    return resolve_rules(plan.vllm_version, plan.engine).whole_gpu


def spare_bytes(plan: Plan) -> int:
    """What the GPU keeps free once this vLLM has taken its share, per the plan's ledger:
    F - R in per-instance versions (vLLM holds its CUDA context plus its request u x total;
    F is the free memory at its snapshot, after its context), and total - R in versions that
    charge the whole GPU (0.6.4, v1 0.7-0.9.0: vLLM fills the GPU up to u x total)."""
    t = plan.tightest
    if _whole_gpu(plan):
        return t.total.value_bytes - t.requested.value_bytes
    return t.free_at_start.value_bytes - t.requested.value_bytes


def _gib(n: int | float) -> str:
    return f"{n / GIB:.2f} GiB"


def judge_gpu(gpu: GpuState, settings: Settings, plan_for: PlanFor,
              margins: Margins, cuda_ordinal: int = 0) -> GpuVerdict:
    """Plan vLLM on this GPU as measured and check the margins."""
    plan = plan_for(settings, gpu, cuda_ordinal=cuda_ordinal)
    spare = spare_bytes(plan)
    takes = gpu.free_bytes - spare
    problems: list[Problem] = []
    out = plan.outcome
    where = f"GPU {gpu.index}"
    if not out.ok and out.failure in FREE_FAILURES:
        text = out.message or out.failure
        problems.append(Problem(out.failure, f"{where}: {text}", gpu_index=gpu.index))
    elif spare < margins.headroom_bytes:
        problems.append(Problem(
            "headroom",
            f"{where}: {_gib(gpu.free_bytes)} free, vLLM takes {_gib(takes)} "
            f"({_util_text(plan)} x {_gib(gpu.spec.total_bytes)} and its CUDA context): "
            f"{_gib(spare)} to spare, "
            f"less than the {_gib(margins.headroom_bytes)} headroom (--headroom-gib)",
            gpu_index=gpu.index))
    if gpu.free_bytes < margins.min_free_bytes:
        problems.append(Problem(
            "min_free", f"{where}: {_gib(gpu.free_bytes)} free, less than --min-free-gib "
                        f"{margins.min_free_bytes / GIB:g}", gpu_index=gpu.index))
    return GpuVerdict(gpu=gpu, plan=plan, takes_bytes=takes, spare_bytes=spare,
                      ok=not problems and out.ok, problems=tuple(problems))


def _util_text(plan: Plan) -> str:
    u = plan.settings.get("gpu_memory_utilization")
    return f"{u:g}" if isinstance(u, (int, float)) else "u"


# ---- fixes -----------------------------------------------------------------------------
def highest_utilization(gpu: GpuState, settings: Settings, plan_for: PlanFor,
                        margins: Margins) -> float | None:
    """The highest --gpu-memory-utilization (in steps of 0.01) at which vLLM's take leaves
    the headroom free on `gpu`; None when even 0.01 does not. Found with the planner."""
    def fits(k: int) -> bool:
        plan = plan_for(settings.with_(gpu_memory_utilization=k / 100), gpu)
        if not plan.outcome.ok and plan.outcome.failure == failures.FREE_MEMORY_BELOW_REQUEST:
            return False
        return spare_bytes(plan) >= margins.headroom_bytes
    lo, hi = 0, 99
    while lo < hi:                     # largest k in [1, 99] with fits(k); 0 = none
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo / 100 if lo else None


def processes_to_stop(gpu: GpuState, short_bytes: int) -> tuple[list, bool]:
    """The fewest other processes (largest first) whose memory covers `short_bytes`, and
    whether they do (False when NVML's list does not account for enough memory)."""
    chosen, freed = [], 0
    for p in sorted(gpu.processes, key=lambda p: -(p.used_bytes or 0)):
        if freed >= short_bytes or not p.used_bytes:
            break
        chosen.append(p)
        freed += p.used_bytes
    return chosen, freed >= short_bytes


def _pid_text(p) -> str:
    name = f" {p.name}" if p.name else ""
    mem = f", {_gib(p.used_bytes)}" if p.used_bytes else ""
    return f"PID {p.pid}{name}{mem}"


def free_fix(v: GpuVerdict, settings: Settings, plan_for: PlanFor, margins: Margins,
             window: Window | None = None) -> str:
    """The fix text for a GPU short of free memory: the highest --gpu-memory-utilization
    that fits (and whether vLLM then starts), which PIDs to stop, or another GPU."""
    parts: list[str] = []
    u = highest_utilization(v.gpu, settings, plan_for, margins)
    if u is not None:
        plan = plan_for(settings.with_(gpu_memory_utilization=u), v.gpu)
        if plan.outcome.ok:
            kv = plan.kv
            tail = (f" (KV cache {kv.tokens:,} tokens, {kv.max_concurrency:.2f}x concurrency)"
                    if kv else "")
            parts.append(f"lower --gpu-memory-utilization to {u:g}{tail}")
        else:
            parts.append(f"--gpu-memory-utilization {u:g} would fit the free memory, but then "
                         f"vLLM fails ({plan.outcome.failure})")
    short = margins.headroom_bytes - v.spare_bytes
    procs, enough = processes_to_stop(v.gpu, short)
    if procs:
        who = " and ".join(_pid_text(p) for p in procs)
        parts.append(f"stop {who}" + ("" if enough else
                                      " (not enough alone: NVML does not list the rest)"))
    elif short > 0:
        parts.append(f"free {_gib(short)} on GPU {v.gpu.index} (NVML lists no process using it)")
    gone = [e for e in (window.events if window else ())
            if e.kind == "left" and e.gpu_uuid == v.gpu.uuid and e.gpu_index == v.gpu.index]
    if gone:
        who = ", ".join(_pid_text(e) for e in gone)
        parts.append(f"{who} held memory during the window and has left: wait for the GPU "
                     "(`vramguard run --wait-for-free`) if it comes back")
    parts.append("or pick another GPU with CUDA_VISIBLE_DEVICES")
    return "; ".join(parts)


def _plan_fix(plan: Plan) -> str | None:
    if not plan.fixes:
        return None
    texts = []
    for f in plan.fixes:
        flags = " ".join(f"{k if k.startswith('-') else '--' + k.replace('_', '-')} {v}"
                         for k, v in f.flags.items())
        texts.append(f.summary + (f" ({flags})" if flags else ""))
    return "; or ".join(texts)


# ---- the whole check -------------------------------------------------------------------
def evaluate(visible: Sequence[GpuState], settings: Settings, plan_for: PlanFor, *,
             margins: Margins = Margins(), host: HostState | None = None,
             host_problems: Sequence[Problem] = (), host_need: HostNeed | None = None,
             window: Window | None = None, notes: Sequence[str] = ()) -> CheckResult:
    """Select the GPUs vLLM will use (the first TP x PP x DP visible ones), judge each with
    the planner, and gather problems with fixes. The tightest GPU decides."""
    needed = settings.world_size * max(1, settings.data_parallel_size)
    selected = list(visible[:needed])
    problems: list[Problem] = []
    if not visible:
        problems.append(Problem("no_gpu", "no GPU is visible to CUDA",
                                fix="Check CUDA_VISIBLE_DEVICES and `nvidia-smi -L`"))
    elif len(visible) < needed:
        problems.append(Problem(
            "not_enough_gpus",
            f"vLLM needs {needed} GPUs (tensor x pipeline x data parallel) but "
            f"{len(visible)} {'is' if len(visible) == 1 else 'are'} visible",
            fix="Lower --tensor-parallel-size / --pipeline-parallel-size, or make more GPUs "
                "visible (CUDA_VISIBLE_DEVICES, --gpus)"))
    verdicts = [judge_gpu(g, settings, plan_for, margins, n) for n, g in enumerate(selected)]
    for v in verdicts:
        for p in v.problems:
            if p.kind in FREE_FAILURES + ("headroom",):
                text = free_fix(v, settings, plan_for, margins, window)
                if p.kind == failures.WEIGHTS_OOM and _plan_fix(v.plan):
                    text += f"; or {_plan_fix(v.plan)}"
                p = Problem(p.kind, p.message, fix=text, gpu_index=p.gpu_index)
            problems.append(p)
    adjustments: tuple = ()
    if verdicts and not all(v.ok for v in verdicts):
        from .adjust import adjust          # NOTE: adjust builds on this module
        fixed, changes = adjust(selected, settings, plan_for, margins)
        if changes and all(judge_gpu(g, fixed, plan_for, margins, n).ok
                           for n, g in enumerate(selected)):
            adjustments = changes
    result = CheckResult(ok=False, visible=tuple(visible), verdicts=tuple(verdicts),
                         needed_gpus=needed, problems=(), adjustments=adjustments, host=host,
                         host_need=host_need, window=window, notes=tuple(notes))
    t = result.tightest
    if t is not None:
        out = t.plan.outcome
        if not out.ok and out.failure not in FREE_FAILURES:
            problems.append(Problem(out.failure or "startup_failure",
                                    f"GPU {t.gpu.index}: {out.message or out.failure}",
                                    fix=_plan_fix(t.plan), gpu_index=t.gpu.index))
        problems += [Problem("risk", r, severity=WARNING, gpu_index=t.gpu.index)
                     for r in out.risks]
    problems += list(host_problems)
    ok = not any(p.severity == ERROR for p in problems)
    return replace(result, ok=ok, problems=tuple(problems))
