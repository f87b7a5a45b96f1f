"""The workload doors over HTTP (app.web.admission): a wired Pod, a gated Pod's swapped wiring
and a queued JobSet's swapped or removed annotation, through the app the webhook serves. Over
TLS: tests/test_serve.py."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.domain.cluster import ClusterSnapshot
from app.domain.policy import Policy, Workloads
from tests.web.conftest import make_client, sample_review

POD_MESSAGE = (
    "Pod/team-a/llama-node-0-1-x2k9p: [NetworkMisplaced] Pod team-a/llama-node-0-1-x2k9p (of Job "
    "team-a/llama-node-0): Networks on another interface than the recipe gives them: "
    "eth1->gpu-nic-1 (the recipe places gpu-nic-1 on eth2), eth2->gpu-nic-0 (the recipe places "
    "gpu-nic-0 on eth1) (recipe nicguard-system/nicguard-recipe@48213)"
)

NODE_INTERFACES = (
    "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
    "[networking.gke.io/interfaces]"
)


def _response(client: TestClient, review: dict[str, Any]) -> dict[str, Any]:
    reply = client.post("/validate", json=review)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()["response"]
    return answer


def test_a_misplaced_pod_is_refused_naming_itself_and_its_job(client: TestClient) -> None:
    response = _response(client, sample_review("misplaced-pod"))
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"] == POD_MESSAGE
    (cause,) = response["status"]["details"]["causes"]
    assert cause["field"] == "metadata.annotations[networking.gke.io/interfaces]"
    assert response["auditAnnotations"]["violations"] == "NetworkMisplaced"


def test_a_pod_update_keeping_its_wiring_is_not_judged(client: TestClient) -> None:
    review = sample_review("misplaced-pod")
    review["request"]["operation"] = "UPDATE"
    review["request"]["oldObject"] = review["request"]["object"]
    response = _response(client, review)
    assert response["allowed"] is True
    assert "warnings" not in response


def test_a_gated_pods_swapped_wiring_is_refused_as_at_create(client: TestClient) -> None:
    review = sample_review("swapped-gated-pod")
    assert review["request"]["object"]["spec"]["schedulingGates"]
    response = _response(client, review)
    assert response["allowed"] is False
    assert response["status"]["message"] == POD_MESSAGE
    assert "grandfathered" not in response["auditAnnotations"]


def test_a_pod_update_removing_its_wiring_is_allowed(client: TestClient) -> None:
    review = sample_review("swapped-gated-pod")
    del review["request"]["object"]["metadata"]["annotations"]
    response = _response(client, review)
    assert response["allowed"] is True
    assert "warnings" not in response


def test_a_queued_jobsets_removed_wiring_is_refused(client: TestClient) -> None:
    response = _response(client, sample_review("unwired-jobset-patch"))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "JobSet/team-a/llama: [InterfacesAnnotationMissing] JobSet team-a/llama: node job: the "
        "update removes the networking.gke.io/interfaces annotation from the node pod template: "
        "the Jobs the JobSet creates from it from then on (a Job re-created on failure is one) "
        "would get no GPU NICs, only eth0"
    )
    (cause,) = response["status"]["details"]["causes"]
    assert cause["field"] == NODE_INTERFACES


def test_a_queued_jobsets_swapped_annotation_is_refused(client: TestClient) -> None:
    response = _response(client, sample_review("queued-jobset-patch"))
    assert response["allowed"] is False
    (line,) = response["status"]["message"].splitlines()
    assert line.startswith(
        "JobSet/team-a/llama: [NetworkMisplaced] JobSet team-a/llama: node job: Networks on "
        "another interface than the recipe gives them: eth1->gpu-nic-1 "
    )
    (cause,) = response["status"]["details"]["causes"]
    assert cause["field"] == NODE_INTERFACES


def test_a_jobset_update_keeping_the_wiring_is_allowed(client: TestClient) -> None:
    review = sample_review("queued-jobset-patch")
    review["request"]["object"] = review["request"]["oldObject"]
    assert _response(client, review)["allowed"] is True


def test_workloads_warn_allows_a_misplaced_pod_with_its_message_as_a_warning(
    example_state: ClusterSnapshot,
) -> None:
    client, _ = make_client(example_state, Policy(workloads=Workloads.WARN))
    response = _response(client, sample_review("misplaced-pod"))
    assert response["allowed"] is True
    assert response["warnings"][0].startswith(
        "[NetworkMisplaced] Pod team-a/llama-node-0-1-x2k9p (of Job team-a/llama-node-0): "
    )
    assert response["auditAnnotations"]["decision"] == "allowed"


def test_a_wired_pod_as_the_apiserver_sends_it_is_allowed(client: TestClient) -> None:
    # Captured from kube-apiserver: defaulted spec, managedFields, the recipe's eight Networks.
    review = sample_review("served-pod")
    assert review["request"]["object"]["metadata"]["managedFields"]
    response = _response(client, review)
    assert response["allowed"] is True
    assert response["uid"] == review["request"]["uid"]
    assert "warnings" not in response


def _status_write(review: dict[str, Any]) -> dict[str, Any]:
    """``review``'s Pod UPDATE made through ``pods/status``, as a kubelet or operator makes it."""
    review["request"]["subResource"] = "status"
    return review


