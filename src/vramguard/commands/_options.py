"""Split a command's own options from the vLLM flags and a pasted launch line.

`vramguard plan`, `tune`, `check` and `run` take vLLM's flags verbatim next to their own
options, and a whole launch command after `--`:

    vramguard plan MODEL -tp 2 --gpu L4 --json
    vramguard plan --gpu L4 -- vllm serve MODEL -tp 2 --json

`split_options` does that split once for all of them. No argparse (it would reject vLLM's
flags, and cost `vramguard plan` cold-start time); no imports at module level.
"""

from __future__ import annotations

# NOTE: the largest memory figure (GiB) an option accepts: far above any device or host, low
# enough that byte counts stay exact integers (1e308 GiB would overflow `int(x * GIB)`).
MAX_GIB = float(1 << 20)


def number(flag: str, text: str, *, kind=float, low: float = 0.0, allow_low: bool = False,
           high: float = float("inf"), unit: str = "", example: str = ""):
    """`text` as a finite `kind` above `low` (or at it with `allow_low`) and at most `high`;
    else a UsageError naming `flag` and the range (`unit`, `example` for its fix)."""
    from ..errors import UsageError
    try:
        x = kind(text)
    except (TypeError, ValueError):
        x = None
    ok = (x is not None and x == x and x != float("inf") and x <= high
          and (x >= low if allow_low else x > low))
    if not ok:
        what = ("a whole number" if kind is int else "a number") + (f" of {unit}" if unit else "")
        top = f" and <= {high:,.0f}" if high != float("inf") else ""
        eg = f", e.g. {example}" if example else ""
        raise UsageError(f"invalid value {text!r}", where=flag,
                         fix=f"Expected {what} {'>=' if allow_low else '>'} {low:g}{top}{eg}.")
    return x


class SplitArgs:
    """What `split_options` found in an argv.

    `values` maps a valued option's flag name (`--gpu`) to its value (a list of values for
    a repeatable one), `flags` holds the boolean options given, `vllm_tokens` everything else
    before `--` (MODEL and vLLM flags, in order), `pasted` the launch line after `--` (None
    without `--`), `help` whether -h/--help was given.
    """

    def __init__(self) -> None:
        self.values: dict[str, str | list[str]] = {}
        self.flags: set[str] = set()
        self.vllm_tokens: list[str] = []
        self.pasted: list[str] | None = None
        self.help = False

    def __repr__(self) -> str:
        return (f"SplitArgs(values={self.values!r}, flags={sorted(self.flags)!r}, "
                f"vllm_tokens={self.vllm_tokens!r}, pasted={self.pasted!r}, help={self.help})")

    def get(self, name: str, default: str | None = None):
        """The value of the valued option `name` (`--window`), or `default`."""
        return self.values.get(name, default)

    def on(self, name: str) -> bool:
        """Whether the boolean option `name` (`--json`) was given."""
        return name in self.flags

    def set_attributes(self, obj):
        """Copy onto `obj` as attributes (`--gpu-memory-gib` -> `obj.gpu_memory_gib`, a
        boolean option -> True), with `vllm_tokens`, `pasted` and `help`. Returns `obj`;
        options not given keep `obj`'s defaults."""
        for name, value in self.values.items():
            setattr(obj, _attr(name), value)
        for name in self.flags:
            setattr(obj, _attr(name), True)
        obj.vllm_tokens, obj.pasted, obj.help = self.vllm_tokens, self.pasted, self.help
        return obj


def _attr(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def flag_name(token: str) -> str:
    """The option name a token spells, as vLLM reads it: `--max_model_len=8k` ->
    `--max-model-len`; short flags and other words are returned up to any `=`."""
    name = token.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def gpu_list(values: list[str]) -> list[str]:
    """GPU names, one per GPU, from `--gpu` values: `A`, `A,B`, `A:4`, `4xA` (`4x A`,
    `4×A`). Raises UsageError for a count outside 1..1024."""
    import re

    from ..errors import UsageError
    names: list[str] = []
    for value in values:
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, count = part.rpartition(":")
            m = None if sep else re.fullmatch(r"(\d+)\s*[x×X*]\s*(\S.*)", part)
            if m:
                count, name = m.group(1), m.group(2)
            elif not (sep and count.isdigit()):
                names.append(part)
                continue
            if not 1 <= int(count) <= 1024:
                raise UsageError(f"invalid GPU count {count!r}", where=f"--gpu {part}",
                                 fix="Write NAME:N (or NxNAME) with N between 1 and 1024.")
            names += [name.strip()] * int(count)
    return names


def split_options(argv, *, bool_flags, value_flags, repeatable=(),
                  own_after_dashdash: bool = False) -> SplitArgs:
    """Split `argv` into the command's own options and the rest.

    `bool_flags` and `value_flags` are the command's own option names (`--json`,
    `--gpu`); `_` and `-` are the same in a name. A valued option takes `--opt=value` or
    `--opt value` (the next token, unless it starts with `--`); one in `repeatable` collects
    a list. Anything else before `--` goes to `vllm_tokens`. After the first `--` the tokens
    go to `pasted`: verbatim, or, with `own_after_dashdash`, still scanned for own options
    and -h/--help (a later `--` is then kept as a pasted word).
    Raises UsageError (one line) for a value given to a boolean option, or a missing or
    empty value.
    """
    out = SplitArgs()
    argv = list(argv)
    rest = out.vllm_tokens
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if tok == "--" and out.pasted is None:
            if not own_after_dashdash:
                out.pasted = argv[i:]
                break
            # NOTE: none of the own options is a vLLM flag, so they can be recognised in
            # the pasted part too: `vramguard plan -- vllm serve M ... --json` works.
            out.pasted = rest = []
            continue
        if tok in ("-h", "--help"):
            out.help = True
            continue
        name = flag_name(tok)
        if name in bool_flags:
            if "=" in tok:
                from ..errors import UsageError
                raise UsageError("takes no value", where=name)
            out.flags.add(name)
        elif name in value_flags:
            if "=" in tok:
                value = tok.split("=", 1)[1]
            elif i < len(argv) and not argv[i].startswith("--"):
                value = argv[i]
                i += 1
            else:
                from ..errors import UsageError
                raise UsageError("expected a value after it", where=name,
                                 fix=f"Write {name} VALUE.")
            if not value.strip():
                # NOTE: an empty value (`--gpu ''`, an unset shell variable) is not the default
                from ..errors import UsageError
                raise UsageError("empty value", where=name, fix=f"Write {name} VALUE.")
            if name in repeatable:
                out.values.setdefault(name, []).append(value)
            else:
                out.values[name] = value
        else:
            rest.append(tok)
    return out


def launch_command(split: "SplitArgs | object", own_options: tuple[str, ...]):
    """`command_from_tokens` of a command's vLLM tokens and pasted line; when vLLM's parse
    fails on a word that is one of this command's own options written inside the pasted line
    (`-- "vllm serve M --gpu L40S"`, read by vLLM as `--gpu-memory-utilization`), the error
    says to give that option outside the launch line."""
    from ..errors import UsageError
    from ..sources.vllm_args import command_from_tokens
    try:
        return command_from_tokens(split.vllm_tokens, split.pasted)
    except UsageError as exc:
        words = [w for part in (split.pasted or []) for w in str(part).split()]
        mine = next((w.split("=")[0] for w in words if w.split("=")[0] in own_options), None)
        if mine is None:
            raise
        raise UsageError(exc.what, where=exc.where,
                         fix=f"{mine} is vramguard's option, not vLLM's: give it outside the "
                             "quoted launch command") from None
