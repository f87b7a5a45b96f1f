"""The misspellings of the YAML corpus: each rewrites one map entry of a runtime document (its
key folded, duplicated or quoted, merged in, aliased, its value respelled, tagged, restyled,
moved or dropped) or one list on the path to the wiring (replicatedJobs, a pod's DRA claims)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Final

from tests.builders import PAIRS, entries
from tests.differential.yaml_text import Map, Node, Scalar, Seq, Step, at, scalars, spelled, update

RUNTIME_PATH: Final = ("spec", "template", "spec", "replicatedJobs")
RUNTIME: Final = "torch-distributed-tcpxo"
GOOD: Final = json.dumps(entries([("eth0", "default"), *PAIRS]), separators=(",", ":"))
BAD: Final = json.dumps(
    entries([("eth0", "default"), *PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]),
    separators=(",", ":"),
)
"""The interfaces value the recipe wants, and one with two NICs swapped (denied)."""
# A value's "other" spelling: what a duplicate, a merge key or an alias sets instead.
_SWAPS: Final = {
    GOOD: BAD,
    True: False,
    "trainer": "dataset-initializer",
    RUNTIME: "other-runtime",
    "ClusterTrainingRuntime": "TrainingRuntime",
    "TrainingRuntime": "ClusterTrainingRuntime",
    "trainer.kubeflow.org/v1alpha1": "example.com/v1",
    "eth0": "eth1",
    "node": "nodes",
    "launcher": "launchers",
    "team": "other-team",
    "default-rdma": "rdma-one-nic",
    "default-netdev": "rdma-one-nic",
    "shared-rdma": "default-rdma",
    "rdma": "nic",
}
SWAP: Final = {spelled(a): spelled(b) for a, b in _SWAPS.items()}

SPELLINGS: Final = (
    *("y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "OFF"),
    *("true", "True", "TRUE", "false", "False", "~", "null", "Null", "NULL", ""),
    *("0x10", "0o10", "010", "0b10", "1_000", "1:20", "-1:20", "190:20:30.15", ".inf", "-.Inf"),
    *(".NaN", "1e3", "1.0", "+1", "12345678901234567890", "2001-12-14t21:59:43.10-05:00"),
    *("2002-12-14", "'y'", '"yes"', "'0x10'", "!!str y", "!!str yes", "!!bool yes"),
    *("!!bool 'true'", "!!int 10", "!!float 1", "!!null ''", "!custom y", "!!str 010"),
    *(f"!!binary {base64.b64encode(b'true').decode()}", "=", "'<<'", "[]", "{}"),
)
"""YAML 1.1 scalars, tags and quoting, each read differently by some reader: every one at every
scalar on the path in the MPI runtime, the ``FEW`` in the others."""
FEW: Final = ("y", "on", "NO", "~", "", "0x10", "1:20", "!!str y", "!custom y", "!!binary dHJ1ZQ==")


def _folds(key: str) -> list[str]:
    """Other spellings of a key that Go's encoding/json matches to the same struct field."""
    found = [key.lower(), key.upper(), key[:1].swapcase() + key[1:]]
    found += [key.replace("s", "\u017f", 1), key.replace("k", "\u212a", 1)]
    return list(dict.fromkeys(k for k in found if k != key))


def _swapped(node: Node) -> Node:
    changed = scalars(node, lambda text: SWAP.get(text, text))
    return changed if changed != node else Scalar("~")


def _with_items(root: Node, path: tuple[Step, ...], items: list[tuple[str, Node]]) -> Node:
    def change(node: Node) -> Node:
        assert isinstance(node, Map)
        return replace(node, items=tuple(items))

    return update(root, path, change)


def _defs(root: Node, **anchored: Node) -> Node:
    """``root`` with a first top-level ``x-anchors`` entry defining ``&name`` nodes."""
    assert isinstance(root, Map)
    defs = Map(tuple((name, _anchored(node, name)) for name, node in anchored.items()))
    return replace(root, items=(("x-anchors", defs), *root.items))


def _anchored(node: Node, name: str) -> Node:
    if isinstance(node, Scalar):
        return Scalar(f"&{name} {node.text}")
    return replace(node, props=f"&{name} {node.props}".strip())


