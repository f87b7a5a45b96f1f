"""libyaml's events (PyYAML's C parser) composed into goyaml.v2's node graph, refusing the syntax
where libyaml 0.2 and goyaml.v2's older port of it could read the same text differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

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


@dataclass(slots=True, eq=False)
class Node:
    """One node as goyaml.v2's parser builds it; ``target`` is an alias's anchored node."""

    kind: int
    line: int
    column: int
    value: str = ""
    plain: bool = False
    children: list[Node] = field(default_factory=list)
    target: Node | None = None


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
        return _Composer(text, limits, first_line).only_document(_events(loader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = "" if mark is None else f" at {position(mark.line + first_line, mark.column)}"
        raise KubeYamlError(f"{error.problem}{where}") from None
    except yaml.YAMLError as error:
        raise KubeYamlError(" ".join(str(error).split())) from None
    finally:
        loader.dispose()


def _events(loader: yaml.CSafeLoader | yaml.SafeLoader) -> Iterator[yaml.Event]:
    """The parser's events, one at a time: a refusal stops the parse where it stands."""
    while loader.check_event():
        event = loader.get_event()
        assert event is not None  # noqa: S101 - check_event said there is one
        yield event


class _Composer:
    def __init__(self, text: str, limits: Limits, first_line: int) -> None:
        self._text = text
        self._limits = limits
        self._first_line = first_line
        self._count = 0

    def only_document(self, events: Iterator[yaml.Event]) -> Node | None:
        found: Node | None = None
        documents = 0
        for event in events:
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise UnsureReadingError("a second YAML document", self._at(event))
                if event.version is not None or event.tags:
                    raise UnsureReadingError("a %YAML or %TAG directive", self._at(event))
                found = self._document(events)
        return found

    def _at(self, event: yaml.Event) -> Position:
        mark = event.start_mark
        assert mark is not None  # noqa: S101 - the parser marks every event
        return Position(mark.line + self._first_line, mark.column)

    def _document(self, events: Iterator[yaml.Event]) -> Node | None:
        anchors: dict[str, Node] = {}
        open_nodes: list[tuple[Node, bool]] = []  # (collection, flow style)
        root: Node | None = None
        for event in events:
            if isinstance(event, yaml.DocumentEndEvent):
                return root
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                open_nodes.pop()
                continue
            assert isinstance(event, yaml.NodeEvent)  # noqa: S101 - libyaml's grammar
            node = self._node(event, anchors, open_nodes)
            if open_nodes:
                open_nodes[-1][0].children.append(node)
            else:
                root = node
            if isinstance(event, yaml.CollectionStartEvent):
                if len(open_nodes) >= self._limits.depth:
                    raise TooCostlyError(f"nesting deeper than {self._limits.depth}", node)
                open_nodes.append((node, bool(event.flow_style)))
        raise KubeYamlError("the YAML stream ends inside a document")

    def _node(
        self, event: yaml.NodeEvent, anchors: dict[str, Node], open_nodes: list[tuple[Node, bool]]
    ) -> Node:
        self._count += 1
        at = self._at(event)
        if self._count > self._limits.nodes:
            raise TooCostlyError(f"more than {self._limits.nodes} YAML nodes", at)
        anchor = event.anchor
        if isinstance(event, yaml.AliasEvent):
            target = None if anchor is None else anchors.get(anchor)
            if target is None:
                raise KubeYamlError(f"unknown anchor '{anchor}' referenced at {_text(at)}")
            if any(target is node for node, _ in open_nodes):
                raise KubeYamlError(f"anchor '{anchor}' value contains itself at {_text(at)}")
            return Node(ALIAS, at.line, at.column, value=anchor or "", target=target)
        assert isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent)  # noqa: S101
        if event.tag is not None:
            raise UnsureReadingError(f"the tag `{event.tag.replace(_LONG_TAG, '!!')}`", at)
        if isinstance(event, yaml.ScalarEvent):
            node = Node(SCALAR, at.line, at.column, event.value, plain=bool(event.implicit[0]))
            if node.plain and open_nodes and open_nodes[-1][1]:
                self._check_flow_plain(event, at)
        else:
            kind = SEQUENCE if isinstance(event, yaml.SequenceStartEvent) else MAPPING
            node = Node(kind, at.line, at.column)
        if anchor is not None:
            anchors[anchor] = node
        return node

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


def _text(mark: Position) -> str:
    return position(mark.line, mark.column)
