"""The `vramguard` command line: parse, call one function, render.

Subcommands live in `vramguard.commands.<name>` and are imported only when used, so
`vramguard plan` stays a fast cold start. A command module defines either
`add_arguments(parser)` + `run(args) -> int`, or `main(argv) -> int` for its own parsing.
Any `VramguardError` becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

# name -> (module, one-line help). Order is the order shown in --help.
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("vramguard.commands.plan", "predict vLLM's startup: KV pool, concurrency, verdict"),
    "model": ("vramguard.commands.model", "a model's spec, parameters, weight and KV bytes"),
    "tune": ("vramguard.commands.tune", "recommend vLLM settings that fit a workload"),
    "table": ("vramguard.commands.table", "a sizing table of models x GPUs"),
    "check": ("vramguard.commands.check", "check the live GPUs before launching vLLM"),
    "run": ("vramguard.commands.run", "check, then exec a `vllm serve` command"),
    "watch": ("vramguard.commands.watch", "watch GPU memory and vLLM KV metrics, with alerts"),
    "report": ("vramguard.commands.report", "an HTML/PNG report of recorded history"),
    "exporter": ("vramguard.commands.exporter", "a Prometheus exporter of vramguard's series"),
    "stress": ("vramguard.commands.stress", "ramp load on a vLLM endpoint, find the preemption knee"),
    "diagnose": ("vramguard.commands.diagnose", "explain a vLLM startup or OOM log"),
    "calibrate": ("vramguard.commands.calibrate", "learn this machine's terms from startup logs"),
    "history": ("vramguard.commands.history", "startups seen by calibrate, compared"),
}


def _usage() -> str:
    from . import __version__
    lines = [f"vramguard {__version__}: will this model and these vLLM flags fit on this GPU?",
             "", "usage: vramguard COMMAND [options]   (vramguard COMMAND --help for more)", "",
             "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def _unknown(name: str) -> int:
    import difflib
    close = difflib.get_close_matches(name, list(COMMANDS), n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else " Run `vramguard --help`."
    print(f"vramguard: error: unknown command {name!r}.{hint}", file=sys.stderr)
    return 2


def _dispatch(name: str, argv: list[str]) -> int:
    import importlib
    module = importlib.import_module(COMMANDS[name][0])
    if hasattr(module, "main"):
        return int(module.main(argv) or 0)
    import argparse   # NOTE: only here: `main(argv)` commands (plan) skip its import cost

    class OneLine(argparse.ArgumentParser):
        """Bad options get one line (argparse prints the whole usage block first)."""

        def error(self, message: str):
            self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    parser = OneLine(prog=f"vramguard {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    return int(module.run(args) or 0)


def _tolerant_streams() -> None:
    """A console that cannot encode a glyph (cp437, latin-1, a C locale) prints '?' for it.

    NOTE: the renderers fall back to ASCII where they know to (`plan_text.can_encode`); this
    keeps any other character (vLLM's own "…" in a predicted log line) from crashing."""
    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if enc != "utf8" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="replace")
            except (ValueError, OSError):     # NOTE: a detached or closed stream: leave it
                pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `vramguard` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from . import __version__
        print(f"vramguard {__version__}")
        return 0
    name = argv[0]
    if name not in COMMANDS:
        return _unknown(name)
    from .errors import VramguardError
    _tolerant_streams()
    try:
        return _dispatch(name, argv[1:])
    except VramguardError as exc:
        print(f"vramguard {name}: error: {exc.line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
