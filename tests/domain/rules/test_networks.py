"""Object -> cluster leg: named Networks must exist, be usable, and the API must be served.

(app.domain.rules.networks through app.domain.evaluate.)
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterSnapshot, Networks, Unverifiable
from app.domain.evaluate import evaluate_object
from app.domain.kinds import Kind
from app.domain.policy import NotReady, OnUnverifiable, Policy
from app.domain.rules.networks import network_targets
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    GPU_NICS,
    INTERFACES,
    INTERFACES_PATH,
    PAIRS,
    RECIPE_BOUND,
    codes,
    condition,
    messages,
    network,
    runtime,
    snapshot,
    waived_codes,
    wired,
)

MIXED = [("eth1", "gpu-nic-0"), ("eth2", "absent-b"), ("eth3", "flaky"), ("eth4", "absent-a")]


def _assess(
    annotations: dict[str, object], view: ClusterSnapshot, policy: Policy | None = None
) -> Verdict:
    obj = runtime("plain", annotations=annotations)
    return evaluate_object(Kind.CLUSTER_TRAINING_RUNTIME, obj, "", view, policy or Policy()).verdict


def _not_served() -> ClusterSnapshot:
    return replace(snapshot(), network_state=Networks({}, served=False))


def test_entries_naming_existing_usable_networks_pass() -> None:
    assert _assess(wired(), snapshot()) == Verdict()


def test_reserved_and_network_interface_entries_are_not_looked_up() -> None:
    entries = (
        InterfaceRef("eth0", "default"),
        InterfaceRef("eth2", "pod-network"),
        InterfaceRef("eth3", interface="nic"),
        InterfaceRef("eth4", "gpu-nic-0"),
    )
    assert network_targets(entries) == [(3, entries[3], "gpu-nic-0")]


def test_one_not_found_violation_lists_every_missing_network_and_the_cluster_names() -> None:
    verdict = _assess(wired([*PAIRS[:2], ("eth3", "nope-1"), ("eth4", "nope-2")]), snapshot())
    assert codes(verdict) == ("NetworkNotFound",)
    violation = verdict.violations[0]
    assert violation.field == f"{INTERFACES_PATH}[3].network"
    assert "no Network object exists for eth3->nope-1, eth4->nope-2" in violation.message
    assert f"(cluster has: {', '.join(GPU_NICS)})" in violation.message


@pytest.mark.parametrize(
    ("networks", "fragment"),
    [
        pytest.param((), "(cluster has: no Network objects)", id="empty-cluster"),
        pytest.param(
            [f"net-{i:02}" for i in range(15)],
            "net-10, net-11 and 3 more)",
            id="long-listing-cut-after-12",
        ),
        pytest.param([f"net-{i:02}" for i in range(12)], "net-10, net-11)", id="twelve-all-shown"),
    ],
)
def test_the_listing_of_cluster_networks_stays_short(networks: list[str], fragment: str) -> None:
    verdict = _assess(wired([("eth1", "absent")]), snapshot(networks=networks))
    assert codes(verdict) == ("NetworkNotFound",)
    assert fragment in verdict.violations[0].message


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        pytest.param(
            network("flaky", ready=False), "eth1->flaky (Ready=NotReady: down)", id="ready"
        ),
        pytest.param(
            network("flaky", params_ready=False), "eth1->flaky (ParamsReady=NoParams)", id="params"
        ),
        pytest.param(
            network("flaky", param_kind="Secret"),
            "eth1->flaky (spec.parametersRef does not name a GKENetworkParamSet)",
            id="parameters-ref-kind",
        ),
        pytest.param(
            network("flaky", conditions=[]),
            "eth1->flaky (no status.conditions reported)",
            id="none",
        ),
        pytest.param(
            network("flaky", conditions=[condition("Ready", "False", reason="Gone", message="x")]),
            "eth1->flaky (Ready=Gone: x; no ParamsReady condition reported)",
            id="reason-and-message",
        ),
    ],
)
def test_a_network_that_is_not_usable_is_not_ready_with_the_failing_condition(
    obj: dict[str, object], problem: str
) -> None:
    verdict = _assess(wired([("eth1", "flaky")]), snapshot(obj))
    assert codes(verdict) == ("NetworkNotReady",)
    violation = verdict.violations[0]
    assert violation.field == f"{INTERFACES_PATH}[1].network"
    assert f"Networks exist but are not Ready/bound: {problem}" in violation.message
    assert f"(usable on cluster: {', '.join(GPU_NICS)})" in violation.message


def test_one_not_ready_violation_lists_each_unusable_network() -> None:
    view = snapshot(network("a", ready=False), network("b", params_ready=False), networks=())
    verdict = _assess(wired([("eth1", "a"), ("eth2", "b")]), view)
    assert codes(verdict) == ("NetworkNotReady",)
    assert "eth1->a (Ready=NotReady: down); eth2->b (ParamsReady=NoParams)" in messages(verdict)
    assert "(usable on cluster: none)" in messages(verdict)


@pytest.mark.parametrize(
    ("not_ready", "denied", "waived"),
    [
        pytest.param(NotReady.DENY, ("NetworkNotFound", "NetworkNotReady"), (), id="deny"),
        pytest.param(NotReady.WARN, ("NetworkNotFound",), ("NetworkNotReady",), id="warn"),
    ],
)
def test_missing_and_unusable_networks_are_both_reported_per_policy(
    not_ready: NotReady, denied: tuple[str, ...], waived: tuple[str, ...]
) -> None:
    view = snapshot(network("flaky", ready=False))
    verdict = _assess(wired(MIXED), view, Policy(not_ready=not_ready))
    assert codes(verdict) == denied
    assert waived_codes(verdict) == waived
    assert "eth2->absent-b, eth4->absent-a" in messages(verdict)
    assert "eth3->flaky (Ready=NotReady: down)" in messages(verdict)


def test_not_ready_under_warn_policy_alone_allows_with_a_warning() -> None:
    view = snapshot(network("flaky", ready=False))
    verdict = _assess(wired([("eth1", "flaky")]), view, Policy(not_ready=NotReady.WARN))
    assert verdict.allowed
    assert verdict.warnings[0].startswith("[NetworkNotReady] Networks exist but are not Ready")


def test_an_unserved_network_api_replaces_not_found() -> None:
    verdict = _assess(wired(MIXED), _not_served())
    assert codes(verdict) == ("NetworkAPINotServed",)
    assert verdict.violations[0].field == INTERFACES_PATH
    assert "networks.networking.gke.io/v1" in verdict.violations[0].message
    assert "--enable-multi-networking" in verdict.violations[0].message


def _interface_only() -> dict[str, object]:
    value = json.dumps(
        [
            {"interfaceName": "eth0", "network": "default"},
            {"interfaceName": "eth1", "interface": "n"},
        ]
    )
    return {INTERFACES: value, DEFAULT_INTERFACE: "eth0"}


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param(_interface_only(), id="network-interface-entries-only"),
        pytest.param(wired([]), id="primary-entry-only"),
    ],
)
def test_any_wired_object_is_denied_when_the_network_api_is_not_served(
    annotations: dict[str, object],
) -> None:
    # docs/rules.md: NetworkAPINotServed applies to every wired object, not only to objects
    # whose entries name Networks.
    assert codes(_assess(annotations, _not_served())) == ("NetworkAPINotServed",)


def test_network_interface_entries_are_warned_about_and_not_looked_up() -> None:
    verdict = _assess(_interface_only(), snapshot(networks=()))
    assert verdict.allowed
    assert verdict.warnings == ("eth1->interface:n (entry 1) uses a NetworkInterface; not checked",)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param(
            {RECIPE_BOUND: "true"}, ("NetworkReserved", "MappingDivergesFromRecipe"), id="bound"
        ),
        pytest.param(None, (), id="unbound"),
    ],
)
def test_pod_network_entries_are_not_looked_up(
    labels: dict[str, str] | None, expected: tuple[str, ...]
) -> None:
    obj = runtime("plain", annotations=wired([("eth1", "pod-network")]), labels=labels)
    view = snapshot(networks=())
    verdict = evaluate_object(Kind.CLUSTER_TRAINING_RUNTIME, obj, "", view, Policy()).verdict
    assert codes(verdict) == expected


@pytest.mark.parametrize(
    ("on_unverifiable", "denied", "waived"),
    [
        pytest.param(OnUnverifiable.DENY, ("ClusterStateUnavailable",), (), id="deny"),
        pytest.param(OnUnverifiable.ALLOW, (), ("ClusterStateUnavailable",), id="allow"),
    ],
)
def test_unlistable_networks_are_cluster_state_unavailable_per_policy(
    on_unverifiable: OnUnverifiable, denied: tuple[str, ...], waived: tuple[str, ...]
) -> None:
    view = replace(snapshot(), network_state=Unverifiable("networks cache not synced"))
    verdict = _assess(wired(), view, Policy(on_unverifiable=on_unverifiable))
    assert codes(verdict) == denied
    assert waived_codes(verdict) == waived
    assert "nicguard cannot decide: Networks cannot be listed: networks cache not synced" in (
        messages(verdict)
    )
    assert verdict.undecided is bool(denied)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(
            {INTERFACES: "nope", DEFAULT_INTERFACE: "eth0"},
            ("InterfacesAnnotationMalformed",),
            id="malformed stops before the network view",
        ),
        pytest.param(
            wired([("eth1", "pod-network")]), ("ClusterStateUnavailable",), id="pod-network-only"
        ),
        pytest.param(_interface_only(), ("ClusterStateUnavailable",), id="network-interfaces-only"),
        pytest.param(wired([]), ("ClusterStateUnavailable",), id="primary-only"),
    ],
)
def test_every_readable_wired_object_needs_the_network_view(
    annotations: dict[str, object], expected: tuple[str, ...]
) -> None:
    # Whether the Network API is served matters to any wired object (NetworkAPINotServed).
    view = replace(snapshot(), network_state=Unverifiable("networks cache not synced"))
    verdict = _assess(annotations, view)
    assert codes(verdict) == expected
    assert waived_codes(verdict) == ()
