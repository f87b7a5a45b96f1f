"""One read of the cluster (app.kube.listing) through the real generated client, against the
fake API server."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from kubernetes.client import ApiClient, Configuration

from app.domain.claims import ClaimRequest, ClaimTemplate
from app.domain.cluster import ClaimTemplates, Networks, RuntimeKey
from app.domain.kinds import Kind
from app.domain.network import ParamSet
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.slim import slim_runtime
from app.kube.listing import ClusterReadError, list_snapshot
from tests.builders import GPU_NICS, RDMA, RECIPE_NAME, claim_template, exactly
from tests.support.apiserver import Reply, client_of, listed, routes, serving, status
from tests.support.cluster import (
    CLUSTER,
    CONFIGMAPS,
    CTR,
    CTRS,
    NETWORKS,
    PARAM_SETS,
    TEAM_A,
    TEAM_B,
    TRAINER,
    TRS,
)


def test_one_list_per_resource_gives_a_complete_slim_snapshot() -> None:
    with client_of(routes(CLUSTER)) as (server, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    assert server.queries == [
        (NETWORKS, {"limit": "100"}),
        (PARAM_SETS, {"limit": "100"}),
        (CONFIGMAPS, {"fieldSelector": "metadata.name=nicguard-recipe", "limit": "100"}),
        (CTRS, {"limit": "100"}),
        (TRS, {"limit": "100"}),
        (TEMPLATES, {"limit": "100"}),
    ]
    # resource.k8s.io/v1 answered 404: not served, so no template can exist.
    assert snapshot.claim_template_state == ClaimTemplates(by_key={}, served=False)
    networks = snapshot.network_state
    assert isinstance(networks, Networks)
    assert networks.served
    assert sorted(networks.by_name) == sorted(GPU_NICS)
    assert networks.param_sets is None  # answered 404: not served, so not described
    recipe = snapshot.recipe_state
    assert isinstance(recipe, Recipe)
    assert recipe.ref == "nicguard-system/nicguard-recipe@7"
    expected: dict[RuntimeKey, object] = {
        (Kind.CLUSTER_TRAINING_RUNTIME, "", "torch-distributed-tcpxo"): slim_runtime(CTR),
        (Kind.TRAINING_RUNTIME, "team-a", "a"): slim_runtime(TEAM_A),
        (Kind.TRAINING_RUNTIME, "team-b", "b"): slim_runtime(TEAM_B),
    }
    assert snapshot.runtime_state == expected
    slim = snapshot.runtime(Kind.TRAINING_RUNTIME, "team-a", "a")
    assert isinstance(slim, Mapping)
    assert slim["metadata"] == {"name": "a", "namespace": "team-a"}


def test_one_namespace_lists_only_its_training_runtimes() -> None:
    with client_of(routes(CLUSTER)) as (server, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, "team-a")
    assert server.paths == [
        NETWORKS,
        PARAM_SETS,
        CONFIGMAPS,
        f"{TRAINER}/namespaces/team-a/trainingruntimes",
        "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates",
    ]
    assert snapshot.runtime_state == {(Kind.TRAINING_RUNTIME, "team-a", "a"): slim_runtime(TEAM_A)}


def test_networks_not_served_and_no_recipe_are_answers_not_failures() -> None:
    table = {**CLUSTER, CONFIGMAPS: listed()}
    del table[NETWORKS]
    with client_of(routes(table)) as (_, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    assert snapshot.network_state == Networks(by_name={}, served=False)
    assert snapshot.recipe_state == RecipeMissing(ref="nicguard-system/nicguard-recipe")


@pytest.mark.parametrize(
    ("path", "reply", "message"),
    [
        pytest.param(
            CTRS,
            status(403, "Forbidden", 'cannot list resource "clustertrainingruntimes"'),
            "cannot list clustertrainingruntimes.trainer.kubeflow.org: forbidden (RBAC): "
            'cannot list resource "clustertrainingruntimes"',
            id="forbidden",
        ),
        pytest.param(
            NETWORKS,
            status(500, "InternalError", "etcdserver: request timed out"),
            "cannot list networks.networking.gke.io: HTTP 500: etcdserver: request timed out",
            id="networks failing otherwise than NotFound",
        ),
        pytest.param(
            TRS,
            status(404, "NotFound", "the server could not find the requested resource"),
            "cannot list trainingruntimes.trainer.kubeflow.org: HTTP 404: "
            "the server could not find the requested resource",
            id="trainer not installed",
        ),
    ],
)
def test_any_other_failure_is_one_line_naming_what_could_not_be_listed(
    path: str, reply: Reply, message: str
) -> None:
    with (
        client_of(routes({**CLUSTER, path: reply})) as (_, api_client),
        pytest.raises(ClusterReadError) as raised,
    ):
        list_snapshot(api_client, RECIPE_NAME, None)
    assert str(raised.value) == message


def test_an_unreachable_server_is_one_line_naming_the_first_list() -> None:
    with serving(routes(CLUSTER)) as server:
        url = server.url  # closed on leaving: nothing listens there any more
    configuration = Configuration(host=url)
    configuration.retries = False
    api_client = ApiClient(configuration)
    try:
        with pytest.raises(ClusterReadError) as raised:
            list_snapshot(api_client, RECIPE_NAME, None)
    finally:
        api_client.rest_client.close()
    message = str(raised.value)
    assert message.startswith("cannot list networks.networking.gke.io: ")
    assert "Connection refused" in message
    assert "\n" not in message
    assert len(message) < 400


def test_param_sets_served_describe_the_networks_usability() -> None:
    gnp = {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": "gpu-nic-0"},
        "spec": {"deviceMode": "NetDevice"},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "VPCNotFound"}]},
    }
    with client_of(routes({**CLUSTER, PARAM_SETS: listed(gnp)})) as (_, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    networks = snapshot.network_state
    assert isinstance(networks, Networks)
    assert networks.param_sets == {
        "gpu-nic-0": ParamSet("gpu-nic-0", "Ready=VPCNotFound", "NetDevice")
    }
    assert networks.problem(networks.by_name["gpu-nic-0"]) == (
        "GKENetworkParamSet gpu-nic-0: Ready=VPCNotFound"
    )
    assert networks.problem(networks.by_name["gpu-nic-1"]) == (
        "GKENetworkParamSet gpu-nic-1 does not exist"
    )


TEMPLATES = "/apis/resource.k8s.io/v1/resourceclaimtemplates"


def test_the_claim_templates_are_listed_slim_as_the_cache_keeps_them() -> None:
    """Items of a built-in list carry no apiVersion and kind; each is read as the apiserver
    stores it."""
    items = [claim_template(), claim_template("one", exactly(mode=None), namespace="team-b")]
    for item in items:
        del item["apiVersion"], item["kind"]
    with client_of(routes({**CLUSTER, TEMPLATES: listed(*items)})) as (_, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    assert snapshot.claim_template_state == ClaimTemplates(
        by_key={
            ("team", "default-rdma"): ClaimTemplate(
                "team", "default-rdma", (ClaimRequest("rdma", RDMA, allocation_mode="All"),)
            ),
            ("team-b", "one"): ClaimTemplate("team-b", "one", (ClaimRequest("rdma", RDMA),)),
        }
    )
