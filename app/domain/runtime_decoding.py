"""A runtime copy as Trainer's typed decoding (Go's encoding/json into its runtime types) reads
it, checked on the path to the wiring (DRA claims included): where that reading could differ from
nicguard's exact keys, the copy is refused (docs/rules.md, RuntimeSnapshotInvalid)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from app.domain.fields import FieldPath, as_list, as_map
from app.domain.verdict import shown


@dataclass(frozen=True, slots=True)
class _Struct:
    fields: Mapping[str, _Field]


@dataclass(frozen=True, slots=True)
class _ListOf:
    item: _Struct


_Field = _Struct | _ListOf | str

_STRING: Final = "a string"
_BOOLEAN: Final = "a boolean"
_STRING_MAP: Final = "a map of strings"
# The only runes beyond ASCII that Go's case folding (encoding/json's foldName, unicode.SimpleFold)
# takes onto ASCII letters: KELVIN SIGN, LATIN SMALL LETTER LONG S, I WITH DOT ABOVE, DOTLESS I.
_ASCII_FOLDS: Final = {"\u212a": "k", "\u017f": "s", "\u0130": "i", "\u0131": "i"}
# A path to a container's claim references is ~110 characters before a key is named.
_PATH_SHOWN: Final = 200

_META: Final = _Struct(
    {"name": _STRING, "namespace": _STRING, "labels": _STRING_MAP, "annotations": _STRING_MAP}
)
# DRA claims (docs/dra.md) are on the path too: the pod's, and each container's references.
_CLAIM_REFERENCES: Final = _Struct(
    {"resources": _Struct({"claims": _ListOf(_Struct({"name": _STRING, "request": _STRING}))})}
)
_POD_SPEC: Final = _Struct(
    {
        "resourceClaims": _ListOf(
            _Struct(
                {
                    "name": _STRING,
                    "resourceClaimTemplateName": _STRING,
                    "resourceClaimName": _STRING,
                }
            )
        ),
        "containers": _ListOf(_CLAIM_REFERENCES),
        "initContainers": _ListOf(_CLAIM_REFERENCES),
    }
)
_POD_TEMPLATE: Final = _Struct({"metadata": _META, "spec": _POD_SPEC})
_JOB_TEMPLATE: Final = _Struct({"metadata": _META, "spec": _Struct({"template": _POD_TEMPLATE})})
_REPLICATED_JOB: Final = _Struct({"name": _STRING, "template": _JOB_TEMPLATE})
_SPEC: Final = _Struct(
    {
        "mlPolicy": _Struct({"mpi": _Struct({"runLauncherAsNode": _BOOLEAN})}),
        "template": _Struct({"spec": _Struct({"replicatedJobs": _ListOf(_REPLICATED_JOB)})}),
    }
)
# The fields nicguard reads, from the root of the copy down to the wired pod templates.
_RUNTIME: Final = _Struct(
    {"apiVersion": _STRING, "kind": _STRING, "metadata": _META, "spec": _SPEC}
)


def typed_reading_problem(runtime: Mapping[str, object]) -> str | None:
    """Why Trainer's typed reading of ``runtime`` could differ from nicguard's, or None.

    Go matches a JSON key to a struct field ignoring case with Unicode folding (``Spec``,
    ``replicatedjobs``, ``annotation\u017f`` land on the real fields, the later in sorted order
    winning); map fields (labels, annotations) are keyed exactly; sigs.k8s.io/yaml turns numbers
    and booleans into strings for string fields. nicguard reads exact keys: a key that may fold
    onto a read field without being it, or a value Go would convert, is refused, never guessed.
    """
    return _struct(runtime, _RUNTIME, FieldPath())


def _struct(value: Mapping[str, object], struct: _Struct, path: FieldPath) -> str | None:
    for key, item in value.items():
        field = struct.fields.get(key)
        if field is None:
            spelled = _folded_onto(key, struct)
            if spelled is not None:
                field_name = _named(path.child(spelled))
                return (
                    f"{_named(path.child(key))} may be read by Trainer as {field_name}"
                    " (Go matches field names ignoring case)"
                )
            continue
        problem = _field(item, field, path.child(key))
        if problem is not None:
            return problem
    return None


def _field(value: object, field: _Field, path: FieldPath) -> str | None:
    if value is None:
        return None  # Go leaves the field as it was: nicguard reads it absent too
    if isinstance(field, _Struct):
        found = as_map(value)
        return _not(path, "an object") if found is None else _struct(found, field, path)
    if isinstance(field, _ListOf):
        return _list(value, field, path)
    if field == _STRING_MAP:
        return _string_map(value, path)
    expected = bool if field == _BOOLEAN else str
    return None if isinstance(value, expected) else _not(path, field)


def _list(value: object, field: _ListOf, path: FieldPath) -> str | None:
    items = as_list(value)
    if items is None:
        return _not(path, "a list")
    for index, item in enumerate(items):
        found = as_map(item)
        problem = (
            _not(path.index(index), "an object")
            if found is None
            else _struct(found, field.item, path.index(index))
        )
        if problem is not None:
            return problem
    return None


def _string_map(value: object, path: FieldPath) -> str | None:
    found = as_map(value)
    if found is None:
        return _not(path, _STRING_MAP)
    for key, item in found.items():
        if not isinstance(item, str):
            # Trainer would read a number or boolean as its text; nicguard refuses to guess it.
            return _not(path.key(key), _STRING)
    return None


def _folded_onto(key: str, struct: _Struct) -> str | None:
    """The read field ``key`` folds onto under Go's rules (one rune for one), or None."""
    for name in struct.fields:
        if len(name) == len(key) and all(
            _ASCII_FOLDS.get(a, a).lower() == b.lower() for a, b in zip(key, name, strict=True)
        ):
            return name
    return None


def _named(path: FieldPath) -> str:
    return f"`{shown(str(path), _PATH_SHOWN)}`"


def _not(path: FieldPath, what: str) -> str:
    return f"{_named(path)} is not {what}"
