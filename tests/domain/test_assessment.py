"""Whether a request is judged and what it needs, assessed once (app.domain.assessment): its
skip reason and the runtime a TrainJob is judged against, and evaluate() honouring it."""

from __future__ import annotations

import pytest

from app.domain.assessment import EXEMPT_USERS, Assessment, assess
from app.domain.evaluate import evaluate
from app.domain.kinds import Kind, Protected, Workload
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.domain.verdict import Verdict
from tests.builders import batch_job, job_set, pod, review, runtime, snapshot, trainjob, wired

BAD = runtime("plain", annotations=wired([("eth1", "absent")], default="eth1"))
SWAPPED = (("eth1", "gpu-nic-1"), ("eth2", "gpu-nic-0"))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(review(BAD), Assessment(None, None), id="a-runtime-is-judged-needing-none"),
        pytest.param(
            review(trainjob()),
            Assessment(None, (Kind.CLUSTER_TRAINING_RUNTIME, "", "torch-distributed-tcpxo")),
            id="a-trainjob-needs-its-runtime",
        ),
        pytest.param(
            review(trainjob(), subresource="status"),
            Assessment("subresource status is not checked", None),
            id="a-skipped-trainjob-needs-nothing",
        ),
        pytest.param(
            Review(
                operation=Operation.DELETE,
                kind=Protected.NETWORK,
                name="gpu-nic-3",
                username=sorted(EXEMPT_USERS)[0],
            ),
            Assessment(
                f"{sorted(EXEMPT_USERS)[0]} is never blocked (namespace deletion, "
                "garbage collection)",
                None,
            ),
            id="an-exempt-identity",
        ),
        pytest.param(review(pod(wired())), Assessment(None, None), id="a-pod-create"),
        pytest.param(
            review(pod(wired()), operation=Operation.UPDATE, old=pod(wired())),
            Assessment("the update leaves the Pod's wiring annotations as they were", None),
            id="a-pod-update-keeping-its-wiring",
        ),
        pytest.param(
            review(pod({**wired(), "team": "a"}), operation=Operation.UPDATE, old=pod(wired())),
            Assessment("the update leaves the Pod's wiring annotations as they were", None),
            id="a-pod-update-of-another-annotation",
        ),
        pytest.param(
            review(pod(None), operation=Operation.UPDATE, old=pod({"team": "a"})),
            Assessment("the update leaves the Pod's wiring annotations as they were", None),
            id="an-unwired-pod-update",
        ),
        pytest.param(
            review(pod(wired(SWAPPED)), operation=Operation.UPDATE, old=pod(wired())),
            Assessment(None, None),
            id="a-pod-update-swapping-its-wiring",
        ),
        pytest.param(
            review(
                pod(wired(default="")), operation=Operation.UPDATE, old=pod(wired(default=None))
            ),
            Assessment(None, None),
            id="a-pod-update-setting-an-absent-default-interface-empty",
        ),
        pytest.param(
            review(pod(None), operation=Operation.UPDATE, old=pod(wired())),
            Assessment(None, None),
            id="a-pod-update-removing-its-wiring",
        ),
        pytest.param(
            review(pod(wired()), operation=Operation.UPDATE),
            Assessment(None, None),
            id="a-pod-update-without-its-old-object",
        ),
        pytest.param(
            review(job_set(), operation=Operation.UPDATE, old=job_set()),
            Assessment(None, None),
            id="a-jobset-update",
        ),
        pytest.param(
            review(batch_job(wired()), operation=Operation.UPDATE, old=batch_job(wired())),
            Assessment(None, None),
            id="a-job-update",
        ),
        pytest.param(
            Review(operation=Operation.DELETE, kind=Workload.JOB, name="llama-node-0"),
            Assessment("DELETE of a Job is not checked", None),
            id="a-job-delete",
        ),
        # A Binding's annotations are written onto its Pod, a status write keeps the request's
        # (app.domain.pod_writes): judged, each for its one operation.
        pytest.param(
            review(pod(wired()), subresource="binding"),
            Assessment(None, None),
            id="a-pod-binding",
        ),
        pytest.param(
            review(pod(wired()), operation=Operation.UPDATE, old=pod(None), subresource="status"),
            Assessment(None, None),
            id="a-pod-status-write-rewiring-it",
        ),
        pytest.param(
            review(
                pod(wired()), operation=Operation.UPDATE, old=pod(wired()), subresource="status"
            ),
            Assessment("the update leaves the Pod's wiring annotations as they were", None),
            id="a-pod-status-write-keeping-its-wiring",
        ),
        pytest.param(
            review(pod(wired()), operation=Operation.UPDATE, subresource="binding"),
            Assessment("subresource binding is not checked", None),
            id="a-pod-binding-update",
        ),
        pytest.param(
            review(pod(wired()), subresource="status"),
            Assessment("subresource status is not checked", None),
            id="a-pod-status-create",
        ),
        pytest.param(
            review(pod(wired()), operation=Operation.UPDATE, subresource="ephemeralcontainers"),
            Assessment("subresource ephemeralcontainers is not checked", None),
            id="a-pod-ephemeralcontainers-write",
        ),
        pytest.param(
            Review(
                operation=Operation.CREATE,
                kind=Workload.POD,
                obj=pod(wired()),
                username="system:kube-controller-manager",
            ),
            Assessment(None, None),
            id="the-controller-manager-is-judged",
        ),
    ],
)
def test_the_assessment_says_what_is_judged_and_what_it_needs(
    request_: Review, expected: Assessment
) -> None:
    assert assess(request_) == expected


def test_evaluate_follows_the_assessment_it_is_given() -> None:
    judged = review(BAD)
    assert not evaluate(judged, snapshot(), Policy()).allowed
    skipped = Assessment("said so by the caller", None)
    assert evaluate(judged, snapshot(), Policy(), assessment=skipped) == Verdict()
