"""A Kubernetes manifest or a docker-compose file, pasted, down to the vLLM launch it runs.

Deployments are often written as YAML, not as a command line: a container's `command` and
`args` (Kubernetes) or a service's `command` / `entrypoint` (compose), its environment, and
an image whose own entry point runs vLLM (`vllm/vllm-openai`: the api_server module up to
0.11.0, `vllm serve` from 0.11.1). `launch_from_manifest(text)` finds the first container or
service that runs vLLM and returns the argv words of its launch, as a pasted command line
would give them: `VAR=value` words first, then the command (`docker run IMAGE ARGS` where the
image's entry point runs, so its tag and entry point are judged like a docker line). `sh -c`
scripts go through `shell_snippet`; compose's `${VAR:-default}` takes the default. Nothing
else in the file is read (resources, volumes). PyYAML's safe loader only (through
`vllm_args.load_yaml_documents`, the one yaml adapter).
"""

from __future__ import annotations

import re

from ..errors import UsageError

__all__ = ["looks_like_manifest", "launch_from_manifest", "looks_like_yaml", "launch_from_yaml"]

_TOP = re.compile(r"^(apiVersion|kind|services|version|name|x-[\w-]+)\s*:", re.M)
_SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/env bash", "/usr/bin/bash")
_DEFAULT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?-)([^}]*)\}")


def looks_like_manifest(text: str) -> bool:
    """A pasted YAML document with Kubernetes or compose keys at the top level."""
    return "\n" in text and bool(_TOP.search(text)) and (
        "containers:" in text or "services:" in text)


_KEY_LINE = re.compile(r"^(?:[A-Za-z_][\w.-]*\s*:(?:\s|$)|\s|-\s|#|---|$)")
_TOP_KEY = re.compile(r"^[A-Za-z_][\w.-]*\s*:(?:\s|$)")


def looks_like_yaml(text: str) -> bool:
    """Pasted YAML: a manifest, or a mapping written `key: value` line by line (a vLLM
    `--config` file's content); never a shell line (`vllm serve ...` has no `key:` form)."""
    if looks_like_manifest(text):
        return True
    lines = text.strip("\n").splitlines()
    # NOTE: an indented shell snippet is all indented lines: a mapping has a top-level key
    return (len(lines) > 1 and all(_KEY_LINE.match(line) for line in lines)
            and any(_TOP_KEY.match(line) for line in lines))


def launch_from_yaml(text: str) -> tuple[list[str], list[str]]:
    """(words, notes) of pasted YAML: a manifest's launch, the production-stack Helm chart's
    values (`helm_values`), or a vLLM `--config` file's flags (as `vllm serve --config` reads
    them, a `model:` key included)."""
    if looks_like_manifest(text):
        return launch_from_manifest(text)
    from .vllm_args import _mapping_to_tokens
    from .vllm_scan import is_known_flag
    from .helm_values import launch_from_helm_values, looks_like_helm_values
    docs = _load(text)
    data = docs[0] if len(docs) == 1 else None
    if looks_like_helm_values(data):
        return launch_from_helm_values(data)
    if not data or not any(is_known_flag("--" + str(k).strip("-")) for k in data):
        raise UsageError("the pasted YAML is not a vLLM --config file (flag: value), a "
                         "Kubernetes manifest, a compose file or the vLLM production-stack "
                         "chart's values", where="command line",
                         fix="Paste the vllm serve line, or pass the vLLM config file with "
                             "--config FILE.")
    return _mapping_to_tokens(data), ["read as a vLLM --config file (flag: value)"]


def _load(text: str) -> list:
    from .shell_snippet import MAX_SNIPPET_CHARS
    from .vllm_args import load_yaml_documents      # NOTE: the one yaml adapter
    if len(text) > MAX_SNIPPET_CHARS:
        raise UsageError(f"the pasted manifest is {len(text) >> 10} KiB (at most "
                         f"{MAX_SNIPPET_CHARS >> 10} KiB is read)", where="command line",
                         fix="Paste the Deployment or the compose service that runs vLLM.")
    return [d for d in load_yaml_documents(text, "command line") if isinstance(d, dict)]


