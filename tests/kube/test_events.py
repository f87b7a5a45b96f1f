"""Audit Events over the real API (app.kube.events) against the fake API server: what one Event
says and where it goes, and reading back the newest fingerprint per runtime across pages."""

from __future__ import annotations

import re
from typing import Final

import pytest

from app.domain.cluster import RuntimeKey
from app.domain.drift import Result, Standing
from app.domain.kinds import Kind
from app.domain.policy_reports import WIRING_DRIFT, WIRING_RESTORED
from app.domain.verdict import Code, Violation
from app.kube.events import (
    ACTION,
    FINDINGS_ANNOTATION,
    REPORTING_CONTROLLER,
    EventRecorder,
)
from tests.support.apiserver import Reply, Request, client_of, listed, status

EVENTS: Final = "/apis/events.k8s.io/v1/events"
CTR: Final[RuntimeKey] = (Kind.CLUSTER_TRAINING_RUNTIME, "", "torch")
TR: Final[RuntimeKey] = (Kind.TRAINING_RUNTIME, "team-a", "mine")
LOST: Final = Violation(
    code=Code.NETWORK_NOT_FOUND, field="spec.x", message="eth1 names gpu-nic-9, not found"
)
FAILING: Final = Standing(Result.FAIL, (LOST,))


def event(
    kind: str, namespace: str, name: str, at: str, fingerprint: str, *, by: str = ""
) -> dict[str, object]:
    regarding = {"kind": kind, "name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "metadata": {"annotations": {FINDINGS_ANNOTATION: fingerprint}},
        "reportingController": by or REPORTING_CONTROLLER,
        "eventTime": at,
        "regarding": regarding,
    }


def created(request: Request) -> Reply:
    return (201, request.body) if request.method == "POST" else status(405, "MethodNotAllowed")


@pytest.mark.parametrize(
    ("key", "standing", "path", "reason", "kind"),
    [
        pytest.param(
            TR,
            FAILING,
            "/apis/events.k8s.io/v1/namespaces/team-a/events",
            WIRING_DRIFT,
            "Warning",
            id="a TrainingRuntime drifted: a Warning in its namespace",
        ),
        pytest.param(
            CTR,
            Standing(Result.PASS),
            "/apis/events.k8s.io/v1/namespaces/default/events",
            WIRING_RESTORED,
            "Normal",
            id="a ClusterTrainingRuntime restored: Normal, in default as client-go does",
        ),
    ],
)
def test_an_event_names_its_runtime_findings_and_controller(
    key: RuntimeKey, standing: Standing, path: str, reason: str, kind: str
) -> None:
    with client_of(created) as (server, api_client):
        EventRecorder(api_client, "pod-1").emit(key, reason, standing)
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("POST", path)
    assert isinstance(sent.body, dict)
    body = sent.body
    metadata = body.pop("metadata")
    assert re.fullmatch(rf"{key[2]}\.[0-9a-f]+", metadata.pop("name"))
    assert metadata == {
        "namespace": path.split("/")[5],
        "labels": {"app.kubernetes.io/managed-by": "nicguard"},
        "annotations": {FINDINGS_ANNOTATION: standing.fingerprint},
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", body.pop("eventTime"))
    reference = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": key[0].value}
    reference |= {"name": key[2]} | ({"namespace": key[1]} if key[1] else {})
    assert body == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": "pod-1",
        "action": ACTION,
        "reason": reason,
        "type": kind,
        "note": "[NetworkNotFound] eth1 names gpu-nic-9, not found"
        if standing.findings
        else "wiring as expected again",
        "regarding": reference,
    }


def test_a_long_name_and_instance_are_cut_to_what_the_api_takes() -> None:
    key = (Kind.TRAINING_RUNTIME, "team-a", "r" * 253)
    with client_of(created) as (server, api_client):
        EventRecorder(api_client, "i" * 200).emit(key, WIRING_DRIFT, FAILING)
    (sent,) = server.requests
    assert isinstance(sent.body, dict)
    assert len(sent.body["metadata"]["name"]) <= 253
    assert sent.body["reportingInstance"] == "i" * 128


def test_published_keeps_the_newest_fingerprint_per_runtime_across_pages() -> None:
    pages: dict[str, Reply] = {
        "": (
            200,
            {
                "metadata": {"continue": "p2"},
                "items": [
                    event("TrainingRuntime", "team-a", "mine", "2026-01-01T00:00:02.000000Z", "b"),
                    event("TrainingRuntime", "team-a", "mine", "2026-01-01T00:00:01.000000Z", "a"),
                    event("ClusterTrainingRuntime", "", "torch", "2026-01-01T00:00:01Z", "c"),
                ],
            },
        ),
        "p2": listed(
            event("TrainingRuntime", "team-a", "mine", "2026-01-01T00:00:03.000000Z", ""),
            event("ClusterTrainingRuntime", "", "torch", "2026-01-01T00:00:00Z", "old"),
            event("TrainingRuntime", "team-b", "other", "2026-01-01T00:00:09Z", "x", by="kubelet"),
            event("TrainJob", "team-a", "job", "2026-01-01T00:00:09Z", "job"),
            event("Widget", "team-a", "w", "2026-01-01T00:00:09Z", "widget"),
            event("TrainingRuntime", "team-a", "", "2026-01-01T00:00:09Z", "nameless"),
            "not an event",
        ),
    }
    with client_of(lambda request: pages[request.query.get("continue", "")]) as (
        server,
        api_client,
    ):
        found = EventRecorder(api_client, "pod-1").published()
    assert found == {TR: "", CTR: "c"}
    selector = {"labelSelector": "app.kubernetes.io/managed-by=nicguard", "limit": "500"}
    assert server.queries == [(EVENTS, selector), (EVENTS, selector | {"continue": "p2"})]


def test_no_events_published_is_an_empty_answer() -> None:
    with client_of(lambda _: listed()) as (_, api_client):
        assert EventRecorder(api_client, "pod-1").published() == {}
