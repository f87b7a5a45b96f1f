"""JSON field paths of reviewed objects, and narrowing of raw JSON-like values.

Objects enter the core as plain decoded JSON; these helpers narrow them without raising.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.domain.value_type import value_type

JsonMap = Mapping[str, object]


@value_type
class FieldPath:
    """A path like ``spec.template.spec.replicatedJobs[0]``, rendered as Kubernetes does."""

    text: str = ""

    def child(self, name: str) -> FieldPath:
        return FieldPath(f"{self.text}.{name}" if self.text else name)

    def index(self, position: int) -> FieldPath:
        return FieldPath(f"{self.text}[{position}]")

    def key(self, name: str) -> FieldPath:
        """A map key that may contain dots, e.g. an annotation name."""
        return FieldPath(f"{self.text}[{name}]")

    def __str__(self) -> str:
        return self.text


def as_map(value: object) -> JsonMap | None:
    """The value as a string-keyed mapping, or None when it is anything else."""
    # On the request path for every step of every lookup: decoded JSON is plain dicts, so test
    # for dict before the (slower) ABC check, and scan the keys with a plain loop.
    if not isinstance(value, dict) and not isinstance(value, Mapping):
        return None
    for key in value:
        if not isinstance(key, str):
            return None
    return value


def as_list(value: object) -> Sequence[object] | None:
    """The value as a list, or None (strings are not lists)."""
    if isinstance(value, list | tuple):
        return value
    return None


def value_at(obj: object, *names: str) -> object:
    """Walk nested mappings by key; None as soon as a step is missing or not a mapping.

    A step only looks a string key up, so it needs no scan of the keys ``as_map`` makes (a key
    that is not a string matches no name): on every request and audit pass, a dozen walks.
    """
    current: object = obj
    for name in names:
        if isinstance(current, dict) or isinstance(current, Mapping):  # noqa: SIM101 - dict first
            current = current.get(name)
        else:
            return None
    return current


def map_at(obj: object, *names: str) -> JsonMap | None:
    """The mapping at a nested key path, or None."""
    return as_map(value_at(obj, *names))


def str_at(obj: object, *names: str) -> str | None:
    """The string at a nested key path, or None."""
    value = value_at(obj, *names)
    return value if isinstance(value, str) else None
