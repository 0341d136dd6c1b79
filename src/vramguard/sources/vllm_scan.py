"""vLLM argv tokens -> flag effects, the way vLLM's argparse reads them: `_` or `-` in names,
`--flag=value`, short aliases, unique prefixes (allow_abbrev), `--no-` negations, `-O`
compilation levels, dotted `--speculative-config.num_speculative_tokens`, `--` ends flags.

`_Scan` accumulates one command's effect in order (later flags win, as in vLLM) and records
where each known flag sits (`spans`), so that `vllm_launch.command_with` can rewrite a line.
Split from `sources.vllm_args`, which drives it (`parse_vllm_args`) and reads `--config`.
"""

from __future__ import annotations

import json
import re

from ..core.rules_changes import SPELLING_RELEASES
from ..errors import UsageError
from . import vllm_compile
from .vllm_flags import (
    ALIASES, BOOL, COMPILE, FLAGS, IGNORED_BOOL, IGNORED_MULTI, IGNORED_VALUE, INT_LIST,
    STR_LIST,
    NEGATIONS, TRIBOOL, UNMODELED_BOOL, UNMODELED_VALUE, CONFIG_OVERRIDE_FLAGS)  # noqa: I001
from .vllm_values import convert_value

_SWITCHES = IGNORED_BOOL | UNMODELED_BOOL        # accepted switches (and their --no- forms)
# accepted flags that take a value
_VALUED = IGNORED_VALUE | UNMODELED_VALUE | frozenset(CONFIG_OVERRIDE_FLAGS)
_UNMODELED = UNMODELED_BOOL | UNMODELED_VALUE


def _canonical(name: str) -> str:
    """`--max_model_len` -> `--max-model-len`; short aliases resolved."""
    if name in ALIASES:
        return ALIASES[name]
    if name.startswith("--"):
        return "--" + name[2:].replace("_", "-")
    return name


_ALL_LONG = None


def _all_long() -> list[str]:
    global _ALL_LONG
    if _ALL_LONG is None:
        neg = [f"--no-{f[2:]}" for f, s in FLAGS.items() if s.kind in (BOOL, TRIBOOL)]
        _ALL_LONG = sorted(set(FLAGS) | _VALUED | _SWITCHES | set(NEGATIONS) | set(neg))
    return _ALL_LONG


def is_known_flag(name: str) -> bool:
    """Whether `name` (`--max_model_len`, `-tp`, `--no-enable-prefix-caching`) is a vLLM flag
    the scanner accepts."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = frozenset(_all_long())
    return name in ALIASES or _canonical(name) in _KNOWN


_KNOWN: frozenset[str] | None = None


def _resolve_prefix(name: str) -> str | None:
    """argparse's allow_abbrev: a unique prefix of a known long flag (`--kv-cache-memory`)."""
    hits = [f for f in _all_long() if f.startswith(name)]
    return hits[0] if len(hits) == 1 else None


def _unknown_error(token: str, where: str | None) -> UsageError:
    import difflib
    name = _canonical(token.split("=", 1)[0])
    close = difflib.get_close_matches(name, _all_long() + list(ALIASES), n=3, cutoff=0.6)
    fix = (f"Did you mean {', '.join(close)}?" if close
           else "See `vllm serve --help` for vLLM's flags, `vramguard plan --help` for "
                "vramguard's.")
    msg = f"unknown flag {token.split('=', 1)[0]!r}"
    return UsageError(msg + (f" in {where}" if where else ""), where=None, fix=fix)


def _base_flag(flag: str) -> str:
    """The flag an occurrence sets: `--no-enable-prefix-caching` -> `--enable-prefix-caching`."""
    if flag in NEGATIONS:
        return NEGATIONS[flag]
    if flag.startswith("--no-") and ("--" + flag[5:]) in FLAGS:
        return "--" + flag[5:]
    return flag


def _looks_like_flag(tok: str) -> bool:
    """A token that starts a new option (negative numbers are values, as in argparse)."""
    if tok in ALIASES:
        return True
    return tok.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", tok) and tok != "-"


