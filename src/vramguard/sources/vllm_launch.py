"""vLLM launch lines, read and written.

Reading: the shapes of a pasted line (env assignments, `vllm serve`, `python -m
vllm.entrypoints...`, `docker run ... IMAGE`): where vLLM's own arguments start. The
arguments themselves are parsed by `sources.vllm_args` (tokens by `sources.vllm_scan`).
Writing: Settings or a parsed command back to a copy-pasteable line, with changes applied.
Imported lazily by `sources.vllm_args` (only for pasted commands and written lines).
"""

from __future__ import annotations

import json
import re

from ..errors import UsageError
from .vllm_flags import BOOL, FLAGS, TRIBOOL

CONTAINER_TOOLS = ("docker", "podman", "nerdctl")
# vLLM's entry modules (for `python -m ...`).
_ENTRY_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server",
                  "vllm.entrypoints.cli.main")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_VERSION_TAG_RE = re.compile(r"^v?(\d+\.\d+(?:\.\d+)*)(?:[-+.][0-9A-Za-z.\-+]*)?$")


# ---------------------------------------------------------------------------------------
# Pasted commands
# ---------------------------------------------------------------------------------------
def split_command_line(text: str) -> list[str]:
    """The argv words of the vLLM launch in a pasted shell line or snippet (`\\`
    continuations, comments, `export` lines, several commands: `shell_snippet`)."""
    return split_snippet(text)[0]


def split_snippet(text: str) -> tuple[list[str], list[str]]:
    """(the launch's words, notes) of a pasted shell snippet (`shell_snippet.launch_words`),
    or of pasted YAML: a Kubernetes manifest, a compose file or a vLLM `--config` file's
    content (`manifests.launch_from_yaml`)."""
    from .manifests import launch_from_yaml, looks_like_yaml
    if looks_like_yaml(text):
        return launch_from_yaml(text)
    from .shell_snippet import launch_words
    return launch_words(text)


_DOCKER_VALUE_OPTS = frozenset("""
-v --volume -p --publish -e --env --env-file --name --gpus --runtime --shm-size --ipc
--network --net --entrypoint -w --workdir --mount -u --user --device --cpus -m --memory
--ulimit -l --label --platform --restart --hostname -h --cap-add --cap-drop --security-opt
--log-driver --log-opt --add-host --memory-swap --cpuset-cpus --pid --uts --userns
--dns --group-add --tmpfs --volumes-from --expose --stop-signal --stop-timeout --pull
--health-cmd --health-interval --health-retries --health-timeout --cidfile --cgroupns
--cgroup-parent --oom-score-adj --shm --link --mac-address --ip --ip6 --label-file
""".split())


def strip_env(tokens: list[str], env: dict[str, str]) -> list[str]:
    """Drop leading `VAR=value` words (into `env`) and `sudo`/`env`/`nohup`-style wrappers."""
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if _ENV_RE.match(tok):
            key, _, val = tok.partition("=")
            env[key] = val
            i += 1
        elif tok in ("env", "sudo", "exec", "nohup", "time", "command") or \
                (tok == "-E" and i and tokens[i - 1] == "sudo"):
            i += 1
        else:
            break
    return tokens[i:]


def docker_args(tokens: list[str], env: dict[str, str]
                ) -> tuple[list[str], str | None, str, bool]:
    """Skip `docker run [opts] IMAGE`; return the container's command words, the image tag's
    version, the image, and whether `--entrypoint` replaced the image's entry point (its
    value then comes first: `--entrypoint vllm IMAGE serve M` runs `vllm serve M`)."""
    i = 2 if len(tokens) > 1 and tokens[1] in ("run", "create") else 1
    entry: str | None = None
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and tok != "-":
            name, eq, val = tok.partition("=")
            if name in ("-e", "--env", "--entrypoint") and not eq:
                val = tokens[i + 1] if i + 1 < len(tokens) else ""
                i += 1
            if name in ("-e", "--env") and "=" in val:
                k, _, v = val.partition("=")
                env[k] = v
            elif name == "--entrypoint":
                entry = val
            elif not eq and name in _DOCKER_VALUE_OPTS:
                i += 1
            i += 1
            continue
        break
    if i >= len(tokens):
        raise UsageError("no image in the docker command", where="docker run",
                         fix="Paste the whole line: `docker run ... vllm/vllm-openai:TAG "
                             "--model M ...`.")
    image = tokens[i]
    words = tokens[i + 1:] if not entry else [entry, *tokens[i + 1:]]
    return words, image_version(image), image, bool(entry)


