"""Decoding YAML/JSON text into plain objects (YAML is a superset of JSON).

Every failure surfaces as ``DocumentError`` (a ValueError) with a one-line reason.
"""

from __future__ import annotations

import yaml


class DocumentError(ValueError):
    """Text that is not valid YAML/JSON; the message is one line with the position."""


def _reason(error: Exception) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"{error.problem} at line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return " ".join(str(error).split())


# PyYAML's constructors raise more than YAMLError on badly tagged scalars ("!!int" ->
# IndexError, "!!bool foo" -> KeyError, "!!timestamp foo" -> AttributeError).
_DECODE_ERRORS = (
    yaml.YAMLError,
    RecursionError,
    ValueError,
    AttributeError,
    KeyError,
    IndexError,
    TypeError,
)


# libyaml's parser when PyYAML was built with it (its wheels are): ~10x faster on large state
# directories; the constructors, hence the decoded values, are the same Python code.
_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


def load_yaml(text: str) -> object:
    """One YAML document; raises DocumentError."""
    try:
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 - _LOADER is a safe loader
    except _DECODE_ERRORS as error:
        raise DocumentError(_reason(error)) from None


def load_all_yaml(text: str) -> list[object]:
    """Every document in a multi-document stream (empty documents dropped); raises DocumentError."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_LOADER) if doc is not None]
    except _DECODE_ERRORS as error:
        raise DocumentError(_reason(error)) from None
