"""The streaming vLLM log parser: lines in, one frozen `Extracted` out. Never raises on content.

    from vramguard.logs.parser import parse
    ex = parse("vllm.log")          # a path, "-" for stdin, bytes, or a binary file object

`LogParser.feed(line)` takes one cleaned line at a time (see reader.py) and returns True
while a wrapped message waits for its continuation lines. Each handler (handlers.py, mixed
into LogParser) runs only after a cheap substring test; values printed once per worker are combined the way vLLM combines
them (the minimum KV pool / tokens / concurrency / blocks; the largest weights and terms).
A second startup in the same log (a restart) starts a fresh record: the last one wins.
"""

from __future__ import annotations

import re
from dataclasses import fields

from . import extracted as X
from . import patterns as P
from .extracted import Extracted, LogError, ServingStats, TorchOom, phase_index
from .fields import parse_args_dict, parse_oom
from .versions import version_tuple
# NOTE: _HANDLERS and _is_stats are re-exported for tests and for the fast path below.
from .handlers import _HANDLERS, LineHandlers, _is_stats
from .reader import MAX_CONTINUATION_LINES, ScanStats, scan, split_prefix

__all__ = ["LogParser", "parse", "parse_text", "parse_args_dict", "parse_oom"]

_MSG_CHARS = 600
_MAX_ERRORS = 200
_TEARDOWN_KINDS = {"engine_failed", "error_line", "exception", "distributed"}
_EXTRACTED_FIELDS = {f.name for f in fields(Extracted)}

# Wrapped messages (pasted excerpts, terminal wrapping): start substring -> "complete" test.
_WRAPPABLE = (
    ("To serve at least one request", re.compile(r"Try increasing|details|model length is\s+\d+"
                                                 r"\s*\.")),
    ("max seq len (", re.compile(r"KV cache \(\d+\)|KV cache memory \(")),
    ("on startup. Desired", re.compile(r"in use is\s+\S+")),
    ("on startup is less than", re.compile(r"less than.*GiB\)")),
    ("exceeds available Mamba", re.compile(r"blocks \(\d+\)")),
    ("Tried to allocate", re.compile(r"is free|free;|total capacity")),
    ("Maximum concurrency for", re.compile(r"\d\s*x")),
)

_ABSURD_NUMBER = re.compile(r"\d{21,}")
# NOTE: values read from dicts a log prints (`non-default args: {...}`) can be of any type
_STR_FIELDS = frozenset({"model", "version", "engine", "architecture"})
_INT_FIELDS = frozenset({"max_model_len", "block_size"})


def _plausible(name: str, value) -> bool:
    if name in _STR_FIELDS:
        return isinstance(value, str)
    if name in _INT_FIELDS:
        return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**15
    return True


