"""vLLM command lines, `--config` YAML files and `non-default args` dicts -> Settings.

Flag names are vLLM's, verbatim (`--max-model-len`, `-tp`, `--no-enable-prefix-caching`,
`--max_model_len`, `--kv-cache-memory` as argparse's prefix of `--kv-cache-memory-bytes`).
Flags that matter for memory become `core.settings.Settings` fields; vLLM flags that do not
(`--host`, `--port`, `--served-model-name`, ...) are accepted and listed in `ignored`;
anything else is a `UsageError` that names the token and suggests close flags.

A pasted command is understood in any of these shapes, with leading `VAR=value` env
assignments returned in `env`:
    vllm serve MODEL --flag ...
    python -m vllm.entrypoints.openai.api_server --model MODEL ...
    python3 -m vllm.entrypoints.api_server --model MODEL ...
    docker run ... vllm/vllm-openai:v0.10.1 --model MODEL ...   (tag -> version_hint)
(the shapes live in `vllm_launch`, the flag table in `vllm_flags`).

Public API: `parse_vllm_command`, `parse_vllm_args`, `command_from_tokens` (a command's
vLLM flags and/or pasted line), `settings_from_mapping`,
`command_with` (the user's own line with a fix applied), `settings_to_args` +
`format_command` (a line from Settings alone), `human_readable_int`.
`yaml` is imported here and nowhere else, and only when a `--config` file is read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..core.settings import Settings
from ..errors import UsageError
from .vllm_flags import (
    ALIASES, BOOL, CHOICE, FLAGS, FLOAT_FRAC, FLOAT_NONNEG, HUMAN_INT, IGNORED_BOOL,
    IGNORED_MULTI, IGNORED_VALUE, JSON, MAXLEN, NEGATIONS, POS_INT, QUANT_METHODS, TRIBOOL,
    UNMODELED_BOOL, UNMODELED_VALUE, Flag as _Flag)

_SWITCHES = IGNORED_BOOL | UNMODELED_BOOL        # accepted switches (and their --no- forms)
_VALUED = IGNORED_VALUE | UNMODELED_VALUE        # accepted flags that take a value
_UNMODELED = UNMODELED_BOOL | UNMODELED_VALUE | {"-O"}


@dataclass(frozen=True)
class VllmCommand:
    """A parsed vLLM launch: the model, the Settings, and what else the line said."""

    model: str | None
    settings: Settings
    env: dict[str, str] = field(default_factory=dict)
    version_hint: str | None = None       # from a docker image tag like vllm/vllm-openai:v0.8.5
    launcher: str = "flags"               # "vllm serve" | "python -m ..." | "docker" | "flags"
    ignored: tuple[str, ...] = ()         # accepted vLLM flags that set no Settings field
    unmodeled: tuple[str, ...] = ()       # ... of which these do change memory (not modeled)
    unknown: tuple[str, ...] = ()         # unknown flags (only when strict=False)
    notes: tuple[str, ...] = ()           # e.g. "unrecognised --quantization method 'xyz'"
    config_file: str | None = None        # the --config YAML, if any
    prefix: tuple[str, ...] = ()          # env, launcher, docker words before vLLM's args
    args: tuple[str, ...] = ()            # vLLM's args as given (model included)

    @property
    def engine_hint(self) -> str | None:
        """`v0`/`v1` when the env pins it (VLLM_USE_V1), else None."""
        val = self.env.get("VLLM_USE_V1")
        if val is None:
            return None
        return "v1" if val.strip().lower() in ("1", "true", "yes") else "v0"


# ---------------------------------------------------------------------------------------
# Value parsing
# ---------------------------------------------------------------------------------------
_HUMAN_RE = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)")
_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BIN = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SUFFIX_HELP = "a whole number, or k/m/g (x1000) or K/M/G (x1024) suffixes such as 25.6k or 32K"


def human_readable_int(text: str) -> int | None:
    """vLLM's human_readable_int: `25.6k` -> 25600, `32K` -> 32768, `8192` -> 8192.

    Decimals are only allowed with the decimal (lower-case) suffixes. None if malformed.
    """
    m = _HUMAN_RE.fullmatch(text.strip())
    if not m:
        return None
    number, suffix = m.groups()
    if suffix in _DEC:
        return int(float(number) * _DEC[suffix])
    if "." in number:
        return None
    return int(number) * _BIN.get(suffix, 1)


def _bad(flag: str, value: object, allowed: str) -> UsageError:
    return UsageError(f"invalid value {value!r}", where=flag, fix=f"Expected {allowed}.")


def _to_int(flag: str, value: object, spec: _Flag, human: bool) -> int:
    if isinstance(value, bool):
        raise _bad(flag, value, "an integer")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    else:
        text = str(value).strip()
        if human:
            n = human_readable_int(text)
        else:
            n = int(text) if re.fullmatch(r"[+-]?\d+", text) else None
        if n is None:
            raise _bad(flag, value, _SUFFIX_HELP if human else "a whole number")
    lo, hi = spec.lo, spec.hi
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        rng = f"{int(lo)} to {int(hi)}" if hi is not None else f"a whole number >= {int(lo)}"
        raise _bad(flag, value, rng)
    return n


def _to_float(flag: str, value: object, spec: _Flag) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        x = float(value)
    except (TypeError, ValueError):
        raise _bad(flag, value, "a number") from None
    if x != x or x in (float("inf"), float("-inf")):
        raise _bad(flag, value, "a number")
    if spec.kind == FLOAT_FRAC and not (0 < x <= 1):
        raise _bad(flag, value, "a fraction of total GPU memory, 0 < value <= 1 (e.g. 0.9)")
    if spec.kind == FLOAT_NONNEG and x < 0:
        raise _bad(flag, value, "a number of GiB >= 0")
    return x


def _to_bool(flag: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise _bad(flag, value, "true or false")


def _max_model_len(flag: str, value: object, spec: _Flag) -> dict:
    text = str(value).strip().lower() if not isinstance(value, int) else str(value)
    if text in ("auto", "-1"):
        return {"max_model_len": None, "max_model_len_auto": True}
    if text in ("none", ""):
        return {"max_model_len": None, "max_model_len_auto": False}
    try:
        n = _to_int(flag, value, spec, human=True)
    except UsageError:
        raise _bad(flag, value, "auto, -1, or a whole number >= 1, with k/m/g (x1000) or "
                                "K/M/G (x1024) suffixes such as 25.6k or 32K") from None
    return {"max_model_len": n, "max_model_len_auto": False}


def _speculative(flag: str, value: object) -> int:
    if isinstance(value, str):
        text = value.strip()
        if text in ("", "None", "null"):
            return 0
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise _bad(flag, value, 'a JSON object such as \'{"method": "ngram", '
                                    '"num_speculative_tokens": 3}\'') from None
    if value is None:
        return 0
    if not isinstance(value, dict):
        raise _bad(flag, value, "a JSON object")
    n = value.get("num_speculative_tokens", 0)
    return _to_int(flag + ".num_speculative_tokens", n if n is not None else 0,
                   _Flag("num_speculative_tokens", POS_INT, 0, 1024), human=False)


def convert_value(flag: str, value: object, notes: list[str] | None = None) -> dict:
    """Parse one value of a known memory flag (string from a command line, or a typed
    value from YAML / a `non-default args` dict) into Settings field changes."""
    spec = FLAGS[flag]
    kind = spec.kind
    if kind == MAXLEN:
        return _max_model_len(flag, value, spec)
    if kind in (POS_INT, HUMAN_INT):
        if spec.field in ("max_num_seqs", "max_num_batched_tokens", "block_size",
                          "kv_cache_memory_bytes", "num_gpu_blocks_override", "max_loras",
                          "max_lora_rank") and str(value).strip() in ("None", ""):
            return {spec.field: None}
        return {spec.field: _to_int(flag, value, spec, human=kind == HUMAN_INT)}
    if kind in (FLOAT_FRAC, FLOAT_NONNEG):
        return {spec.field: _to_float(flag, value, spec)}
    if kind in (BOOL, TRIBOOL):
        return {spec.field: _to_bool(flag, value)}
    if kind == CHOICE:
        text = str(value).strip()
        if text not in spec.choices:
            import difflib
            close = difflib.get_close_matches(text, spec.choices, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise _bad(flag, value, "one of " + ", ".join(spec.choices) + hint)
        return {spec.field: text}
    if kind == JSON:
        return {spec.field: _speculative(flag, value)}
    # STR
    text = str(value).strip()
    if spec.field == "quantization":
        if text in ("None", "none", ""):
            return {"quantization": None}
        if not re.fullmatch(r"[A-Za-z0-9_\-.]+", text):
            raise _bad(flag, value, "a quantization method such as awq, gptq, fp8")
        if text not in QUANT_METHODS and notes is not None:
            notes.append(f"--quantization {text!r} is not a method vramguard knows; "
                         "weights are planned from the checkpoint")
        return {"quantization": text}
    if not text:
        raise _bad(flag, value, "a non-empty value")
    return {spec.field: text}


# ---------------------------------------------------------------------------------------
# Token scanning
# ---------------------------------------------------------------------------------------
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

    def apply(self, flag: str, value: object) -> None:
        changes = convert_value(flag, value, self.notes)
        self.changes.update(changes)
        field_name = FLAGS[flag].field
        self.user_set.add(field_name)

    def scan(self, tokens: list[str], where: str | None = None) -> None:
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
            if tok.startswith("-O") and not tok.startswith("--"):
                # -O3, -O 3, -O.level=3, -O '{...}': compilation config; not a memory input
                if tok == "-O" and i < n and not _looks_like_flag(tokens[i]):
                    i += 1
                self._accept("-O", "-O")
                continue
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
            start = i - 1
            i = self._one(flag, dotted, eq, inline, tokens, i, name)
            self.spans.append((start, i, _base_flag(flag)))

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
        if flag == "--speculative-config" and dotted:
            value, i = self._take_value(name, eq, inline, tokens, i)
            if dotted.replace("-", "_") == "num_speculative_tokens":
                self.apply(flag, {"num_speculative_tokens": value})
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

    def _accept(self, flag: str, base: str) -> None:
        self.ignored.append(flag)
        if base in _UNMODELED:
            self.unmodeled.append(flag)

    @staticmethod
    def _skip_bool_literal(tokens, i, eq) -> int:
        if not eq and i < len(tokens) and tokens[i].strip().lower() in ("true", "false"):
            return i + 1
        return i


# ---------------------------------------------------------------------------------------
# YAML (--config) and mappings
# ---------------------------------------------------------------------------------------
def load_config_yaml(path: str) -> dict:
    """Read vLLM's `--config` YAML into a dict (keys with dashes or underscores)."""
    if not path.endswith((".yaml", ".yml")):
        raise UsageError(f"config file must be .yaml or .yml, got {path!r}", where="--config",
                         fix="vLLM only reads YAML config files.")
    import yaml
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}", where="--config",
                         fix="Check the path.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path} is not valid YAML{at}", where="--config",
                         fix="Fix the YAML syntax.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path} must be a mapping of flag: value", where="--config",
                         fix="Write one `flag-name: value` per line.")
    return data


