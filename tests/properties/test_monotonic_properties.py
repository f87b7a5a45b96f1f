"""A denied object is never allowed after a violating field is made worse.

Each base below is denied for one reason. Worsening mutations only add damage: append a bad
entry, duplicate an entry, rename a network to one the cluster lacks, break the primary entry,
corrupt the default interface, or replace the value with a malformed one. They never remove or
repair an entry, so every one of them is itself a violation, whatever the base. The property
holds for runtimes (CREATE and UPDATE from the base) and for TrainJobs whose later patches carry
the worsened wiring.
"""

from __future__ import annotations

import json
from typing import Final

from hypothesis import assume, given, settings, strategies as st

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.policy import Policy
from app.domain.review import Operation
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    GPU_NICS,
    INTERFACES,
    PAIRS,
    TCPXO_RUNTIME,
    Pair,
    entries,
    network,
    override,
    review,
    runtime,
    snapshot,
    trainjob,
    wired,
)
from tests.properties.strategies import assert_well_formed, json_values, secondary_pairs
from tests.support.examples import examples

CORE = settings(max_examples=examples(200))
NOT_READY: Final = "gpu-nic-unready"
CLUSTER: Final = snapshot(network(NOT_READY, ready=False))
CLUSTER_NETWORKS: Final = frozenset({*GPU_NICS, NOT_READY})
PLAIN: Final = "plain"
"""A runtime name that is not recipe-bound."""

Annotations = dict[str, object]


def _with(pairs: list[Pair]) -> list[dict[str, object]]:
    """eth0->default followed by ``pairs``, as decoded annotation entries."""
    listed: list[dict[str, object]] = [{"interfaceName": "eth0", "network": "default"}]
    listed.extend({"interfaceName": name, "network": net} for name, net in pairs)
    return listed


def _annotations(listed: object, default: object = "eth0") -> Annotations:
    found: Annotations = {
        INTERFACES: listed if not isinstance(listed, list) else json.dumps(listed)
    }
    if default is not None:
        found[DEFAULT_INTERFACE] = default
    return found


_P = list(PAIRS)
BASES: Final[dict[str, tuple[Annotations, bool]]] = {
    # name: (node annotations, recipe-bound)
    "missing-network": (_annotations(_with([*_P[:2], ("eth3", "gpu-nic-absent"), *_P[3:]])), False),
    "duplicated-interface": (_annotations(_with([_P[0], ("eth1", "gpu-nic-1"), *_P[2:]])), False),
    "duplicated-network": (_annotations(_with([_P[0], ("eth2", "gpu-nic-0"), *_P[2:]])), False),
    # AICR's conventions hold bound templates only (docs/rules.md, bound and unbound templates).
    "reserved-network": (_annotations(_with([*_P[:7], ("eth8", "pod-network")])), True),
    "invalid-name": (_annotations(_with([*_P[:4], ("eth5:0", "gpu-nic-4"), *_P[5:]])), False),
    "not-ready": (_annotations(_with([*_P, ("eth9", NOT_READY)])), False),
    "malformed-entry": (
        _annotations([*_with(_P[:3]), {"interfaceName": "eth4", "network": "a", "interface": "b"}]),
        False,
    ),
    "malformed-json": (_annotations('[{"interfaceName": "eth0", "network": "default"}'), False),
    "malformed-type": ({INTERFACES: _with(_P), DEFAULT_INTERFACE: "eth0"}, False),
    "primary-invalid": (
        _annotations([{"interfaceName": "eth0", "network": "gpu-nic-0"}, *entries(_P[1:])]),
        True,
    ),
    "default-missing": (_annotations(_with(_P), default=None), True),
    "default-wrong": (_annotations(_with(_P), default="eth1"), True),
    "divergent-order": (_annotations(_with(list(reversed(_P)))), True),
    "divergent-length": (_annotations(_with(_P[:7])), True),
    "divergent-interface-ref": (
        _annotations([*_with(_P[:7]), {"interfaceName": "eth8", "interface": "gpu-nic-7"}]),
        True,
    ),
}

# --- Worsening mutations ---------------------------------------------------------------------

missing_names = st.sampled_from(["gpu-nic-9", "gpu-nic-absent", "x"]) | st.text(
    min_size=1, max_size=12
).filter(lambda name: name not in CLUSTER_NETWORKS)
bad_entries = st.one_of(
    st.builds(
        lambda n, net: {"interfaceName": f"eth{n}", "network": net},
        st.integers(1, 20),
        missing_names,
    ),
    st.sampled_from(["default", "pod-network"]).map(
        lambda net: {"interfaceName": "eth12", "network": net}
    ),
    st.sampled_from(["eth0", "eth3:1", "eth/1", ".", "..", "e" * 16, " eth1"]).map(
        lambda name: {"interfaceName": name, "network": "gpu-nic-7"}
    ),
    st.sampled_from(
        [
            None,
            1,
            "eth1",
            [],
            {},
            {"network": "gpu-nic-1"},
            {"interfaceName": ""},
            {"interfaceName": "eth9"},
            {"interfaceName": "eth9", "network": ""},
            {"interfaceName": "eth9", "network": "gpu-nic-1", "interface": "nic"},
            {"interfaceName": 9, "network": "gpu-nic-1"},
        ]
    ),
)
"""Entries that are violations wherever they appear after the primary one."""