class LogParser(LineHandlers):
    """Accumulates one log. `feed(line) -> bool`; `result(stats) -> Extracted`."""

    def __init__(self) -> None:
        self._startups = 0
        self._seq = 0
        self._recognized_total = 0
        self._pending: list[str] | None = None
        self._touched = False
        self._line_errors = 0
        self._pending_done: re.Pattern | None = None
        self._reset()

    # ---- state -------------------------------------------------------------------------
    def _reset(self) -> None:
        self.v: dict = {}
        self.errors: list[LogError] = []
        self._error_keys: set = set()
        self._error_lines = 0
        self.stats: dict = {}
        self.markers: set[str] = set()
        self.phase = X.STARTUP
        self.frame: tuple[str, str] | None = None   # (function, phase) of a traceback frame
        # NOTE: a torch OOM logged before its traceback (vLLM's `logger.exception` style):
        # [its index in `errors`, whether its traceback has begun]
        self.oom_before_frames: list | None = None

    def _set(self, name: str, value, mode: str = "first") -> None:
        if value is None or not _plausible(name, value):
            return
        self._touched = True
        old = self.v.get(name)
        if old is None or mode == "last":
            self.v[name] = value
        elif mode == "min":
            self.v[name] = min(old, value)
        elif mode == "max":
            self.v[name] = max(old, value)

    def _advance(self, phase: str) -> None:
        self._touched = True
        if phase_index(phase) > phase_index(self.phase):
            self.phase = phase

    def _marker(self, kind: str) -> None:
        """A startup marker (server banner, args, engine init). Repeated after the last
        startup got past weight loading, it means a restart: start a fresh record."""
        if kind in self.markers and phase_index(self.phase) >= phase_index(X.PROFILING):
            self._reset()
        if not self.markers:
            self._startups += 1
        self.markers.add(kind)
        self._advance(X.FREE_MEMORY_CHECK)

    def _error(self, kind: str, msg: str, phase: str | None = None, oom: TorchOom | None = None,
               **numbers) -> None:
        if self.v.get("stopped") and kind in _TEARDOWN_KINDS:
            return          # NOTE: tracebacks of a deliberate shutdown are not failures
        if P.INFO_RECORD.match(msg):
            return          # NOTE: INFO/DEBUG lines (request logs echo prompts) never are
        key = (kind, msg[:200])
        if key in self._error_keys or len(self.errors) >= _MAX_ERRORS:
            return
        self._error_keys.add(key)
        self._touched = True
        if phase:
            self._advance(phase)
        self.errors.append(LogError(kind, msg[:_MSG_CHARS], self._seq, phase or self.phase,
                                    {k: v for k, v in numbers.items() if v is not None}, oom))

    def in_startup(self) -> bool:
        """A startup has begun and not yet reached serving (the scanner keeps every anchor)."""
        return bool(self.markers) and self.phase != X.SERVING and not self.errors

    # ---- input -------------------------------------------------------------------------
    def feed(self, line: str) -> bool:
        """Take one cleaned line; True when a wrapped message wants the next line too."""
        try:
            return self._feed(line)
        except Exception:          # NOTE: a parser never lets a malformed line escape
            self._pending = None
            return False

    def _feed(self, line: str) -> bool:
        self._seq += 1
        if self._pending is None:       # NOTE: the hot paths of a serving log
            if _is_stats(line):
                self._stats(line)
                self._recognized_total += 1
                return False
            if "is preempted by" in line:
                self.stats["preempted_warnings"] = self.stats.get("preempted_warnings", 0) + 1
                self._recognized_total += 1
                return False
        if self._pending is not None:
            if P.NEW_RECORD.match(line) or len(self._pending) > MAX_CONTINUATION_LINES:
                self._flush()
            else:
                self._pending.append(line.strip().strip("`"))
                text = " ".join(self._pending)
                if self._pending_done.search(text):
                    self._flush()
                    return False
                return True
        _, msg = split_prefix(line)
        for start, done in _WRAPPABLE:
            if start in msg and not done.search(msg):
                self._pending, self._pending_done = [msg.rstrip().rstrip("`")], done
                return True
        self._handle(msg)
        return False

    def _flush(self) -> None:
        text = " ".join(self._pending or [])
        self._pending = self._pending_done = None
        if text:
            self._handle(text)

    def _handle(self, msg: str) -> None:
        self._touched = False
        self._line_errors = len(self.errors)
        if _ABSURD_NUMBER.search(msg):
            return          # NOTE: no vLLM quantity has 21+ digits: a corrupt line, not data
        if _is_stats(msg):
            self._stats(msg)
        else:
            for anchors, handler in _HANDLERS:
                if any(a in msg for a in anchors):
                    handler(self, msg)
        if self._touched:
            self._recognized_total += 1

    # ---- output ------------------------------------------------------------------------
    def _engine(self) -> str | None:
        return self.v.get("engine") or self.v.get("engine_hint")

    def result(self, stats: ScanStats | None = None) -> Extracted:
        """The Extracted of everything fed so far (flushes a pending wrapped message)."""
        if self._pending is not None:
            try:
                self._flush()
            except Exception:
                self._pending = None
        v = {k: val for k, val in self.v.items() if k in _EXTRACTED_FIELDS}
        v["engine"] = self._engine() or _engine_from_version(v.get("version"))
        cfg = v.get("engine_config") or {}
        if v.get("max_model_len") is None:
            v["max_model_len"] = cfg.get("max_model_len") or v.get("concurrency_tokens_per_request")
        st = self.stats
        if st.get("n") or st.get("preempted_warnings"):
            v["stats"] = ServingStats(
                samples=st.get("n", 0), last_running=st.get("last_running"),
                last_waiting=st.get("last_waiting"), max_running=st.get("max_running"),
                max_waiting=st.get("max_waiting"), last_kv_usage_pct=st.get("last_kv"),
                max_kv_usage_pct=st.get("max_kv"),
                preemptions=st.get("preemptions", 0) + st.get("preempted_warnings", 0),
                max_swapped=st.get("max_swapped"))
        stats = stats or ScanStats()
        return Extracted(**v, errors=tuple(self.errors), phase=self.phase,
                         startups=self._startups, bytes_read=stats.bytes_read,
                         lines=stats.lines or self._seq, recognized_lines=self._recognized_total,
                         truncated_lines=stats.truncated_lines)


def _engine_from_version(version: str | None) -> str | None:
    """v1 from 0.11 (v0 removed), v0 before 0.7 (no v1); in between it depends."""
    v = version_tuple(version)
    if v is None:
        return None
    return "v1" if v >= (0, 11, 0) else "v0" if v < (0, 7, 0) else None


def parse(source, *, full: bool = False, **scan_options) -> Extracted:
    """Parse a vLLM log (path, "-", bytes or binary stream) into an Extracted.

    Raises LogParseError only when the input cannot be read at all; content never raises.
    `full=True` feeds every line to the parser (the slow reference path).
    """
    parser = LogParser()
    stats = scan(source, parser.feed, full=full, in_startup=parser.in_startup, **scan_options)
    return parser.result(stats)


def parse_text(text: str) -> Extracted:
    """Parse a log held in a string (tests, pasted excerpts)."""
    return parse(text.encode("utf-8", errors="replace"))