def _mapping_to_tokens(data: dict) -> list[str]:
    """vLLM's load_config_file: `key: value` -> `--key value`; true -> `--key`; lists
    -> `--key a b`. False booleans become `--no-key` (vLLM drops them; same effect for
    flags whose default is off, and the intent is explicit for tri-state flags)."""
    tokens: list[str] = []
    for key, value in data.items():
        flag = "--" + str(key).lstrip("-")
        if isinstance(value, bool):
            if value:
                tokens.append(flag)
            else:
                base = _canonical(flag)
                if base in FLAGS and FLAGS[base].kind == TRIBOOL:
                    tokens.append("--no-" + base[2:])
        elif isinstance(value, list):
            if value:
                tokens.append(flag)
                tokens.extend(str(v) for v in value)
        elif isinstance(value, dict):
            tokens += [flag, json.dumps(value)]
        elif value is None:
            continue
        else:
            tokens += [flag, str(value)]
    return tokens


def settings_from_mapping(d: dict, *, base: Settings | None = None) -> Settings:
    """Settings from a dict of vLLM arg names -> values, as vLLM logs them
    (`non-default args: {'model': ..., 'max_model_len': 8192, ...}`) or as a YAML config
    holds them. Keys may use dashes or underscores; unknown keys are ignored (a log's
    dict holds many non-memory args). Bad values raise UsageError naming the key."""
    changes: dict[str, object] = {}
    user_set: set[str] = set()
    for key, value in d.items():
        k = str(key).lstrip("-").replace("_", "-")
        if k in ("model-tag",):
            k = "model"
        flag = ALIASES.get("-" + k, "--" + k)
        if flag not in FLAGS or flag == "--config" or value is None:
            continue
        changes.update(convert_value(flag, value))
        user_set.add(FLAGS[flag].field)
    return _with(base or Settings(), changes, user_set)


