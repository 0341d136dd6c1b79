#!/usr/bin/env python3
"""Regenerate src/vramguard/core/engine_flags.py: the releases whose `vllm serve` argparse has
each flag, the engine's (EngineArgs' `add_cli_args`, vllm/engine/arg_utils.py) and the front
end's (the OpenAI server's `make_arg_parser`, its `FrontendArgs`, the `serve` subcommand).

Input: a folder holding one source tree per release, named by its version (as the sdists and
wheels unpack: `0.8.5/vllm-0.8.5/vllm/...`, `0.10.1.1/...`); only `vllm/engine/arg_utils.py`,
`vllm/entrypoints/**` and `vllm/scripts.py` are read, e.g.

    tar -xzf vllm-0.8.5.tar.gz -C 0.8.5 --wildcards '*/vllm/engine/arg_utils.py' \\
        '*/vllm/entrypoints/*' '*/vllm/scripts.py'

Engine flags: every `"--name"` string literal of arg_utils.py (its add_argument calls; a
mention in a help text only widens the span, the safe side) and the short option strings of
its add_argument calls (`-tp`, `-ep`; `-O` from 0.12 is FlexibleArgumentParser's, not here).
Front-end flags, read from the syntax tree: the option strings of the add_argument calls in
the files that define `make_arg_parser` (not run_batch's), in `entrypoints/cli/serve.py`, in
`entrypoints/openai/api_server.py`, and of the `serve` subparser in `scripts.py` (0.5-0.7,
whose `chat` and `complete` subcommands have their own); and the fields of `FrontendArgs`
(and its `BaseFrontendArgs`) where the release turns them into flags (`--field-name`, 0.10
on). Post releases are merged into their x.y.z release; spans are over the releases examined
(a flag absent from a release between two that have it splits its span). The wheels of
0.4.0 and 0.15.0 stand in for their missing sdists (the same files, unpacked alike).

Usage:
    python scripts/vllm_serve_flags.py RELEASES_DIR [--write FILE]
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

_FLAG = re.compile(r"""["'](--[a-z0-9][a-z0-9-]*)["']""")
_OPTION = re.compile(r"-{1,2}[a-zA-Z0-9][a-zA-Z0-9-]*$")
_DATACLASS_ARGS = ("FrontendArgs", "BaseFrontendArgs")


def _version(name: str) -> tuple[int, ...]:
    base = re.match(r"\d+(\.\d+)*", name).group(0)
    return tuple(int(x) for x in base.split("."))[:3]


def _tree(path: Path) -> ast.AST | None:
    try:
        return ast.parse(path.read_text(errors="replace"))
    except SyntaxError:
        return None


def _option_strings(tree: ast.AST, receiver: str | None = None) -> set[str]:
    """The option strings of the add_argument calls (on a receiver whose name holds
    `receiver`, when given)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        if receiver is not None:
            owner = node.func.value
            if not (isinstance(owner, ast.Name) and receiver in owner.id):
                continue
        for arg in node.args:
            if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                    and _OPTION.match(arg.value)):
                out.add(arg.value)
    return out


def _dataclass_flags(tree: ast.AST) -> set[str]:
    """`--field-name` for the annotated fields of FrontendArgs / BaseFrontendArgs."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in _DATACLASS_ARGS:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    if not stmt.target.id.startswith("_"):
                        out.add("--" + stmt.target.id.replace("_", "-"))
    return out


def engine_flags(root: Path) -> set[str]:
    """The engine's flags in one release's tree: the long ones as literals, the short ones
    (`-tp`, `-ep`, ...) as add_argument option strings."""
    path = next(root.rglob("vllm/engine/arg_utils.py"), None)
    if path is None:
        return set()
    found = set(_FLAG.findall(path.read_text(errors="replace")))
    tree = _tree(path)
    if tree is not None:
        found |= {f for f in _option_strings(tree) if not f.startswith("--")}
    return found


def frontend_flags(root: Path) -> set[str]:
    """The serve front end's own flags in one release's tree."""
    out: set[str] = set()
    for path in root.rglob("vllm/entrypoints/**/*.py"):
        text = path.read_text(errors="replace")
        parser_file = "def make_arg_parser" in text and path.name != "run_batch.py"
        serve = str(path).endswith(("entrypoints/cli/serve.py",
                                    "entrypoints/openai/api_server.py"))
        if not (parser_file or serve or "class FrontendArgs" in text
                or "class BaseFrontendArgs" in text):
            continue
        tree = _tree(path)
        if tree is None:
            continue
        if parser_file or serve:
            out |= _option_strings(tree)
        if "get_kwargs" in text or "class BaseFrontendArgs" in text:
            out |= _dataclass_flags(tree)
    scripts = next(root.rglob("vllm/scripts.py"), None)
    if scripts is not None and (tree := _tree(scripts)) is not None:
        out |= _option_strings(tree, receiver="serve")
    return out


def releases(root: Path) -> dict[tuple[int, ...], tuple[set[str], set[str]]]:
    """x.y.z -> (engine flags, front-end flags), post releases merged in."""
    out: dict[tuple[int, ...], tuple[set[str], set[str]]] = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir() and re.match(r"\d", p.name)):
        eng, front = out.setdefault(_version(d.name), (set(), set()))
        eng |= engine_flags(d)
        front |= frontend_flags(d)
    return out