def entry_mutations(
    root: Node, path: tuple[Step, ...], spellings: tuple[str, ...] = SPELLINGS
) -> Iterator[tuple[str, Node]]:
    """Each misspelling of the map entry at ``path`` (a key, its value, its neighbours)."""
    where, key = path[:-1], path[-1]
    assert isinstance(key, str)
    owner = at(root, where)
    assert isinstance(owner, Map)
    items = list(owner.items)
    index = next(i for i, (k, _) in enumerate(items) if k == key)
    value = items[index][1]
    other = _swapped(value)
    before, after = items[:index], items[index + 1 :]

    def entries_(*middle: tuple[str, Node]) -> Node:
        return _with_items(root, where, [*before, *middle, *after])

    for fold in _folds(key):
        yield f"renamed {fold}", entries_((fold, value))
        yield f"then {fold} other", entries_((key, value), (fold, other))
        yield f"{fold} other first", entries_((fold, other), (key, value))
    yield "twice, other second", entries_((key, value), (key, other))
    yield "twice, other first", entries_((key, other), (key, value))
    yield "merge other before", entries_(("<<", Map(((key, other),), flow=True)), (key, value))
    yield "merge other after", entries_((key, value), ("<<", Map(((key, other),), flow=True)))
    yield "merge only", entries_(("<<", Map(((key, value),))))
    yield "merge list", entries_(("<<", Seq((Map(((key, other),)), Map(((key, value),))))))
    yield "merge list rev", entries_(("<<", Seq((Map(((key, value),)), Map(((key, other),))))))
    yield "merge twice", entries_(("<<", Map(((key, value),))), ("<<", Map(((key, other),))))
    for fold in _folds(key)[:1]:
        yield f"merge {fold}", entries_((key, value), ("<<", Map(((fold, other),), flow=True)))
    yield "merge alias", _defs(entries_((key, value), ("<<", Scalar("*m"))), m=Map(((key, other),)))
    yield (
        "merge alias first",
        _defs(entries_(("<<", Scalar("*m")), (key, value)), m=Map(((key, other),))),
    )
    yield "alias", _defs(entries_((key, Scalar("*v"))), v=value)
    yield "alias other", _defs(entries_((key, Scalar("*v"))), v=other)
    yield "anchored", entries_((key, _anchored(value, "a")))
    yield "double-quoted key", entries_((json.dumps(key), value))
    yield "single-quoted key", entries_((f"'{key}'", value))
    yield "tagged key", entries_((f"!!str {key}", value))
    yield "missing", entries_()
    yield "null", entries_((key, Scalar("~")))
    yield "empty", entries_((key, Scalar("")))
    yield "first", _with_items(root, where, [(key, value), *before, *after])
    yield "last", _with_items(root, where, [*before, *after, (key, value)])
    if isinstance(value, Scalar):
        for text in spellings:
            yield f"= {text}", entries_((key, Scalar(text)))
        yield "= other", entries_((key, other))
        yield "tagged !!str", entries_((key, Scalar(f"!!str {value.text}")))
        yield "tagged custom", entries_((key, Scalar(f"!custom {value.text}")))
    else:
        yield "flow", entries_((key, replace(value, flow=True)))
        yield "tagged custom", entries_((key, replace(value, props="!custom")))
        tag = "!!map" if isinstance(value, Map) else "!!seq"
        yield f"tagged {tag}", entries_((key, replace(value, props=tag)))
        yield "tagged !!str", entries_((key, replace(value, props="!!str")))
        yield (
            "= []" if isinstance(value, Map) else "= {}",
            entries_((key, Map(()) if isinstance(value, Seq) else Seq(()))),
        )


def job_mutations(root: Node) -> Iterator[tuple[str, Node]]:
    """The replicatedJobs list itself: entries reordered, merged from an anchor, aliased."""
    return list_mutations(root, RUNTIME_PATH, "jobs")


def list_mutations(root: Node, path: tuple[Step, ...], plural: str) -> Iterator[tuple[str, Node]]:
    """The list of maps at ``path`` itself: entries reordered, merged from an anchor, aliased
    (each entry merged keeps its own ``name``, the key such lists are merged by)."""
    found = at(root, path)
    assert isinstance(found, Seq)
    items = list(found.items)

    def listed(*found: Node, flow: bool = False) -> Node:
        return update(root, path, lambda _: Seq(tuple(found), flow=flow))

    yield f"{plural} reversed", listed(*reversed(items))
    yield f"{plural} flow", listed(*items, flow=True)
    for index, entry in enumerate(items):
        yield (
            f"[{index}] aliased",
            _defs(listed(*items[:index], Scalar("*j"), *items[index + 1 :]), j=entry),
        )
        assert isinstance(entry, Map)
        other = _swapped(entry)
        merged = Map((("<<", Scalar("*j")), *((k, v) for k, v in entry.items if k == "name")))
        yield (
            f"[{index}] merged from other",
            _defs(listed(*items[:index], merged, *items[index + 1 :]), j=other),
        )
        yield (
            f"[{index}] other merged under",
            _defs(
                listed(
                    *items[:index],
                    replace(entry, items=(*entry.items, ("<<", Scalar("*j")))),
                    *items[index + 1 :],
                ),
                j=other,
            ),
        )
