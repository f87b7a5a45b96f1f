"""POST /validate for the door claimtemplates.nicguard.dev: CREATE of a ResourceClaimTemplate
whose name a DRA-bound runtime uses, over the in-process ASGI client against examples/dranet."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.documents import load_yaml
from app.domain.cluster import ClusterSnapshot, snapshot_of
from app.domain.policy import Policy, Protect
from app.files.state import load_objects
from tests.builders import ONE_NIC_SELECTOR, RDMA, claim_template, exactly
from tests.web.conftest import EXAMPLES, RECIPE, make_client

TEMPLATE = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaimTemplate"}


@pytest.fixture(scope="module")
def dranet() -> ClusterSnapshot:
    """examples/dranet/cluster: ClusterTrainingRuntime torch-distributed-dranet, bound to
    a4-dranet, names default-rdma."""
    objects = (o.obj for o in load_objects([EXAMPLES / "dranet" / "cluster"]))
    return snapshot_of(objects, recipe_name=RECIPE, load_yaml=load_yaml)


def _review(template: dict[str, object], operation: str = "CREATE", **request: Any) -> object:
    metadata = template["metadata"]
    assert isinstance(metadata, dict)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": TEMPLATE,
            "operation": operation,
            "namespace": metadata["namespace"],
            "name": metadata["name"],
            "userInfo": {"username": "alice"},
            "object": template,
            **request,
        },
    }


def _post(client: TestClient, review: object) -> dict[str, Any]:
    reply = client.post("/validate", json=review)
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    return response


def test_default_rdma_recreated_with_one_nic_is_refused_naming_the_runtime(
    dranet: ClusterSnapshot,
) -> None:
    one_nic = claim_template("default-rdma", exactly(mode=None), namespace="team-b")
    response = _post(make_client(dranet)[0], _review(one_nic))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403
    assert status["message"] == (
        "ResourceClaimTemplate/team-b/default-rdma: [RdmaClaimMismatch] ResourceClaimTemplate "
        f"team-b/default-rdma requests 1 {RDMA} device, but ClusterTrainingRuntime "
        "torch-distributed-dranet, bound to profile a4-dranet (8 RDMA NICs per node), names it: "
        f"request exactly one {RDMA}, allocationMode All or ExactCount count 8"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "RdmaClaimMismatch",
            "field": "spec.spec.devices.requests[0]",
            "message": "ClusterTrainingRuntime torch-distributed-dranet",
        }
    ]
    assert response["auditAnnotations"]["violations"] == "RdmaClaimMismatch"


def test_a_selector_is_refused_saying_so_and_all_nics_or_another_name_are_allowed(
    dranet: ClusterSnapshot,
) -> None:
    client = make_client(dranet)[0]
    narrowed = claim_template(
        "default-rdma", exactly(selectors=ONE_NIC_SELECTOR), namespace="team-b"
    )
    refused = _post(client, _review(narrowed))
    assert "with selectors" in refused["status"]["message"]
    assert refused["status"]["details"]["causes"][0]["field"] == (
        "spec.spec.devices.requests[0].exactly.selectors"
    )
    for allowed in (
        claim_template("default-rdma", namespace="team-b"),
        claim_template("rdma-one-nic", exactly(mode=None), namespace="team-b"),
    ):
        assert (_post(client, _review(allowed))["allowed"], allowed["metadata"]) == (
            True,
            allowed["metadata"],
        )


def test_protect_warn_admits_with_the_line_and_off_admits_silently(
    dranet: ClusterSnapshot,
) -> None:
    one_nic = claim_template("default-rdma", exactly(mode=None), namespace="team-b")
    warned = _post(make_client(dranet, Policy(protect=Protect.WARN))[0], _review(one_nic))
    assert warned["allowed"] is True
    assert warned["warnings"][0].startswith("[RdmaClaimMismatch] ResourceClaimTemplate team-b/")
    off = _post(make_client(dranet, Policy(protect=Protect.OFF))[0], _review(one_nic))
    assert (off["allowed"], off.get("warnings")) == (True, None)


@pytest.mark.parametrize(
    ("operation", "request_"),
    [
        pytest.param("UPDATE", {}, id="update"),
        pytest.param("DELETE", {"object": None}, id="delete"),
        pytest.param(
            "CREATE",
            {"userInfo": {"username": "system:serviceaccount:kube-system:namespace-controller"}},
            id="namespace-controller",
        ),
    ],
)
def test_only_creates_are_judged(
    dranet: ClusterSnapshot, operation: str, request_: dict[str, object]
) -> None:
    one_nic = claim_template("default-rdma", exactly(mode=None), namespace="team-b")
    response = _post(make_client(dranet)[0], _review(one_nic, operation, **request_))
    assert response["allowed"] is True
