"""goyaml.v2's decoding of a node graph into ``interface{}`` followed by sigs.k8s.io/yaml's
conversion to JSON: duplicate keys (the later wins), merge keys applied in document order,
aliases expanded under goyaml.v2's own aliasing bound and nicguard's budget, keys made strings.
"""

from __future__ import annotations

import math
from typing import Final

from app.kubeyaml.errors import KubeYamlError, TooCostlyError, UnsureReadingError, position
from app.kubeyaml.nodes import ALIAS, MAPPING, SCALAR, SEQUENCE, Limits, Node
from app.kubeyaml.scalars import MERGE, Resolved, json_number, resolve_plain

_MAX_INT64: Final = (1 << 63) - 1
_MIN_INT64: Final = -(1 << 63)
# decode.go's excessive-aliasing bound.
_RATIO_LOW: Final = 400_000
_RATIO_HIGH: Final = 4_000_000

_KEY_SHOWN: Final = 64

JsonObject = dict[str, object]


def decode_document(root: Node | None, limits: Limits) -> object:
    """The JSON value sigs.k8s.io/yaml.YAMLToJSON produces for one document (None when empty)."""
    if root is None:
        return None
    decoder = _Decoder(limits)
    decoder.count(root)  # goyaml.v2 counts the document node itself
    value = decoder.value(root, 0)
    deferred = _first_deferred(value)
    if deferred is not None:
        raise deferred.error
    return value


class _Deferred:
    """What YAMLToJSON cannot convert (a null or uint64 key, two keys read as one string, a NaN):
    an error only if it is still there at the end, not overwritten by a later key or merge."""

    __slots__ = ("error",)

    def __init__(self, error: KubeYamlError) -> None:
        self.error = error


def _first_deferred(value: object) -> _Deferred | None:
    pending = [value]
    while pending:
        found = pending.pop()
        if isinstance(found, _Deferred):
            return found
        if isinstance(found, dict):
            pending.extend(found.values())
        elif isinstance(found, list):
            pending.extend(found)
    return None


def _allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _RATIO_LOW:
        return 0.99
    if decodes >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decodes - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


class _Decoder:
    """decode.go's ``unmarshal`` into ``interface{}``: every call counted as goyaml.v2 counts it
    (``count``), so its aliasing bound and nicguard's budget apply to the same number."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._budget = limits.decodes
        self._decodes = 0
        self._aliased = 0
        self._alias_depth = 0

    def count(self, node: Node) -> None:
        self._decodes += 1
        if self._alias_depth > 0:
            self._aliased += 1
            if (
                self._aliased > 100
                and self._decodes > 1000
                and self._aliased / self._decodes > _allowed_alias_ratio(self._decodes)
            ):
                where = position(node.line, node.column)
                raise KubeYamlError(f"document contains excessive aliasing at {where}")
        if self._decodes > self._budget:
            raise TooCostlyError(f"more than {self._budget} values (aliases expanded)", node)

    def value(self, node: Node, depth: int) -> object:
        """The node's value; the caller has counted it."""
        kind = node.kind
        if kind == SCALAR:
            return _json_scalar(resolve_plain(node.value), node) if node.plain else node.value
        if kind == ALIAS:
            target = _target(node)
            self._alias_depth += 1
            try:
                self.count(target)
                return self.value(target, depth)
            finally:
                self._alias_depth -= 1
        if depth >= self._limits.depth:
            raise TooCostlyError(f"nesting deeper than {self._limits.depth}", node)
        if kind == SEQUENCE:
            items = []
            for child in node.children:
                self.count(child)
                items.append(self.value(child, depth + 1))
            return items
        mapping = _Mapping()
        self._fill(node, mapping, depth)
        return mapping.values if mapping.problem is None else _Deferred(mapping.problem)

    def _fill(self, node: Node, mapping: _Mapping, depth: int) -> None:
        """decode.go's ``mapping`` into a map: keys in document order, each set over the last."""
        children = node.children
        for index in range(0, len(children), 2):
            key, value = children[index], children[index + 1]
            if key.plain and key.kind == SCALAR and key.value == MERGE:
                self._merge(value, mapping, depth)
                continue
            self.count(key)
            kind, name = self._key(key)
            self.count(value)
            mapping.set(key, kind, name, self.value(value, depth + 1))

    def _key(self, key: Node) -> tuple[str, str | KubeYamlError]:
        """The key's Go type and the string YAMLToJSON makes of it (or why it makes none)."""
        if key.kind == ALIAS:
            target = _target(key)
            self._alias_depth += 1
            try:
                self.count(target)
                return self._key(target)
            finally:
                self._alias_depth -= 1
        if key.kind != SCALAR:
            raise KubeYamlError(f"invalid map key (a collection) at {_at(key)}")
        if not key.plain:
            return "str", key.value
        resolved = resolve_plain(key.value)
        return resolved[0], _key_string(resolved, key)

    def _merge(self, node: Node, mapping: _Mapping, depth: int) -> None:
        """decode.go's ``merge``: a map, an alias of one, or a sequence of them applied last to
        first (so the earlier wins), each key set over what the map holds so far."""
        for item in reversed(node.children) if node.kind == SEQUENCE else (node,):
            target = _target(item) if item.kind == ALIAS else item
            if target.kind != MAPPING:
                raise KubeYamlError(
                    f"map merge requires map or sequence of maps as the value at {_at(item)}"
                )
            self.count(item)
            if item.kind != ALIAS:
                self._fill(item, mapping, depth)
                continue
            self._alias_depth += 1
            try:
                self.count(target)
                self._fill(target, mapping, depth)
            finally:
                self._alias_depth -= 1