def image_tag(image: str) -> str | None:
    """The tag of `[registry/]repo[:tag]` (a registry's port is not a tag)."""
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else None


def vllm_image(image: str) -> bool:
    """vLLM's own images, whose tags are vLLM releases: the `vllm` organisation's
    (vllm/vllm-openai, vllm/vllm-openai-rocm, ...) and `vllm-openai` copies in other
    registries. Not LMCache's (lmcache/vllm-openai: LMCache's releases) or NGC's
    (nvcr.io/nvidia/vllm:25.11: NVIDIA's container releases)."""
    path = image.rsplit(":", 1)[0] if image_tag(image) else image
    parts = path.lower().split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]                                  # NOTE: a registry host
    org = parts[-2] if len(parts) > 1 else ""
    return org != "lmcache" and (org == "vllm" or parts[-1].startswith("vllm-openai"))


def image_version(image: str) -> str | None:
    """The vLLM release a vLLM image's tag names (v0.8.5, 0.10.1.1, v0.9.2-cu128)."""
    tag = image_tag(image)
    m = _VERSION_TAG_RE.match(tag) if tag and vllm_image(image) else None
    return m.group(1) if m else None


def foreign_tag_note(image: str) -> str | None:
    """A note when another image's tag looks like a version but is not vLLM's."""
    tag = image_tag(image)
    if tag and not vllm_image(image) and _VERSION_TAG_RE.match(tag):
        return (f"the image tag {tag} is not read as a vLLM release ({image} is not vLLM's "
                "own image): pass --vllm-version with the release it contains")
    return None


# NOTE: vllm/vllm-openai's ENTRYPOINT is `python3 -m vllm.entrypoints.openai.api_server` up to
# 0.11.0 and `vllm serve` from 0.11.1 (each release's docker/Dockerfile).
_IMAGE_SERVE_FROM = (0, 11, 1)


def api_server_image(image: str, version: str | None) -> bool:
    """Whether the official image runs the OpenAI api_server module (not `vllm serve`):
    tags before 0.11.1 (`latest` and untagged: the newest)."""
    return "vllm-openai" in image and version is not None and _before(version, _IMAGE_SERVE_FROM)


def api_server_positional(what: str, image: bool) -> UsageError:
    """A positional model given to the api_server module: refused before 0.10 ("unrecognized
    arguments"), parsed and ignored from 0.10 (only `vllm serve` reads model_tag)."""
    where = "the image's api_server entry point" if image else "api_server"
    return UsageError(f"{what}: {where} takes the model as --model MODEL", where=None,
                      fix="write --model MODEL (vLLM refuses a positional model before 0.10 "
                          "and ignores it from 0.10, serving its default model)")


def find_vllm_args(tokens: list[str]) -> tuple[str, list[str], bool]:
    """Find where vLLM's own args start. Returns (launcher, args, model_positional_ok)."""
    if not tokens:
        return "flags", [], True
    head = tokens[0].rsplit("/", 1)[-1]
    if head in ("uv", "uvx", "pipx") and len(tokens) > 1:
        rest = tokens[2:] if tokens[1] == "run" else tokens[1:]
        return find_vllm_args(rest)
    if head == "vllm":
        if len(tokens) > 1 and tokens[1] == "serve":
            return "vllm serve", tokens[2:], True
        sub = tokens[1] if len(tokens) > 1 else ""
        raise UsageError(f"`vllm {sub}` does not start a server", where="vllm",
                         fix="Use `vllm serve MODEL ...`.")
    if re.fullmatch(r"python(\d(\.\d+)?)?", head):
        j = 1
        while j < len(tokens) and tokens[j].startswith("-") and tokens[j] != "-m":
            j += 1
        if j + 1 < len(tokens) and tokens[j] == "-m":
            mod = tokens[j + 1]
            if mod in _ENTRY_MODULES or mod.startswith("vllm.entrypoints"):
                rest = tokens[j + 2:]
                if mod == "vllm.entrypoints.cli.main" and rest[:1] == ["serve"]:
                    return "vllm serve", rest[1:], True
                return f"python -m {mod}", rest, mod.endswith("cli.main")
        raise UsageError("this python command does not start vLLM", where=tokens[0],
                         fix="Expected `python -m vllm.entrypoints.openai.api_server "
                             "--model M ...`.")
    return "flags", tokens, True



