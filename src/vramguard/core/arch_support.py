"""What a vLLM release supports, read from its released sources: whether it implements a model
architecture natively (`arch_registry.NATIVE`, its model registry) and what it does when it
does not; the minimum GPU compute capability of a quantization method
(`quant_registry.MIN_CAPABILITY`); and whether it accepts a quantization method at all
(`quant_registry.METHODS`, `DEPRECATED`, `CLAIMED`).

Before 0.7.2 vLLM stops with "Model architectures [...] are not supported for now"; from 0.7.2
an architecture outside the registry falls back to vLLM's Transformers backend, which works
only when the installed transformers has the architecture and it is backend compatible
(`rules.transformers_fallback`).
"""

from __future__ import annotations

from bisect import bisect_right
from functools import lru_cache

from .arch_registry import ENCODER_EXAMINED, ENCODER_TP_DATA, EXAMINED, NATIVE
from .quant_registry import CLAIMED, DEPRECATED, METHODS, MIN_CAPABILITY, QUANT_EXAMINED, ROCM
from .rules import parse_version

__all__ = ["native_releases", "not_native", "encoder_tp_data", "quant_min_capability",
           "first_release_for", "quant_method_refusal", "quant_method_releases",
           "quant_method_last_release", "rocm_refuses"]

_V3 = tuple[int, int, int]
_v3 = parse_version
_FIRST, _LAST = _v3(EXAMINED[0]), _v3(EXAMINED[-1])
_TABLES = {"native": NATIVE, "methods": METHODS, "deprecated": DEPRECATED, "claimed": CLAIMED,
           "rocm": ROCM, "encoder": ENCODER_TP_DATA}
_ENC_FIRST, _ENC_LAST = _v3(ENCODER_EXAMINED[0]), _v3(ENCODER_EXAMINED[-1])
_QUANT_RELEASES = tuple(_v3(v) for v in QUANT_EXAMINED)


@lru_cache(maxsize=None)
def _spans(arch: str, table: str = "native") -> tuple[tuple[_V3, _V3 | None], ...]:
    text = _TABLES[table].get(arch, "")
    out = []
    for span in filter(None, text.split(",")):
        first, _, last = span.partition("-")
        out.append((_v3(first), _v3(last) if last else None))
    return tuple(out)


def native_releases(arch: str) -> str:
    """The examined releases that implement `arch`, as text ("0.8.4 on", "0.6.2-0.10.2";
    "none of 0.4.1-0.33.0")."""
    parts = [f"{'.'.join(map(str, a))}" + (f"-{'.'.join(map(str, b))}" if b else " on")
             for a, b in _spans(arch)]
    return ", ".join(parts) or f"none of {EXAMINED[0]}-{EXAMINED[-1]}"


@lru_cache(maxsize=256)
def encoder_tp_data(arch: str | None, version: str) -> bool:
    """Whether vLLM `version` replicates the multimodal encoder of `arch` on every TP rank
    with `--mm-encoder-tp-mode data` (its model class's `supports_encoder_tp_data`; 0.9.1-0.10.1
    the classes that read `--enable-multimodal-encoder-data-parallel`). False: vLLM falls back
    to "weights" (the encoder sharded). Releases newer than the newest examined are judged by
    the newest."""
    if not arch:
        return False
    v = min(_v3(version), _ENC_LAST)
    return v >= _ENC_FIRST and _in(arch, "encoder", v)


@lru_cache(maxsize=256)
def not_native(arch: str | None, version: str) -> bool:
    """True when vLLM `version` has no native implementation of `arch` (by its registry).

    False when it has one, and when nothing can be said: no architecture name (or a GGUF
    `gguf:…` one, which vLLM maps itself), or a release older than the oldest examined.
    Releases newer than the newest examined are judged by the newest."""
    if not arch or ":" in arch:
        return False
    v = min(_v3(version), _LAST)
    if v < _FIRST:
        return False
    return not any(a <= v and (b is None or v <= b) for a, b in _spans(arch))


