"""Sorting plain objects into a cluster snapshot (app.domain.cluster, app.domain.cluster)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.documents import load_yaml
from app.domain.claims import ClaimRequest, ClaimTemplate, claim_template_of
from app.domain.cluster import (
    ClaimTemplates,
    ClusterSnapshot,
    Networks,
    ObjectName,
    Unverifiable,
    WithClaimTemplate,
    WithRuntime,
    describes_param_sets,
    runtime_key,
    snapshot_of,
    with_claim_templates,
    with_runtimes,
)
from app.domain.kinds import Kind, trainer_kind
from app.domain.network import Network, ParamSet
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.slim import slim_runtime
from tests.builders import (
    RECIPE_NAME,
    claim_template,
    configmap,
    exactly,
    network,
    param_set,
    plain_recipe,
    runtime,
    trainjob,
)


def _snapshot(*objects: object) -> ClusterSnapshot:
    return snapshot_of(objects, recipe_name=RECIPE_NAME, load_yaml=load_yaml)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("ns/name", ObjectName("ns", "name"), id="plain"),
        pytest.param("nicguard-system/r", ObjectName("nicguard-system", "r"), id="dashed"),
    ],
)
def test_object_names_parse_from_namespace_slash_name(text: str, expected: ObjectName) -> None:
    assert ObjectName.parse(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("name", id="no-slash"),
        pytest.param("/name", id="no-namespace"),
        pytest.param("ns/", id="no-name"),
        pytest.param("a/b/c", id="two-slashes"),
    ],
)
def test_malformed_object_names_are_rejected_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match=f"expected namespace/name, got {text!r}"):
        ObjectName.parse(text)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(runtime(), Kind.CLUSTER_TRAINING_RUNTIME, id="ctr"),
        pytest.param(runtime(kind=Kind.TRAINING_RUNTIME), Kind.TRAINING_RUNTIME, id="tr"),
        pytest.param(trainjob(), Kind.TRAIN_JOB, id="trainjob"),
        pytest.param(
            runtime() | {"apiVersion": "trainer.kubeflow.org"},
            Kind.CLUSTER_TRAINING_RUNTIME,
            id="no-version",
        ),
        pytest.param(runtime() | {"apiVersion": "kubeflow.org/v1"}, None, id="other-group"),
        pytest.param({"kind": "TrainJob"}, None, id="no-api-version"),
        pytest.param(network("n"), None, id="network"),
    ],
)
def test_trainer_kind_reads_group_and_kind(obj: object, expected: Kind | None) -> None:
    assert trainer_kind(obj) is expected


def test_networks_are_recognised_by_api_version_and_kind_and_keyed_by_name() -> None:
    wrong_version = network("old") | {"apiVersion": "networking.gke.io/v1alpha1"}
    wrong_kind = network("param") | {"kind": "GKENetworkParamSet"}
    nameless = network("x") | {"metadata": {}}
    snapshot = _snapshot(
        network("a"), network("b", ready=False), wrong_version, wrong_kind, nameless
    )
    networks = snapshot.networks()
    assert isinstance(networks, Networks)
    assert networks.served
    assert sorted(networks.by_name) == ["a", "b"]
    assert networks.by_name["a"] == Network("a", param_set="a", device=True)
    assert not networks.by_name["b"].usable


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        pytest.param((), RecipeMissing("nicguard-system/nicguard-recipe"), id="absent"),
        pytest.param(
            (configmap(plain_recipe(), name=ObjectName("other", "nicguard-recipe")),),
            RecipeMissing("nicguard-system/nicguard-recipe"),
            id="other-namespace",
        ),
        pytest.param(
            (configmap(plain_recipe(), name=ObjectName("nicguard-system", "other")),),
            RecipeMissing("nicguard-system/nicguard-recipe"),
            id="other-name",
        ),
        pytest.param(
            (configmap(plain_recipe()) | {"kind": "Secret"},),
            RecipeMissing("nicguard-system/nicguard-recipe"),
            id="not-a-configmap",
        ),
        pytest.param(
            (configmap(plain_recipe()) | {"apiVersion": "v2"},),
            RecipeMissing("nicguard-system/nicguard-recipe"),
            id="wrong-api-version",
        ),
    ],
)
def test_only_the_named_configmap_is_the_recipe(
    objects: tuple[object, ...], expected: RecipeMissing
) -> None:
    assert _snapshot(*objects).recipe() == expected


def test_the_recipe_ref_carries_the_resource_version_when_known() -> None:
    with_version = _snapshot(configmap(plain_recipe(), resource_version="42")).recipe()
    without = _snapshot(configmap(plain_recipe(), resource_version=None)).recipe()
    assert isinstance(with_version, Recipe)
    assert isinstance(without, Recipe)
    assert with_version.ref == "nicguard-system/nicguard-recipe@42"
    assert without.ref == "nicguard-system/nicguard-recipe"
    assert with_version.mapping is not None


def test_a_recipe_configmap_without_data_is_invalid() -> None:
    recipe = _snapshot(configmap(None)).recipe()
    assert isinstance(recipe, Recipe)
    assert recipe.problem is not None
    assert "(found: none)" in recipe.problem


def test_runtimes_are_keyed_by_kind_namespace_and_name() -> None:
    ctr = runtime("ctr")
    ctr_with_namespace = runtime("ctr2") | {"metadata": {"name": "ctr2", "namespace": "x"}}
    tr = runtime("tr", kind=Kind.TRAINING_RUNTIME, namespace="team")
    nameless = runtime("x") | {"metadata": {}}
    snapshot = _snapshot(ctr, ctr_with_namespace, tr, nameless, trainjob(), "junk", None)
    # What is kept is the slim copy (app.domain.template, tested there).
    assert snapshot.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "anywhere", "ctr") == slim_runtime(ctr)
    assert snapshot.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "ctr2") == slim_runtime(
        ctr_with_namespace
    )
    assert snapshot.runtime(Kind.TRAINING_RUNTIME, "team", "tr") == slim_runtime(tr)
    assert snapshot.runtime(Kind.TRAINING_RUNTIME, "other", "tr") is None
    assert snapshot.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "tr") is None
    assert snapshot.runtime(Kind.TRAIN_JOB, "team", "job") is None


def test_with_runtimes_adds_and_replaces_runtimes() -> None:
    old, new = runtime("a"), runtime("a", labels={"v": "2"})
    extra = runtime("tr", kind=Kind.TRAINING_RUNTIME)
    snapshot = with_runtimes(
        _snapshot(old, network("n")),
        {
            runtime_key(Kind.CLUSTER_TRAINING_RUNTIME, "ns", "a"): new,
            runtime_key(Kind.TRAINING_RUNTIME, "team", "tr"): extra,
        },
    )
    assert snapshot.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "a") == new
    assert snapshot.runtime(Kind.TRAINING_RUNTIME, "team", "tr") == extra
    assert snapshot.networks() == _snapshot(network("n")).networks()


def test_an_unverifiable_runtime_state_stays_unverifiable() -> None:
    unknown = Unverifiable("runtimes cache not synced")
    snapshot = ClusterSnapshot(Networks({}), RecipeMissing("a/b"), unknown)
    assert with_runtimes(snapshot, {runtime_key(Kind.TRAINING_RUNTIME, "t", "x"): {}}) is snapshot
    assert snapshot.runtime(Kind.TRAINING_RUNTIME, "t", "x") == unknown
    assert snapshot.recipe() == RecipeMissing("a/b")


def test_with_claim_templates_adds_and_replaces_templates() -> None:
    old = claim_template("default-rdma", exactly(mode="ExactCount", count=1))
    new, extra = claim_template("default-rdma"), claim_template("imex")
    snapshot = _snapshot(old, network("n"))
    added = with_claim_templates(
        snapshot, [t for t in map(claim_template_of, (new, extra)) if t is not None]
    )
    templates = added.claim_templates()
    assert isinstance(templates, ClaimTemplates)
    assert templates.get("team", "default-rdma") == claim_template_of(new)
    assert templates.get("team", "imex") == claim_template_of(extra)
    assert added.networks() == snapshot.networks()
    unknown = replace(snapshot, claim_template_state=Unverifiable("not synced"))
    assert with_claim_templates(unknown, templates.by_key.values()) is unknown


def test_a_view_with_a_claim_template_adds_it_and_reads_the_rest_through() -> None:
    ctr = runtime("a")
    base = _snapshot(ctr, network("n"), claim_template("default-rdma"))
    added = claim_template_of(claim_template("my-rdma"))
    assert added is not None
    view = WithClaimTemplate(base, added)
    templates = view.claim_templates()
    assert isinstance(templates, ClaimTemplates)
    assert templates.get("team", "my-rdma") == added
    assert templates.get("team", "default-rdma") is not None
    assert view.networks() == base.networks()
    assert view.recipe() == base.recipe()
    assert view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "a") == base.runtime(
        Kind.CLUSTER_TRAINING_RUNTIME, "", "a"
    )
    assert view.runtimes() == base.runtimes()
    unknown = replace(base, claim_template_state=Unverifiable("not synced"))
    assert WithClaimTemplate(unknown, added).claim_templates() == Unverifiable("not synced")


@pytest.mark.parametrize(
    ("kind", "namespace", "expected"),
    [
        pytest.param(
            Kind.CLUSTER_TRAINING_RUNTIME, "ns", (Kind.CLUSTER_TRAINING_RUNTIME, "", "n"), id="ctr"
        ),
        pytest.param(Kind.TRAINING_RUNTIME, "ns", (Kind.TRAINING_RUNTIME, "ns", "n"), id="tr"),
    ],
)
def test_a_cluster_training_runtime_key_ignores_the_namespace(
    kind: Kind, namespace: str, expected: tuple[Kind, str, str]
) -> None:
    assert runtime_key(kind, namespace, "n") == expected


def test_a_state_describes_param_sets_only_when_it_holds_some() -> None:
    gnp = {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": "gpu-nic-0"},
        "spec": {"deviceMode": "NetDevice"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    nameless = {**gnp, "metadata": {}}
    described = snapshot_of(
        [network("gpu-nic-0"), gnp, nameless], recipe_name=RECIPE_NAME, load_yaml=load_yaml
    )
    assert isinstance(described.network_state, Networks)
    assert described.network_state.param_sets == {
        "gpu-nic-0": ParamSet("gpu-nic-0", "", "NetDevice")
    }
    silent = snapshot_of([network("gpu-nic-0")], recipe_name=RECIPE_NAME, load_yaml=load_yaml)
    assert isinstance(silent.network_state, Networks)
    assert silent.network_state.param_sets is None  # not described: their checks are skipped


def test_only_networks_without_param_sets_leave_their_checks_undescribed() -> None:
    described = snapshot_of(
        [network("gpu-nic-0"), param_set("gpu-nic-0")], recipe_name=RECIPE_NAME, load_yaml=load_yaml
    )
    silent = snapshot_of([network("gpu-nic-0")], recipe_name=RECIPE_NAME, load_yaml=load_yaml)
    unknown = ClusterSnapshot(Unverifiable("networks cache not synced"), RecipeMissing(ref="x"), {})
    assert (describes_param_sets(described), describes_param_sets(silent)) == (True, False)
    assert describes_param_sets(unknown)  # nothing to skip: the rules say it cannot decide


def test_resource_claim_templates_are_keyed_by_namespace_and_name() -> None:
    snapshot = _snapshot(
        claim_template("a", namespace="team"),
        claim_template("a", namespace=None),
        claim_template("b", exactly(mode=None)),
        {**claim_template("old"), "apiVersion": "resource.k8s.io/v1beta1"},
    )
    templates = snapshot.claim_templates()
    assert isinstance(templates, ClaimTemplates)
    assert sorted(templates.by_key) == [("default", "a"), ("team", "a"), ("team", "b")]
    assert templates.served
    assert templates.get("team", "b") == ClaimTemplate(
        "team", "b", (ClaimRequest("rdma", "mrdma.google.com"),)
    )
    assert templates.get("team", "old") is None


def test_a_view_without_templates_has_none_and_serves_the_api() -> None:
    snapshot = ClusterSnapshot(Networks({}), RecipeMissing("a/b"), {})
    assert snapshot.claim_templates() == ClaimTemplates({}, served=True)


def test_added_runtimes_and_a_fetched_runtime_keep_the_templates() -> None:
    snapshot = _snapshot(claim_template("a"))
    extra = with_runtimes(snapshot, {runtime_key(Kind.TRAINING_RUNTIME, "t", "x"): {}})
    assert extra.claim_templates() == snapshot.claim_templates()
    fetched = WithRuntime(snapshot, runtime_key(Kind.TRAINING_RUNTIME, "t", "x"), None)
    assert fetched.claim_templates() == snapshot.claim_templates()
