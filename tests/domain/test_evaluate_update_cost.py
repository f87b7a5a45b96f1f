"""UPDATE grandfathering reads the old object's wiring before it judges it, if it judges it at
all (app/domain/evaluate.py): the verdicts are the ones judging both objects in full gives."""

from __future__ import annotations

import pytest

from app.domain.evaluate import evaluate, evaluate_object
from app.domain.fields import JsonMap
from app.domain.grandfather import grandfather
from app.domain.judge import judge_runtime, runtime_fingerprint
from app.domain.kinds import Kind, Workload
from app.domain.policy import NotReady, Placement, Policy
from app.domain.review import Operation
from app.domain.verdict import Verdict
from app.domain.workloads import judge_workload, workload_fingerprint
from tests.builders import (
    PAIRS,
    RECIPE_BOUND,
    batch_job,
    by_template,
    claim_template,
    claimed_job,
    job_set,
    network,
    node_job,
    review,
    runtime,
    snapshot,
    wired,
    with_metadata,
)

MISSING = (("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-9"))
MISPLACED = (("eth1", "gpu-nic-1"), ("eth2", "gpu-nic-0"))
DUPLICATED = tuple((name, "gpu-nic-9") for name, _ in PAIRS)
SPARE = (("eth1", "gpu-nic-0"), ("eth2", "spare"))
VIEW = snapshot(network("spare", ready=False), claim_template("default-rdma", namespace="team-a"))


def _full(kind: Kind | Workload, new: JsonMap, old: JsonMap, policy: Policy) -> Verdict:
    """The verdict of judging both objects in full, then comparing their fingerprints."""
    namespace = review(new).namespace
    current = evaluate_object(kind, new, namespace, VIEW, policy, old=old)
    if current.verdict.allowed:
        return current.verdict
    previous = evaluate_object(kind, old, namespace, VIEW, policy)
    if previous.fingerprint != current.fingerprint:
        return current.verdict
    return grandfather(current.verdict, previous.verdict)


def _jobs(*wirings: tuple[tuple[str, str], ...] | None) -> list[dict[str, object]]:
    return [
        node_job(None if pairs is None else wired(pairs), name=f"slice-{n}")
        for n, pairs in enumerate(wirings)
    ]


WORKLOAD_UPDATES = [
    pytest.param(
        job_set(*_jobs(MISSING, MISSING, DUPLICATED)),
        job_set(*_jobs(MISSING, MISSING, DUPLICATED), suspend=True),
        id="jobset-untouched",
    ),
    pytest.param(
        job_set(*_jobs(MISSING, MISPLACED)),
        job_set(*_jobs(MISSING, MISSING)),
        id="jobset-one-template-changed",
    ),
    pytest.param(
        job_set(*_jobs(MISSING, None)),
        job_set(*_jobs(MISSING, MISSING)),
        id="jobset-template-annotated",
    ),
    pytest.param(
        job_set(*_jobs(MISSING, MISSING)),
        job_set(*_jobs(MISSING)),
        id="jobset-template-gone",
    ),
    pytest.param(
        job_set(*_jobs(MISSING, MISSING)),
        job_set(*_jobs(MISSING, None)),
        id="jobset-template-unwired",
    ),
    pytest.param(
        job_set(*_jobs(PAIRS, PAIRS)),
        job_set(*_jobs(DUPLICATED, DUPLICATED)),
        id="jobset-broken-by-the-update",
    ),
    pytest.param(
        job_set(*_jobs(SPARE, MISPLACED)),
        job_set(*_jobs(SPARE, MISPLACED)),
        id="jobset-not-ready-and-misplaced",
    ),
    pytest.param(
        job_set(claimed_job(by_template(), annotations=wired())),
        job_set(claimed_job(by_template(), annotations=wired())),
        id="jobset-claims-untouched",
    ),
    pytest.param(
        job_set(claimed_job(by_template("other"), annotations=wired())),
        job_set(claimed_job(by_template(), annotations=wired())),
        id="jobset-claims-changed",
    ),
    pytest.param(batch_job(wired(MISSING)), batch_job(wired(MISSING)), id="job-untouched"),
    pytest.param(batch_job(wired(MISPLACED)), batch_job(wired(MISSING)), id="job-changed"),
]
POLICIES = [
    pytest.param(Policy(), id="defaults"),
    pytest.param(Policy(not_ready=NotReady.WARN, placement=Placement.WARN), id="warnings"),
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("old", "new"), WORKLOAD_UPDATES)
def test_a_workload_update_gets_the_verdict_judging_the_old_object_gives(
    old: JsonMap, new: JsonMap, policy: Policy
) -> None:
    kind = Workload.JOB_SET if new["kind"] == "JobSet" else Workload.JOB
    update = review(new, operation=Operation.UPDATE, old=old)
    assert evaluate(update, VIEW, policy) == _full(kind, new, old, policy)


@pytest.mark.parametrize(("old", "new"), WORKLOAD_UPDATES)
def test_a_workload_fingerprint_is_the_one_judging_it_gives(old: JsonMap, new: JsonMap) -> None:
    kind = Workload.JOB_SET if new["kind"] == "JobSet" else Workload.JOB
    for obj in (old, new):
        judged = judge_workload(kind, obj, "team-a", VIEW, Policy())
        assert workload_fingerprint(kind, obj) == judged.fingerprint


BROKEN = runtime("plain", annotations=wired(MISSING))
RUNTIME_UPDATES = [
    pytest.param(BROKEN, with_metadata(BROKEN, labels={"team": "a"}), id="untouched"),
    pytest.param(runtime("plain", annotations=wired(MISPLACED)), BROKEN, id="wiring-changed"),
    pytest.param(BROKEN, with_metadata(BROKEN, labels={RECIPE_BOUND: "true"}), id="newly-bound"),
    pytest.param(runtime("plain"), BROKEN, id="newly-wired"),
]


@pytest.mark.parametrize(("old", "new"), RUNTIME_UPDATES)
def test_a_runtime_update_gets_the_verdict_judging_the_old_object_gives(
    old: JsonMap, new: JsonMap
) -> None:
    update = review(new, operation=Operation.UPDATE, old=old)
    expected = _full(Kind.CLUSTER_TRAINING_RUNTIME, new, old, Policy())
    assert evaluate(update, VIEW, Policy()) == expected


@pytest.mark.parametrize(("old", "new"), RUNTIME_UPDATES)
def test_a_runtime_fingerprint_is_the_one_judging_it_gives(old: JsonMap, new: JsonMap) -> None:
    for obj in (old, new):
        judged = judge_runtime(Kind.CLUSTER_TRAINING_RUNTIME, obj, VIEW, Policy())
        assert runtime_fingerprint(obj) == judged.fingerprint
