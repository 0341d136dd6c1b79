"""Plain-text rendering of a `vramguard check` result (probe.gate.CheckResult).

Takes results, never computes them: every number is a field of the result (bytes are only
converted to GiB for display).
"""

from __future__ import annotations

from ..core.gpu import GpuState
from ..probe.verdict import ERROR

GIB = 1 << 30


def _g(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


def _paint(text: str, code: str, color: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if color else text


def _free(g: GpuState) -> str:
    if g.free_min_bytes is None or g.free_min_bytes == g.free_max_bytes:
        return f"{_g(g.free_bytes)} GiB"
    return (f"{_g(g.free_min_bytes)} / {_g(g.free_median_bytes)} / {_g(g.free_max_bytes)} GiB "
            "(min/med/max)")


def _procs(g: GpuState) -> list[str]:
    out = []
    for p in g.processes:
        name = p.name or "?"
        mem = f"{_g(p.used_bytes)} GiB" if p.used_bytes is not None else "? GiB"
        out.append(f"PID {p.pid} {name} {mem}")
    return out


def _gpu_lines(result, color: bool) -> list[str]:
    verdicts = {id(v.gpu): v for v in result.verdicts}
    lines = []
    for g in result.visible:
        v = verdicts.get(id(g))
        label = g.spec.name if g.spec.source != "nvml" else (g.spec.full_name or g.spec.name)
        head = (f"GPU {g.index}  {label}  total {_g(g.spec.total_bytes)} GiB  "
                f"free {_free(g)}")
        if g.utilization_pct is not None:
            head += f"  util {g.utilization_pct:.0f}%"
        if v is None:
            lines.append(_paint(head + "  (not used by this launch)", "2", color))
        else:
            state = (_paint("ok", "32", color) if v.ok else _paint("UNSAFE", "31;1", color))
            lines.append(f"{head}  {state}")
            left = (f"leaving {_g(v.spare_bytes)} GiB" if v.spare_bytes >= 0
                    else f"short by {_g(-v.spare_bytes)} GiB")
            lines.append(f"    vLLM takes {_g(v.takes_bytes)} GiB, {left}")
        procs = _procs(g)
        if procs:
            lines.append("    other processes: " + "; ".join(procs))
        for note in g.notes:
            lines.append(_paint(f"    note: {note}", "2", color))
    return lines


def _plan_lines(result) -> list[str]:
    plan = result.plan
    if plan is None:
        return []
    s = plan.settings
    out = [f"vLLM {plan.vllm_version} ({plan.engine}), {plan.model}: "
           f"TP {s.get('tensor_parallel_size', 1)} x PP {s.get('pipeline_parallel_size', 1)}, "
           f"--gpu-memory-utilization {s.get('gpu_memory_utilization')}, "
           f"--max-model-len {s.get('max_model_len')}"]
    kv = plan.kv
    if plan.outcome.ok and kv is not None:
        out.append(f"  predicted KV cache: {kv.tokens:,} tokens, {kv.max_concurrency:.2f}x "
                   f"concurrency at {kv.max_model_len:,} tokens (tightest GPU)")
    return out


def _problem_lines(result, color: bool) -> list[str]:
    out = []
    for p in result.problems:
        mark = _paint("x", "31", color) if p.severity == ERROR else _paint("!", "33", color)
        out.append(f"  {mark} {p.kind}: {p.message}")
        if p.fix:
            out.append(f"      fix: {p.fix}")
    return out


def _host_lines(result) -> list[str]:
    h, need = result.host, result.host_need
    if h is None:
        return []
    parts = [f"RAM {_g(h.ram_available_bytes)}/{_g(h.ram_total_bytes)} GiB available"]
    if h.cgroup_limit_bytes is not None:
        parts.append(f"cgroup v{h.cgroup_version} limit {_g(h.cgroup_limit_bytes)} GiB")
    if h.shm_total_bytes is not None:
        parts.append(f"/dev/shm {h.shm_total_bytes / (1 << 20):.0f} MiB")
    line = "host: " + ", ".join(parts)
    if need is not None:
        line += f"; vLLM needs about {_g(need.total_bytes)} GiB"
    return [line]


def render_check(result, *, color: bool = False) -> str:
    """The check as text: GPUs, the plan, problems with fixes, the verdict last."""
    lines = _plan_lines(result)
    if result.window is not None:
        w = result.window
        lines.append(f"window: {w.samples} samples over {w.duration_s:.0f}s "
                     f"(every {w.interval_s:g}s); the plan uses the lowest free memory seen")
    lines.append("")
    lines += _gpu_lines(result, color)
    host = _host_lines(result)
    if host:
        lines += [""] + host
    if result.problems:
        lines += ["", "problems:"] + _problem_lines(result, color)
    if result.adjustments and not result.ok:
        lines.append("  safe settings: " + ", ".join(c.describe() for c in result.adjustments)
                     + "  (`vramguard run --adjust` applies them)")
    for note in result.notes:
        lines.append(_paint(f"note: {note}", "2", color))
    t = result.tightest
    lines.append("")
    if result.ok:
        which = f" (tightest: GPU {t.gpu.index}, {_g(t.spare_bytes)} GiB to spare)" if t else ""
        lines.append(_paint(f"SAFE to launch{which}", "32;1", color))
    else:
        which = f": GPU {t.gpu.index} decides" if t and not t.ok else ""
        lines.append(_paint(f"UNSAFE to launch{which}", "31;1", color))
    return "\n".join(lines)