# ---------------------------------------------------------------------------------------
# Writing a line back
# ---------------------------------------------------------------------------------------
# NOTE: written together, in the release's spelling (`_speculative_args`)
_SPEC_SHORT = frozenset({"--spec-method", "--spec-model", "--spec-tokens"})
_SPECULATIVE = _SPEC_SHORT | {"--speculative-config", "--speculative-model",
                              "--num-speculative-tokens"}
FIELD_TO_FLAG = {spec.field: flag for flag, spec in FLAGS.items()
                 if spec.field and flag not in _SPECULATIVE
                 and flag not in ("--compilation-config", "--device-memory-utilization",
                                  "--forced-num-gpu-blocks")}
# NOTE: written back as one --compilation-config JSON, with the key names of the release
# (`_compilation_keys`).
_COMPILATION_KEYS = {"compilation_mode": "mode", "cudagraph_mode": "cudagraph_mode"}


def _before(version: str | None, release: tuple[int, int, int]) -> bool:
    """`version` is older than `release` (None: the newest, never older)."""
    from ..core.rules import parse_version
    return version is not None and parse_version(version) < release


def _compilation_keys(version: str | None) -> dict[str, str]:
    """Settings fields written inside --compilation-config for `version` (None: newest).

    NOTE: before 0.12 `-O` was `--compilation-config` itself (an int: the level), so `-O N`
    beside a JSON config would replace it: the level goes in the JSON. Before 0.11.1 the
    config's "mode" was "level" and the capture sizes had no flag of their own."""
    if not _before(version, (0, 12, 0)):
        return _COMPILATION_KEYS
    if not _before(version, (0, 11, 1)):
        return {**_COMPILATION_KEYS, "optimization_level": "mode"}
    return {"optimization_level": "level", "compilation_mode": "level",
            "cudagraph_mode": "cudagraph_mode",
            "cudagraph_capture_sizes": "cudagraph_capture_sizes"}


_FIELD_ORDER = {spec.field: n for n, spec in enumerate(FLAGS.values())}


def flag_tokens(values: dict[str, object]) -> tuple[set[str], list[str]]:
    """(the long flags named, their argv): `{"--enforce-eager": ""}` -> `--enforce-eager`,
    a False tri-state -> `--no-...`, a False switch -> nothing, None -> nothing."""
    from .vllm_args import flag_for
    named: set[str] = set()
    out: list[str] = []
    for key, val in values.items():
        flag = flag_for(str(key))
        named.add(flag)
        spec = FLAGS.get(flag)
        switch = spec is not None and spec.kind in (BOOL, TRIBOOL)
        if val is None:
            continue
        if isinstance(val, bool) or (switch and str(val).lower() in ("true", "false", "")):
            on = val if isinstance(val, bool) else str(val).lower() != "false"
            if on:
                out.append(flag)
            elif spec is not None and spec.kind == TRIBOOL:
                out.append("--no-" + flag[2:])
            continue
        if isinstance(val, (tuple, list)):
            out += [flag, *(str(v) for v in val)]      # NOTE: nargs="+" (capture sizes)
            continue
        out += [flag, f"{val:g}" if isinstance(val, float) else str(val)]
    return named, out


