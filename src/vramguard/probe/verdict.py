"""The check's verdict vocabulary: problems found on the live machine, each with its fix.

Shared by the GPU gate (`probe/gate.py`), the host checks (`probe/host.py`), `vramguard check`
and `vramguard run`. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"       # vLLM will fail or be killed: the check is unsafe (exit 1)
WARNING = "warning"   # a risk worth reading; the check still passes


@dataclass(frozen=True)
class Problem:
    """One finding: `kind` is a stable identifier, `message` says what with numbers, `fix`
    says what to do. `gpu_index` is set for per-GPU findings."""

    kind: str
    message: str
    fix: str | None = None
    severity: str = ERROR
    gpu_index: int | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "severity": self.severity, "message": self.message,
                "fix": self.fix, "gpu_index": self.gpu_index}
