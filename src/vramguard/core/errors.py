"""The one exception family of vramguard.

Every message says what was wrong, where, and what to do. Adapters translate foreign
errors (json, OSError, pynvml, HTTP) into these at their boundary; the CLI turns any
`VramguardError` into one line on stderr and exit code 2.
"""

from __future__ import annotations


class VramguardError(Exception):
    """Base class. `what` is the problem, `where` the file/flag/URL, `fix` the remedy."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None):
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self.line())

    def line(self) -> str:
        """The single line the CLI prints: `where: what. fix`."""
        text = f"{self.where}: {self.what}" if self.where else self.what
        if self.fix:
            text = text.rstrip(". ") + f". {self.fix}"
        return text


class UsageError(VramguardError):
    """Bad flags, contradictory options, unknown GPU names, vLLM's own validation."""


class SourceError(VramguardError):
    """A model source (config.json, safetensors, GGUF, cache, hub) is missing or malformed."""


class ProbeError(VramguardError):
    """NVML, cgroups or another probe of the live machine failed."""


class MonitorError(VramguardError):
    """A metrics endpoint, the history database or the exporter failed."""


class LogParseError(VramguardError):
    """A log file cannot be read at all (parsing itself never raises)."""
