"""vLLM's argument parser as each release has it: "unrecognized arguments" for the flags a
release does not have (`rules_changes.FLAG_RELEASES`, `SPELLING_RELEASES`,
`OVERRIDE_FLAG_RELEASES`), with what to write instead, and "invalid choice" for the choice
flags. Split from `validation`, which runs these checks first (argparse stops a launch
before anything else), and read by `parser_flags`."""

from __future__ import annotations

import json

from . import _memo
from .errors import UsageError
from .rules import parse_version
from .rules_changes import FLAG_RELEASES, OVERRIDE_FLAG_RELEASES, SPELLING_RELEASES
from .settings import Settings

__all__ = ["check_flag_releases", "check_override_flags", "check_flag_spellings",
           "check_choice", "last_release_with_flags", "unrecognized", "is_dev_build",
           "span_text", "GONE_FIX"]


def is_dev_build(version: str) -> bool:
    """A development build ("0.6.4.dev12+g…"): it may have architectures its release lacks."""
    return "dev" in version.lower()


def unrecognized(flag: str, value: object, fix: str, typed: str | None = None) -> UsageError:
    """argparse's error for a flag the release does not have (`typed`: the words as typed,
    when they are not "flag value")."""
    words = typed if typed is not None else f"{flag} {value}"
    return UsageError(f"vllm serve: error: unrecognized arguments: {words}".rstrip(),
                      where=flag, fix=fix)


# NOTE: what to do instead, where a flag went away
GONE_FIX = {"--swap-space": "drop it: V1 preempts by recomputing, not by swapping",
            "--disable-log-requests": "drop it: requests are not logged by default "
                                      "(--enable-log-requests logs them)",
            "--enable-multimodal-encoder-data-parallel": "use --mm-encoder-tp-mode data",
            "--task": "use --runner pooling with --convert embed / classify"}
# NOTE: what an earlier release spells instead
_EARLIER_FIX = {"--mm-encoder-tp-mode":
                "0.9.1-0.10.1 have --enable-multimodal-encoder-data-parallel (= data)",
                "--runner": "earlier releases take --task embed / classify / score",
                "--convert": "earlier releases take --task embed / classify / score"}
_FLAG_FIELDS = frozenset(FLAG_RELEASES)
_OVERRIDE_KEY = {"--rope-scaling": "rope_scaling", "--rope-theta": "rope_theta"}


def _outside(version: str, first: str, last: str | None) -> str | None:
    """The releases that have a flag ("0.10.0 on", "0.4.0-0.17.1") when `version` is not
    among them (a development build is judged by its release), else None."""
    v = parse_version(version)
    if v < parse_version(first) or (last is not None and v > parse_version(last)):
        return span_text(first, last)
    return None


def span_text(first: str, last: str | None) -> str:
    """"0.10.0 on", "0.4.0-0.17.1", "0.4.0"."""
    return f"{first} on" if last is None else (first if first == last else f"{first}-{last}")


def check_flag_releases(s: Settings, version: str) -> None:
    """The flags of `rules_changes.FLAG_RELEASES` the user gave, as the release's argparse
    has them: "unrecognized arguments" outside their releases."""
    if s.user_set and s.user_set.isdisjoint(_FLAG_FIELDS):
        return                  # NOTE: the common case, once per screened candidate
    for name in [n for n in FLAG_RELEASES if _given(s, n)]:     # NOTE: in a fixed order
        flag, first, last = FLAG_RELEASES[name]
        releases = _outside(version, first, last)
        if releases is None:
            continue
        fix = f"vLLM {version} has no such flag ({releases})"
        if parse_version(version) > parse_version(first):      # NOTE: it went away
            fix += f": {GONE_FIX.get(flag, 'drop it')}; or plan with the --vllm-version you run"
        elif flag in _EARLIER_FIX:
            fix += f"; {_EARLIER_FIX[flag]}"
        raise unrecognized(flag, _argv_text(getattr(s, name)), fix)


def last_release_with_flags(s: Settings) -> str | None:
    """The newest release whose argparse has every flag of `FLAG_RELEASES` (and of
    `SPELLING_RELEASES`) that `s` sets (None: no such flag limits it). A log that does not
    print its version started with its flags, so it is at most that release."""
    lasts = [last for name, (_flag, _first, last) in FLAG_RELEASES.items()
             if last is not None and _given(s, name)]
    lasts += [last for flag, _ in s.flag_spellings
              if (last := SPELLING_RELEASES[flag][1]) is not None]
    return min(lasts, key=parse_version) if lasts else None


def _given(s: Settings, name: str) -> bool:
    """Whether the launch sets `name` (its user_set; without one, a value off the default)."""
    if s.user_set:
        return name in s.user_set
    return getattr(s, name) != getattr(_memo.DEFAULT_SETTINGS, name)


