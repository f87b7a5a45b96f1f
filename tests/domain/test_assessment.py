"""Whether a request is judged and what it needs, assessed once (app.domain.assessment): its
skip reason and the runtime a TrainJob is judged against, and evaluate() honouring it."""

from __future__ import annotations

import pytest

from app.domain.assessment import EXEMPT_USERS, Assessment, assess
from app.domain.evaluate import evaluate
from app.domain.kinds import Kind, Protected
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.domain.verdict import Verdict
from tests.builders import review, runtime, snapshot, trainjob, wired

BAD = runtime("plain", annotations=wired([("eth1", "absent")], default="eth1"))


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
