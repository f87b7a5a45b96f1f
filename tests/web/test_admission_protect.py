"""POST /validate for what the wiring depends on: Network and GKENetworkParamSet DELETEs and the
recipe ConfigMap, over the in-process ASGI client against examples/cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.cluster import ClusterSnapshot
from app.domain.policy import Policy, Protect
from tests.web.conftest import make_client

NETWORK = {"group": "networking.gke.io", "version": "v1", "kind": "Network"}
PARAM_SET = {"group": "networking.gke.io", "version": "v1", "kind": "GKENetworkParamSet"}
CONFIGMAP = {"group": "", "version": "v1", "kind": "ConfigMap"}
RECIPE_PAIRS = [(f"eth{i + 1}", f"gpu-nic-{i}") for i in range(8)]


def _review(kind: dict[str, str], operation: str, name: str, **request: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": kind,
            "operation": operation,
            "name": name,
            "userInfo": {"username": "alice"},
            **request,
        },
    }


def _post(client: TestClient, review: object) -> dict[str, Any]:
    reply = client.post("/validate", json=review)
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    return response


def _recipe(pairs: list[tuple[str, str]], name: str = "nicguard-recipe") -> dict[str, Any]:
    entries = [{"interfaceName": i, "network": n} for i, n in pairs]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "nicguard-system"},
        "data": {"tcpxoInterfaces": json.dumps(entries)},
    }


@pytest.fixture
def client(example_state: ClusterSnapshot) -> TestClient:
    return make_client(example_state)[0]


@pytest.mark.parametrize("old", [None, {"metadata": {"name": "gpu-nic-3"}}, {"junk": 1}])
def test_deleting_an_in_use_network_is_refused_with_a_cause_per_dependent(
    client: TestClient, old: object
) -> None:
    response = _post(client, _review(NETWORK, "DELETE", "gpu-nic-3", oldObject=old))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403
    assert status["message"].startswith(
        "Network/gpu-nic-3: [NetworkInUse] Network gpu-nic-3 is in use by recipe "
        "nicguard-system/nicguard-recipe (eth4), ClusterTrainingRuntime torch-distributed-tcpxo "
        "(eth4)"
    )
    assert [c["message"] for c in status["details"]["causes"]] == [
        "recipe nicguard-system/nicguard-recipe (eth4)",
        "ClusterTrainingRuntime torch-distributed-tcpxo (eth4)",
    ]
    assert response["auditAnnotations"]["violations"] == "NetworkInUse"


def test_an_unused_network_and_a_warn_policy_are_allowed(example_state: ClusterSnapshot) -> None:
    client = make_client(example_state)[0]
    assert _post(client, _review(NETWORK, "DELETE", "gpu-nic-spare"))["allowed"] is True
    warn = make_client(example_state, Policy(protect=Protect.WARN))[0]
    response = _post(warn, _review(NETWORK, "DELETE", "gpu-nic-3"))
    assert response["allowed"] is True
    assert response["warnings"][0].startswith("[NetworkInUse] Network gpu-nic-3 is in use by")


def test_deleting_the_param_set_of_an_in_use_network_is_refused(client: TestClient) -> None:
    response = _post(client, _review(PARAM_SET, "DELETE", "gpu-nic-3"))
    assert response["status"]["details"]["causes"][0]["reason"] == "ParamSetInUse"


def test_the_recipe_is_protected_and_no_other_configmap_is(client: TestClient) -> None:
    seven = _recipe(RECIPE_PAIRS[:7])
    denied = _post(
        client,
        _review(CONFIGMAP, "UPDATE", "nicguard-recipe", namespace="nicguard-system", object=seven),
    )
    assert denied["status"]["details"]["causes"][0]["reason"] == "RecipeInvalid"
    other = _recipe(RECIPE_PAIRS[:7], name="unrelated")
    review = _review(CONFIGMAP, "UPDATE", "unrelated", namespace="nicguard-system")
    allowed = _post(client, review | {"request": review["request"] | {"object": other}})
    assert (allowed["allowed"], allowed.get("warnings")) == (True, None)


def test_a_valid_recipe_write_carries_its_blast_radius(client: TestClient) -> None:
    swapped = _recipe([RECIPE_PAIRS[1], RECIPE_PAIRS[0], *RECIPE_PAIRS[2:]])
    response = _post(
        client,
        _review(
            CONFIGMAP, "UPDATE", "nicguard-recipe", namespace="nicguard-system", object=swapped
        ),
    )
    assert response["allowed"] is True
    assert response["warnings"] == [
        "[MappingDivergesFromRecipe] would diverge from this recipe: "
        "ClusterTrainingRuntime torch-distributed-tcpxo"
    ]


def test_deleting_the_recipe_while_it_binds_a_runtime_is_refused(client: TestClient) -> None:
    response = _post(
        client, _review(CONFIGMAP, "DELETE", "nicguard-recipe", namespace="nicguard-system")
    )
    assert response["status"]["details"]["causes"][0]["reason"] == "RecipeInUse"


def test_the_namespace_controller_deletes_anything(client: TestClient) -> None:
    review = _review(NETWORK, "DELETE", "gpu-nic-3")
    review["request"]["userInfo"] = {
        "username": "system:serviceaccount:kube-system:namespace-controller"
    }
    assert _post(client, review)["allowed"] is True


def test_bad_input_on_the_protected_path_is_a_clear_answer_never_a_500(client: TestClient) -> None:
    nameless = _post(client, _review(NETWORK, "DELETE", ""))
    assert nameless["allowed"] is True  # a Network named "" is used by nothing
    garbled = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"tcpxoInterfaces": 5}}
    review = _review(CONFIGMAP, "CREATE", "nicguard-recipe", namespace="nicguard-system")
    response = _post(client, review | {"request": review["request"] | {"object": garbled}})
    assert response["status"]["details"]["causes"][0]["message"] == (
        "the recipe ConfigMap nicguard-system/nicguard-recipe is invalid: "
        "data key tcpxoInterfaces is not a string"
    )
    review = _review(NETWORK, "DELETE", "gpu-nic-3")
    review["request"]["oldObject"] = "not an object"
    reply = client.post("/validate", json=review)
    assert reply.status_code == 400
