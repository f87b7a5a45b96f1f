"""A ResourceClaimTemplate created after a claimant that names it — a runtime snapshot, a JobSet,
a Job or a Pod the view knows (a file state) — is judged with it (app/domain/claimants.py,
app/domain/template_conflicts.py): order does not decide a verdict."""

from __future__ import annotations

from typing import Final

import pytest

from app.domain.claimant_audit import (
    ClaimantBook,
    claimant_key,
    claimant_reference,
    claimant_standing,
)
from app.domain.claimants import Claimant, judge_claimant, snapshot_claimant, workload_claimant
from app.domain.claims import claim_template_of
from app.domain.cluster import WithClaimTemplate, WithRuntime, runtime_key
from app.domain.drift import PASSING
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap, str_at
from app.domain.kinds import Kind, Protected, Workload
from app.domain.policy import Policy, Protect
from app.domain.review import Operation, Review
from app.domain.runtime_snapshot import RuntimeSnapshot
from app.domain.verdict import Code, Verdict
from tests.builders import (
    RDMA,
    batch_job,
    by_template,
    claim_template,
    claimed_job,
    codes,
    copy_of,
    dra_runtime,
    exactly,
    job_set,
    node_job,
    pod,
    runtime,
    snapshot,
    snapshot_review,
    wired,
    with_metadata,
)

CTR = Kind.CLUSTER_TRAINING_RUNTIME
REQUESTS = "spec.spec.devices.requests"
SNAPSHOT = "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job"
# The copy of a bound ClusterTrainingRuntime whose claim was edited to name my-rdma, which then
# requested all NICs and has since been deleted (the template the copy claims is gone).
RENAMED_COPY: Final = copy_of(dra_runtime(by_template("my-rdma"), name="dranet", kind=CTR))
ALL_NICS: Final = claim_template("my-rdma")
ONE_NIC: Final = claim_template("my-rdma", exactly(mode="ExactCount", count=1))
NO_RDMA: Final = claim_template("my-rdma", exactly("netdev.google.com"))


def created(template: JsonMap, *objects: object, policy: Policy | None = None) -> Verdict:
    namespace = str_at(template, "metadata", "namespace") or ""
    review = Review(
        operation=Operation.CREATE,
        kind=Protected.CLAIM_TEMPLATE,
        namespace=namespace,
        obj=template,
        name=str_at(template, "metadata", "name") or "",
    )
    return evaluate(review, snapshot(*objects), policy or Policy())


def claimants_of(obj: JsonMap) -> list[Claimant]:
    return list(snapshot(obj).claimants())


def claiming_pod(*claims: JsonMap, name: str = "llama-node-0-0-x2k") -> dict[str, object]:
    """A bare Pod in team-a mapping eth1.. to gpu-nic-* (Device-type Networks), naming
    ``claims``."""
    found = pod(wired(), name=name)
    return {**found, "spec": {"containers": [], "resourceClaims": list(claims)}}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param(ONE_NIC, ("RdmaClaimMismatch",), id="one-nic-of-eight"),
        pytest.param(NO_RDMA, ("RdmaClaimMissing",), id="no-rdma-request"),
        pytest.param(ALL_NICS, (), id="all-nics"),
        pytest.param(claim_template("my-rdma", namespace="other"), (), id="another-namespace"),
        pytest.param(claim_template("default-rdma", exactly(mode=None)), (), id="another-name"),
    ],
)
def test_a_template_a_bound_snapshot_claims_is_held_to_its_profile(
    template: JsonMap, expected: tuple[str, ...]
) -> None:
    """A snapshot can name a template its runtime does not; Trainer builds pods from it."""
    verdict = created(template, RENAMED_COPY)
    assert codes(verdict) == expected
    if expected:
        (finding,) = verdict.violations
        assert finding.message.startswith(
            f"ResourceClaimTemplate team/my-rdma would be used by {SNAPSHOT}: "
            "ClusterTrainingRuntime dranet): "
        )
        assert finding.message.count(SNAPSHOT) == 1
        assert "bound to profile a4-dranet (8 RDMA NICs per node)" in finding.message
        assert finding.field == (
            f"{REQUESTS}[0]" if expected[0] == "RdmaClaimMismatch" else REQUESTS
        )


def test_a_finding_the_snapshot_had_anyway_is_not_the_templates() -> None:
    """A bound copy that maps a Device-type Network conflicts whatever its templates: the
    snapshot door's finding, not news at the template's."""
    mapped = copy_of(
        dra_runtime(by_template("my-rdma"), annotations=wired(), name="dranet", kind=CTR)
    )
    assert codes(created(ALL_NICS, mapped)) == ()
    assert codes(evaluate(snapshot_review(mapped), snapshot(ALL_NICS), Policy())) == (
        "WiringModeConflict",
    )


WORKLOADS: Final = {
    "pod": claiming_pod(by_template("my-rdma")),
    "job": {
        **batch_job(None),
        "spec": {
            "template": {
                "metadata": {"annotations": wired()},
                "spec": {"containers": [], "resourceClaims": [by_template("my-rdma")]},
            }
        },
    },
    "jobset": job_set(claimed_job(by_template("my-rdma"), annotations=wired())),
}