def test_a_status_write_that_rewires_a_pod_is_judged_as_its_update(client: TestClient) -> None:
    response = _response(client, _status_write(sample_review("swapped-gated-pod")))
    assert response["allowed"] is False
    assert response["status"]["message"] == POD_MESSAGE


def test_a_status_write_keeping_the_wiring_is_not_judged(client: TestClient) -> None:
    review = _status_write(sample_review("misplaced-pod"))
    review["request"]["operation"] = "UPDATE"
    review["request"]["oldObject"] = review["request"]["object"]
    assert _response(client, review)["allowed"] is True


def _binding(annotations: dict[str, str], *, resource: str = "pods") -> dict[str, Any]:
    """A ``pods/binding`` CREATE (or one of the older ``bindings`` resource) of Pod
    team-a/llama-node-0-1-x2k9p carrying ``annotations``."""
    review = sample_review("misplaced-pod")
    request = review["request"]
    request["kind"] = request["requestKind"] = {"group": "", "version": "v1", "kind": "Binding"}
    request["resource"] = request["requestResource"] = {
        "group": "",
        "version": "v1",
        "resource": resource,
    }
    if resource == "pods":
        request["subResource"] = request["requestSubResource"] = "binding"
    request["userInfo"] = {"username": "system:serviceaccount:team-a:binder"}
    request["object"] = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": "llama-node-0-1-x2k9p",
            "namespace": "team-a",
            "annotations": annotations,
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1"},
    }
    return review


MISSING_EIGHT = (
    '[{"interfaceName":"eth0","network":"default"},'
    '{"interfaceName":"eth8","network":"gpu-nic-missing"}]'
)


def test_a_binding_carrying_wiring_is_judged_as_the_pods_new_wiring(client: TestClient) -> None:
    for resource in ("pods", "bindings"):
        response = _response(
            client, _binding({"networking.gke.io/interfaces": MISSING_EIGHT}, resource=resource)
        )
        assert response["allowed"] is False, resource
        assert response["auditAnnotations"]["violations"] == "NetworkNotFound"
        assert response["status"]["message"].startswith(
            "Binding/team-a/llama-node-0-1-x2k9p: [NetworkNotFound] Pod "
            "team-a/llama-node-0-1-x2k9p: no Network object exists for "
        )


def test_a_binding_without_wiring_is_allowed(client: TestClient) -> None:
    assert _response(client, _binding({"note": "scheduled"}))["allowed"] is True
    assert _response(client, _binding({}))["allowed"] is True
