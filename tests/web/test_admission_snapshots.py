"""POST /validate for Trainer's runtime snapshots and recipe updates: the adapter decodes the
YAML (data.runtime, the old and new recipe) and the core judges it, over the in-process ASGI
client against examples/cluster (as file-mode ``serve`` answers)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from app.documents import load_yaml
from app.domain.cluster import snapshot_of
from app.files.state import load_objects
from tests.support.claimed_snapshots import DRANET_STATE, FOLDED, TAMPERED, claimed_copy
from tests.support.paths import ROOT, UPSTREAM
from tests.web.conftest import RECIPE, make_client

FIXTURES = UPSTREAM / "trainer-v2.3.0/snapshots"
CONFIGMAP = {"group": "", "version": "v1", "kind": "ConfigMap"}
EXAMPLES = ROOT / "examples"


def _snapshot(variant: str = "v2.3.0") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        (FIXTURES / f"tj-runtime-snapshot-{variant}.yaml").read_text()
    )
    return loaded


def _review(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata = obj["metadata"]
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": CONFIGMAP,
        "operation": "CREATE" if old is None else "UPDATE",
        "namespace": metadata["namespace"],
        "name": metadata["name"],
        "userInfo": {"username": "system:serviceaccount:kubeflow-system:kubeflow-trainer"},
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _post(client: TestClient, review: object) -> dict[str, Any]:
    reply = client.post("/validate", json=review)
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    return response


def _swapped(obj: dict[str, Any]) -> dict[str, Any]:
    tampered = copy.deepcopy(obj)
    text = tampered["data"]["runtime"]
    text = text.replace('"gpu-nic-2"', '"X"').replace('"gpu-nic-3"', '"gpu-nic-2"')
    tampered["data"]["runtime"] = text.replace('"X"', '"gpu-nic-3"')
    return tampered


def test_trainers_own_snapshots_are_admitted(client: TestClient) -> None:
    for variant in ("v2.3.0", "fixed"):
        response = _post(client, _review(_snapshot(variant)))
        assert response["allowed"] is True, response
        assert "warnings" not in response


def test_a_tampered_snapshot_is_denied_naming_its_trainjob_and_runtime(client: TestClient) -> None:
    response = _post(client, _review(_swapped(_snapshot()), old=_snapshot()))
    assert response["allowed"] is False
    status = response["status"]
    assert status["message"].startswith(
        "ConfigMap/team-a/tj-runtime-snapshot: [MappingDivergesFromRecipe] ConfigMap "
        "team-a/tj-runtime-snapshot (runtime snapshot of TrainJob team-a/tj: "
        "ClusterTrainingRuntime torch-distributed-tcpxo): at position eth3"
    )
    (cause,) = status["details"]["causes"]
    assert cause["field"].startswith("data.runtime: spec.template.spec.replicatedJobs[0]")
    assert response["auditAnnotations"]["violations"] == "MappingDivergesFromRecipe"


def test_a_snapshot_that_is_not_yaml_is_runtime_snapshot_invalid(client: TestClient) -> None:
    broken = _snapshot()
    broken["data"]["runtime"] = "metadata: [unclosed"
    response = _post(client, _review(broken))
    assert response["status"]["details"]["causes"][0]["reason"] == "RuntimeSnapshotInvalid"


def test_a_configmap_without_a_trainjob_controller_is_not_judged(client: TestClient) -> None:
    plain = _swapped(_snapshot())
    del plain["metadata"]["ownerReferences"]
    response = _post(client, _review(plain))
    assert response["allowed"] is True
    assert response["auditAnnotations"]["decision"] == "allowed"


@pytest.mark.parametrize(
    "respelled",
    [
        pytest.param({"kind": "trainjob"}, id="kind-in-lower-case"),
        pytest.param({"apiVersion": "example.com/v1"}, id="another-group"),
        pytest.param({"kind": "Deployment", "apiVersion": "apps/v1"}, id="another-kind"),
    ],
)
def test_a_tampered_snapshot_whose_owner_is_spelled_otherwise_is_denied(
    client: TestClient, respelled: dict[str, str]
) -> None:
    """Trainer checks only the controller's UID: the copy is used, so it is judged, and named
    by the owner's name."""
    tampered = _swapped(_snapshot())
    (owner,) = tampered["metadata"]["ownerReferences"]
    owner.update(respelled)
    response = _post(client, _review(tampered, old=_snapshot()))
    assert response["allowed"] is False
    assert "(runtime snapshot of TrainJob team-a/tj: " in response["status"]["message"]
    assert response["auditAnnotations"]["violations"] == "MappingDivergesFromRecipe"


def test_a_look_alike_without_a_runtime_key_owned_by_something_else_is_not_judged(
    client: TestClient,
) -> None:
    dashboard = _snapshot()
    dashboard["metadata"]["name"] = "grafana-runtime-snapshot"
    (owner,) = dashboard["metadata"]["ownerReferences"]
    owner.update(apiVersion="apps/v1", kind="Deployment", name="grafana")
    dashboard["data"] = {"dashboard.json": "{}"}
    response = _post(client, _review(dashboard))
    assert response["allowed"] is True
    assert "warnings" not in response


def _recipe() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        (EXAMPLES / "cluster/recipe-configmap.yaml").read_text()
    )
    return loaded


def test_a_recipe_update_that_switches_it_off_is_recipe_in_use(client: TestClient) -> None:
    old = _recipe()
    new = copy.deepcopy(old)
    result = yaml.safe_load(new["data"]["recipe.yaml"])
    for component in result["componentRefs"]:
        if component["name"] == "kubeflow-trainer":
            component["overrides"]["enabled"] = False
    new["data"]["recipe.yaml"] = json.dumps(result)
    response = _post(client, _review(new, old=old))
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["reason"] == "RecipeInUse"


@pytest.fixture(scope="module")
def dranet_client() -> TestClient:
    """Against examples/dranet/cluster: namespace team-a's ResourceClaimTemplates."""
    objects = (o.obj for o in load_objects([DRANET_STATE]))
    return make_client(snapshot_of(objects, recipe_name=RECIPE, load_yaml=load_yaml))[0]


@pytest.mark.parametrize("tampering", list(TAMPERED))
def test_a_snapshot_whose_claims_trainer_reads_by_folding_is_refused(
    dranet_client: TestClient, tampering: str
) -> None:
    response = _post(dranet_client, _review(claimed_copy()))
    assert response["allowed"] is True, response
    response = _post(dranet_client, _review(claimed_copy(TAMPERED[tampering]), old=claimed_copy()))
    assert response["allowed"] is False
    (cause,) = response["status"]["details"]["causes"]
    assert (cause["reason"], cause["field"]) == ("RuntimeSnapshotInvalid", "data.runtime")
    # The cause's message is cut to 256 bytes; the status message holds all of it.
    message = response["status"]["message"]
    assert message.startswith(
        "ConfigMap/team-a/tj-runtime-snapshot: [RuntimeSnapshotInvalid] ConfigMap "
        "team-a/tj-runtime-snapshot (runtime snapshot of TrainJob team-a/tj): the copy in "
        "data.runtime cannot be read as Trainer reads it: "
    )
    assert f"{FOLDED[tampering]}` may be read by Trainer as" in message
    assert response["auditAnnotations"]["violations"] == "RuntimeSnapshotInvalid"
