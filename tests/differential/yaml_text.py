"""A YAML document as written text: nodes that keep their spelling, and the emitter that writes
them, so the YAML corpus can misspell one key, scalar or style at a time (tests/differential)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final


@dataclass(frozen=True, slots=True)
class Scalar:
    """A scalar exactly as written: plain, quoted, tagged, an alias (``*a``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Map:
    """A mapping; keys are written as given (``<<``, quoted, tagged). ``props``: anchor/tag."""

    items: tuple[tuple[str, Node], ...]
    flow: bool = False
    props: str = ""


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Node, ...]
    flow: bool = False
    props: str = ""


Node = Scalar | Map | Seq
Step = str | int
"""A map key as written, or a sequence index."""

_PLAIN: Final = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*\Z")
_YAML11: Final = re.compile(
    r"(y|yes|n|no|true|false|on|off|null|~)\Z|[0-9+.-]", re.IGNORECASE | re.ASCII
)


def spelled(value: object) -> str:
    """A JSON value as YAML text that every YAML 1.1 or 1.2 reader reads as that value: a
    string plain when it cannot be read as anything else, else quoted."""
    if isinstance(value, str):
        if _PLAIN.match(value) and not _YAML11.match(value):
            return value
        if "'" not in value and "\n" not in value and value.isprintable():
            return f"'{value}'"
        return json.dumps(value)
    return json.dumps(value)


def node_of(value: object) -> Node:
    """``value`` (JSON) as block-style nodes with ``spelled`` scalars and keys."""
    if isinstance(value, dict):
        return Map(tuple((spelled(str(k)), node_of(v)) for k, v in value.items()))
    if isinstance(value, list):
        return Seq(tuple(node_of(item) for item in value))
    return Scalar(spelled(value))


def text_of(node: Node) -> str:
    """The document: block style where the nodes say so, two-space indents, compact lists."""
    if isinstance(node, Scalar) or node.flow or not node.items:
        return f"{_flow(node)}\n"
    return "".join(f"{line}\n" for line in _block(node, 0))


def _props(node: Map | Seq) -> str:
    return f"{node.props} " if node.props else ""


def _flow(node: Node) -> str:
    if isinstance(node, Scalar):
        return node.text
    if isinstance(node, Map):
        inner = ", ".join(f"{key}: {_flow(value)}" for key, value in node.items)
        return f"{_props(node)}{{{inner}}}"
    return f"{_props(node)}[{', '.join(_flow(item) for item in node.items)}]"


def _inline(node: Node) -> bool:
    return isinstance(node, Scalar) or node.flow or not node.items


def _block(node: Map | Seq, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(node, Map):
        for key, value in node.items:
            if _inline(value):
                lines.append(f"{pad}{key}: {_flow(value)}".rstrip())
            else:
                assert not isinstance(value, Scalar)
                lines.append(f"{pad}{key}:{' ' + value.props if value.props else ''}")
                lines.extend(_block(value, indent if isinstance(value, Seq) else indent + 2))
        return lines
    for item in node.items:
        if _inline(item):
            lines.append(f"{pad}- {_flow(item)}".rstrip())
            continue
        assert not isinstance(item, Scalar)
        inner = _block(item, indent + 2)
        if item.props or isinstance(item, Seq):
            lines.append(f"{pad}-{' ' + item.props if item.props else ''}")
            lines.extend(inner)
        else:
            lines.append(f"{pad}- {inner[0][indent + 2 :]}")
            lines.extend(inner[1:])
    return lines


def at(node: Node, path: tuple[Step, ...]) -> Node:
    """The node at ``path`` (the first item with that key)."""
    for step in path:
        if isinstance(node, Map):
            node = next(value for key, value in node.items if key == step)
        else:
            assert isinstance(node, Seq)
            assert isinstance(step, int)
            node = node.items[step]
    return node


def update(node: Node, path: tuple[Step, ...], change: Callable[[Node], Node]) -> Node:
    """``node`` with the node at ``path`` replaced by ``change(it)``."""
    if not path:
        return change(node)
    step, rest = path[0], path[1:]
    if isinstance(node, Map):
        index = next(i for i, (key, _) in enumerate(node.items) if key == step)
        key, value = node.items[index]
        items = (*node.items[:index], (key, update(value, rest, change)), *node.items[index + 1 :])
        return replace(node, items=items)
    assert isinstance(node, Seq)
    assert isinstance(step, int)
    items_ = list(node.items)
    items_[step] = update(items_[step], rest, change)
    return replace(node, items=tuple(items_))


def scalars(node: Node, change: Callable[[str], str]) -> Node:
    """``node`` with every scalar's text passed through ``change``."""
    if isinstance(node, Scalar):
        return Scalar(change(node.text))
    if isinstance(node, Map):
        return replace(node, items=tuple((k, scalars(v, change)) for k, v in node.items))
    return replace(node, items=tuple(scalars(item, change) for item in node.items))
