"""Why a YAML text was not read: invalid, or a construct nicguard cannot be sure to read as
kubectl and Trainer do, or beyond what one read may cost."""

from __future__ import annotations

from typing import Protocol

from app.documents import DocumentError

_UNSURE = "nicguard cannot be sure to read it as Trainer and kubectl do"


class _Mark(Protocol):
    @property
    def line(self) -> int: ...

    @property
    def column(self) -> int: ...


def position(line: int, column: int) -> str:
    """``line L, column C``, both from 1, from a 0-based mark."""
    return f"line {line + 1}, column {column + 1}"


class KubeYamlError(DocumentError):
    """Text kubectl and Trainer cannot read either; the message is one line with the position."""


class UnsureReadingError(KubeYamlError):
    """A construct read one way here and maybe another by goyaml.v2: refused, never guessed."""

    def __init__(self, construct: str, mark: _Mark) -> None:
        super().__init__(f"{construct} at {position(mark.line, mark.column)}: {_UNSURE}")


class TooCostlyError(KubeYamlError):
    """A document beyond one read's budget (nodes, alias expansion, nesting)."""

    def __init__(self, what: str, mark: _Mark) -> None:
        where = position(mark.line, mark.column)
        super().__init__(f"{what} at {where}: beyond what nicguard reads")
