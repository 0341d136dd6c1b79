"""`vramguard run`: check the live GPUs, optionally wait or adjust, then exec vLLM.

    vramguard run [--wait-for-free 300s] [--adjust] [check options] -- vllm serve MODEL ...

The vLLM command is exec'd as an argv list (no shell) with `os.execvpe`, so vramguard's
process becomes vLLM: its exit code and signals pass through untouched. Only --adjust
changes the command, by replacing/appending the lowered flags (printed one by one).
A failed probe or an unsafe verdict never starts vLLM (exit 2 / 1), unless --force, which
prints a loud warning first.
"""

from __future__ import annotations

import os
import re
import sys
import time

from .check import OWN_BOOL, OWN_VALUE

HELP = """\
usage: vramguard run [options] -- vllm serve MODEL [vLLM flags]

Check the live GPUs like `vramguard check`, then replace this process with the vLLM command
(exec, no shell): vLLM's exit code and signals pass through. Nothing is launched when the
check fails.

options:
  --wait-for-free DURATION  when unsafe, re-check every --poll until the GPUs are free
                            enough, for at most this long (e.g. 300s; default 0: no wait)
  --poll DURATION           time between re-checks while waiting (default 5s)
  --adjust                  when still unsafe, lower --gpu-memory-utilization, then
                            --max-model-len / --max-num-seqs to values that pass (printed)
  --force                   launch even when the check fails or the GPUs cannot be read
                            (prints a loud warning)
  --dry-run                 print the command that would be exec'd, and exit 0/1
  --window, --interval, --headroom-gib, --min-free-gib, --vllm-version, --engine,
  --offline, --no-host, --json, --no-color: as in `vramguard check` (output goes to stderr)

exit status: vLLM's own once launched; 1 unsafe, 2 bad input or probe failure (before launch).
"""