def settings_to_args(settings, overrides: dict[str, object] | None = None,
                     version: str | None = None) -> list[str]:
    """See `vllm_args.settings_to_args`."""
    values: dict[str, object] = {}
    keys = _compilation_keys(version)
    for name in sorted(settings.user_set, key=lambda f: _FIELD_ORDER.get(f, len(FLAGS))):
        if name in ("model", "max_model_len_auto", "entrypoint", "speculative_method",
                    "speculative_model", "flag_spellings"):
            continue        # NOTE: the speculative ones go with num_speculative_tokens;
                            # the spellings as given are not written back
        if name == "max_model_len" and settings.max_model_len_auto:
            values["--max-model-len"] = "auto"
        elif name in keys:
            if name == "optimization_level" and "compilation_mode" in settings.user_set:
                continue        # NOTE: both are the level before 0.12: the config's wins
            conf = json.loads(str(values.get("--compilation-config") or "{}"))
            value = getattr(settings, name)
            conf[keys[name]] = list(value) if isinstance(value, tuple) else value
            values["--compilation-config"] = json.dumps(conf)
        elif name == "optimization_level":
            values["-O"] = settings.optimization_level
        elif name == "limit_mm_per_prompt":
            limits = settings.limit_mm_per_prompt
            values["--limit-mm-per-prompt"] = json.dumps(dict(limits)) if limits else None
        elif name == "config_overrides":
            values.update(_override_flags(settings.config_overrides))
        elif name == "num_speculative_tokens":
            values.update(_speculative_args(settings, version))
        else:
            values[FIELD_TO_FLAG.get(name, "--" + name.replace("_", "-"))] = \
                getattr(settings, name)
    from .vllm_args import flag_for
    for key, val in (overrides or {}).items():
        values[flag_for(str(key))] = val
    return flag_tokens(values)[1]


def _speculative_args(settings, version: str | None) -> dict[str, object]:
    """Speculative decoding in the release's spelling: --speculative-model (a drafter, or
    '[ngram]') and --num-speculative-tokens before 0.8.2; the --spec-* flags from 0.22 when
    those are what was given; else the --speculative-config JSON (0.8.2+)."""
    n, method = settings.num_speculative_tokens, settings.speculative_method
    draft = settings.speculative_model
    if not n:
        return {}
    if _before(version, (0, 8, 2)):
        ngram = method in ("ngram", "[ngram]")
        return {"--speculative-model": draft or ("[ngram]" if ngram else None),
                "--num-speculative-tokens": n}
    given = {flag for flag, _ in settings.flag_spellings if flag in _SPECULATIVE or flag == "-sc"}
    if given and given <= _SPEC_SHORT and not _before(version, (0, 22, 0)):
        return {"--spec-method": method, "--spec-model": draft, "--spec-tokens": n}
    conf = (({"method": method} if method else {}) | ({"model": draft} if draft else {})
            | {"num_speculative_tokens": n})
    return {"--speculative-config": json.dumps(conf)}


def _override_flags(pairs: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The model-config flags to write: --rope-scaling / --rope-theta as given (the last of
    each), --hf-overrides once with everything given to it (argparse keeps the last one)."""
    out: dict[str, str] = {}
    merged: dict = {}
    for flag, text in pairs:
        if flag == "--hf-overrides":
            merged.update(json.loads(text))
        else:
            out[flag] = text
    if merged:
        out["--hf-overrides"] = json.dumps(merged)
    return out


def command_with(cmd, overrides: dict[str, object] | None = None) -> str:
    """See `vllm_args.command_with`."""
    import shlex

    from .vllm_scan import _Scan
    args = list(cmd.args)
    drop, extra = flag_tokens(overrides or {})
    # NOTE: every spelling of an overridden setting goes (--device-memory-utilization too)
    fields = {FLAGS[f].field for f in drop if f in FLAGS and FLAGS[f].field}
    drop |= {f for f, spec in FLAGS.items() if spec.field in fields}
    if drop:
        scan = _Scan(strict=False)
        try:
            scan.scan(args)
        except UsageError:
            scan.spans = []
        cut = {j for a, b, f in scan.spans if f in drop for j in range(a, b)}
        args = [t for j, t in enumerate(args) if j not in cut]
    prefix = list(cmd.prefix) or ["vllm", "serve"]
    if not cmd.prefix and cmd.model and cmd.model not in args:
        prefix.append(cmd.model)
    return " ".join(shlex.quote(t) for t in prefix + args + extra)


def format_command(model: str | None, args: list[str], launcher: str = "vllm serve",
                   env: tuple[str, ...] = ()) -> str:
    """See `vllm_args.format_command`."""
    import shlex
    parts = list(env) + launcher.split() + ([model] if model else []) + list(args)
    return " ".join(shlex.quote(p) for p in parts)