class _Scan:
    """Accumulates the effect of flag tokens, in order (later flags win, as in vLLM)."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.changes: dict[str, object] = {}
        self.user_set: set[str] = set()
        self.ignored: list[str] = []
        self.unmodeled: list[str] = []
        self.spans: list[tuple[int, int, str]] = []   # (start, end, flag) of each known flag
        self.unknown: list[str] = []
        self.notes: list[str] = []
        self.positionals: list[str] = []
        self.config_file: str | None = None
        # (flag, JSON of its value) per model-config flag, in order (Settings.config_overrides)
        self.override_args: list[tuple[str, str]] = []
        # (flag, value as given) per flag spelled by release (Settings.flag_spellings)
        self.spelling_args: list[tuple[str, str]] = []
        # the accepted flags that set no Settings field: (flag, its tokens as given), in order
        self.ignored_args: list[tuple[str, tuple[str, ...]]] = []

    def apply(self, flag: str, value: object) -> None:
        """Record `flag` (a FLAGS key) set to `value`."""
        changes = convert_value(flag, value, self.notes)
        self.changes.update(changes)
        if FLAGS[flag].kind == COMPILE:
            self.user_set.update(changes)     # NOTE: one JSON sets several fields
        else:
            self.user_set.add(FLAGS[flag].field)

    def scan(self, tokens: list[str], where: str | None = None) -> None:
        """Apply `tokens` in order; `where` names their origin in errors (a config file)."""
        i = 0
        n = len(tokens)
        while i < n:
            tok = tokens[i]
            i += 1
            if tok == "--":
                self.positionals.extend(tokens[i:])
                return
            if not _looks_like_flag(tok):
                self.positionals.append(tok)
                continue
            name, eq, inline = tok.partition("=")
            typed = name.split(".", 1)[0]       # NOTE: the spelling, for SPELLING_RELEASES
            if tok.startswith("-O") and not tok.startswith("--"):
                start = i - 1
                i = self._opt(tok, tokens, i)
                self.spans.append((start, i, "-O"))
                self._spelled("-O", tokens, start, i)
                continue
            short, dot, rest = name.partition(".")
            if dot and short in ALIASES:
                name = f"{ALIASES[short]}.{rest}"   # NOTE: a dotted short alias (-cc.mode=3)
            flag = _canonical(name)
            dotted = None
            if "." in flag and flag.startswith("--"):
                flag, dotted = flag.split(".", 1)
            if flag not in FLAGS and flag not in _VALUED and flag not in _SWITCHES \
                    and flag not in NEGATIONS and not self._is_negated(flag):
                full = _resolve_prefix(flag) if flag.startswith("--") else None
                if full is None:
                    if self.strict:
                        raise _unknown_error(tok, where)
                    self.unknown.append(name)
                    # best effort: an unknown flag followed by a non-flag takes it as value
                    if not eq and i < n and not _looks_like_flag(tokens[i]) \
                            and (self.positionals or "model" in self.changes):
                        i += 1
                    continue
                flag = full
            start, accepted = i - 1, len(self.ignored)
            i = self._one(flag, dotted, eq, inline, tokens, i, name)
            self.spans.append((start, i, _base_flag(flag)))
            if len(self.ignored) > accepted:
                self.ignored_args.append((self.ignored[-1], tuple(tokens[start:i])))
            self._spelled(typed if typed in SPELLING_RELEASES else flag, tokens, start, i)

    def _spelled(self, flag: str, tokens: list[str], start: int, end: int) -> None:
        """Record a flag whose spelling depends on the release (`SPELLING_RELEASES`) with its
        value as typed (Settings.flag_spellings)."""
        if flag not in SPELLING_RELEASES:
            return
        tok = tokens[start]
        if flag == "-O":
            text = " ".join(tokens[start:end])      # NOTE: as typed: -O3, -O 3, -O.level=3
        elif "=" in tok:
            text = tok.partition("=")[2]
        else:
            text = " ".join(tokens[start + 1:end])
        self.spelling_args.append((flag, text))

    def _is_negated(self, flag: str) -> bool:
        if not flag.startswith("--no-"):
            return False
        base = "--" + flag[5:]
        return (base in FLAGS and FLAGS[base].kind in (BOOL, TRIBOOL)) or base in _SWITCHES

    def _take_value(self, name: str, eq: str, inline: str, tokens: list[str], i: int):
        if eq:
            return inline, i
        if i >= len(tokens) or (tokens[i].startswith("--") and tokens[i] != "--"):
            raise UsageError("expected a value after it", where=name,
                             fix=f"Write {name} VALUE or {name}=VALUE.")
        return tokens[i], i + 1

    def _one(self, flag, dotted, eq, inline, tokens, i, name) -> int:
        # negations first: --no-enable-prefix-caching, --disable-prefix-caching (old vLLM)
        if flag in NEGATIONS or (self._is_negated(flag) and flag not in _SWITCHES):
            base = NEGATIONS.get(flag) or "--" + flag[5:]
            if base in FLAGS:
                self.apply(base, False)
            else:
                self._accept(flag, base)
            return i
        if flag in _SWITCHES or self._is_negated(flag):
            self._accept(flag, flag)
            return self._skip_bool_literal(tokens, i, eq)
        if flag in CONFIG_OVERRIDE_FLAGS:
            value, i = self._take_value(name, eq, inline, tokens, i)
            change = config_override(flag, value, name, dotted)
            given = change if flag == "--hf-overrides" else next(iter(change.values()))
            self.override_args.append((flag, json.dumps(given)))
            return i
        if flag in _VALUED:
            self._accept(flag, flag)
            if eq:
                return i
            if flag in IGNORED_MULTI:
                while i < len(tokens) and not _looks_like_flag(tokens[i]):
                    i += 1
                return i
            if flag in ("--hf-token",) and (i >= len(tokens) or _looks_like_flag(tokens[i])):
                return i  # nargs="?"
            _, i = self._take_value(name, eq, inline, tokens, i)
            return i
        spec = FLAGS[flag]
        if spec.kind == COMPILE and dotted:
            value, i = self._take_value(name, eq, inline, tokens, i)
            self._compile_key(flag, dotted, value)
            return i
        if spec.kind in (INT_LIST, STR_LIST) and not eq:
            # NOTE: nargs="+": every value up to the next flag
            j = i
            while j < len(tokens) and not _looks_like_flag(tokens[j]):
                j += 1
            if j == i:
                example = "1 2 4 8" if spec.kind == INT_LIST else "0 1 31"
                raise UsageError("expected one or more values after it", where=name,
                                 fix=f"Write {name} {example}.")
            self.apply(flag, " ".join(tokens[i:j]))
            return j
        if flag == "--limit-mm-per-prompt" and dotted:
            # NOTE: `--limit-mm-per-prompt.image 0`: one modality, merged with the others
            value, i = self._take_value(name, eq, inline, tokens, i)
            merged = dict(self.changes.get("limit_mm_per_prompt") or ())
            merged[dotted] = value
            self.apply(flag, merged)
            return i
        if flag == "--speculative-config" and dotted:
            value, i = self._take_value(name, eq, inline, tokens, i)
            if dotted.replace("-", "_") == "num_speculative_tokens":
                self.apply(flag, {"num_speculative_tokens": value})
            elif dotted in ("method", "model"):
                self.apply(flag, {dotted: value})
            return i
        if spec.kind in (BOOL, TRIBOOL):
            if eq:
                self.apply(flag, inline)
                return i
            # old vLLM (StoreBoolean, nargs="?") accepted `--enable-chunked-prefill False`
            if i < len(tokens) and tokens[i].strip().lower() in ("true", "false"):
                self.apply(flag, tokens[i])
                return i + 1
            self.apply(flag, True)
            return i
        value, i = self._take_value(name, eq, inline, tokens, i)
        if flag == "--config":
            self.config_file = value
            return i
        self.apply(flag, value)
        return i

    def _opt(self, tok: str, tokens: list[str], i: int) -> int:
        """`-O3`, `-O 3`, `-O=3` (the optimization level from 0.12, before the compilation
        level), `-O.level=3` / `-O.cudagraph_mode NONE` (dotted), `-O '{...}'` (a
        compilation config, up to 0.12)."""
        rest = tok[2:]
        if rest.startswith("."):
            key, eq, inline = rest[1:].partition("=")
            value, i = self._take_value("-O." + key, eq, inline, tokens, i)
            self._compile_key("-O", key, value)
            return i
        value = rest[1:] if rest.startswith("=") else rest
        if not value:
            value, i = self._take_value("-O", "", "", tokens, i)
        if value.strip().startswith("{"):
            changes, other = vllm_compile.compilation_config("-O", value)
            self._compile_changes(changes, other, "-O")
        else:
            self._compile_changes(vllm_compile.optimization_level("-O", value), [], "-O")
        return i

    def _compile_key(self, flag: str, key: str, value: str) -> None:
        key = key.replace("-", "_")
        changes = vllm_compile.compilation_key(flag, key, value)
        self._compile_changes(changes, [] if key in vllm_compile.MODELLED_KEYS else [key], flag)

    def _compile_changes(self, changes: dict, other: list[str], flag: str) -> None:
        self.changes.update(changes)
        self.user_set.update(changes)
        if other:
            self.notes.append(vllm_compile.unmodelled_note(flag, other))

    def _accept(self, flag: str, base: str) -> None:
        self.ignored.append(flag)
        if base in _UNMODELED:
            self.unmodeled.append(flag)

    @staticmethod
    def _skip_bool_literal(tokens, i, eq) -> int:
        if not eq and i < len(tokens) and tokens[i].strip().lower() in ("true", "false"):
            return i + 1
        return i


def config_override(flag: str, value: str, where: str,
                    dotted: str | None = None) -> dict[str, object]:
    """What `--hf-overrides JSON` (or `--hf-overrides.KEY VALUE`), `--rope-scaling JSON` or
    `--rope-theta N` change in the model's config.json (vLLM applies them to the HF config
    before anything else)."""
    key = CONFIG_OVERRIDE_FLAGS[flag]
    if dotted and key is None:
        try:
            return {dotted.replace("-", "_"): json.loads(value)}
        except ValueError:
            return {dotted.replace("-", "_"): value}
        except RecursionError:
            raise UsageError("not valid JSON (nested too deeply)", where=where,
                             fix="Write a flatter JSON value") from None
    if flag == "--rope-theta":
        try:
            theta = float(value)
        except ValueError:
            theta = float("nan")
        if not 0 < theta < float("inf"):
            raise UsageError(f"{value!r} is not a positive number", where=where,
                             fix="Write --rope-theta 1000000") from None
        return {key: theta}
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise UsageError(f"not valid JSON ({exc.msg} at character {exc.pos})", where=where,
                         fix=f"Quote the JSON object: {flag} '{{\"key\": value}}'") from None
    except RecursionError:
        raise UsageError("not valid JSON (nested too deeply)", where=where,
                         fix=f"Write {flag} '{{\"key\": value}}'") from None
    if not isinstance(parsed, dict):
        raise UsageError("expected a JSON object", where=where,
                         fix=f"Write {flag} '{{\"key\": value}}'")
    return parsed if key is None else {key: parsed}