def _listed(found: Annotations) -> list[object] | None:
    raw = found.get(INTERFACES)
    if not isinstance(raw, str):
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return None
    return decoded if isinstance(decoded, list) and decoded else None


def _set_list(found: Annotations, listed: list[object]) -> Annotations:
    return {**found, INTERFACES: json.dumps(listed)}


@st.composite
def worsening(draw: st.DrawFn, found: Annotations) -> Annotations:
    """One mutation that adds a violation to ``found`` and removes none."""
    listed = _listed(found)
    choices = ["default", "replace"] + (
        ["append", "insert", "duplicate", "rename", "primary"] if listed is not None else []
    )
    choice = draw(st.sampled_from(choices))
    if choice == "default":
        default = draw(st.none() | st.sampled_from(["eth1", "", "ETH0", " eth0"]) | json_values)
        if default == "eth0":
            default = "eth00"
        return {k: v for k, v in found.items() if k != DEFAULT_INTERFACE} | (
            {} if default is None else {DEFAULT_INTERFACE: default}
        )
    if choice == "replace":
        raw = draw(
            st.sampled_from(["", "[]", "{}", "null", "[{]", "NaN", "eth0"])
            | json_values.filter(lambda v: v is not None and not isinstance(v, str))
        )
        return {**found, INTERFACES: raw}
    assert listed is not None
    if choice == "append":
        return _set_list(found, [*listed, draw(bad_entries)])
    if choice == "insert":
        position = draw(st.integers(1, len(listed)))
        return _set_list(found, [*listed[:position], draw(bad_entries), *listed[position:]])
    if choice == "duplicate":
        copied = listed[draw(st.integers(0, len(listed) - 1))]
        position = draw(st.integers(1, len(listed)))
        return _set_list(found, [*listed[:position], copied, *listed[position:]])
    if choice == "rename":
        named = [
            i for i, e in enumerate(listed) if i > 0 and isinstance(e, dict) and "network" in e
        ]
        if not named:
            return _set_list(found, [*listed, draw(bad_entries)])
        position = draw(st.sampled_from(named))
        entry = listed[position]
        assert isinstance(entry, dict)
        renamed = {**entry, "network": draw(missing_names)}
        return _set_list(found, [*listed[:position], renamed, *listed[position + 1 :]])
    primary = draw(
        st.sampled_from(
            [
                {"interfaceName": "eth0", "network": "gpu-nic-0"},
                {"interfaceName": "eth1", "network": "default"},
                {"interfaceName": "eth0", "interface": "default"},
                {"interfaceName": "eth0", "network": "pod-network"},
            ]
        )
    )
    return _set_list(found, [primary, *listed[1:]])


@st.composite
def worsened(draw: st.DrawFn) -> tuple[str, Annotations, Annotations]:
    name = draw(st.sampled_from(sorted(BASES)))
    base, _ = BASES[name]
    found = base
    for _ in range(draw(st.integers(1, 4))):
        found = draw(worsening(found))
    return name, base, found


def _runtime(name: str, found: Annotations) -> dict[str, object]:
    return runtime(TCPXO_RUNTIME if BASES[name][1] else PLAIN, annotations=found)


def _denied(verdict: Verdict) -> bool:
    assert_well_formed(verdict)
    return not verdict.allowed


def test_every_base_is_denied() -> None:
    for name, (found, _) in BASES.items():
        assert _denied(evaluate(review(_runtime(name, found)), CLUSTER, Policy())), name


@CORE
@given(worsened())
def test_a_worse_runtime_stays_denied(case: tuple[str, Annotations, Annotations]) -> None:
    name, _, found = case
    assert _denied(evaluate(review(_runtime(name, found)), CLUSTER, Policy()))


@CORE
@given(worsened())
def test_an_update_that_makes_a_runtime_worse_is_denied(
    case: tuple[str, Annotations, Annotations],
) -> None:
    name, base, found = case
    old, new = _runtime(name, base), _runtime(name, found)
    verdict = evaluate(review(new, operation=Operation.UPDATE, old=old), CLUSTER, Policy())
    if found != base:
        assert _denied(verdict)


def _patch(found: Annotations) -> Annotations:
    """A node annotation patch that sets the keys ``found`` has (a null, for the others, changes
    nothing: on an unannotated runtime the first patch leaves the wiring at ``found``)."""
    return {key: found.get(key) for key in (INTERFACES, DEFAULT_INTERFACE)}


