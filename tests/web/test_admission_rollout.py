"""POST /validate: enforcement=warn, grandfathered codes, TrainJob attribution and the order
warning, as the apiserver sees them (docs/rules.md, docs/rollout.md)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from app.documents import load_yaml
from app.domain.cluster import ClusterSnapshot, snapshot_of
from app.domain.fields import str_at
from app.domain.policy import Enforcement, Policy
from app.files.state import load_objects
from app.web.response import WARNING_MAX_CHARS
from tests.web.conftest import EXAMPLES, RECIPE, make_client, sample_review

WARN = Policy(enforcement=Enforcement.WARN)
RECIPE_REF = "nicguard-system/nicguard-recipe@48213"
DRIFT_LINE = (
    "[MappingDivergesFromRecipe] at position eth3 the object maps eth4->gpu-nic-3 but the recipe "
    "records eth3->gpu-nic-2"
)


def post(client: TestClient, review: object) -> dict[str, Any]:
    reply = client.post("/validate", json=review)
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    assert "patch" not in response
    return response


def example(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / path).read_text())
    return loaded


def review_of(
    obj: dict[str, Any], *, operation: str = "CREATE", old: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An AdmissionReview as the apiserver sends it for ``obj`` (a Trainer object)."""
    review = sample_review("drifted-runtime")
    request = review["request"]
    kind, metadata = obj["kind"], obj["metadata"]
    request["kind"] = request["requestKind"] = {**request["kind"], "kind": kind}
    plural = f"{kind.lower()}s"
    request["resource"] = request["requestResource"] = {**request["resource"], "resource": plural}
    request["name"] = metadata["name"]
    if "namespace" in metadata:
        request["namespace"] = metadata["namespace"]
    request["operation"] = operation
    request["object"] = obj
    request["oldObject"] = old
    return review


def state_with(*replacements: Path) -> ClusterSnapshot:
    """The example cluster, with the objects of ``replacements`` in place of their namesakes."""
    replaced = [o.obj for o in load_objects(list(replacements))]
    names = {(str_at(o, "kind"), str_at(o, "metadata", "name")) for o in replaced}
    kept = (
        o.obj
        for o in load_objects([EXAMPLES / "cluster"])
        if (str_at(o.obj, "kind"), str_at(o.obj, "metadata", "name")) not in names
    )
    return snapshot_of([*kept, *replaced], recipe_name=RECIPE, load_yaml=load_yaml)


@pytest.fixture(scope="module")
def drifted_state() -> ClusterSnapshot:
    """The installed TCPXO runtime drifted (eth3/eth4 swapped), e.g. under break-glass."""
    return state_with(EXAMPLES / "objects" / "drifted-runtime.yaml")


def decision_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event_type", "") == "admission_decision"]


# --- enforcement=warn ---------------------------------------------------------------------------


def test_warn_allows_a_denial_with_its_lines_as_warnings_audited_logged_and_counted(
    example_state: ClusterSnapshot, caplog: pytest.LogCaptureFixture
) -> None:
    client, metrics = make_client(example_state, WARN)
    with caplog.at_level(logging.INFO, logger="nicguard.decisions"):
        response = post(client, sample_review("drifted-runtime"))
    assert response["allowed"] is True
    assert "status" not in response
    (warning,) = response["warnings"]
    assert len(warning) <= WARNING_MAX_CHARS
    assert warning.startswith(DRIFT_LINE[: WARNING_MAX_CHARS - 1])
    assert response["auditAnnotations"] == {
        "decision": "warned",
        "violations": "MappingDivergesFromRecipe",
        "recipe": RECIPE_REF,
    }
    (record,) = decision_records(caplog)
    assert (record.allowed, record.decision) == (True, "warned")  # type: ignore[attr-defined]
    assert record.violation_codes == ["MappingDivergesFromRecipe"]  # type: ignore[attr-defined]
    assert record.grandfathered_codes == []  # type: ignore[attr-defined]
    rendered = metrics.render().decode()
    assert (
        'nicguard_admission_requests_total{decision="warned",dry_run="false",'
        'kind="ClusterTrainingRuntime",operation="CREATE"} 1.0'
    ) in rendered
    # Nothing was enforced: the violation counter counts what denied.
    assert "nicguard_violations_total{" not in rendered


def test_warn_still_refuses_a_malformed_request(example_state: ClusterSnapshot) -> None:
    client, _ = make_client(example_state, WARN)
    reply = client.post("/validate", json={"kind": "AdmissionReview"})
    assert reply.status_code == 400


