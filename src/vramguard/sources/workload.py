"""Read workloads: `--workload p50=…,p90=…,p99=…` and `--workload-file` (JSONL or a vLLM benchmark result)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.workload import Workload
from ..errors import UsageError

# Per-request keys we accept in JSONL files (first match wins).
_PROMPT_KEYS = ("prompt_tokens", "input_tokens", "prompt_len", "input_len", "num_prompt_tokens")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens", "output_len", "max_tokens", "num_output_tokens")
_TOTAL_KEYS = ("total_tokens", "tokens")


def parse_workload_spec(text: str) -> Workload:
    """Parse `p50=800,p90=2000,p99=6000` (k/K suffixes allowed: `p99=6k`)."""
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("p50", "p90", "p99"):
            raise UsageError(f"cannot read {part!r}", where="--workload",
                             fix="Use p50=TOKENS,p90=TOKENS,p99=TOKENS, e.g. p50=800,p90=2000,p99=6000")
        values[key] = _tokens(raw.strip(), "--workload")
    if "p99" not in values:
        raise UsageError("p99 is required (max_model_len is sized from the tail)", where="--workload",
                         fix="Add p99=TOKENS")
    p99 = values["p99"]
    p90 = values.get("p90", p99)
    p50 = values.get("p50", p90)
    try:
        return Workload(p50, p90, p99)
    except ValueError as exc:
        raise UsageError(str(exc), where="--workload") from None


# NOTE: the longest contexts are a few million tokens; more is a unit or data error.
MAX_REQUEST_TOKENS = 100_000_000


def _tokens(raw: str, where: str) -> int:
    mult = 1
    if raw[-1:] in ("k", "K"):
        mult, raw = (1000 if raw[-1] == "k" else 1024), raw[:-1]
    try:
        value = int(float(raw) * mult)
    except (ValueError, OverflowError):       # NOTE: OverflowError: inf, -inf, 1e400
        raise UsageError(f"{raw!r} is not a token count", where=where) from None
    if value <= 0 or value > MAX_REQUEST_TOKENS:
        raise UsageError(f"token count {value} is outside 1..{MAX_REQUEST_TOKENS:,}", where=where)
    return value


def read_workload_file(path: str) -> Workload:
    """A JSONL file (one request per line) or a vLLM benchmark result JSON (input_lens/output_lens)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read the workload file: {exc.strerror}", where=path) from None
    if not text.strip():
        raise UsageError("the workload file is empty", where=path,
                         fix="Give one JSON object per line with prompt_tokens and output_tokens")
    lengths = _benchmark_lengths(text, path)
    if lengths is None:
        lengths = [_line_tokens(line, i, path) for i, line in enumerate(text.splitlines(), 1)
                   if line.strip()]
    return Workload.from_lengths(lengths, source=path)


def _benchmark_lengths(text: str, path: str) -> list[int] | None:
    """vLLM's `benchmark_serving --save-result` JSON: {"input_lens": [...], "output_lens": [...]}."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or "input_lens" not in doc:
        return None
    ins, outs = doc.get("input_lens"), doc.get("output_lens") or []
    if not isinstance(ins, list) or not ins or not all(isinstance(x, int) and x >= 0 for x in ins):
        raise UsageError("input_lens must be a non-empty list of token counts", where=path)
    if outs and len(outs) != len(ins):
        raise UsageError(f"output_lens has {len(outs)} entries, input_lens {len(ins)}", where=path)
    return [i + (outs[k] if outs else 0) for k, i in enumerate(ins) if i + (outs[k] if outs else 0) > 0]


def _line_tokens(line: str, lineno: int, path: str) -> int:
    where = f"{path}:{lineno}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"not valid JSON ({exc.msg} at column {exc.colno})", where=where) from None
    if not isinstance(obj, dict):
        raise UsageError("each line must be a JSON object", where=where)
    total = _first_int(obj, _TOTAL_KEYS, where)
    if total is None:
        prompt, output = _first_int(obj, _PROMPT_KEYS, where), _first_int(obj, _OUTPUT_KEYS, where)
        if prompt is None:
            raise UsageError("no prompt token count", where=where,
                             fix=f"Give one of {', '.join(_PROMPT_KEYS)} (and an output count)")
        total = prompt + (output or 0)
    if total <= 0:
        raise UsageError(f"request has {total} tokens", where=where)
    return total


def _first_int(obj: dict, keys: tuple[str, ...], where: str) -> int | None:
    for key in keys:
        if key in obj:
            value = obj[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"{key} must be a non-negative integer, got {value!r:.40}",
                                 where=where)
            if value > MAX_REQUEST_TOKENS:
                raise UsageError(f"{key} {value:.3g} is beyond any model's context "
                                 f"({MAX_REQUEST_TOKENS:,} tokens at most)", where=where)
            return value
    return None
