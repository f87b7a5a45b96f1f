"""goyaml.v2's decoding of a node graph into ``interface{}`` followed by sigs.k8s.io/yaml's
conversion to JSON: duplicate keys (the later wins), merge keys applied in document order,
aliases expanded under goyaml.v2's own aliasing bound and nicguard's budget, keys made strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from app.kubeyaml.errors import KubeYamlError, TooCostlyError, UnsureReadingError, position
from app.kubeyaml.nodes import ALIAS, MAPPING, SCALAR, SEQUENCE, Limits, Node
from app.kubeyaml.scalars import MERGE, Resolved, resolve_plain

_MAX_INT64: Final = (1 << 63) - 1
# decode.go's excessive-aliasing bound.
_RATIO_LOW: Final = 400_000
_RATIO_HIGH: Final = 4_000_000
# Go's encoding/json writes float64s below this in plain notation: whole ones read back as ints.
_PLAIN_FLOAT_BOUND: Final = 1e21

JsonObject = dict[str, object]


def decode_document(root: Node | None, limits: Limits) -> object:
    """The JSON value sigs.k8s.io/yaml.YAMLToJSON produces for one document (None when empty)."""
    if root is None:
        return None
    decoder = _Decoder(limits)
    decoder.count(root)  # goyaml.v2 counts the document node itself
    return decoder.value(root, 0)


def _allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _RATIO_LOW:
        return 0.99
    if decodes >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decodes - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


class _Decoder:
    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._decodes = 0
        self._aliased = 0
        self._alias_depth = 0

    def count(self, node: Node) -> None:
        """decode.go's ``unmarshal`` bookkeeping, and nicguard's budget on the same count."""
        self._decodes += 1
        if self._alias_depth > 0:
            self._aliased += 1
        if (
            self._aliased > 100
            and self._decodes > 1000
            and self._aliased / self._decodes > _allowed_alias_ratio(self._decodes)
        ):
            raise KubeYamlError(
                f"document contains excessive aliasing at {position(node.line, node.column)}"
            )
        if self._decodes > self._limits.decodes:
            raise TooCostlyError(
                f"more than {self._limits.decodes} values (aliases expanded)", node
            )

    def value(self, node: Node, depth: int) -> object:
        if node.kind == ALIAS:
            return self._through_alias(node, lambda target: self._counted_value(target, depth))
        if node.kind == SCALAR:
            return _json_scalar(_resolved(node), node)
        if depth >= self._limits.depth:
            raise TooCostlyError(f"nesting deeper than {self._limits.depth}", node)
        if node.kind == SEQUENCE:
            return [self._counted_value(child, depth + 1) for child in node.children]
        mapping = _Mapping()
        self._fill(node, mapping, depth)
        return mapping.values

    def _counted_value(self, node: Node, depth: int) -> object:
        self.count(node)
        return self.value(node, depth)

    def _through_alias(self, alias: Node, use: Callable[[Node], object]) -> object:
        assert alias.target is not None  # noqa: S101 - nodes.compose sets every alias's target
        self._alias_depth += 1
        try:
            return use(alias.target)
        finally:
            self._alias_depth -= 1

    def _fill(self, node: Node, mapping: _Mapping, depth: int) -> None:
        """decode.go's ``mapping`` into a map: keys in document order, each set over the last."""
        children = node.children
        for index in range(0, len(children), 2):
            key, value = children[index], children[index + 1]
            if key.kind == SCALAR and key.plain and key.value == MERGE:
                self._merge(value, mapping, depth)
                continue
            self.count(key)
            resolved = self._key(key)
            mapping.set(resolved, key, self._counted_value(value, depth + 1))

    def _key(self, key: Node) -> Resolved:
        if key.kind == ALIAS:
            found = self._through_alias(key, self._aliased_key)
            assert isinstance(found, tuple)  # noqa: S101 - _aliased_key returns Resolved
            return found
        if key.kind != SCALAR:
            raise KubeYamlError(f"invalid map key (a collection) at {_at(key)}")
        return _resolved(key)

    def _aliased_key(self, target: Node) -> Resolved:
        self.count(target)
        return self._key(target)

    def _merge(self, node: Node, mapping: _Mapping, depth: int) -> None:
        """decode.go's ``merge``: a map, an alias of one, or a sequence of them applied last to
        first (so the earlier wins), each key set over what the map holds so far."""
        if node.kind == SEQUENCE:
            for item in reversed(node.children):
                self._merge_one(item, mapping, depth)
        else:
            self._merge_one(node, mapping, depth)

    def _merge_one(self, node: Node, mapping: _Mapping, depth: int) -> None:
        target = node.target if node.kind == ALIAS else node
        if target is None or target.kind != MAPPING:
            raise KubeYamlError(
                f"map merge requires map or sequence of maps as the value at {_at(node)}"
            )
        self.count(node)
        if node.kind == ALIAS:
            self._through_alias(node, lambda found: self._merge_counted(found, mapping, depth))
        else:
            self._fill(node, mapping, depth)

    def _merge_counted(self, target: Node, mapping: _Mapping, depth: int) -> None:
        self.count(target)
        self._fill(target, mapping, depth)


class _Mapping:
    """A Go ``map[interface{}]interface{}`` as YAMLToJSON leaves it: keys made strings, two keys
    that differ in Go but read as the same string refused (Go's map order would pick one)."""

    def __init__(self) -> None:
        self.values: JsonObject = {}
        self._keys: dict[str, Resolved] = {}

    def set(self, key: Resolved, node: Node, value: object) -> None:
        name = _key_string(key, node)
        earlier = self._keys.get(name)
        if earlier is not None and earlier != key:
            raise UnsureReadingError(
                f"two keys read as `{name}` (a {earlier[0]} and a {key[0]})", node
            )
        self._keys[name] = key
        self.values[name] = value


def _resolved(node: Node) -> Resolved:
    return resolve_plain(node.value) if node.plain else ("str", node.value)


def _key_string(key: Resolved, node: Node) -> str:
    kind, value = key
    if kind == "str":
        assert isinstance(value, str)  # noqa: S101 - resolve_plain's contract
        return value
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        assert isinstance(value, int)  # noqa: S101 - resolve_plain's contract
        if value > _MAX_INT64:
            raise KubeYamlError(f"unsupported map key of type uint64 at {_at(node)}")
        return str(value)
    if kind == "float":
        raise UnsureReadingError("a floating-point map key", node)
    raise KubeYamlError(f"unsupported map key (null) at {_at(node)}")


def _json_scalar(resolved: Resolved, node: Node) -> object:
    """The value json.Marshal writes and a JSON reader reads back: whole floats as integers."""
    kind, value = resolved
    if kind != "float":
        return value
    assert isinstance(value, float)  # noqa: S101 - resolve_plain's contract
    if math.isnan(value) or math.isinf(value):
        raise KubeYamlError(f"json: unsupported value {node.value} at {_at(node)}")
    if value.is_integer() and abs(value) < _PLAIN_FLOAT_BOUND:
        return int(value)
    return value


def _at(node: Node) -> str:
    return position(node.line, node.column)
