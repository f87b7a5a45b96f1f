"""Hypothesis strategies shared by the property tests: JSON, mutations, objects, cluster views.

``mutated(value)`` is the workhorse: it takes a realistic object (from ``tests.builders``) and
applies a few edits at random nodes: replace, null, drop, duplicate or add; strings holding JSON
(the interfaces annotation) are decoded, mutated and re-encoded, so near-valid inputs are as
common as garbage. The edits shrink to none, so failures shrink towards the realistic object.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Final

from hypothesis import strategies as st

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterSnapshot, Networks, RuntimeKey, Unverifiable, runtime_key
from app.domain.fields import JsonMap
from app.domain.kinds import Kind, Workload
from app.domain.network import Network
from app.domain.policy import NotReady, OnUnverifiable, Policy
from app.domain.recipe import RECIPE_KEYS, Recipe, RecipeMissing
from app.domain.review import Operation
from app.domain.verdict import Code, Verdict, Violation
from tests.builders import (
    DEFAULT_INTERFACE,
    GPU_NICS,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    TCPXO_MANIFEST,
    TCPXO_RUNTIME,
    batch_job,
    bound,
    controller,
    job_set,
    mpi_runtime,
    node_job,
    override,
    pod,
    runtime,
    trainjob,
    wired,
)

# --- JSON values -----------------------------------------------------------------------------

INTERESTING_KEYS: Final = (
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "deletionTimestamp",
    "spec",
    "template",
    "replicatedJobs",
    "node",
    "launcher",
    "mlPolicy",
    "mpi",
    "runLauncherAsNode",
    "runtimeRef",
    "apiGroup",
    "runtimePatches",
    "trainingRuntimeSpec",
    "podTemplateOverrides",
    "targetJobs",
    "interfaceName",
    "network",
    "interface",
    INTERFACES,
    DEFAULT_INTERFACE,
    RECIPE_BOUND,
    *RECIPE_KEYS,
)

keys: st.SearchStrategy[str] = st.sampled_from(INTERESTING_KEYS) | st.text(max_size=12)

TRICKY_CHARACTERS: Final = (
    "\ud800",
    "\udfff",
    "\x00",
    "\n",
    "\u2028",
    "\ufeff",
    "\u00e9",
    "\U0001f600",
)
"""Lone surrogates (a decoded JSON string can hold them), NUL, line breaks, BOM, non-ASCII."""
characters: st.SearchStrategy[str] = st.characters(
    codec=None, exclude_categories=()
) | st.sampled_from(TRICKY_CHARACTERS)


def _no_surrogate_pair(text: str) -> bool:
    """True unless two code points form a UTF-16 surrogate pair (JSON would join them)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass") == text


any_text: st.SearchStrategy[str] = (
    st.lists(characters, max_size=24).map("".join).filter(_no_surrogate_pair)
)
"""Any code points, with the tricky ones made common (``st.text`` would flatten the weights)."""

json_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.sampled_from(["", "eth0", "eth1", "default", "pod-network", "node", "true", *GPU_NICS]),
    st.text(max_size=16),
)
"""JSON scalars as Python decodes them (``json.loads`` accepts NaN and Infinity)."""

finite_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=16),
)


def _containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)


json_values: st.SearchStrategy[object] = st.recursive(json_scalars, _containers, max_leaves=10)
finite_json_values: st.SearchStrategy[object] = st.recursive(
    finite_scalars, _containers, max_leaves=10
)
json_objects: st.SearchStrategy[dict[str, object]] = st.dictionaries(keys, json_values, max_size=6)


