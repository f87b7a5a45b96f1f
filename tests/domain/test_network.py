"""When a GKE Network object is usable (app.domain.network)."""

from __future__ import annotations

import pytest

from app.domain.cluster import Networks
from app.domain.network import Network, ParamSet, network_from_object, param_set_from_object
from tests.builders import condition, network


def test_a_ready_bound_network_is_usable() -> None:
    found = network_from_object(network("gpu-nic-0"))
    assert found == Network("gpu-nic-0", param_set="gpu-nic-0", device=True)
    assert found.usable


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        pytest.param(network("n", ready=False), "Ready=NotReady: down", id="ready-false"),
        pytest.param(network("n", params_ready=False), "ParamsReady=NoParams", id="params-false"),
        pytest.param(
            network("n", ready=False, params_ready=False),
            "Ready=NotReady: down; ParamsReady=NoParams",
            id="both-false",
        ),
        pytest.param(
            network("n", param_kind="Secret"),
            "spec.parametersRef does not name a GKENetworkParamSet",
            id="parameters-ref-wrong-kind",
        ),
        pytest.param(
            network("n", param_kind=None),
            "spec.parametersRef does not name a GKENetworkParamSet",
            id="no-parameters-ref",
        ),
        pytest.param(
            network("n", conditions=[]),
            "no status.conditions reported",
            id="no-conditions",
        ),
        pytest.param(
            {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}},
            "no status.conditions reported; spec.parametersRef does not name",
            id="no-status-no-spec",
        ),
        pytest.param(
            network("n", conditions=[condition("ParamsReady")]),
            "no Ready condition reported",
            id="ready-condition-absent",
        ),
        pytest.param(
            network("n", conditions=[condition("Ready"), "junk", {"type": 3}]),
            "no ParamsReady condition reported",
            id="params-ready-absent-junk-ignored",
        ),
        pytest.param(
            network("n", conditions=[condition("Ready", "Unknown"), condition("ParamsReady")]),
            "Ready is not True",
            id="no-reason",
        ),
        pytest.param(
            network(
                "n",
                conditions=[condition("Ready", "False", reason="R", message="m" * 200)],
            ),
            "Ready=R: " + "m" * 120 + ";",
            id="message-cut-to-120",
        ),
        pytest.param(
            network(
                "n",
                conditions=[condition("Ready"), condition("Ready", "False", reason="Later")],
            ),
            "Ready=Later",
            id="later-duplicate-wins",
        ),
    ],
)
def test_an_unusable_network_says_which_condition_fails_and_why(obj: object, problem: str) -> None:
    found = network_from_object(obj)
    assert found is not None
    assert not found.usable
    assert problem in found.problem


def test_an_earlier_failing_duplicate_is_overridden_by_a_later_true_one() -> None:
    conditions = [
        condition("Ready", "False", reason="Old"),
        condition("Ready"),
        condition("ParamsReady"),
    ]
    found = network_from_object(network("n", conditions=conditions))
    assert found == Network("n", param_set="n", device=True)


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"metadata": {}}, id="no-name"),
        pytest.param({"metadata": {"name": ""}}, id="empty-name"),
        pytest.param("network", id="not-a-map"),
    ],
)
def test_a_network_without_a_name_is_dropped(obj: object) -> None:
    assert network_from_object(obj) is None


@pytest.mark.parametrize(
    ("param_kind", "expected"),
    [("GKENetworkParamSet", "gpu-nic-0"), ("ConfigMap", ""), (None, "")],
)
def test_a_network_knows_the_param_set_it_references(param_kind: str | None, expected: str) -> None:
    found = network_from_object(network("gpu-nic-0", param_kind=param_kind))
    assert found is not None
    assert found.param_set == expected


# -- GKENetworkParamSets (docs/rules.md) --------------------------------------------------------


def param_set(
    name: str = "rdma-0",
    *,
    mode: str | None = "RDMA",
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, object]:
    spec: dict[str, object] = {"vpc": "v", "vpcSubnet": "s"}
    if mode is not None:
        spec["deviceMode"] = mode
    obj: dict[str, object] = {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": name},
        "spec": spec,
    }
    if conditions is not None:
        obj["status"] = {"networkName": name, "conditions": conditions}
    return obj


