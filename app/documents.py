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


def load_yaml(text: str) -> object:
    """One YAML document; raises DocumentError."""
    try:
        return yaml.safe_load(text)
    except _DECODE_ERRORS as error:
        raise DocumentError(_reason(error)) from None


def load_all_yaml(text: str) -> list[object]:
    """Every document in a multi-document stream (empty documents dropped); raises DocumentError."""
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except _DECODE_ERRORS as error:
        raise DocumentError(_reason(error)) from None