def is_finite(value: object) -> bool:
    """No NaN or infinity anywhere in a JSON value."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_finite(item) for item in value)
    if isinstance(value, dict):
        return all(is_finite(item) for item in value.values())
    return True


# --- Mutations -------------------------------------------------------------------------------

Path = tuple[str | int, ...]
_EDITS_MAX: Final = 4
_REPLACE, _NULL, _GROW, _SHRINK = range(4)
_KIND: Final = st.integers(0, 3)
_COIN: Final = st.booleans()


@functools.cache
def _below(bound: int) -> st.SearchStrategy[int]:
    """``0 <= i < bound``; strategies are cached because building one costs more than a draw."""
    return st.integers(0, bound - 1)


def _nodes(value: object, path: Path = ()) -> list[tuple[Path, object]]:
    """Every node of a JSON value with its path, parents before children."""
    found: list[tuple[Path, object]] = [(path, value)]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_nodes(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_nodes(item, (*path, index)))
    return found


def _decoded_container(text: object) -> object:
    """The list or object a JSON string holds (an annotation value), else None."""
    if not isinstance(text, str):
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        return None
    return decoded if isinstance(decoded, list | dict) else None


def _replaced(value: object, path: Path, new: object) -> object:
    """``value`` with the node at ``path`` replaced; copies only along the path."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict) and isinstance(head, str) and head in value:
        return {**value, head: _replaced(value[head], rest, new)}
    if isinstance(value, list) and isinstance(head, int) and head < len(value):
        return [*value[:head], _replaced(value[head], rest, new), *value[head + 1 :]]
    return value


@st.composite
def mutated(draw: st.DrawFn, value: object) -> object:
    """``value`` after up to four edits: a node replaced, nulled, grown or shrunk, or a JSON
    string (the interfaces annotation) decoded, mutated and re-encoded.

    The edits shrink to none, so a failure shrinks towards the realistic ``value``.
    """
    nodes = _nodes(value)
    json_strings = [(path, node) for path, node in nodes if _decoded_container(node) is not None]
    for _ in range(draw(_below(_EDITS_MAX + 1))):
        dive: bool = draw(_COIN)
        if json_strings and dive:
            path, node = json_strings[draw(_below(len(json_strings)))]
            inner = draw(mutated(_decoded_container(node)))
            value = _replaced(value, path, json.dumps(inner))
        else:
            path, node = nodes[draw(_below(len(nodes)))]
            value = _replaced(value, path, _edited(draw, node))
    return value


def _edited(draw: st.DrawFn, node: object) -> object:
    kind = draw(_KIND)
    if kind == _REPLACE:
        return draw(json_values)
    if kind == _NULL:
        return None
    if isinstance(node, dict):
        if kind == _GROW:
            return {**node, draw(keys): draw(json_values)}
        if node:
            dropped = sorted(node)[draw(_below(len(node)))]
            return {key: item for key, item in node.items() if key != dropped}
        return node
    if isinstance(node, list):
        if kind == _GROW:
            extra = node[draw(_below(len(node)))] if node else draw(json_values)
            position = draw(_below(len(node) + 1))
            return [*node[:position], extra, *node[position:]]
        if node:
            position = draw(_below(len(node)))
            return [*node[:position], *node[position + 1 :]]
        return node
    if isinstance(node, str):
        cut = draw(_below(len(node) + 1))
        return node[:cut] + draw(any_text) + node[cut:] if kind == _GROW else node[:cut]
    return draw(json_values)


# --- Interface lists -------------------------------------------------------------------------

nonempty_text: st.SearchStrategy[str] = (
    st.lists(characters, min_size=1, max_size=12).map("".join).filter(_no_surrogate_pair)
)


_REF_NAMES: Final = st.sampled_from(["eth0", "eth1", "eth2", "eth9"]) | nonempty_text
_REF_TARGETS: Final = st.sampled_from(["default", *GPU_NICS]) | nonempty_text
_ENTRY_NOISE: Final = st.dictionaries(st.sampled_from(["ipv4", "mac", "x-note"]), finite_scalars)
_INDENTS: Final = st.sampled_from([None, 0, 2])


@st.composite
def interface_refs(draw: st.DrawFn) -> InterfaceRef:
    """Any InterfaceRef the parser may return: a name and exactly one of network/interface."""
    name = draw(_REF_NAMES)
    target = draw(_REF_TARGETS)
    if draw(st.booleans()):
        return InterfaceRef(interface_name=name, network=target)
    return InterfaceRef(interface_name=name, interface=target)