def spans(present: list[bool], versions: list[tuple[int, ...]]) -> str:
    """"0.8.0-" or "0.4.0-0.17.1" or "a-b,c-" over the examined releases."""
    parts, start = [], None
    for i, on in enumerate(present + [False]):
        if on and start is None:
            start = i
        elif not on and start is not None:
            last = "" if i == len(versions) else ".".join(map(str, versions[i - 1]))
            parts.append(".".join(map(str, versions[start])) + "-" + last)
            start = None
    return ",".join(parts)


def _table(name: str, doc: str, table, versions, which: int) -> list[str]:
    flags = sorted(set().union(*(table[v][which] for v in versions)))
    lines = [f"# {doc}", f"{name}: dict[str, str] = {{"]
    for flag in flags:
        span = spans([flag in table[v][which] for v in versions], versions)
        lines.append(f"    {flag!r}: {span!r},")
    return lines + ["}"]


def render(table: dict[tuple[int, ...], tuple[set[str], set[str]]]) -> str:
    versions = sorted(table)
    lines = ['"""The releases whose `vllm serve` argparse has each flag: the engine\'s',
             "(EngineArgs) and the front end's (the OpenAI server's parser, FrontendArgs, the",
             "serve subcommand).",
             "",
             "GENERATED by scripts/vllm_serve_flags.py from every release's",
             "vllm/engine/arg_utils.py and vllm/entrypoints; do not edit. Spans are over",
             "`EXAMINED`: \"0.8.0-\" from 0.8.0 on, \"0.4.0-0.17.1\" those releases. A release's",
             "parser has a flag when either table's span holds it (a flag that moved between",
             "the two is in both).",
             '"""', "", "from __future__ import annotations", "",
             "EXAMINED: tuple[str, ...] = ("]
    names = [repr(".".join(map(str, v))) for v in versions]
    for i in range(0, len(names), 9):
        lines.append("    " + ", ".join(names[i:i + 9]) + ",")
    lines += [")", ""]
    lines += _table("ENGINE_FLAGS", "EngineArgs.add_cli_args (vllm/engine/arg_utils.py)",
                    table, versions, 0)
    lines += [""]
    lines += _table("FRONTEND_FLAGS", "make_arg_parser, FrontendArgs, the serve subcommand",
                    table, versions, 1)
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("releases_dir", type=Path)
    ap.add_argument("--write", type=Path)
    args = ap.parse_args()
    text = render(releases(args.releases_dir))
    if args.write:
        args.write.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