@pytest.mark.parametrize("workload", WORKLOADS.values(), ids=WORKLOADS.keys())
def test_a_template_created_after_a_wired_workload_naming_it_is_a_conflict(
    workload: JsonMap,
) -> None:
    """The same pair is WiringModeConflict at the workload's door the other way round."""
    verdict = created(claim_template("my-rdma", namespace="team-a"), workload)
    assert codes(verdict) == ("WiringModeConflict",)
    (conflict,) = verdict.violations
    assert conflict.field == f"{REQUESTS}[0]"
    assert "would be used by " in conflict.message
    assert "eth1->gpu-nic-0, a Device-type Network" in conflict.message
    # The other order: the workload created after the template.
    kind = Workload(str(workload["kind"]))
    door = Review(operation=Operation.CREATE, kind=kind, namespace="team-a", obj=workload)
    after = evaluate(door, snapshot(claim_template("my-rdma", namespace="team-a")), Policy())
    assert codes(after) == ("WiringModeConflict",)


@pytest.mark.parametrize(
    "template",
    [
        pytest.param(claim_template("my-rdma", exactly("netdev.google.com"), namespace="team-a")),
        pytest.param(claim_template("my-rdma", namespace="team"), id="another-namespace"),
        pytest.param(claim_template("other", namespace="team-a"), id="another-name"),
    ],
)
def test_a_template_a_workload_names_without_conflict_is_admitted(template: JsonMap) -> None:
    assert created(template, WORKLOADS["pod"]).allowed


def test_the_setting_protect_governs_what_a_claimant_finding_does() -> None:
    warned = created(ONE_NIC, RENAMED_COPY, policy=Policy(protect=Protect.WARN))
    assert warned.allowed
    assert any(w.startswith("[RdmaClaimMismatch]") for w in warned.warnings)
    off = created(ONE_NIC, RENAMED_COPY, policy=Policy(protect=Protect.OFF))
    assert (off.allowed, off.warnings) == (True, ())


def test_only_objects_that_name_templates_are_claimants() -> None:
    unclaimed = runtime("plain", kind=CTR)
    copy = snapshot_review(copy_of(unclaimed)).snapshot
    assert copy is not None
    assert snapshot_claimant(copy_of(unclaimed), copy) is None
    unread = RuntimeSnapshot(namespace="team", name="x", trainjob="x", problem="not YAML")
    assert snapshot_claimant(copy_of("{"), unread) is None
    assert workload_claimant(Workload.POD, pod(wired()), "team-a") is None
    assert workload_claimant(Workload.JOB_SET, job_set(node_job(wired())), "team-a") is None
    found = workload_claimant(Workload.POD, WORKLOADS["pod"], "team-a")
    assert found is not None
    assert (found.namespace, found.names) == ("team-a", frozenset({"my-rdma"}))


def test_a_claimants_standing_holds_only_what_depends_on_the_templates() -> None:
    (pod,) = claimants_of(claiming_pod(by_template("my-rdma")))
    template = claim_template("my-rdma", namespace="team-a")
    # The Networks do not exist: NetworkNotFound is the Pod's own door's, no claim finding.
    verdict = judge_claimant(pod, snapshot(template, networks=()), Policy())
    assert "NetworkNotFound" in codes(verdict)
    assert claimant_standing(pod, snapshot(template, networks=()), Policy()) == PASSING
    conflicted = claimant_standing(pod, snapshot(template), Policy())
    assert [v.code.value for v in conflicted.findings] == ["WiringModeConflict"]
    assert RDMA in conflicted.findings[0].message


def test_views_that_add_an_object_keep_the_claimants() -> None:
    view = snapshot(RENAMED_COPY)
    (claimant,) = view.claimants()
    template = claim_template_of(ALL_NICS)
    assert template is not None
    added = WithClaimTemplate(view, template)
    fetched = WithRuntime(view, runtime_key(CTR, "", "dranet"), None)
    assert list(added.claimants()) == list(fetched.claimants()) == [claimant]


def test_a_claimants_reference_carries_its_uid_when_it_has_one() -> None:
    (copy,) = snapshot(RENAMED_COPY).claimants()
    assert claimant_reference(copy) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": "team",
        "name": "job-runtime-snapshot",
    }
    (found,) = snapshot(with_metadata(WORKLOADS["pod"], uid="u-1")).claimants()
    assert claimant_reference(found)["uid"] == "u-1"
    assert claimant_key(found) == ("v1", "Pod", "team-a", "llama-node-0-0-x2k")


def test_the_book_counts_the_failing_claimants_per_code() -> None:
    view = snapshot(ONE_NIC)
    book = ClaimantBook()
    passing = claimants_of(claiming_pod(by_template("other"), name="p"))
    book.sweep(None, [*claimants_of(RENAMED_COPY), *passing], view, Policy())
    assert book.failing_codes == {Code.RDMA_CLAIM_MISMATCH: 1}
    assert len(book.standings) == 2
