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
(the shapes live in `vllm_launch`, the flag table in `vllm_flags`, one value's conversion
in `vllm_values`, the argv token scanner in `vllm_scan`; this module drives them and reads
`--config` files).

Public API: `parse_vllm_command`, `parse_vllm_args`, `command_from_tokens` (a command's
vLLM flags and/or pasted line), `settings_from_mapping`,
`command_with` (the user's own line with a fix applied), `settings_to_args` +
`format_command` (a line from Settings alone), `human_readable_int`.
`yaml` is imported here and nowhere else, and only when a `--config` file or a pasted
manifest is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..core.settings import Settings
from ..errors import UsageError
from .vllm_flags import ALIASES, COMPILE, FLAGS, TRIBOOL
# NOTE: convert_value and human_readable_int are re-exported: callers import every public
# name from here (the conversions live in vllm_values, the token scanner in vllm_scan).
from .vllm_scan import _canonical, _Scan
from .vllm_values import convert_value, human_readable_int

__all__ = ["VllmCommand", "command_from_tokens", "command_with", "convert_value", "flag_for",
           "format_command", "human_readable_int", "load_config_yaml", "load_yaml_documents",
           "parse_vllm_args",
           "parse_vllm_command", "settings_from_mapping", "settings_to_args",
           "split_command_line"]


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
    # the `ignored` flags with their tokens as given, in order (a --config file's too)
    ignored_args: tuple[tuple[str, tuple[str, ...]], ...] = ()
    model_positional: bool = False        # the model given as `vllm serve MODEL` (model_tag)

    @property
    def config_overrides(self) -> dict:
        """config.json changes from --hf-overrides / --rope-scaling / --rope-theta, in order
        (vLLM applies them to the model's config; `load_model_spec(config_overrides=...)`)."""
        from .vllm_flags import CONFIG_OVERRIDE_FLAGS
        out: dict = {}
        for flag, text in self.settings.config_overrides:
            value, key = json.loads(text), CONFIG_OVERRIDE_FLAGS[flag]
            out.update(value if key is None else {key: value})
        return out

    @property
    def passthrough(self) -> tuple[str, ...]:
        """The tokens of `ignored_args`, in order: a command written from Settings carries
        them so that the launch keeps working (`vramguard tune`)."""
        return tuple(tok for _, tokens in self.ignored_args for tok in tokens)

    @property
    def no_effect(self) -> tuple[str, ...]:
        """The flags given that do not change memory: `ignored` less `unmodeled` (those are
        noted apart), each once, in order."""
        return tuple(f for f in dict.fromkeys(self.ignored) if f not in self.unmodeled)

    @property
    def engine_hint(self) -> str | None:
        """`v0`/`v1` when the env pins it (VLLM_USE_V1), else None."""
        val = self.env.get("VLLM_USE_V1")
        if val is None:
            return None
        return "v1" if val.strip().lower() in ("1", "true", "yes") else "v0"


# ---------------------------------------------------------------------------------------
# YAML (--config) and mappings
# ---------------------------------------------------------------------------------------
def load_yaml_documents(text: str, where: str) -> list:
    """The YAML documents of `text` (a pasted manifest: `sources.manifests`), UsageError
    naming the line when it is not valid YAML."""
    import yaml
    try:
        return list(yaml.safe_load_all(text))
    except RecursionError:
        raise UsageError("the pasted YAML is nested too deeply", where=where,
                         fix="Paste the whole file, or the vllm serve line only.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"the pasted manifest is not valid YAML{at}", where=where,
                         fix="Paste the whole file, or the vllm serve line only.") from None


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
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text", where="--config",
                         fix="Fix the YAML file.") from None
    except RecursionError:
        raise UsageError(f"{path} is not valid YAML (nested too deeply)", where="--config",
                         fix="Fix the YAML file.") from None
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
        converted = convert_value(flag, value)
        changes.update(converted)
        if FLAGS[flag].kind == COMPILE:
            user_set.update(converted)      # NOTE: one compilation config sets several fields
        else:
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
        data = load_config_yaml(config_file)
        try:
            scan.scan(_mapping_to_tokens(data), where=config_file)
        except UsageError as exc:
            if exc.where in (None, config_file):
                raise
            # NOTE: the scanner speaks of command-line tokens; the user wrote YAML keys.
            fix = exc.fix if exc.fix and not exc.fix.startswith("Write ") else (
                "Fix that key in the YAML file (`key: value`; true/false only for switches "
                "such as enforce-eager)")
            raise UsageError(f"{exc.where}: {exc.what}", where=f"--config {config_file}",
                             fix=fix) from None
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
    user_set = set(scan.user_set)
    if scan.override_args:
        # NOTE: after a pasted line's own (`base`): both are on the command line
        changes["config_overrides"] = settings.config_overrides + tuple(scan.override_args)
        user_set.add("config_overrides")
    if scan.spelling_args:
        changes["flag_spellings"] = settings.flag_spellings + tuple(scan.spelling_args)
        user_set.add("flag_spellings")
    if model is not None:
        changes["model"] = model
    model = changes.get("model", settings.model)
    notes = list(scan.notes)
    if scan.unmodeled:
        names = " ".join(dict.fromkeys(scan.unmodeled))
        notes.append(f"not modeled, although vLLM's memory depends on them: {names} "
                     "(the plan is made without them)")
    return VllmCommand(model=model, settings=_with(settings, changes, user_set),
                       ignored=tuple(scan.ignored),
                       unmodeled=tuple(scan.unmodeled), unknown=tuple(scan.unknown),
                       notes=tuple(notes), config_file=config_file, args=tuple(tokens),
                       ignored_args=tuple(scan.ignored_args),
                       model_positional=bool(positionals))