def _with(settings: Settings, changes: dict, user_set: set[str]) -> Settings:
    """`settings` with `changes` applied and `user_set` added to its user_set."""
    from dataclasses import replace
    return replace(settings, **changes, user_set=settings.user_set | frozenset(user_set))


def split_command_line(text: str) -> list[str]:
    """Split one pasted shell line (with `\\` continuations) into argv tokens."""
    from .vllm_launch import split_command_line as split
    return split(text)


def parse_vllm_args(tokens: list[str], *, strict: bool = True, base: Settings | None = None,
                    positional_model: bool = True, where: str | None = None) -> VllmCommand:
    """Parse vLLM flags (no launcher words) into a VllmCommand. A bare first token is the
    model (as in `vllm serve MODEL`) when `positional_model`; `--config` YAML is read and
    the command line wins over it, as in vLLM."""
    tokens = list(tokens)
    scan = _Scan(strict)
    scan.scan(tokens, where)
    config_file = scan.config_file
    if config_file is not None:
        # as vLLM does: the YAML's flags go first, so the command line's win
        scan = _Scan(strict)
        scan.scan(_mapping_to_tokens(load_config_yaml(config_file)), where=config_file)
        if scan.config_file is not None:
            raise UsageError("a --config file cannot name another config", where=config_file)
        if scan.positionals:
            raise UsageError(f"unexpected value {scan.positionals[0]!r}", where=config_file)
        scan.scan(tokens, where)
    positionals = scan.positionals
    model = scan.changes.get("model")
    if positionals:
        if not positional_model or len(positionals) > 1:
            extra = positionals[1:] if positional_model else positionals
            raise UsageError(f"unexpected argument {extra[0]!r}", where=where,
                             fix="Flags are written --flag VALUE; quote values with spaces.")
        model = positionals[0]   # vLLM: the positional model wins over --model
    changes = dict(scan.changes)
    settings = base or Settings()
    if model is not None:
        changes["model"] = model
    model = changes.get("model", settings.model)
    notes = list(scan.notes)
    if scan.unmodeled:
        names = " ".join(dict.fromkeys(scan.unmodeled))
        notes.append(f"not modeled, although vLLM's memory depends on them: {names} "
                     "(the plan is made without them)")
    return VllmCommand(model=model, settings=_with(settings, changes, scan.user_set),
                       ignored=tuple(scan.ignored),
                       unmodeled=tuple(scan.unmodeled), unknown=tuple(scan.unknown),
                       notes=tuple(notes), config_file=config_file, args=tuple(tokens))


