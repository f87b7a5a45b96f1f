"""POST /validate over the in-process ASGI client: every docs/rules.md rule."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.claimants import Claimant
from app.domain.cluster import ClusterSnapshot, Networks, Unverifiable
from app.domain.policy import OnUnverifiable, Policy
from tests.web.conftest import make_client, sample_review

DRIFTED = "ClusterTrainingRuntime/torch-distributed-tcpxo: [MappingDivergesFromRecipe]"


def post(client: TestClient, review: object) -> dict[str, Any]:
    reply = client.post("/validate", json=review)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert "patch" not in body["response"]
    return body["response"]  # type: ignore[no-any-return]


def test_good_runtime_is_allowed_and_uid_echoed(client: TestClient) -> None:
    review = sample_review("good-runtime")
    response = post(client, review)
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True
    assert "status" not in response
    assert response["auditAnnotations"] == {
        "decision": "allowed",
        "violations": "",
        "recipe": "nicguard-system/nicguard-recipe@48213",
    }


def test_drifted_runtime_is_denied_with_causes(client: TestClient) -> None:
    response = post(client, sample_review("drifted-runtime"))
    assert response["allowed"] is False
    status = response["status"]
    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert status["message"].startswith(DRIFTED)
    assert "eth4->gpu-nic-3" in status["message"]
    assert "eth3->gpu-nic-2" in status["message"]
    (cause,) = status["details"]["causes"]
    assert cause["reason"] == "MappingDivergesFromRecipe"
    assert cause["field"].endswith("annotations[networking.gke.io/interfaces][3]")
    assert response["auditAnnotations"]["decision"] == "denied"
    assert response["auditAnnotations"]["violations"] == "MappingDivergesFromRecipe"


def test_trainjob_patch_drift_is_denied(client: TestClient) -> None:
    response = post(client, sample_review("trainjob-patch-drift"))
    assert response["allowed"] is False
    assert response["status"]["details"]["causes"][0]["field"].startswith("spec.runtimePatches[0]")


def test_dry_run_is_judged_like_a_real_request(client: TestClient) -> None:
    review = sample_review("drifted-runtime")
    review["request"]["dryRun"] = True
    assert post(client, review)["allowed"] is False


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"subResource": "status"}, id="status subresource"),
        pytest.param({"operation": "DELETE", "object": None}, id="delete"),
        pytest.param({"operation": "CONNECT", "object": None}, id="connect"),
        pytest.param({"kind": {"group": "", "version": "v1", "kind": "Pod"}}, id="other kind"),
    ],
)
def test_requests_that_are_not_judged_are_allowed(
    client: TestClient, change: dict[str, object]
) -> None:
    review = sample_review("drifted-runtime")
    review["request"].update(change)
    response = post(client, review)
    assert response["allowed"] is True
    assert response["auditAnnotations"]["decision"] == "allowed"


def test_finalizer_removal_of_an_object_being_deleted_is_allowed(client: TestClient) -> None:
    review = sample_review("drifted-runtime")
    request = review["request"]
    request["operation"] = "UPDATE"
    request["object"]["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    request["oldObject"] = json.loads(json.dumps(request["object"]))
    request["oldObject"]["metadata"]["finalizers"] = ["example.com/hold"]
    assert post(client, review)["allowed"] is True


def test_a_spec_change_of_an_object_being_deleted_is_judged(client: TestClient) -> None:
    review = sample_review("drifted-runtime")
    request = review["request"]
    request["operation"] = "UPDATE"
    request["object"]["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    request["oldObject"] = json.loads(json.dumps(request["object"]))
    request["oldObject"]["spec"] = {}
    assert post(client, review)["allowed"] is False


def test_update_leaving_wiring_untouched_keeps_old_violation_as_warning(client: TestClient) -> None:
    review = sample_review("drifted-runtime")
    request = review["request"]
    request["operation"] = "UPDATE"
    request["oldObject"] = json.loads(json.dumps(request["object"]))
    request["object"]["metadata"]["labels"] = {"team": "ml-platform"}
    response = post(client, review)
    assert response["allowed"] is True
    assert any("MappingDivergesFromRecipe" in w for w in response["warnings"])
    assert all(len(w) <= 120 for w in response["warnings"])


def test_update_changing_wiring_gets_the_full_verdict(client: TestClient) -> None:
    good = sample_review("good-runtime")["request"]["object"]
    review = sample_review("drifted-runtime")
    review["request"]["operation"] = "UPDATE"
    review["request"]["oldObject"] = good
    assert post(client, review)["allowed"] is False


def test_long_denials_are_cut_to_one_kibibyte_with_a_count(client: TestClient) -> None:
    review = sample_review("drifted-runtime")
    entries = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": f"nic:{i}", "network": f"missing-network-{i}"} for i in range(60)
    ]
    template = review["request"]["object"]["spec"]["template"]["spec"]["replicatedJobs"][0]
    annotations = template["template"]["spec"]["template"]["metadata"]["annotations"]
    annotations["networking.gke.io/interfaces"] = json.dumps(entries)
    status = post(client, review)["status"]
    assert len(status["message"].encode()) <= 1024
    assert "more (see details.causes)" in status["message"]
    assert status["details"]["causes"][0]["reason"] == "InterfaceNameInvalid"


def test_unverifiable_state_denies_with_503(example_state: ClusterSnapshot) -> None:
    view = ClusterSnapshot(
        Unverifiable("cache networks not synced"), example_state.recipe_state, {}
    )
    client, _ = make_client(view)
    status = post(client, sample_review("good-runtime"))["status"]
    assert status["code"] == 503
    assert status["reason"] == "ServiceUnavailable"
    assert "[ClusterStateUnavailable]" in status["message"]


def test_unverifiable_state_can_be_allowed_with_a_warning(example_state: ClusterSnapshot) -> None:
    view = ClusterSnapshot(Unverifiable("not synced"), example_state.recipe_state, {})
    client, _ = make_client(view, Policy(on_unverifiable=OnUnverifiable.ALLOW))
    response = post(client, sample_review("good-runtime"))
    assert response["allowed"] is True
    assert response["warnings"][0].startswith("[ClusterStateUnavailable]")


class _BrokenView:
    """A cluster view whose Network lookup fails: stands in for a bug in the rules."""

    def networks(self) -> Networks:
        raise RuntimeError("boom")

    def recipe(self) -> Unverifiable:
        return Unverifiable("n/a")

    def runtime(self, *_: object) -> None:
        return None

    def runtimes(self) -> Unverifiable:
        return Unverifiable("n/a")

    def claim_templates(self) -> Unverifiable:
        return Unverifiable("n/a")

    def claimants(self) -> tuple[Claimant, ...]:
        return ()


def test_a_bug_denies_in_band_and_never_returns_5xx(caplog: pytest.LogCaptureFixture) -> None:
    client, _ = make_client(_BrokenView(), Policy(recipe_runtimes=frozenset({"other"})))
    with caplog.at_level(logging.ERROR, logger="nicguard.decisions"):
        response = post(client, sample_review("good-runtime"))
    assert response["allowed"] is False
    assert "internal error" in response["status"]["message"]
    assert any(r.exc_info for r in caplog.records)


def test_one_audit_line_per_decision_without_the_body(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="nicguard.decisions"):
        post(client, sample_review("drifted-runtime"))
    (record,) = [r for r in caplog.records if getattr(r, "event_type", "") == "admission_decision"]
    fields = vars(record)
    assert fields["admission_uid"] == "6f1f4a2e-0d7c-4d8e-9a57-1c2b3d4e5f60"
    assert fields["operation"] == "CREATE"
    assert fields["dry_run"] is False
    assert fields["resource_kind"] == "ClusterTrainingRuntime"
    assert fields["resource_name"] == "torch-distributed-tcpxo"
    assert fields["request_username"] == "alice@example.com"
    assert fields["allowed"] is False
    assert fields["violation_codes"] == ["MappingDivergesFromRecipe"]
    assert fields["recipe"] == "nicguard-system/nicguard-recipe@48213"
    assert fields["duration_ms"] >= 0
    assert "tcpxo-daemon" not in json.dumps(fields, default=str)


def test_metrics_count_decisions_and_violations(example_state: ClusterSnapshot) -> None:
    client, metrics = make_client(example_state)
    post(client, sample_review("drifted-runtime"))
    text = metrics.render().decode()
    assert (
        'nicguard_admission_requests_total{decision="denied",dry_run="false",'
        'kind="ClusterTrainingRuntime",operation="CREATE"} 1.0'
    ) in text
    assert 'nicguard_violations_total{code="MappingDivergesFromRecipe"} 1.0' in text
    assert 'nicguard_cache_synced{cache="files"} 1.0' in text


def test_metrics_count_every_decision_by_its_labels(example_state: ClusterSnapshot) -> None:
    client, metrics = make_client(example_state)
    for name in ("drifted-runtime", "good-runtime", "drifted-runtime"):
        post(client, sample_review(name))
    dry_run = sample_review("drifted-runtime")
    dry_run["request"]["dryRun"] = True
    post(client, dry_run)
    text = metrics.render().decode()
    labels = 'dry_run="{}",kind="ClusterTrainingRuntime",operation="CREATE"'
    assert (
        f'nicguard_admission_requests_total{{decision="denied",{labels.format("false")}}} 2.0'
        in text
    )
    assert (
        f'nicguard_admission_requests_total{{decision="allowed",{labels.format("false")}}} 1.0'
        in text
    )
    assert (
        f'nicguard_admission_requests_total{{decision="denied",{labels.format("true")}}} 1.0'
        in text
    )
    assert 'nicguard_violations_total{code="MappingDivergesFromRecipe"} 3.0' in text
    assert "nicguard_admission_duration_seconds_count 4.0" in text