def _patched(base: Annotations, found: Annotations) -> Annotations:
    """The wiring after ``_patch(base)`` then ``_patch(found)``: nulls keep the earlier value."""
    return base | {
        key: value for key, value in found.items() if key in (INTERFACES, DEFAULT_INTERFACE)
    }


@CORE
@given(worsened(), st.booleans())
def test_a_trainjob_whose_later_patch_makes_it_worse_stays_denied(
    case: tuple[str, Annotations, Annotations], as_override: bool
) -> None:
    name, base, found = case
    runtime_name = TCPXO_RUNTIME if BASES[name][1] else PLAIN
    cluster = snapshot(network(NOT_READY, ready=False), runtime(runtime_name, annotations={}))
    start = trainjob(runtime_name, patches=[_patch(base)])
    assert _denied(evaluate(review(start), cluster, Policy()))
    if as_override:
        job = trainjob(runtime_name, patches=[_patch(base)], overrides=[override(_patch(found))])
    else:
        job = trainjob(runtime_name, patches=[_patch(base), _patch(found)])
    assert _denied(evaluate(review(job), cluster, Policy()))
    update = evaluate(review(job, operation=Operation.UPDATE, old=start), cluster, Policy())
    if _patched(base, found) != base:
        assert _denied(update)


@CORE
@given(worsened())
def test_a_trainjob_update_that_makes_it_worse_is_denied_while_runtimes_are_unverifiable(
    case: tuple[str, Annotations, Annotations],
) -> None:
    """Without its runtime, a TrainJob is denied (503); changing its patches must not help."""
    _, base, found = case
    view = ClusterSnapshot(CLUSTER.network_state, CLUSTER.recipe_state, Unverifiable("not synced"))
    start = trainjob(PLAIN, patches=[_patch(base)])
    job = trainjob(PLAIN, patches=[_patch(base), _patch(found)])
    assert _denied(evaluate(review(job), view, Policy()))
    if _patched(base, found) != base:
        verdict = evaluate(review(job, operation=Operation.UPDATE, old=start), view, Policy())
        assert _denied(verdict)


# --- From valid to denied --------------------------------------------------------------------


@CORE
@given(secondary_pairs(), st.data())
def test_a_valid_runtime_with_any_network_renamed_to_a_missing_one_is_denied(
    pairs: list[Pair], data: st.DataObject
) -> None:
    valid = runtime(PLAIN, annotations=wired(pairs))
    assert evaluate(review(valid), CLUSTER, Policy()).allowed
    position = data.draw(st.integers(0, len(pairs) - 1))
    renamed = list(pairs)
    renamed[position] = (pairs[position][0], data.draw(missing_names))
    changed = runtime(PLAIN, annotations=wired(renamed))
    assert _denied(evaluate(review(changed), CLUSTER, Policy()))
    update = evaluate(review(changed, operation=Operation.UPDATE, old=valid), CLUSTER, Policy())
    assert _denied(update)


@CORE
@given(secondary_pairs(), st.data())
def test_moving_any_recipe_network_to_another_interface_is_misplaced(
    pairs: list[Pair], data: st.DataObject
) -> None:
    """Placement (docs/rules.md, NetworkMisplaced): pairs, not order, are placed."""
    position = data.draw(st.integers(0, len(pairs) - 1))
    name, network_name = pairs[position]
    used = {interface for interface, _ in pairs}
    elsewhere = data.draw(st.sampled_from([f"eth{i}" for i in range(1, 10) if f"eth{i}" != name]))
    assume(elsewhere not in used)
    moved = list(pairs)
    moved[position] = (elsewhere, network_name)
    verdict = evaluate(review(runtime(PLAIN, annotations=wired(moved))), CLUSTER, Policy())
    assert [v.code.value for v in verdict.violations] == ["NetworkMisplaced"]
    assert f"{elsewhere}->{network_name} (the recipe places" in verdict.violations[0].message


@CORE
@given(st.integers(0, 7), st.text(min_size=1, max_size=16), st.booleans())
def test_any_change_to_a_recipe_bound_entry_is_denied(
    position: int, name: str, as_interface: bool
) -> None:
    """Recipe-bound wiring must equal the recipe element-wise (docs/rules.md)."""
    assert evaluate(review(runtime(annotations=wired())), CLUSTER, Policy()).allowed
    listed = _with(list(PAIRS))
    entry = dict(listed[position + 1])
    if as_interface:
        entry.pop("network")
        entry["interface"] = name
    elif name != entry["network"]:
        entry["network"] = name
    else:
        entry["interfaceName"] = name + "0"
    listed[position + 1] = entry
    changed = runtime(annotations=_annotations(listed))
    assert _denied(evaluate(review(changed), CLUSTER, Policy()))