def test_deny_answers_the_same_request_with_a_denial(example_state: ClusterSnapshot) -> None:
    client, _ = make_client(example_state)
    response = post(client, sample_review("drifted-runtime"))
    assert response["allowed"] is False
    assert response["auditAnnotations"]["decision"] == "denied"
    assert "grandfathered" not in response["auditAnnotations"]


# --- grandfathering --------------------------------------------------------------------------


def test_an_update_keeping_drifted_wiring_records_the_grandfathered_codes(
    drifted_state: ClusterSnapshot, caplog: pytest.LogCaptureFixture
) -> None:
    old = example("objects/drifted-runtime.yaml")
    new = copy.deepcopy(old)
    new["metadata"].setdefault("labels", {})["team"] = "vision"
    client, _ = make_client(drifted_state)
    with caplog.at_level(logging.INFO, logger="nicguard.decisions"):
        response = post(client, review_of(new, operation="UPDATE", old=old))
    assert response["allowed"] is True
    assert response["auditAnnotations"] == {
        "decision": "allowed",
        "violations": "",
        "grandfathered": "MappingDivergesFromRecipe",
        "recipe": RECIPE_REF,
    }
    (warning,) = response["warnings"]
    assert warning.startswith(
        "[MappingDivergesFromRecipe] pre-existing, wiring unchanged: at position eth3 the object"
    )
    (record,) = decision_records(caplog)
    assert record.decision == "allowed"  # type: ignore[attr-defined]
    assert record.violation_codes == []  # type: ignore[attr-defined]
    assert record.grandfathered_codes == ["MappingDivergesFromRecipe"]  # type: ignore[attr-defined]


# --- TrainJobs on a drifted runtime ----------------------------------------------------------


def test_a_trainjob_on_a_drifted_runtime_is_denied_naming_the_runtime(
    drifted_state: ClusterSnapshot,
) -> None:
    client, _ = make_client(drifted_state)
    response = post(client, review_of(example("objects/good-trainjob.yaml")))
    assert response["allowed"] is False
    status = response["status"]
    assert status["message"].startswith(
        "TrainJob/team-a/llama-pretrain: [MappingDivergesFromRecipe] inherited unchanged from "
        "ClusterTrainingRuntime/torch-distributed-tcpxo, the object to fix: at position eth3 "
    )
    (cause,) = status["details"]["causes"]
    assert cause["field"] == "spec.runtimeRef"
    assert cause["message"].startswith(
        "inherited unchanged from ClusterTrainingRuntime/torch-distributed-tcpxo, the object to fix"
    )


def test_a_trainjob_whose_own_patches_diverge_is_blamed_for_them(
    example_state: ClusterSnapshot,
) -> None:
    client, _ = make_client(example_state)
    response = post(client, sample_review("trainjob-patch-drift"))
    message = response["status"]["message"]
    assert "[MappingDivergesFromRecipe] at position eth1 the object maps eth8->gpu-nic-7" in message
    assert "inherited" not in message


# --- an unbound copy in another order -----------------------------------------------------------


def test_an_unbound_copy_in_another_order_is_allowed_and_a_misplaced_one_denied(
    example_state: ClusterSnapshot,
) -> None:
    copy_ = example("objects/drifted-runtime.yaml")
    copy_["kind"] = "TrainingRuntime"
    copy_["metadata"] = {"name": "torch-tcpxo", "namespace": "team-a"}
    client, _ = make_client(example_state)
    # Entries trading places keep every Network on its interface: placement has nothing to say.
    response = post(client, review_of(copy_))
    assert response["allowed"] is True
    assert "warnings" not in response or not response["warnings"]
    misplaced = example("objects/misplaced-network-runtime.yaml")
    denied = post(client, review_of(misplaced))
    assert denied["allowed"] is False
    assert (
        "[NetworkMisplaced] Networks on another interface than the recipe gives them: "
        "eth2->gpu-nic-5 (the recipe places gpu-nic-5 on eth6)"
    ) in denied["status"]["message"]
    assert denied["auditAnnotations"] == {
        "decision": "denied",
        "violations": "NetworkMisplaced",
        "recipe": RECIPE_REF,
    }
    copy_["metadata"]["labels"] = {"nicguard.dev/recipe-bound": "true"}
    labelled = post(client, review_of(copy_))
    assert labelled["allowed"] is False
    assert labelled["auditAnnotations"]["violations"] == "MappingDivergesFromRecipe"