def _containers(node, found: list) -> None:
    """Every container dict under a `containers` list, depth first (initContainers not)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "containers" and isinstance(value, list):
                found.extend(c for c in value if isinstance(c, dict))
            elif key != "initContainers":
                _containers(value, found)
    elif isinstance(node, list):
        for item in node:
            _containers(item, found)


def _strs(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _runs_vllm(image: str, words: list[str]) -> bool:
    return "vllm" in image.lower() or any("vllm" in w for w in words)


def _env_words(env) -> list[str]:
    """`VAR=value` words from a Kubernetes env list or a compose environment (dict/list)."""
    if isinstance(env, dict):
        return [f"{k}={'' if v is None else v}" for k, v in env.items()]
    out = []
    for item in env or []:
        if isinstance(item, dict) and "name" in item and "value" in item:
            out.append(f"{item['name']}={'' if item['value'] is None else item['value']}")
        elif isinstance(item, str) and "=" in item:
            out.append(item)
    return out


def _launch(image: str, entry: list[str], args: list[str]) -> tuple[list[str], list[str]]:
    """(words, notes) of a container: its entry point and arguments as one command."""
    from .shell_snippet import launch_words
    if entry and entry[0] in _SHELLS and "-c" in entry[1:2]:
        script = entry[2] if len(entry) > 2 else (args[0] if args else "")
        return launch_words(script)
    if not entry:
        if "vllm-openai" in image:
            return ["docker", "run", image, *args], []       # NOTE: the image's entry point
        return args, []
    from .vllm_launch import image_version
    if image_version(image):
        # NOTE: `command` replaces the image's entry point as docker's --entrypoint does; the
        # docker form keeps the tag's release for the plan.
        return ["docker", "run", "--entrypoint", entry[0], image, *entry[1:], *args], []
    return [*entry, *args], []


def _with_env(env: list[str], words: list[str]) -> list[str]:
    """The container's environment before its command: `VAR=value` words, or `-e` options
    of a docker form (`docker run -e VAR=value IMAGE ...`)."""
    if words[:2] == ["docker", "run"]:
        return ["docker", "run", *(w for e in env for w in ("-e", e)), *words[2:]]
    return env + words


def _compose_words(value) -> list[str]:
    """A compose `command` / `entrypoint`: a list, or a string split like a shell word list."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if value is None:
        return []
    import shlex
    try:
        return shlex.split(str(value))
    except ValueError:
        raise UsageError("cannot split the service's command: No closing quotation",
                         where="command line", fix="Check the quotes.") from None


def _interpolate(words: list[str]) -> list[str]:
    """compose's `${VAR:-default}` / `${VAR-default}`: the default (the .env is not here)."""
    return [_DEFAULT.sub(lambda m: m.group(3), w) for w in words]


def launch_from_manifest(text: str) -> tuple[list[str], list[str]]:
    """(the launch's words, notes) of the first container or compose service that runs vLLM
    (its image or its command says vllm). UsageError when none does."""
    for doc in _load(text):
        services = doc.get("services")
        if isinstance(services, dict):
            for name, svc in services.items():
                if not isinstance(svc, dict):
                    continue
                image = str(svc.get("image") or "")
                entry = _interpolate(_compose_words(svc.get("entrypoint")))
                args = _interpolate(_compose_words(svc.get("command")))
                if _runs_vllm(image, entry + args):
                    words, notes = _launch(image, entry, args)
                    env = _interpolate(_env_words(svc.get("environment")))
                    return _with_env(env, words), [f"read from the compose service {name!r}",
                                                   *notes]
        found: list = []
        try:
            _containers(doc, found)
        except RecursionError:
            raise UsageError("the pasted YAML is nested too deeply", where="command line",
                             fix="Paste the Deployment that runs vLLM.") from None
        for c in found:
            image = str(c.get("image") or "")
            entry, args = _strs(c.get("command")), _strs(c.get("args"))
            if _runs_vllm(image, entry + args):
                words, notes = _launch(image, entry, args)
                kind = doc.get("kind") or "manifest"
                return (_with_env(_env_words(c.get("env")), words),
                        [f"read from the {kind}'s container {c.get('name', '?')!r}", *notes])
    raise UsageError("no container or service in the pasted YAML runs vLLM", where="command line",
                     fix="Paste the vllm serve line, or a manifest whose image or command is vLLM's.")
