"""The flags of a launch that vramguard reads but does not model, judged the way the release's
`vllm serve` argparse judges them (`engine_flags`: the engine's and the front end's flags of
every release, 0.4.0-0.33.0), and the front end's own start-up checks of such flags.

NOTE: the modelled flags are judged where they are read (`validation`: FLAG_RELEASES,
SPELLING_RELEASES, the rules' fields); these are the rest: `--port`, `--tool-call-parser`,
`--reasoning-parser`, `-asc`, ... (`VllmCommand.ignored_args`).
"""

from __future__ import annotations

from .engine_flags import ENGINE_FLAGS, EXAMINED, FRONTEND_FLAGS
from .errors import UsageError
from .rules import parse_version
from .argparse_checks import GONE_FIX, is_dev_build, span_text, unrecognized

__all__ = ["check_launch", "check_parser_flags", "check_launcher", "flag_releases"]

_INDEX = {v: i for i, v in enumerate(EXAMINED)}

# NOTE: `vllm serve` (vllm/scripts.py, the `vllm` console script) arrived in 0.5.2; its
# positional model_tag was required until 0.8.3 made it optional (nargs="?").
_SERVE_CLI, _MODEL_TAG_OPTIONAL = "0.5.2", "0.8.3"
# NOTE: the front end refuses these at start-up (a TypeError before it serves): (flag, the
# flag it needs, first release). From 0.6.0 the chat server needs a tool parser for
# automatic tool choice (`serving_chat.py`, from 0.11.1 `validate_parsed_serve_args`); from
# 0.11.0 logging outputs needs logging requests.
_REQUIRES = (("--enable-auto-tool-choice", "--tool-call-parser", "0.6.0"),
             ("--enable-log-outputs", "--enable-log-requests", "0.11.0"))


def _parse_spans(text: str) -> list[tuple[str, str | None]]:
    return [(a, b or None) for a, _, b in (s.partition("-") for s in text.split(",") if s)]


def flag_releases(flag: str) -> list[tuple[str, str | None]]:
    """The examined releases whose serve parser has `flag`, as (first, last or None) spans:
    the engine's and the front end's, adjacent spans joined ([] when neither table has it)."""
    spans = sorted(_parse_spans(ENGINE_FLAGS.get(flag, ""))
                   + _parse_spans(FRONTEND_FLAGS.get(flag, "")), key=lambda s: _INDEX[s[0]])
    out: list[tuple[str, str | None]] = []
    for first, last in spans:
        if out and (out[-1][1] is None or _INDEX[first] <= _INDEX[out[-1][1]] + 1):
            prev_first, prev_last = out[-1]
            joined = None if last is None or prev_last is None else max(
                last, prev_last, key=lambda v: _INDEX[v])
            out[-1] = (prev_first, joined)
        else:
            out.append((first, last))
    return out


def _inside(version: str, first: str, last: str | None) -> bool:
    v = parse_version(version)
    return parse_version(first) <= v and (last is None or v <= parse_version(last))


def _typed_name(flag: str, tokens: tuple[str, ...]) -> str:
    """The name as typed where it is a short option (`-asc`), else the flag."""
    typed = tokens[0].split("=", 1)[0] if tokens else flag
    return typed if typed.startswith("-") and not typed.startswith("--") else flag


def check_launch(cmd, version: str | None) -> None:
    """A parsed launch (a `sources.vllm_args.VllmCommand`: its launcher, whether the model
    was positional, its unmodelled flags, its entry point) as the release takes it."""
    check_launcher(cmd.launcher, cmd.model_positional, version)
    check_parser_flags(cmd.ignored_args, version, cmd.settings.entrypoint)


def check_launcher(launcher: str, model_positional: bool, version: str | None) -> None:
    """`vllm serve` as the release has it: no `vllm` command before 0.5.2, and the model as
    its positional `model_tag` (argparse requires it) up to 0.8.2; `--model` alone from
    0.8.3. Other launchers and development builds are not judged."""
    version = version or EXAMINED[-1]
    if launcher != "vllm serve" or is_dev_build(version):
        return
    if parse_version(version) < parse_version(_SERVE_CLI):
        raise UsageError(f"vLLM {version} has no `vllm serve` command (the vllm command is "
                         f"new in {_SERVE_CLI})", where=None,
                         fix="start it with python -m vllm.entrypoints.openai.api_server "
                             "--model MODEL ..., or plan with the --vllm-version you run")
    if not model_positional and parse_version(version) < parse_version(_MODEL_TAG_OPTIONAL):
        raise UsageError("vllm serve: error: the following arguments are required: model_tag",
                         where=None,
                         fix=f"write the model first, `vllm serve MODEL ...` (vLLM {version} "
                             f"needs it there; --model alone works from {_MODEL_TAG_OPTIONAL})")


def check_parser_flags(args: tuple[tuple[str, tuple[str, ...]], ...], version: str | None,
                       entrypoint: str = "serve") -> None:
    """The launch's flags that vramguard reads but does not model ((flag, its tokens as
    given): `VllmCommand.ignored_args`) as the release's argparse has them: "unrecognized
    arguments" outside their releases (a short option as typed, `-asc`); then the front
    end's start-up checks (`--enable-auto-tool-choice` needs `--tool-call-parser`). A flag in
    neither table is not judged; a release newer than the examined ones is judged as the
    newest; development builds and releases before the oldest are not judged, nor the LLM
    class (`entrypoint` "llm": no argparse, no server)."""
    version = version or EXAMINED[-1]
    if (not args or entrypoint != "serve" or is_dev_build(version)
            or parse_version(version) < parse_version(EXAMINED[0])):
        return
    judged = min(version, EXAMINED[-1], key=parse_version)
    for flag, tokens in args:
        name = _typed_name(flag, tokens)
        spans = flag_releases(name)
        if not spans or any(_inside(judged, a, b) for a, b in spans):
            continue
        went = parse_version(judged) > parse_version(spans[0][0])
        fix = (f"vLLM {version} has no such flag ({', '.join(span_text(a, b) for a, b in spans)})"
               f": {GONE_FIX.get(flag, 'drop it') if went else 'drop it'}; or plan with the "
               "--vllm-version you run")
        raise unrecognized(name, "", fix, typed=" ".join(tokens))
    _check_requirements({flag for flag, _ in args}, judged)


def _check_requirements(given: set[str], version: str) -> None:
    for flag, needed, first in _REQUIRES:
        if flag in given and needed not in given and _inside(version, first, None):
            raise UsageError(f"Error: {flag} requires {needed}", where=flag,
                             fix=f"add {needed} (vLLM {version} stops at start-up without it)")