def _target(alias: Node) -> Node:
    target = alias.target
    assert target is not None  # noqa: S101 - nodes.compose sets every alias's target
    return target


def _cut(name: str) -> str:
    return name if len(name) <= _KEY_SHOWN else name[: _KEY_SHOWN - 1] + "…"


class _Mapping:
    """A Go ``map[interface{}]interface{}`` as YAMLToJSON converts it: keys made strings; a key
    it cannot convert, or two keys that differ in Go (1 and "1") but read as one string (Go's
    map order would pick one), leave a ``problem`` instead. ``kinds``: the Go type of the key
    that set each name (same type and name is the same Go key)."""

    __slots__ = ("kinds", "problem", "values")

    def __init__(self) -> None:
        self.values: JsonObject = {}
        self.kinds: dict[str, str] = {}
        self.problem: KubeYamlError | None = None

    def set(self, key: Node, kind: str, name: str | KubeYamlError, value: object) -> None:
        if isinstance(name, KubeYamlError):
            self.problem = self.problem or name
            return
        earlier = self.kinds.get(name)
        if earlier is not None and earlier != kind:
            message = f"two keys read as `{_cut(name)}` (a {earlier} and a {kind})"
            self.problem = self.problem or UnsureReadingError(message, key)
        self.kinds[name] = kind
        self.values[name] = value


def _key_string(key: Resolved, node: Node) -> str | KubeYamlError:
    kind, value = key
    if kind == "str":
        assert isinstance(value, str)  # noqa: S101 - resolve_plain's contract
        return value
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        assert isinstance(value, int)  # noqa: S101 - resolve_plain's contract
        if value > _MAX_INT64:
            return KubeYamlError(f"unsupported map key of type uint64 at {_at(node)}")
        return str(value)
    if kind == "float":
        return UnsureReadingError("a floating-point map key", node)
    return KubeYamlError(f"unsupported map key (null) at {_at(node)}")


def _json_scalar(resolved: Resolved, node: Node) -> object:
    """The value json.Marshal writes and a JSON reader reads back: whole floats as integers."""
    kind, value = resolved
    if kind == "float":
        assert isinstance(value, float)  # noqa: S101 - resolve_plain's contract
        if math.isnan(value) or math.isinf(value):
            return _Deferred(KubeYamlError(f"json: unsupported value {node.value} at {_at(node)}"))
        value = json_number(value)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not _MIN_INT64 <= value <= _MAX_INT64
    ):
        # kubectl reads such a JSON integer back as a float64, Trainer's typed decoding as
        # whatever its field is: no one reading of it to agree with.
        raise UnsureReadingError("an integer beyond 64 bits", node)
    return value


def _at(node: Node) -> str:
    return position(node.line, node.column)
