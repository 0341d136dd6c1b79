"""Instances of frozen dataclasses built without their generated `__init__`.

NOTE: the planner builds about ten frozen objects per candidate (Estimate, Ledger,
KvCapacity, Outcome, Plan) and a search screens thousands of candidates. A frozen
dataclass's `__init__` sets every field through `object.__setattr__`; filling the instance
dict directly is 2-3x faster and gives the same object (equal, same hash and repr).
`maker(cls)` refuses classes whose construction does more than set fields (`__post_init__`,
`__slots__`, a hand-written `__init__`). Every field must be passed: defaults are not
applied (tests/core/test_tuner_screen.py checks the planner's objects field by field).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Callable, TypeVar

T = TypeVar("T")

# NOTE: where a class that caches its hash keeps it (an instance attribute, not a field);
# `replace` drops it from the copy.
HASH_KEY = "_hash"


def _check(cls: type) -> None:
    """Refuse classes whose construction does more than set fields."""
    if not (is_dataclass(cls) and cls.__dataclass_params__.frozen):
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    for klass in cls.__mro__[:-1]:
        if "__post_init__" in vars(klass) or "__slots__" in vars(klass):
            raise TypeError(f"{cls.__name__}: __post_init__ or __slots__ (use the constructor)")


def maker(cls: type[T]) -> Callable[..., T]:
    """`make(**every_field)` -> an instance of the frozen dataclass `cls`."""
    _check(cls)
    new = object.__new__

    def make(**values) -> T:
        obj = new(cls)
        obj.__dict__.update(values)
        return obj

    make.field_names = frozenset(f.name for f in fields(cls))   # type: ignore[attr-defined]
    make.__doc__ = f"A {cls.__name__} from every field, without running __init__."
    return make


def replacer(cls: type[T]) -> Callable[..., T]:
    """`replace(obj, **changes)` -> `dataclasses.replace(obj, **changes)` for the frozen
    dataclass `cls`, without re-running `__init__` (the tuner copies Settings and Options on
    its hot path: ~10x faster). Unknown field names raise TypeError, like `replace`."""
    _check(cls)
    names = frozenset(f.name for f in fields(cls))
    new = object.__new__

    def replace(obj: T, **changes) -> T:
        if not names.issuperset(changes):       # NOTE: no set built on the hot path
            raise TypeError(f"unknown {cls.__name__} fields: {sorted(changes.keys() - names)}")
        out = new(cls)
        d = out.__dict__
        d.update(obj.__dict__)
        d.update(changes)
        d.pop(HASH_KEY, None)       # NOTE: a cached hash belongs to the original's values
        return out

    replace.field_names = names     # type: ignore[attr-defined]
    replace.__doc__ = f"`dataclasses.replace` for {cls.__name__}, without running __init__."
    return replace
