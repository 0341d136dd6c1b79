"""Reading vLLM logs in bounded memory: bytes in, clean text lines out.

Two ways through a log, sharing one line-cleaning function:

- `iter_lines(source)` yields every line, cleaned (the general streaming API);
- `scan(source, feed)` is the fast path of the parser: it reads fixed-size binary chunks and,
  outside "startup windows", only materialises lines that contain one of a few anchor
  substrings (`bytes.find` runs in C), so a 1 GB log of access lines costs a few `find`
  passes instead of millions of Python-level line iterations.

Cleaning: UTF-8 with errors="replace", ANSI colour codes stripped, CR / CRLF / LF all end a
line, lines longer than `max_line_bytes` are truncated (the rest of such a line is skipped
without being held in memory). Process tags such as `(EngineCore_DP0 pid=…)`,
`(VllmWorker rank=0 pid=…)`, `(Worker_TP0 pid=…)` and a `[VLLM_LOGGING_PREFIX]` are split
off by `split_prefix`.
"""

from __future__ import annotations

import io
import os
import re
import sys
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator

from ..errors import LogParseError

CHUNK_BYTES = 4 << 20            # read size; memory stays a small multiple of this
MAX_LINE_BYTES = 64 << 10        # longer lines are truncated to this
STARTUP_WINDOW_BYTES = 2 << 20   # bytes after a startup marker scanned with every anchor
LOOKBACK_BYTES = 256 << 10       # bytes before a mid-log startup marker rescanned too
# NOTE: the longest message parsed, vLLM's --kv-cache-memory suggestion (~600 characters),
# takes 8-9 lines when a quoted excerpt wraps it at 70 columns
MAX_CONTINUATION_LINES = 10      # wrapped messages: physical lines joined at most

