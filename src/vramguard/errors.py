"""The exception family, re-exported for adapters and the CLI.

NOTE: the classes live in `vramguard.core.errors` so that the pure core, which raises
vLLM's own validation errors, imports nothing from above it.
"""

from .core.errors import (LogParseError, MonitorError, ProbeError, SourceError, UsageError,
                          VramguardError)

__all__ = ["VramguardError", "UsageError", "SourceError", "ProbeError", "MonitorError",
           "LogParseError"]