READY = {"type": "Ready", "status": "True", "reason": "GNPReady", "message": ""}
SUBNET = {"type": "Ready", "status": "False", "reason": "SubnetNotFound", "message": "no subnet s"}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(param_set(conditions=[READY]), ParamSet("rdma-0", "", "RDMA"), id="ready"),
        pytest.param(
            param_set(mode="NetDevice", conditions=[SUBNET]),
            ParamSet("rdma-0", "Ready=SubnetNotFound: no subnet s", "NetDevice"),
            id="not-ready-with-reason",
        ),
        pytest.param(
            param_set(mode=None, conditions=[SUBNET, READY]),
            ParamSet("rdma-0", "", ""),
            id="later-duplicate-wins-no-mode",
        ),
        pytest.param(
            param_set(conditions=[]),
            ParamSet("rdma-0", "no Ready condition reported", "RDMA"),
            id="no-conditions",
        ),
        pytest.param(
            param_set(conditions=None),
            ParamSet("rdma-0", "no Ready condition reported", "RDMA"),
            id="no-status",
        ),
        pytest.param({"metadata": {}}, None, id="no-name"),
    ],
)
def test_a_param_set_is_its_name_readiness_and_device_mode(
    obj: object, expected: ParamSet | None
) -> None:
    assert param_set_from_object(obj) == expected


def described(*sets: ParamSet) -> Networks:
    networks = {
        name: Network(name=name, param_set=name) for name in ("gvnic-1", "rdma-0", "rdma-1")
    }
    networks["plain"] = Network(name="plain")  # names no param set (its own problem says so)
    return Networks(by_name=networks, param_sets={s.name: s for s in sets})


@pytest.mark.parametrize(
    ("networks", "name", "problem"),
    [
        pytest.param(described(ParamSet("rdma-0")), "rdma-0", "", id="ready"),
        pytest.param(
            described(ParamSet("rdma-0", "Ready=SubnetNotFound: gone")),
            "rdma-0",
            "GKENetworkParamSet rdma-0: Ready=SubnetNotFound: gone",
            id="param-set-not-ready",
        ),
        pytest.param(
            described(), "rdma-1", "GKENetworkParamSet rdma-1 does not exist", id="absent"
        ),
        pytest.param(
            Networks(by_name={"rdma-1": Network(name="rdma-1", param_set="rdma-1")}),
            "rdma-1",
            "",
            id="param-sets-not-described",
        ),
        pytest.param(described(), "plain", "", id="no-param-set-named"),
    ],
)
def test_a_network_is_usable_only_with_its_param_set_ready(
    networks: Networks, name: str, problem: str
) -> None:
    network = networks.by_name[name]
    assert networks.problem(network) == problem
    assert networks.usable(network) is (not problem)


def test_both_problems_are_said_when_network_and_param_set_fail() -> None:
    network = Network(name="rdma-0", problem="Ready=ParamsNotReady", param_set="rdma-0")
    networks = Networks(by_name={"rdma-0": network}, param_sets={})
    assert networks.problem(network) == (
        "Ready=ParamsNotReady; GKENetworkParamSet rdma-0 does not exist"
    )
    assert networks.usable_names == ()


@pytest.mark.parametrize(
    ("network_type", "device"),
    [
        pytest.param("Device", True, id="device"),
        pytest.param("L3", False, id="l3"),
        pytest.param("L2", False, id="l2"),
        pytest.param("device", False, id="case-sensitive"),
        pytest.param(None, False, id="no-type"),
    ],
)
def test_a_network_knows_whether_it_hands_over_a_node_nic(
    network_type: str | None, device: bool
) -> None:
    obj = network("n")
    spec = obj["spec"]
    assert isinstance(spec, dict)
    if network_type is None:
        del spec["type"]
    else:
        spec["type"] = network_type
    found = network_from_object(obj)
    assert found is not None
    assert found.device is device