# NOTE: every line the parser can use contains one of FULL_ANCHORS (see the routing table `_HANDLERS` in logs/handlers.py).
# In steady state (serving) only FAST_ANCHORS are searched: stats, errors, OOMs, restarts.
# Each anchor costs one C-level pass (~0.5 ms/MB), so the steady-state set is minimal:
# stats and v0 preemption warnings ("KV cache"), exceptions incl. OutOfMemoryError and
# DistBackendError ("Error"), deliberate shutdowns, and restarts ("LLM engine").
FAST_ANCHORS: tuple[bytes, ...] = (b"KV cache", b"Error", b"hutdown", b"LLM engine")
FULL_ANCHORS: tuple[bytes, ...] = FAST_ANCHORS + (
    b"GiB", b" GB", b"rror", b"RROR", b"ailed", b"LLM", b"version", b"args", b"NCCL",
    b"out of memory", b"memory", b"blocks", b"concurrency", b"took", b"aptur", b"raph",
    b"uto-fit", b"serve", b"vllm.entrypoints", b"model len", b"Resolved arch", b"block size",
    b"load model", b"oading", b"SIG", b"startup complete", b"weights take", b"activation peak",
    b"KV Cache", b"can use", b"init engine", b"Watchdog", b"seq len", b"allocate", b"shm",
    b"Bus error", b"died", b"Traceback", b"max_model_len", b"Mamba", b"Desired", b"on startup",
    b"NVIDIA", b"Instinct", b"allreduce", b'File "', b"for profiling",
    # NOTE: a colour code can split an anchor ("K\x1b[31mV cache"); a coloured line in the
    # startup window is read like the every-line path reads it (codes stripped first)
    b"\x1b[",
)
# A FAST candidate matching this re-opens a startup window (a restart mid-log).
_RESTART = re.compile(rb"Initializing (?:an?|a V[01]) LLM engine")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_PROC = re.compile(r"^\s*\(([A-Za-z_][\w.\-]*)(?:[ _][^()]{0,60}?)?\s+pid=(\d+)[^)]*\)\s*")
_VLLM_PREFIX = re.compile(r"^\s*\[[^\]\s:]{1,64}\]\s*(?=\(\w[^)]*pid=|INFO|WARNING|ERROR|DEBUG)")
# vLLM's record head (`INFO 11-19 12:16:36 [core.py:842]`), and one inside a longer line
_RECORD_HEAD = re.compile(r"\s*(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d")
_EMBEDDED = re.compile(r"\([A-Za-z_][\w.\-]*(?:[ _][^()]{0,60}?)?\s+pid=\d+[^)]*\)\s*"
                       r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d")

Feed = Callable[[str], bool]


@dataclass
class ScanStats:
    """What the reader saw: bytes and physical lines, and how many were truncated."""

    bytes_read: int = 0
    lines: int = 0
    truncated_lines: int = 0
    fed_lines: int = 0


def clean(raw: bytes) -> str:
    """One raw line (no terminator) -> text: decoded, ANSI-free, right-stripped."""
    text = raw.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return text.rstrip()


def split_prefix(line: str) -> tuple[str | None, str]:
    """`(EngineCore_DP0 pid=12) INFO …` -> ("EngineCore_DP0:12", "INFO …").

    Also drops a `[VLLM_LOGGING_PREFIX]` in front of it. The tag is None when absent.
    """
    m = _VLLM_PREFIX.match(line)
    if m:
        line = line[m.end():]
    m = _PROC.match(line)
    if not m:
        if not _RECORD_HEAD.match(line):
            # NOTE: a collector's own prefix (cloud logging's `INFO 2025-11-19T20:16:36Z
            # [resource.labels…]`, a pod name) in front of vLLM's record: dropped
            e = _EMBEDDED.search(line, 1)
            if e is not None:
                return split_prefix(line[e.start():])
        return None, line
    return f"{m.group(1)}:{m.group(2)}", line[m.end():]


# ---- opening sources -------------------------------------------------------------------

def open_source(source) -> tuple[BinaryIO, str, bool]:
    """(binary stream, display name, whether we opened it). `source` may be a path, "-"
    (stdin), bytes, or a binary/text file object. Raises LogParseError when unreadable."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(source)), "<bytes>", True
    if source == "-" or source is None:
        return sys.stdin.buffer, "<stdin>", False
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            raise LogParseError("is a directory, not a log file", where=path,
                                fix="Pass the log file, or - to read stdin")
        try:
            return open(path, "rb"), path, True
        except OSError as exc:
            raise LogParseError(f"cannot read the log: {exc.strerror or exc}", where=path,
                                fix="Check the path and permissions, or pipe it: cat LOG | "
                                    "vramguard diagnose -") from None
    if hasattr(source, "buffer"):          # a text stream such as sys.stdin
        return source.buffer, getattr(source, "name", "<stream>"), False
    if hasattr(source, "read"):
        return source, getattr(source, "name", "<stream>"), False
    raise LogParseError(f"cannot read a log from {type(source).__name__}")


def _chunks(stream: BinaryIO, stats: ScanStats, chunk_bytes: int) -> Iterator[bytes]:
    while True:
        try:
            chunk = stream.read(chunk_bytes)
        except OSError as exc:
            raise LogParseError(f"read failed: {exc}") from None
        if not chunk:
            return
        if isinstance(chunk, str):          # a text-mode object slipped through
            chunk = chunk.encode("utf-8", errors="replace")
        stats.bytes_read += len(chunk)
        yield chunk


def _last_terminator(buf: bytes) -> int:
    """The last line end; a final lone CR does not count (its LF may be in the next chunk)."""
    cut = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
    if cut == len(buf) - 1 and buf[cut] == 13:
        cut = max(buf.rfind(b"\n", 0, cut), buf.rfind(b"\r", 0, cut))
    return cut


def _bodies(stream: BinaryIO, stats: ScanStats, max_line: int,
            chunk_bytes: int) -> Iterator[bytes]:
    """Runs of complete lines (ending with a terminator; the last may not), in order.

    A line longer than `max_line` is cut: its first `max_line` bytes come out as a line
    of their own and the rest is dropped up to the next terminator.
    """
    carry = b""
    skipping = False
    for chunk in _chunks(stream, stats, chunk_bytes):
        if skipping:
            cut = min((p for p in (chunk.find(b"\n"), chunk.find(b"\r")) if p != -1),
                      default=-1)
            if cut == -1:
                continue
            chunk, skipping = chunk[cut:], False
        buf = carry + chunk if carry else chunk
        cut = _last_terminator(buf)
        if cut == -1:
            if len(buf) > max_line:
                stats.truncated_lines += 1
                yield buf[:max_line] + b"\n"
                carry, skipping = b"", True
            else:
                carry = buf
            continue
        carry = buf[cut + 1:]
        yield buf[:cut + 1]
        if len(carry) > max_line:
            stats.truncated_lines += 1
            yield carry[:max_line] + b"\n"
            carry, skipping = b"", True
    if carry and not skipping:
        yield carry


def _split(body: bytes) -> list[bytes]:
    return body.splitlines()


def iter_lines(source, *, max_line_bytes: int = MAX_LINE_BYTES,
               chunk_bytes: int = CHUNK_BYTES, stats: ScanStats | None = None) -> Iterator[str]:
    """Every line of `source`, cleaned, in bounded memory (see `clean`)."""
    stats = stats if stats is not None else ScanStats()
    stream, _, owned = open_source(source)
    try:
        for body in _bodies(stream, stats, max_line_bytes, chunk_bytes):
            for raw in _split(body):
                stats.lines += 1
                if len(raw) > max_line_bytes:
                    stats.truncated_lines += 1
                    raw = raw[:max_line_bytes]
                yield clean(raw)
    finally:
        if owned:
            stream.close()


# ---- the fast path ---------------------------------------------------------------------

def _line_span(body: bytes, pos: int, max_line: int) -> tuple[int, int]:
    # NOTE: LF first, then CR only inside that LF-bounded line: searching a window for a CR
    # a file does not have would cost the whole window on every hit.
    lo = max(0, pos - max_line)
    start = body.rfind(b"\n", lo, pos) + 1 or lo
    start = body.rfind(b"\r", start, pos) + 1 or start
    hi = min(len(body), pos + max_line)
    end = body.find(b"\n", pos, hi)
    end = hi if end == -1 else end
    cr = body.find(b"\r", pos, end)
    end = end if cr == -1 else cr
    return start, min(end, start + max_line)


def _candidates(body: bytes, anchors: tuple[bytes, ...], max_line: int) -> dict[int, int]:
    spans: dict[int, int] = {}
    find = body.find
    for anchor in anchors:
        pos = find(anchor)
        while pos != -1:
            start, end = _line_span(body, pos, max_line)
            spans[start] = end
            pos = find(anchor, max(end, pos + 1))
    return spans


def _next_line(body: bytes, end: int, max_line: int) -> tuple[int, int] | None:
    """The physical line after the one ending at `end` (skipping one CRLF / CR / LF)."""
    n = len(body)
    if end < n and body[end:end + 2] == b"\r\n":
        end += 2
    elif end < n:
        end += 1
    if end >= n:
        return None
    return _line_span(body, end, max_line)


def scan(source, feed: Feed, *, max_line_bytes: int = MAX_LINE_BYTES,
         chunk_bytes: int = CHUNK_BYTES, stats: ScanStats | None = None,
         full: bool = False, in_startup: Callable[[], bool] | None = None) -> ScanStats:
    """Feed the lines of `source` that may matter to `feed(text) -> wants_next_line`.

    `full=True` feeds every line (the slow reference path). `in_startup()` (the parser's
    view) keeps every anchor on while a startup is under way, however long its log is.
    Returns the ScanStats.
    """
    stats = stats if stats is not None else ScanStats()
    stream, _, owned = open_source(source)
    window = [STARTUP_WINDOW_BYTES]     # bytes before this offset get every anchor
    want_next = False
    joined = [0]                        # continuation lines fed so far (across bodies)
    offset = 0
    try:
        for body in _bodies(stream, stats, max_line_bytes, chunk_bytes):
            stats.lines += body.count(b"\n")   # NOTE: LF count; a lone CR is rare
            if body[-1:] != b"\n":
                stats.lines += 1
            if full:
                for raw in _split(body):
                    stats.fed_lines += 1
                    if len(raw) > max_line_bytes:
                        stats.truncated_lines += 1
                    want_next = feed(clean(raw[:max_line_bytes]))
            else:
                if in_startup is not None and in_startup():
                    window[0] = max(window[0], offset + 1)
                want_next = _scan_body(body, offset, window, feed, want_next,
                                       max_line_bytes, stats, joined)
            offset += len(body)
    finally:
        if owned:
            stream.close()
    return stats


def _restart_at(body: bytes, spans: dict[int, int]) -> int | None:
    """Start of the first candidate line that is a startup marker (a restart), if any."""
    for start in sorted(spans):
        line = body[start:spans[start]]
        if b"LLM engine" in line and _RESTART.search(line):
            return start
    return None


def _scan_body(body: bytes, offset: int, window: list[int], feed: Feed, want_next: bool,
               max_line: int, stats: ScanStats, joined: list[int]) -> bool:
    if offset < window[0]:
        spans = _candidates(body, FULL_ANCHORS, max_line)
    else:
        spans = _candidates(body, FAST_ANCHORS, max_line)
        hit = _restart_at(body, spans)
        if hit is not None:
            window[0] = offset + hit + STARTUP_WINDOW_BYTES
            lo = max(0, hit - LOOKBACK_BYTES)
            spans.update({s: e for s, e in _candidates(body, FULL_ANCHORS, max_line).items()
                          if s >= lo})
    cursor = 0
    if want_next and body:
        # NOTE: a wrapped message split over two bodies: the lines already joined count
        # toward MAX_CONTINUATION_LINES (chunking never changes what is fed)
        first = _line_span(body, 0, max_line)
        cursor, want_next = _feed_run(body, first, feed, max_line, stats, joined[0] + 1,
                                      joined)
    for start in sorted(spans):
        if start < cursor:
            continue
        cursor, want_next = _feed_run(body, (start, spans[start]), feed, max_line, stats, 0,
                                      joined)
    return want_next


def _feed_run(body: bytes, span: tuple[int, int], feed: Feed, max_line: int,
              stats: ScanStats, joined: int, state: list[int]) -> tuple[int, bool]:
    """Feed one line, then the following ones while the parser asks for continuations
    (`joined` of them already fed; the count left in `state[0]` for the next body)."""
    start, end = span
    stats.fed_lines += 1
    if end - start >= max_line:
        stats.truncated_lines += 1
    want = feed(clean(body[start:end]))
    while want and joined < MAX_CONTINUATION_LINES:
        nxt = _next_line(body, end, max_line)
        if nxt is None:
            state[0] = joined
            return len(body), True
        start, end = nxt
        stats.fed_lines += 1
        want = feed(clean(body[start:end]))
        joined += 1
    return end, False