def parse_vllm_command(argv: list[str] | str, *, strict: bool = True) -> VllmCommand:
    """Parse a pasted vLLM launch (argv tokens, or one string, or a string + more tokens)
    into a VllmCommand.

    Understands `vllm serve MODEL ...`, `python[3] -m vllm.entrypoints[.openai].api_server
    --model MODEL ...`, leading `VAR=value` env assignments, and `docker run ...
    vllm/vllm-openai:TAG ...` (a vX.Y.Z tag becomes `version_hint`). A bare list of
    flags (`--model M -tp 2`) works too. Unknown flags raise UsageError when `strict`.
    """
    from . import vllm_launch as launch
    snippet_notes: list[str] = []
    if isinstance(argv, str):
        tokens, snippet_notes = launch.split_snippet(argv)
    elif argv and any(c.isspace() for c in argv[0]):
        # one quoted line, possibly followed by more tokens (which then come last and win)
        tokens, snippet_notes = launch.split_snippet(argv[0])
        tokens += list(argv[1:])
    else:
        tokens = list(argv)
    all_tokens = tokens
    env: dict[str, str] = {}
    tokens = launch.strip_env(tokens, env)
    version = None
    launcher = None
    api_server_image = False
    if tokens and tokens[0].rsplit("/", 1)[-1] in launch.CONTAINER_TOOLS:
        tokens, version, image, own_entry = launch.docker_args(tokens, env)
        tokens = launch.strip_env(tokens, env)
        launcher = "docker"
        api_server_image = not own_entry and launch.api_server_image(image, version)
        foreign = launch.foreign_tag_note(image)
        snippet_notes = [*snippet_notes, foreign] if foreign else snippet_notes
    name, args, positional_ok = launch.find_vllm_args(tokens)
    prefix = tuple(all_tokens[:len(all_tokens) - len(args)])   # each step kept a suffix
    api_server = api_server_image or name == "python -m vllm.entrypoints.openai.api_server"
    try:
        cmd = parse_vllm_args(args, strict=strict, where=None,
                              positional_model=positional_ok and not api_server_image)
    except UsageError as exc:
        if api_server and exc.what.startswith("unexpected argument"):
            raise launch.api_server_positional(exc.what, api_server_image) from None
        raise
    from dataclasses import replace

    from .vllm_flags import UNMODELED_ENV
    notes = tuple(snippet_notes) + cmd.notes
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
                   unmodeled=cmd.unmodeled + extra.unmodeled, args=cmd.args + extra.args,
                   ignored_args=cmd.ignored_args + extra.ignored_args)


# ---------------------------------------------------------------------------------------
# Back to a command line (written in vllm_launch; imported only when a line is written)
# ---------------------------------------------------------------------------------------
def flag_for(name: str) -> str:
    """`max_model_len` or `--max-model-len` or `-tp` -> vLLM's long flag name."""
    if name.startswith("-"):
        return _canonical(name)
    from .vllm_launch import FIELD_TO_FLAG
    return FIELD_TO_FLAG.get(name, "--" + name.replace("_", "-"))


def settings_to_args(settings: Settings, overrides: dict[str, object] | None = None,
                     version: str | None = None) -> list[str]:
    """The flags in `settings.user_set` as vLLM argv, with `overrides` (flag or field name
    -> value; True or "" for a switch, False to turn it off) on top. Model excluded.
    `version`: the release the line is for (default the newest): `-O` and the compilation
    config's keys are written as that release reads them (they changed in 0.11.1 and 0.12)."""
    from .vllm_launch import settings_to_args as write
    return write(settings, overrides, version)


def command_with(cmd: VllmCommand, overrides: dict[str, object] | None = None) -> str:
    """The user's own launch line (env, launcher, docker words and every flag kept), with
    `overrides` replacing earlier occurrences of those flags (aliases, `=`, `_` and `--no-`
    forms included), appended last. Shell-quoted, ready to copy."""
    from .vllm_launch import command_with as write
    return write(cmd, overrides)


def format_command(model: str | None, args: list[str], launcher: str = "vllm serve",
                   env: tuple[str, ...] = ()) -> str:
    """A shell-quoted `vllm serve MODEL args...` line (`env`: `VAR=value` words first)."""
    from .vllm_launch import format_command as write
    return write(model, args, launcher, env)
