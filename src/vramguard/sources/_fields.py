"""Typed, bounded reads from a config dict; every bad value becomes a SourceError.

Private helpers shared by the config adapters (config.py, layers.py, vision.py, quant.py).
A config is untrusted input: values may be missing, of the wrong type, zero, negative or
absurd. These helpers are the only place that checks them, so the adapters stay short.
"""

from __future__ import annotations

from typing import Any

from ..errors import SourceError

# Sanity limits: anything beyond these is a corrupt or hostile file, not a model.
LIMITS = {
    "layers": 10_000,
    "hidden": 1 << 20,
    "heads": 1 << 16,
    "vocab": 1 << 27,
    "intermediate": 1 << 24,
    "experts": 1 << 16,
    "positions": 1 << 40,
    "generic": 1 << 40,
}


class Fields:
    """A config dict plus where it came from, read with checks.

    `where` names the file or id for error messages; `path` is the nested key path
    (e.g. "text_config") shown in messages.
    """

    def __init__(self, data: Any, where: str, path: str = ""):
        if not isinstance(data, dict):
            raise SourceError(f"{path or 'config'} is {type(data).__name__}, not a JSON object",
                              where=where, fix="Pass a Hugging Face config.json")
        self.data = data
        self.where = where
        self.path = path
        self.defaulted: tuple[str, ...] = ()      # keys filled from transformers defaults

    # ---- raw access -------------------------------------------------------------------
    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, what: str, fix: str = "Fix or re-download config.json") -> SourceError:
        return SourceError(what, where=self.where, fix=fix)

    def sub(self, key: str) -> "Fields | None":
        """A nested config (text_config, vision_config, ...) or None when absent."""
        value = self.dict(key)
        return None if value is None else Fields(value, self.where, self._name(key))

    def _typed(self, key: str, kind: type, label: str):
        """The value of `key` if it is a `kind`, None when missing; SourceError otherwise."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, kind):
            raise self.error(f"{self._name(key)} is {type(value).__name__}, not {label}")
        return value

    # ---- typed reads ------------------------------------------------------------------
    def int(self, key: str, default: int | None = None, *, lo: int = 1,
            hi: int = LIMITS["generic"]) -> int:
        """A required integer in [lo, hi] (`default` when missing)."""
        value = self.opt_int(key, lo=lo, hi=hi)
        if value is None:
            if default is None:
                raise self.error(f"missing {self._name(key)}")
            return default
        return value

    def opt_int(self, key: str, *, lo: int = 1, hi: int = LIMITS["generic"]) -> int | None:
        """An optional integer in [lo, hi]; None when missing or null."""
        value = self.data.get(key)
        if value is None:
            return None
        return self.check_int(value, self._name(key), lo, hi)

    def check_int(self, value: Any, name: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"{name} is {value!r:.40}, not a whole number")
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")) or value != int(value):
                raise self.error(f"{name} is {value!r}, not a whole number")
            value = int(value)
        if value < lo or value > hi:
            raise self.error(f"{name} is {value}, outside [{lo}, {hi}]")
        return value

    def first_int(self, keys: tuple[str, ...], *, lo: int = 1,
                  hi: int = LIMITS["generic"]) -> tuple[str, int] | None:
        """The first present key of `keys` with its integer value, or None."""
        for key in keys:
            value = self.opt_int(key, lo=lo, hi=hi)
            if value is not None:
                return key, value
        return None

    def float(self, key: str, default: float | None = None) -> float | None:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise self.error(f"{self._name(key)} is {value!r:.40}, not a number")
        return float(value)

    def bool(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise self.error(f"{self._name(key)} is {value!r:.40}, not true/false")

    def str(self, key: str, default: str | None = None) -> str | None:
        value = self._typed(key, str, "a string")
        return default if value is None else value

    def list(self, key: str) -> list | None:
        return self._typed(key, list, "a list")

    def int_list(self, key: str, *, lo: int = 0, hi: int = LIMITS["generic"]) -> list[int] | None:
        values = self.list(key)
        if values is None:
            return None
        return [self.check_int(v, f"{self._name(key)}[{i}]", lo, hi) for i, v in enumerate(values)]

    def str_list(self, key: str) -> list[str] | None:
        values = self.list(key)
        if values is None:
            return None
        out = []
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise self.error(f"{self._name(key)}[{i}] is {v!r:.40}, not a string")
            out.append(v)
        return out

    def dict(self, key: str) -> dict | None:
        return self._typed(key, dict, "an object")
