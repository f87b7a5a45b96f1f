"""When a GKE Network object is usable (app.domain.network)."""

from __future__ import annotations

import pytest

from app.domain.network import Network, network_from_object
from tests.builders import condition, network


def test_a_ready_bound_network_is_usable() -> None:
    found = network_from_object(network("gpu-nic-0"))
    assert found == Network("gpu-nic-0", param_set="gpu-nic-0")
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
    assert found == Network("n", param_set="n")


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