def _argv_text(value) -> str:
    """A value as it follows its flag on the command line ("" for a switch)."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, tuple):
        # NOTE: (name, value) pairs are one JSON argument; plain items are nargs="+"
        if value and all(isinstance(v, str) for v in value):
            return " ".join(value)
        return json.dumps(dict(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_override_flags(s: Settings, version: str) -> None:
    """--rope-scaling, --rope-theta and --hf-overrides as the release's argparse has them
    (`rules_changes.OVERRIDE_FLAG_RELEASES`), with the spelling the release does have."""
    has_hf = _outside(version, *OVERRIDE_FLAG_RELEASES["--hf-overrides"]) is None
    for flag, value in s.config_overrides:
        releases = _outside(version, *OVERRIDE_FLAG_RELEASES[flag])
        if releases is None:
            continue
        fix = f"vLLM {version} has no such flag ({releases})"
        key = _OVERRIDE_KEY.get(flag)
        if key is not None and has_hf:
            fix += f": write it as --hf-overrides '{{\"{key}\": {value}}}'"
        elif key is None and _outside(version, *OVERRIDE_FLAG_RELEASES["--rope-scaling"]) is None:
            fix += ": --rope-scaling (and --rope-theta from 0.5.0) set those keys"
        raise unrecognized(flag, value, fix)


# NOTE: what to write instead, for the flags of SPELLING_RELEASES other than the speculative
_SPELLING_FIX = {"--device-memory-utilization": "write it --gpu-memory-utilization",
                 "--num-gpu-blocks-override": "0.4.0 spells it --forced-num-gpu-blocks",
                 "--forced-num-gpu-blocks": "write it --num-gpu-blocks-override",
                 "--optimization-level": "before 0.12 -O N is the compilation level "
                                         "(--compilation-config '{\"level\": N}')",
                 "-cc": "write it --compilation-config",
                 "-ep": "write it --enable-expert-parallel",
                 "-sc": "write it --speculative-config",
                 "--compilation-config": "this release has no compilation config "
                                         "(its CUDA graphs: --enforce-eager turns them off)",
                 "-O": "this release has no compilation config (its CUDA graphs: "
                       "--enforce-eager turns them off)"}
# NOTE: what each spelling of the speculative flags is in the other spellings
_SPEC_KEYS = {"--spec-method": "method", "--spec-model": "model",
              "--spec-tokens": "num_speculative_tokens", "--speculative-model": "model",
              "--num-speculative-tokens": "num_speculative_tokens"}


def check_flag_spellings(s: Settings, version: str) -> None:
    """The flags of `rules_changes.SPELLING_RELEASES` as the release's argparse has them,
    with the spelling the release does have; from 0.22 a --spec-* flag and the same key in
    --speculative-config are refused (EngineArgs: "are mutually exclusive")."""
    for flag, value in s.flag_spellings:
        releases = _outside(version, *SPELLING_RELEASES[flag])
        if releases is not None:
            fix = _SPELLING_FIX.get(flag) or _speculative_fix(flag, version)
            # NOTE: -O's value is its whole argv, as typed (-O3, -O 3, -O.level=3)
            raise unrecognized(flag, value, f"vLLM {version} has no such flag ({releases}): "
                               f"{fix}", typed=value if flag == "-O" else None)
    given = {flag for flag, _ in s.flag_spellings}
    in_json: set[str] = set()
    for flag, value in s.flag_spellings:
        if flag in ("--speculative-config", "-sc"):
            try:
                conf = json.loads(value)
            except ValueError:
                continue        # NOTE: the scanner has read it already
            in_json |= set(conf) if isinstance(conf, dict) else set()
    for flag in ("--spec-method", "--spec-model", "--spec-tokens"):
        if flag in given and _SPEC_KEYS[flag] in in_json:
            raise UsageError(f"{flag} and --speculative-config['{_SPEC_KEYS[flag]}'] are "
                             "mutually exclusive", where=flag,
                             fix=f"Give the {_SPEC_KEYS[flag]} once: with {flag} or inside "
                                 "--speculative-config")


def _speculative_fix(flag: str, version: str) -> str:
    """What the release spells instead of `flag`."""
    key = _SPEC_KEYS.get(flag)
    if _outside(version, *SPELLING_RELEASES["--speculative-config"]) is None:
        return f"write it inside --speculative-config '{{\"{key}\": ...}}'"
    if flag == "--spec-model" or flag == "--spec-tokens":
        old = "--speculative-model" if key == "model" else "--num-speculative-tokens"
        return f"this release spells it {old}"
    return ("this release has --speculative-model and --num-speculative-tokens (an n-gram "
            "drafter is --speculative-model '[ngram]')")


def check_choice(flag: str, value: str, choices: tuple[str, ...], version: str,
                  since: str) -> None:
    """A choice flag as argparse checks it: absent before `since` (no `choices`), else one of
    the release's `choices` (--mamba-cache-mode 0.15+, --mamba-cache-dtype 0.10.1+, ...)."""
    if not choices:
        raise unrecognized(flag, value, f"vLLM {version} has no such flag ({since}+)")
    if value not in choices:
        shown = ", ".join(repr(c) for c in choices)
        raise UsageError(f"vllm serve: error: argument {flag}: invalid choice: {value!r} "
                         f"(choose from {shown})", where=flag)
