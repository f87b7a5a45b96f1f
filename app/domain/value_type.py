"""``@value_type``: the core's immutable value types, frozen for the type checker and built like
plain slotted dataclasses (a frozen dataclass sets each field through ``object.__setattr__``:
2 to 4 times the cost of a plain one, and a review builds a few dozen of them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, dataclass_transform, overload

_T = TypeVar("_T")


@overload
def value_type(cls: type[_T], /) -> type[_T]: ...


@overload
def value_type(*, kw_only: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True)
def value_type(
    cls: type[_T] | None = None, /, *, kw_only: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """A slotted dataclass compared and hashed by its fields, as ``frozen=True`` makes one.
    mypy (strict, on app and tests) refuses any assignment to a field, as for a frozen one:
    immutability is checked where the code is written rather than paid for on every build."""

    def make(target: type[_T]) -> type[_T]:
        return dataclass(slots=True, unsafe_hash=True, kw_only=kw_only)(target)

    return make if cls is None else make(cls)