def entry_of(ref: InterfaceRef) -> dict[str, object]:
    found: dict[str, object] = {"interfaceName": ref.interface_name}
    if ref.network is not None:
        found["network"] = ref.network
    if ref.interface is not None:
        found["interface"] = ref.interface
    return found


@st.composite
def encoded_entries(draw: st.DrawFn, refs: Sequence[InterfaceRef]) -> str:
    """``refs`` as annotation JSON, in any of the ways a client may write it."""
    encoded = []
    for ref in refs:
        entry = entry_of(ref)
        if draw(st.booleans()):  # an explicit null counts as absent
            entry["interface" if ref.interface is None else "network"] = None
        noise = draw(_ENTRY_NOISE)
        encoded.append({**noise, **entry})
    return json.dumps(
        encoded,
        ensure_ascii=draw(st.booleans()),
        indent=draw(_INDENTS),
        sort_keys=draw(st.booleans()),
    )


def secondary_pairs(networks: Sequence[str] = GPU_NICS) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Well-formed secondary pairs ``ethN -> network``, in any order: unique names, unique
    cluster networks, the N-th of ``networks`` on ``ethN`` (where the recipe places GPU_NICS)."""
    return st.lists(st.sampled_from(networks), unique=True, min_size=1, max_size=len(networks)).map(
        lambda chosen: [(f"eth{networks.index(net) + 1}", net) for net in chosen]
    )


# --- Trainer objects -------------------------------------------------------------------------

_PATCHED: Final = wired([*PAIRS[:4], ("eth5", "gpu-nic-9")], default="eth1")

BASE_RUNTIMES: Final[tuple[dict[str, object], ...]] = (
    runtime(annotations=wired()),
    runtime("plain", annotations=wired(PAIRS[:3])),
    runtime(TCPXO_RUNTIME, kind=Kind.TRAINING_RUNTIME, annotations=wired(reversed(PAIRS))),
    bound(annotations=wired(PAIRS, default=None)),
    runtime(jobs=[{"name": "launcher"}, "not-a-map", {"name": "node"}]),
    mpi_runtime(TCPXO_RUNTIME, launcher=wired(reversed(PAIRS)), node=wired()),
    mpi_runtime("custom", launcher=None, node=wired(), labels={RECIPE_BOUND: "true"}),
)
BASE_TRAINJOBS: Final[tuple[dict[str, object], ...]] = (
    trainjob(),
    trainjob(patches=[_PATCHED, {INTERFACES: None}]),
    trainjob(overrides=[override(_PATCHED), override(wired(), "launcher", "node")]),
    trainjob("custom", patches=[wired(PAIRS[1:])], overrides=[override({DEFAULT_INTERFACE: "x"})]),
    trainjob(ref={"name": TCPXO_RUNTIME, "kind": "TrainingRuntime"}, patches=[_PATCHED]),
    trainjob(overrides=[override(_PATCHED, "launcher")]),
    trainjob("custom", overrides=[override(wired(), "launcher")]),
)
BASE_WORKLOADS: Final[tuple[dict[str, object], ...]] = (
    job_set(node_job(wired()), node_job(None, name="driver"), node_job(_PATCHED, name="workers")),
    batch_job(wired(reversed(PAIRS)), owners=[controller("JobSet", "llama")]),
    pod(_PATCHED, name=None, generate_name="llama-node-0-0-", owners=[controller("Job", "j")]),
)


def _as_object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {"metadata": value}


fuzzed_runtimes: st.SearchStrategy[dict[str, object]] = (
    st.sampled_from(BASE_RUNTIMES).flatmap(mutated).map(_as_object)
)
fuzzed_trainjobs: st.SearchStrategy[dict[str, object]] = (
    st.sampled_from(BASE_TRAINJOBS).flatmap(mutated).map(_as_object)
)
fuzzed_workloads: st.SearchStrategy[dict[str, object]] = (
    st.sampled_from(BASE_WORKLOADS).flatmap(mutated).map(_as_object)
)
fuzzed_objects: st.SearchStrategy[dict[str, object]] = st.one_of(
    fuzzed_runtimes, fuzzed_trainjobs, fuzzed_workloads, json_objects
)


# --- Cluster views and policies --------------------------------------------------------------

network_names: st.SearchStrategy[str] = st.sampled_from(
    [*GPU_NICS, "gpu-nic-9", "default", "pod-network"]
) | st.text(min_size=1, max_size=10)


reasons: st.SearchStrategy[str] = st.text(max_size=8)
problems: st.SearchStrategy[str | None] = st.none() | st.text(min_size=1, max_size=8)
network_listings: st.SearchStrategy[list[tuple[str, str]]] = st.lists(
    st.tuples(network_names, st.sampled_from(["", "Ready=NotReady"]) | st.text(max_size=8)),
    max_size=8,
)


@st.composite
def networks_states(draw: st.DrawFn) -> Networks | Unverifiable:
    if draw(_below(8)) == 7:
        return Unverifiable(draw(reasons))
    listed = draw(network_listings)
    by_name = {name: Network(name=name, problem=problem) for name, problem in listed}
    return Networks(by_name=by_name, served=draw(_below(8)) != 7)


_VIEW_REFS: Final = st.builds(
    InterfaceRef,
    st.sampled_from(["eth0", "eth1", "eth2", "eth8", "eth9", "x"]),
    st.sampled_from(["default", *GPU_NICS, "gpu-nic-9"]) | st.text(max_size=6),
)
recipe_mappings: st.SearchStrategy[tuple[InterfaceRef, ...] | None] = st.one_of(
    st.none(),
    st.just(tuple(InterfaceRef(name, net) for name, net in PAIRS)),
    st.lists(_VIEW_REFS, max_size=9).map(tuple),
)
"""What a view may hold (a view is not bound to validate its recipe)."""


@st.composite
def recipe_states(draw: st.DrawFn) -> Recipe | RecipeMissing | Unverifiable:
    ref = "nicguard-system/nicguard-recipe@7"
    choice = draw(_below(6))
    if choice == 4:
        return RecipeMissing(ref)
    if choice == 5:
        return Unverifiable(draw(reasons))
    problem = draw(problems)
    return Recipe(ref=ref, mapping=draw(recipe_mappings), problem=problem)


RUNTIME_KEYS: Final[tuple[RuntimeKey, ...]] = (
    runtime_key(Kind.CLUSTER_TRAINING_RUNTIME, "", TCPXO_RUNTIME),
    runtime_key(Kind.TRAINING_RUNTIME, "team", TCPXO_RUNTIME),
    runtime_key(Kind.CLUSTER_TRAINING_RUNTIME, "", "custom"),
)


runtime_maps: st.SearchStrategy[dict[RuntimeKey, dict[str, object]]] = st.dictionaries(
    st.sampled_from(RUNTIME_KEYS), fuzzed_runtimes, max_size=2
)


@st.composite
def runtime_states(draw: st.DrawFn) -> Mapping[RuntimeKey, JsonMap] | Unverifiable:
    if draw(_below(8)) == 7:
        return Unverifiable(draw(reasons))
    return draw(runtime_maps)


cluster_views: st.SearchStrategy[ClusterSnapshot] = st.builds(
    ClusterSnapshot, networks_states(), recipe_states(), runtime_states()
)

policies: st.SearchStrategy[Policy] = st.builds(
    Policy,
    recipe_runtimes=st.frozensets(
        st.sampled_from([TCPXO_RUNTIME, "custom", "plain"]) | st.text(max_size=6), max_size=3
    ),
    not_ready=st.sampled_from(NotReady),
    recipe_required=st.booleans(),
    on_unverifiable=st.sampled_from(OnUnverifiable),
)

operations: st.SearchStrategy[Operation] = st.sampled_from(Operation)
judged_kinds: st.SearchStrategy[Kind | Workload | None] = (
    st.none() | st.sampled_from(Kind) | st.sampled_from(Workload)
)
namespaces: st.SearchStrategy[str] = st.sampled_from(["", "team", "other"]) | st.text(max_size=8)
subresources: st.SearchStrategy[str] = st.sampled_from(["", "", "", "status"]) | st.text(max_size=6)

# --- Recipes ---------------------------------------------------------------------------------

_LOWER: Final = "abgnz"
_LABEL: Final = "abgnz09-"
_NETWORK_PREFIX: Final = st.just("") | st.builds(
    str.__add__, st.sampled_from(_LOWER), st.text(_LABEL, max_size=5)
)
_NETWORK_SUFFIX: Final = st.just("") | st.builds(
    str.__add__, st.text(_LABEL, max_size=5), st.sampled_from("az09")
)
recipe_network_names: st.SearchStrategy[str] = st.builds(
    lambda prefix, suffix: f"{prefix}gpu-nic{suffix}", _NETWORK_PREFIX, _NETWORK_SUFFIX
)
"""Network names AICR accepts: DNS-label-ish, at most 41 characters, containing ``gpu-nic``."""


@st.composite
def valid_recipe_pairs(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Eight entries AICR accepts: eth1..eth8 in any order, eight distinct GPU-NIC networks."""
    names = draw(st.permutations([f"eth{i}" for i in range(1, 9)]))
    networks = draw(st.lists(recipe_network_names, min_size=8, max_size=8, unique=True))
    return list(zip(names, networks, strict=True))


