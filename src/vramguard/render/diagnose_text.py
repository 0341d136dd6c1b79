"""Plain-text rendering of a Diagnosis (and of the plan next to it). Never computes."""

from __future__ import annotations

from ..logs.diagnose import Diagnosis
from ..logs.extracted import PHASE_TEXT

_STATUS = {"started": "STARTED", "failed": "FAILED", "incomplete": "INCOMPLETE LOG",
           "empty": "NOTHING TO DIAGNOSE"}


def _v(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.2f}".rstrip("0").rstrip(".") if abs(x) < 1e6 else f"{x:,.0f}"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return str(x)


def _flags(flags: dict) -> str:
    parts = []
    for k, v in flags.items():
        if k.startswith("env "):
            parts.append(f"{k[4:]}={v}")
        elif k == "docker":
            parts.append(f"docker run {v}")
        else:
            parts.append(f"{k} {v}".strip())
    return " ".join(parts)


def render(d: Diagnosis, *, source: str | None = None, side_by_side=None,
           plan_note: str | None = None) -> str:
    """The human report: verdict, cause, fixes, the numbers and what the log showed."""
    ex = d.extracted
    head = _STATUS.get(d.status, d.status.upper())
    lines = []
    title = f"{head}"
    if d.status == "failed":
        title += f" during {PHASE_TEXT.get(d.phase, d.phase)}"
        if d.failure:
            title += f"  [{d.failure}]"
    elif d.status == "incomplete":
        title += f" (reached {PHASE_TEXT.get(d.phase, d.phase)})"
    lines.append(title)
    ident = []
    if ex is not None:
        if ex.model:
            ident.append(ex.model)
        if ex.version:
            ident.append(f"vLLM {ex.version}" + (f" ({ex.engine})" if ex.engine else ""))
        if ex.device and ex.device != "cuda":
            ident.append(ex.device)
    if source:
        ident.append(source)
    if ident:
        lines.append("  " + " | ".join(ident))
    lines += ["", d.cause]
    if d.fixes:
        lines += ["", "Fix (pick one):"]
        for f in d.fixes:
            flag_text = _flags(f.flags)
            lines.append(f"  {flag_text:<44} {f.summary}" if flag_text else f"  - {f.summary}")
    if d.numbers:
        nums = ", ".join(f"{k}={_v(v)}" for k, v in d.numbers.items()
                         if not isinstance(v, (dict, list, tuple)))
        if nums:
            lines += ["", "Numbers: " + nums]
    for note in d.notes:
        lines.append(f"Note: {note}")
    if d.evidence:
        lines += ["", "From the log:"]
        lines += [f"  {e[:300]}" for e in d.evidence]
    if side_by_side:
        lines += ["", f"  {'':<18} {'vLLM logged':>14} {'vramguard plan':>16}"]
        lines += [f"  {name:<18} {_v(a):>14} {_v(b):>16}" for name, a, b in side_by_side]
        if plan_note:
            lines.append(f"  ({plan_note})")
    elif plan_note:
        lines += ["", f"(no plan side by side: {plan_note})"]
    return "\n".join(lines)
