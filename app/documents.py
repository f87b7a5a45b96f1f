"""YAML and JSON documents: one or many decoded safely, every failure one line with its position.

Used for the recipe ConfigMap's data; what kubectl or Trainer would read (files, states, runtime
snapshots) is read by app.kubeyaml, as they read it.
"""

from __future__ import annotations

from collections.abc import Iterator

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
    return list(iter_yaml_documents(text))


def iter_yaml_documents(text: str) -> Iterator[object]:
    """``load_all_yaml`` one document at a time: only the current one is decoded at once."""
    documents = yaml.load_all(text, Loader=_LOADER)
    while True:
        try:
            document = next(documents)
        except StopIteration:
            return
        except _DECODE_ERRORS as error:
            raise DocumentError(_reason(error)) from None
        if document is not None:
            yield document