RUN_VALUE = OWN_VALUE + ("--wait-for-free", "--poll")
RUN_BOOL = OWN_BOOL + ("--adjust", "--force", "--dry-run")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading `VAR=value` words (as a shell would apply them) and the command after them."""
    env: dict[str, str] = {}
    i = 0
    while i < len(argv) and _ENV_RE.match(argv[i]):
        key, _, value = argv[i].partition("=")
        env[key] = value
        i += 1
    return env, argv[i:]


def apply_changes(argv: list[str], changes) -> list[str]:
    """`argv` with each changed flag's old occurrences (`--flag V`, `--flag=V`, underscore
    spelling) removed and `--flag NEW` appended; vLLM's parser takes the last occurrence, so
    an abbreviated spelling left behind is overridden too."""
    out = list(argv)
    for change in changes:
        flag = change.flag
        names = {flag, "--" + flag[2:].replace("-", "_")}
        kept: list[str] = []
        i = 0
        while i < len(out):
            tok = out[i]
            if tok in names:
                i += 2
                continue
            if tok.split("=", 1)[0] in names and "=" in tok:
                i += 1
                continue
            kept.append(tok)
            i += 1
        value = change.new
        out = kept + [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return out


def _say(text: str) -> None:
    print(f"vramguard run: {text}", file=sys.stderr, flush=True)


def _loud(reason: str) -> None:
    bar = "!" * 78
    print(f"{bar}\nvramguard run: WARNING: --force: launching vLLM although {reason}\n"
          f"vramguard run: WARNING: it may fail at startup or run out of memory.\n{bar}",
          file=sys.stderr, flush=True)


def _check(opts, argv: list[str]):
    """Check, wait, adjust. Returns (result or None, the argv to exec). Raises
    VramguardError from the probe (the caller decides about --force)."""
    from ..durations import parse_duration
    from . import check
    wait_s = parse_duration(opts.get("--wait-for-free", "0"), flag="--wait-for-free",
                            allow_zero=True)
    poll_s = parse_duration(opts.get("--poll", "5s"), flag="--poll", allow_zero=True)
    if poll_s <= 0:
        from ..errors import UsageError
        raise UsageError("must be positive", where="--poll", fix="Use e.g. --poll 5s")
    progress = _say
    prep = check.prepare(opts)
    probed = check.probe(prep, progress=progress)
    result = check.evaluate(prep, probed)
    deadline = time.monotonic() + wait_s
    if not result.ok and wait_s > 0:
        first = result.problems[0].message if result.problems else "unsafe"
        _say(f"not safe yet ({first}); waiting up to {wait_s:g}s for the GPUs to free up")
    while not result.ok and time.monotonic() < deadline:
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))
        probed = check.probe(prep)
        result = check.evaluate(prep, probed)
    if result.ok and wait_s > 0:
        _say("the GPUs are free enough now")
    if not result.ok and opts.on("--adjust"):
        changes = result.adjustments
        adjusted = (check.evaluate(prep, probed, prep.cmd.settings.with_(**result.suggested))
                    if changes else None)
        if adjusted is not None and adjusted.ok:
            for c in changes:
                _say(f"--adjust: {c.describe()}")
            return adjusted, apply_changes(argv, changes)
        _say("--adjust: no lower --gpu-memory-utilization / --max-model-len / --max-num-seqs "
             "makes this launch safe")
    return result, argv


def main(argv: list[str]) -> int:
    """Entry point of `vramguard run` (see HELP)."""
    from ..errors import UsageError, VramguardError
    from .check import parse_options, render
    opts = parse_options(argv, value_flags=RUN_VALUE, bool_flags=RUN_BOOL, allow_tokens=False)
    if opts.help:
        print(HELP, end="")
        return 0
    if not opts.pasted:
        raise UsageError("no vLLM command given", where="the command",
                         fix="Write `vramguard run [options] -- vllm serve MODEL ...`")
    pasted = opts.pasted
    if len(pasted) == 1 and pasted[0].split() != pasted:     # one quoted command line
        from ..sources.vllm_launch import split_snippet
        pasted, notes = split_snippet(pasted[0])
        for note in notes:
            _say(f"note: {note}")
    env_words, command = split_env(pasted)
    if not command:
        raise UsageError("the command after `--` is only VAR=value words", where="the command",
                         fix="Write `vramguard run -- vllm serve MODEL ...`")
    force = opts.on("--force")
    try:
        result, command = _check(opts, command)
    except VramguardError as exc:
        if not force:
            raise
        _loud(f"the check could not run: {exc.line()}")
        result = None
    if result is not None:
        render(result, opts, stream=sys.stderr)
        if not result.ok:
            if not force:
                _say("not launching vLLM: the check says it is unsafe (exit 1); "
                     "--force launches anyway")
                return 1
            _loud("the check says it is unsafe")
    if opts.on("--dry-run"):
        import shlex
        print(shlex.join([f"{k}={v}" for k, v in env_words.items()] + command))
        return 0
    return _exec(command, env_words)


def _exec(command: list[str], env_words: dict[str, str]) -> int:
    """Replace this process with `command` (PATH lookup, no shell)."""
    from ..errors import UsageError
    from ..probe.nvml import shutdown
    shutdown()
    env = dict(os.environ)
    env.update(env_words)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], command, env)
    except FileNotFoundError:
        raise UsageError(f"command not found: {command[0]!r}", where="the command",
                         fix="Check that vLLM is installed and on PATH (or give its full path)"
                         ) from None
    except PermissionError:
        raise UsageError(f"cannot execute {command[0]!r}: permission denied",
                         where="the command") from None
    except OSError as exc:      # NOTE: e.g. not a program (ENOEXEC), a name too long
        name = command[0] if len(command[0]) <= 200 else command[0][:200] + "..."
        raise UsageError(f"cannot execute {name!r}: {exc.strerror or exc}",
                         where="the command",
                         fix="Check that the command is vLLM's program, or give its full path"
                         ) from None
    return 127   # not reached: exec replaced the process