YAML_TOKENS: Final = (
    *(
        f"!!{tag}{space}"
        for tag in ("int", "bool", "float", "timestamp", "str")
        for space in ("", " ")
    ),
    "!!binary ",
    "!!set ",
    "!!omap ",
    "!!pairs ",
    "!!null ",
    "!!map ",
    "!!seq ",
    "!!python/object/apply:os.system ",
    "!<tag:yaml.org,2002:int> ",
    "&a ",
    "*a",
    "- ",
    ": ",
    "? ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "\n",
    "  ",
    "'",
    '"',
    "# c",
    "|",
    ">",
    "~",
    "null",
    "yes",
    "no",
    "1.5",
    "0x1F",
    "0o17",
    "1_000",
    ".inf",
    ".nan",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "---",
    "...",
    "%YAML 1.1\n",
    "<<: ",
    "eth1",
    "gpu-nic-0",
    "interfaceName",
    "network",
    "tcpxoInterfaces",
    "componentRefs",
    "kubeflow-trainer",
    "overrides",
    "manifestFiles",
    "enabled",
    "false",
    TCPXO_MANIFEST,
    "\t",
    "\\u0000",
    "\x00",
    "\ufeff",
)
yamlish_text: st.SearchStrategy[str] = st.lists(
    st.sampled_from(YAML_TOKENS) | st.text(max_size=3), max_size=24
).map("".join)
"""Text built from YAML syntax, tags, anchors and recipe vocabulary."""


# --- Verdicts --------------------------------------------------------------------------------

MAX_MESSAGE_BYTES: Final = 1024


def assert_well_formed(verdict: Verdict) -> None:
    """Every part of a verdict has the type and vocabulary docs/rules.md promises."""
    assert isinstance(verdict, Verdict)
    for violation in (*verdict.violations, *verdict.waived):
        assert isinstance(violation, Violation)
        assert isinstance(violation.code, Code)
        assert violation.code in set(Code)
        assert isinstance(violation.field, str)
        assert isinstance(violation.message, str)
        assert violation.message
        assert violation.render().startswith(f"[{violation.code.value}] ")
    assert all(isinstance(warning, str) for warning in verdict.warnings)
    assert len(verdict.warnings) >= len(verdict.waived)
    assert isinstance(verdict.recipe, str)
    assert verdict.allowed is (not verdict.violations)
    assert verdict.undecided is (verdict.undecided and not verdict.allowed)


def codes_of(verdict: Verdict) -> set[Code]:
    return {violation.code for violation in verdict.violations}
