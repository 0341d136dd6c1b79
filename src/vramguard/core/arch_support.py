"""Whether a vLLM release implements a model architecture natively (`arch_registry.NATIVE`,
read from each release's model registry), and what vLLM does when it does not.

Before 0.7.2 vLLM stops with "Model architectures [...] are not supported for now"; from 0.7.2
an architecture outside the registry falls back to vLLM's Transformers backend, which works
only when the installed transformers has the architecture and it is backend compatible
(`rules.transformers_fallback`).
"""

from __future__ import annotations

from functools import lru_cache

from .arch_registry import EXAMINED, NATIVE
from .rules import parse_version

__all__ = ["native_releases", "not_native"]

_V3 = tuple[int, int, int]


def _v3(text: str) -> _V3:
    return parse_version(text)


_FIRST, _LAST = _v3(EXAMINED[0]), _v3(EXAMINED[-1])


@lru_cache(maxsize=None)
def _spans(arch: str) -> tuple[tuple[_V3, _V3 | None], ...]:
    text = NATIVE.get(arch, "")
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