def parse_vllm_command(argv: list[str] | str, *, strict: bool = True) -> VllmCommand:
    """Parse a pasted vLLM launch (argv tokens, or one string, or a string + more tokens)
    into a VllmCommand.

    Understands `vllm serve MODEL ...`, `python[3] -m vllm.entrypoints[.openai].api_server
    --model MODEL ...`, leading `VAR=value` env assignments, and `docker run ...
    vllm/vllm-openai:TAG ...` (a vX.Y.Z tag becomes `version_hint`). A bare list of
    flags (`--model M -tp 2`) works too. Unknown flags raise UsageError when `strict`.
    """
    from . import vllm_launch as launch
    if isinstance(argv, str):
        tokens = launch.split_command_line(argv)
    elif argv and any(c.isspace() for c in argv[0]):
        # one quoted line, possibly followed by more tokens (which then come last and win)
        tokens = launch.split_command_line(argv[0]) + list(argv[1:])
    else:
        tokens = list(argv)
    all_tokens = tokens
    env: dict[str, str] = {}
    tokens = launch.strip_env(tokens, env)
    version = None
    launcher = None
    if tokens and tokens[0].rsplit("/", 1)[-1] in launch.CONTAINER_TOOLS:
        tokens, version, _image = launch.docker_args(tokens, env)
        tokens = launch.strip_env(tokens, env)
        launcher = "docker"
    name, args, positional_ok = launch.find_vllm_args(tokens)
    prefix = tuple(all_tokens[:len(all_tokens) - len(args)])   # each step kept a suffix
    cmd = parse_vllm_args(args, strict=strict, positional_model=positional_ok,
                          where=None)
    from dataclasses import replace

    from .vllm_flags import UNMODELED_ENV
    notes = cmd.notes
    unmodeled_env = [f"{k}={env[k]}" for k in UNMODELED_ENV if k in env]
    if unmodeled_env:
        notes += (f"not modeled, although vLLM's memory depends on them: "
                  f"{' '.join(unmodeled_env)} (the plan is made without them)",)
    return replace(cmd, env=env, version_hint=version, launcher=launcher or name, prefix=prefix,
                   notes=notes)


