"""libyaml's events (PyYAML's C parser) composed into goyaml.v2's node graph, refusing the syntax
where libyaml 0.2 and goyaml.v2's older port of it could read the same text differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import yaml

from app.kubeyaml.errors import KubeYamlError, TooCostlyError, UnsureReadingError, position

SCALAR: Final = 0
SEQUENCE: Final = 1
MAPPING: Final = 2
ALIAS: Final = 3

# libyaml through PyYAML when built with it (its wheels are): the pure-Python parser is a port of
# the same C code, ~10x slower.
_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
_FLOW_AMBIGUOUS: Final = frozenset(":?")
_BLANK_OR_END: Final = frozenset(" \t\r\n")
_LONG_TAG: Final = "tag:yaml.org,2002:"


class Node:
    """One node as goyaml.v2's parser builds it; ``target`` is an alias's anchored node."""

    __slots__ = ("children", "column", "kind", "line", "plain", "target", "value")

    def __init__(
        self,
        kind: int,
        line: int,
        column: int,
        value: str = "",
        plain: bool = False,  # noqa: FBT001, FBT002 - see above
        target: Node | None = None,
    ) -> None:
        self.kind = kind
        self.line = line
        self.column = column
        self.value = value
        self.plain = plain
        self.target = target
        self.children: list[Node] = []


@dataclass(frozen=True, slots=True)
class Limits:
    """What one document may cost: nodes parsed, values decoded (aliases expanded), nesting."""

    nodes: int
    decodes: int
    depth: int


@dataclass(frozen=True, slots=True)
class Position:
    """A 0-based line and column in the file (a document's own lines shifted by where it starts)."""

    line: int
    column: int


def compose(text: str, limits: Limits, first_line: int = 0) -> Node | None:
    """The first YAML document of ``text`` as a node (None when there is none): goyaml.v2 reads
    no further, so a second one is refused. Raises KubeYamlError."""
    loader = _LOADER(text)
    try:
        return _Composer(text, limits, first_line, loader.get_event).only_document()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = "" if mark is None else f" at {position(mark.line + first_line, mark.column)}"
        raise KubeYamlError(f"{error.problem}{where}") from None
    except yaml.YAMLError as error:
        raise KubeYamlError(" ".join(str(error).split())) from None
    finally:
        loader.dispose()


_NEXT = Callable[[], "yaml.Event | None"]
_ENDS: Final = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


class _Composer:
    """goyaml.v2's parser.go over libyaml's events. On the request path of every snapshot: one
    loop, events told apart by their exact type (libyaml's classes are never subclassed)."""

    def __init__(self, text: str, limits: Limits, first_line: int, next_event: _NEXT) -> None:
        self._text = text
        self._limits = limits
        self._first_line = first_line
        self._next = next_event

    def only_document(self) -> Node | None:
        found: Node | None = None
        documents = 0
        while True:
            event = self._next()
            if event is None or type(event) is yaml.StreamEndEvent:
                return found
            if type(event) is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise UnsureReadingError("a second YAML document", self._at(event))
                assert isinstance(event, yaml.DocumentStartEvent)  # noqa: S101 - for mypy
                if event.version is not None or event.tags:
                    raise UnsureReadingError("a %YAML or %TAG directive", self._at(event))
                found = self._document()

    def _at(self, event: yaml.Event) -> Position:
        mark = event.start_mark
        assert mark is not None  # noqa: S101 - the parser marks every event
        return Position(mark.line + self._first_line, mark.column)

    def _document(self) -> Node | None:
        anchors: dict[str, Node] = {}
        stack: list[Node] = []  # the collections open, innermost last
        flows: list[bool] = []
        open_ids: set[int] = set()
        root: Node | None = None
        count, limit, depth = 0, self._limits.nodes, self._limits.depth
        first_line = self._first_line
        while True:
            event: Any = self._next()  # libyaml's grammar fixes which event comes where
            kind = type(event)
            if kind in _ENDS:
                open_ids.discard(id(stack.pop()))
                flows.pop()
                continue
            if kind is yaml.DocumentEndEvent:
                return root
            mark = event.start_mark
            line, column = mark.line + first_line, mark.column
            count += 1
            if count > limit:
                raise TooCostlyError(f"more than {limit} YAML nodes", Position(line, column))
            anchor = event.anchor
            if kind is yaml.ScalarEvent:
                if event.tag is not None:
                    raise _tagged(event.tag, line, column)
                node = Node(SCALAR, line, column, event.value, bool(event.implicit[0]))
                if node.plain and flows and flows[-1]:
                    self._check_flow_plain(event, Position(line, column))
            elif kind is yaml.AliasEvent:
                target = None if anchor is None else anchors.get(anchor)
                where = position(line, column)
                if target is None:
                    raise KubeYamlError(f"unknown anchor '{anchor}' referenced at {where}")
                if id(target) in open_ids:
                    raise KubeYamlError(f"anchor '{anchor}' value contains itself at {where}")
                node = Node(ALIAS, line, column, anchor or "", target=target)
            else:
                if event.tag is not None:
                    raise _tagged(event.tag, line, column)
                node = Node(SEQUENCE if kind is yaml.SequenceStartEvent else MAPPING, line, column)
            if anchor is not None and kind is not yaml.AliasEvent:
                anchors[anchor] = node
            if stack:
                stack[-1].children.append(node)
            else:
                root = node
            if node.kind == SEQUENCE or node.kind == MAPPING:
                if len(stack) >= depth:
                    raise TooCostlyError(f"nesting deeper than {depth}", node)
                stack.append(node)
                open_ids.add(id(node))
                flows.append(bool(event.flow_style))

    def _check_flow_plain(self, event: yaml.ScalarEvent, at: Position) -> None:
        """goyaml.v2 lets ``:`` continue a plain scalar in a flow collection and ends one at
        ``?``; libyaml 0.2 does the opposite in places (``[a:,b]``, ``[a?b]``)."""
        assert event.end_mark is not None  # noqa: S101 - the parser marks every event
        end = event.end_mark.index
        after = self._text[end : end + 2]
        if _FLOW_AMBIGUOUS.intersection(event.value) or (
            after[:1] == ":" and after[1:] and after[1:] not in _BLANK_OR_END
        ):
            raise UnsureReadingError("a plain scalar with `:` or `?` in a flow collection", at)


def _tagged(tag: str, line: int, column: int) -> UnsureReadingError:
    return UnsureReadingError(f"the tag `{tag.replace(_LONG_TAG, '!!')}`", Position(line, column))