@lru_cache(maxsize=None)
def _quant_changes(method: str) -> tuple[tuple[_V3, int | None, str], ...]:
    for name in (method, method.replace("_", "-"), method.replace("-", "_")):
        text = MIN_CAPABILITY.get(name)
        if text is not None:
            break
    else:
        return ()
    out = []
    for part in text.split(","):
        version, cap, *name = part.split(":")
        out.append((_v3(version), None if cap == "-" else int(cap), name[0] if name else ""))
    return tuple(out)


@lru_cache(maxsize=256)
def quant_min_capability(method: str | None, version: str) -> tuple[int, str] | None:
    """(minimum compute capability as major x 10 + minor, the method's name in vLLM's message)
    for `method` in vLLM `version`; None when unknown (no such method or no integer minimum
    in that release, or a release older than the oldest examined)."""
    if not method:
        return None
    v = _v3(version)        # NOTE: each entry holds from its release on, later ones included
    found = None
    for since, cap, name in _quant_changes(method):
        if since <= v:
            found = (cap, name) if cap is not None else None
    return found


def first_release_for(method: str, capability: int) -> str | None:
    """The first examined release from which `method` runs at `capability` and goes on doing
    so (None: none does)."""
    first = None
    for since, cap, _ in _quant_changes(method):
        ok = cap is not None and cap <= capability
        first = (first or ".".join(map(str, since))) if ok else None
    return first


def _in(name: str, table: str, at: _V3) -> bool:
    return any(a <= at and (b is None or at <= b) for a, b in _spans(name, table))


def _vllm_spelling(method: str) -> str | None:
    """`method` as vLLM's method lists spell it (`auto_round` -> `auto-round`); None when no
    examined release lists it (a plugin's method, or a name vLLM never had)."""
    for name in (method, method.replace("_", "-"), method.replace("-", "_")):
        if name in METHODS:
            return name
    return None


def _examined_at(version: str) -> _V3 | None:
    """The examined release that judges `version`: the newest at or before it."""
    i = bisect_right(_QUANT_RELEASES, _v3(version))
    return _QUANT_RELEASES[i - 1] if i else None


@lru_cache(maxsize=256)
def quant_method_refusal(method: str | None, version: str) -> tuple[str, str] | None:
    """("unknown" | "deprecated", the method as vLLM spells it) when vLLM `version` refuses the
    quantization method `method`: a method some release accepts that this one does not list,
    or one it lists as deprecated (0.14+: needs --allow-deprecated-quantization). None when
    it accepts it, when nothing can be said (a name no release lists, a release older than
    the oldest examined), and when an override of that release may load a checkpoint of that
    method as another method (`CLAIMED`). A release between examined ones is judged by the
    examined one before it; newer ones by the newest."""
    name = _vllm_spelling(method) if method else None
    at = _examined_at(version)
    if name is None or at is None or _in(name, "claimed", at):
        return None
    if not _in(name, "methods", at):
        return "unknown", name
    return ("deprecated", name) if _in(name, "deprecated", at) else None


@lru_cache(maxsize=256)
def rocm_refuses(method: str | None, version: str) -> str | None:
    """The method as vLLM spells it when the ROCm platform of vLLM `version` does not accept
    it (`quant_registry.ROCM`); None when it does, and when nothing can be said (as
    `quant_method_refusal`: an unknown name, an older release, an override that may load it
    as another method)."""
    name = _vllm_spelling(method) if method else None
    at = _examined_at(version)
    if name is None or at is None or _in(name, "claimed", at) or not _in(name, "methods", at):
        return None
    return None if _in(name, "rocm", at) else name


def quant_method_releases(method: str, table: str = "methods") -> str:
    """The examined releases that accept `method` ("0.5.0-0.27.1"; `table` "rocm": on ROCm),
    as text."""
    name = _vllm_spelling(method) or method
    return ", ".join(f"{'.'.join(map(str, a))}" + (f"-{'.'.join(map(str, b))}" if b else " on")
                     for a, b in _spans(name, table)) or "no examined release"


def quant_method_last_release(method: str) -> str | None:
    """The newest examined release that accepts `method` ("0.23", a ".0" patch left out);
    None when the newest examined release still accepts it or none does."""
    spans = _spans(_vllm_spelling(method) or method, "methods")
    last = spans[-1][1] if spans else None
    if last is None:
        return None
    return ".".join(map(str, last[:2] if last[2] == 0 else last))