_LAUNCH_WORDS = ("vllm", "docker", "podman", "python", "python3", "uv", "uvx", "sudo", "env")


def command_from_tokens(tokens: list[str], pasted: list[str] | None = None) -> VllmCommand:
    """The VllmCommand a vramguard command was given: vLLM `tokens` (MODEL and flags, before
    `--`) and/or a `pasted` launch line (the words after `--`, or one quoted string). The
    tokens' flags and MODEL win over the pasted line's, as later flags do in vLLM. Without a
    pasted line, tokens that start like one (`vllm`, `python...`, `docker`, `uv`, `VAR=value`,
    also as one quoted word) are parsed as a launch line."""
    if pasted is None:
        first = tokens[0].split()[0] if tokens and tokens[0].strip() else ""
        head = first.rsplit("/", 1)[-1]
        env_word = "=" in first and first[0] != "-"
        if head in _LAUNCH_WORDS or head.startswith("python") or env_word:
            return parse_vllm_command(list(tokens))
        return parse_vllm_args(list(tokens))
    cmd = parse_vllm_command(list(pasted))
    if not tokens:
        return cmd
    extra = parse_vllm_args(list(tokens), base=cmd.settings)
    from dataclasses import replace
    return replace(cmd, model=extra.model, settings=extra.settings,
                   ignored=cmd.ignored + extra.ignored, notes=cmd.notes + extra.notes,
                   unmodeled=cmd.unmodeled + extra.unmodeled, args=cmd.args + extra.args)


# ---------------------------------------------------------------------------------------
# Back to a command line (written in vllm_launch; imported only when a line is written)
# ---------------------------------------------------------------------------------------
def flag_for(name: str) -> str:
    """`max_model_len` or `--max-model-len` or `-tp` -> vLLM's long flag name."""
    if name.startswith("-"):
        return _canonical(name)
    from .vllm_launch import FIELD_TO_FLAG
    return FIELD_TO_FLAG.get(name, "--" + name.replace("_", "-"))


def settings_to_args(settings: Settings, overrides: dict[str, object] | None = None) -> list[str]:
    """The flags in `settings.user_set` as vLLM argv, with `overrides` (flag or field name
    -> value; True or "" for a switch, False to turn it off) on top. Model excluded."""
    from .vllm_launch import settings_to_args as write
    return write(settings, overrides)


def command_with(cmd: VllmCommand, overrides: dict[str, object] | None = None) -> str:
    """The user's own launch line (env, launcher, docker words and every flag kept), with
    `overrides` replacing earlier occurrences of those flags (aliases, `=`, `_` and `--no-`
    forms included), appended last. Shell-quoted, ready to copy."""
    from .vllm_launch import command_with as write
    return write(cmd, overrides)


def format_command(model: str | None, args: list[str], launcher: str = "vllm serve") -> str:
    """A shell-quoted `vllm serve MODEL args...` line."""
    from .vllm_launch import format_command as write
    return write(model, args, launcher)
