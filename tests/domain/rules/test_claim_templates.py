"""ResourceClaimTemplates after admission (app.domain.rules.claim_templates): the door that judges
a template's CREATE against the DRA-bound runtimes that name it, and the audit of a bound
ClusterTrainingRuntime's templates in every namespace."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.drift import Result, judge
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap, str_at
from app.domain.kinds import Kind, Protected
from app.domain.policy import Enforcement, OnUnverifiable, Policy, Protect
from app.domain.review import Operation, Review
from app.domain.rules.claim_templates import cluster_runtime_claims
from app.domain.verdict import Verdict
from tests.builders import (
    ONE_NIC_SELECTOR,
    RDMA,
    by_template,
    claim_template,
    claimed_job,
    codes,
    dra_runtime,
    exactly,
    runtime,
    snapshot,
    wired,
    with_metadata,
)

CTR = Kind.CLUSTER_TRAINING_RUNTIME
TR = Kind.TRAINING_RUNTIME
NETDEV = "netdev.google.com"
BOUND_TR = dra_runtime(by_template(), name="team-runtime")
BOUND_CTR = dra_runtime(by_template(), name="cluster-runtime", kind=CTR)
EXPECTED = f"request exactly one {RDMA}, allocationMode All or ExactCount count 8"
ONE_NIC = claim_template("default-rdma", exactly(mode=None))
REQUESTS = "spec.spec.devices.requests"
IMEX = claim_template("imex", exactly("compute-domain-default-channel.nvidia.com"))
WITH_IMEX = dra_runtime(by_template(), by_template("imex", name="imex"), name="with-imex")
NUMA = {"matchAttribute": "dra.net/numa"}


def created(
    template: JsonMap,
    *runtimes: object,
    policy: Policy | None = None,
    namespace: str = "team",
    view: ClusterSnapshot | None = None,
    username: str = "alice",
    operation: Operation = Operation.CREATE,
) -> Verdict:
    review = Review(
        operation=operation,
        kind=Protected.CLAIM_TEMPLATE,
        namespace=namespace,
        obj=template,
        name=str_at(template, "metadata", "name") or "",
        username=username,
    )
    return evaluate(review, view or snapshot(*runtimes), policy or Policy())


@dataclass(frozen=True)
class Case:
    template: JsonMap
    runtimes: tuple[object, ...]
    expected: tuple[str, ...]
    message: str = ""
    field: str = ""
    namespace: str = "team"


CASES = {
    "all-nics": Case(claim_template(), (BOUND_TR, BOUND_CTR), ()),
    "one-nic-named-by-a-training-runtime": Case(
        ONE_NIC,
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        f"ResourceClaimTemplate team/default-rdma requests 1 {RDMA} device, but TrainingRuntime "
        "team/team-runtime, bound to profile a4-dranet (8 RDMA NICs per node), names it: "
        f"{EXPECTED}",
        f"{REQUESTS}[0]",
    ),
    "one-nic-named-by-a-cluster-runtime": Case(
        ONE_NIC,
        (BOUND_CTR,),
        ("RdmaClaimMismatch",),
        "but ClusterTrainingRuntime cluster-runtime, bound to profile a4-dranet",
        namespace="anywhere",
    ),
    "one-nic-named-by-two": Case(
        ONE_NIC,
        (BOUND_TR, BOUND_CTR),
        ("RdmaClaimMismatch",),
        "but ClusterTrainingRuntime cluster-runtime, TrainingRuntime team/team-runtime, bound "
        "to profile a4-dranet (8 RDMA NICs per node), name it:",
    ),
    "a-training-runtime-of-another-namespace": Case(ONE_NIC, (BOUND_TR,), (), namespace="other"),
    "a-training-runtime-without-a-namespace-is-of-none": Case(
        ONE_NIC,
        (with_metadata(BOUND_TR, namespace=""),),
        (),
    ),
    "an-unbound-runtime": Case(
        ONE_NIC, (runtime("plain", kind=TR, jobs=[claimed_job(by_template())]),), ()
    ),
    "a-runtime-bound-to-an-annotation-profile": Case(
        ONE_NIC,
        (
            runtime(
                "gb200",
                kind=TR,
                labels={"nicguard.dev/profile": "a4x-gb200-rdma"},
                jobs=[claimed_job(by_template(), annotations=wired())],
            ),
        ),
        # Not a DRA holder (no RdmaClaimMismatch), but its Device-type Networks beside the
        # claim the template makes real are a conflict (template_conflicts).
        ("WiringModeConflict",),
    ),
    "a-bound-runtime-naming-another-template": Case(
        claim_template("imex", exactly(NETDEV)), (BOUND_TR, BOUND_CTR), ()
    ),
    "no-rdma-request": Case(
        claim_template("default-rdma", exactly(NETDEV)),
        (BOUND_TR,),
        ("RdmaClaimMissing",),
        f"ResourceClaimTemplate team/default-rdma requests no {RDMA} device, but TrainingRuntime "
        "team/team-runtime, bound to profile a4-dranet (8 RDMA NICs per node), names it: its pods "
        f"would run NCCL on the gVNIC; {EXPECTED}",
        REQUESTS,
    ),
    "selectors": Case(
        claim_template(
            "default-rdma", exactly(NETDEV, name="net"), exactly(selectors=ONE_NIC_SELECTOR)
        ),
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        f"requests all {RDMA} devices with selectors, but TrainingRuntime team/team-runtime, "
        f"bound to profile a4-dranet (8 RDMA NICs per node), names it: {EXPECTED}, without "
        "selectors, adminAccess, or constraints or config naming it",
        f"{REQUESTS}[1].exactly.selectors",
    ),
    "admin-access": Case(
        claim_template("default-rdma", exactly(adminAccess=True)),
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        "with adminAccess: true,",
        f"{REQUESTS}[0].exactly.adminAccess",
    ),
    "constraints-naming-every-request": Case(
        claim_template("default-rdma", constraints=[NUMA]),
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        "with constraints naming it,",
        "spec.spec.devices.constraints",
    ),
    "config-naming-the-request": Case(
        claim_template("default-rdma", config=[{"requests": ["rdma"], "opaque": {}}]),
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        "with config naming it,",
        "spec.spec.devices.config",
    ),
    "two-requests": Case(
        claim_template("default-rdma", exactly(name="a"), exactly(name="b")),
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        f"requests 2 requests of {RDMA},",
        f"{REQUESTS}[0]",
    ),
    "an-unnamed-request": Case(
        claim_template("default-rdma", {"exactly": {"deviceClassName": RDMA}}),
        (BOUND_TR,),
        ("RdmaClaimMismatch",),
        field=REQUESTS,
    ),
    "a-template-without-a-name": Case(
        {**ONE_NIC, "metadata": {"namespace": "team"}}, (BOUND_TR,), ()
    ),
    "the-imex-channel-beside-a-template-that-claims": Case(
        IMEX,
        (WITH_IMEX, claim_template()),
        (),
    ),
    "the-imex-channel-before-the-template-that-claims": Case(IMEX, (WITH_IMEX,), ()),
    "the-imex-channel-beside-a-template-that-claims-wrongly": Case(IMEX, (WITH_IMEX, ONE_NIC), ()),
    "default-rdma-without-rdma-beside-the-imex-channel": Case(
        claim_template("default-rdma", exactly(NETDEV)),
        (WITH_IMEX, IMEX),
        ("RdmaClaimMissing",),
        "but TrainingRuntime team/with-imex, bound to profile a4-dranet",
    ),
    "default-rdma-without-rdma-beside-the-imex-channel-for-two": Case(
        claim_template("default-rdma", exactly(NETDEV)),
        (
            WITH_IMEX,
            dra_runtime(by_template(), by_template("imex", name="i"), name="c", kind=CTR),
            IMEX,
        ),
        ("RdmaClaimMissing",),
        "but ClusterTrainingRuntime c, TrainingRuntime team/with-imex, bound to profile",
    ),
    "four-nics-for-two-profiles": Case(
        claim_template("default-rdma", exactly(mode="ExactCount", count=4)),
        (BOUND_TR, dra_runtime(by_template(), name="gb200", profile="a4x-dranet")),
        ("RdmaClaimMismatch",),
        "but TrainingRuntime team/team-runtime, bound to profile a4-dranet",
    ),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_a_created_template_claims_the_nics_of_every_bound_runtime_naming_it(case: Case) -> None:
    verdict = created(case.template, *case.runtimes, namespace=case.namespace)
    assert codes(verdict) == case.expected
    if case.message:
        assert case.message in verdict.violations[0].message
    if case.field:
        assert verdict.violations[0].field == case.field


def test_each_runtime_holding_the_name_is_a_cause() -> None:
    (violation,) = created(ONE_NIC, BOUND_TR, BOUND_CTR).violations
    assert [message for _, message in violation.causes] == [
        "ClusterTrainingRuntime cluster-runtime",
        "TrainingRuntime team/team-runtime",
    ]


def test_the_namespace_is_the_requests_else_the_objects() -> None:
    assert codes(created(ONE_NIC, BOUND_TR, namespace="")) == ("RdmaClaimMismatch",)


@pytest.mark.parametrize(
    ("policy", "allowed", "warned"),
    [
        pytest.param(Policy(protect=Protect.WARN), True, True, id="warn"),
        pytest.param(Policy(protect=Protect.OFF), True, False, id="off"),
        pytest.param(Policy(enforcement=Enforcement.WARN), True, True, id="enforcement-warn"),
    ],
)
def test_protect_governs_the_door(policy: Policy, allowed: bool, warned: bool) -> None:
    verdict = created(ONE_NIC, BOUND_TR, policy=policy)
    assert verdict.allowed is allowed
    assert any(w.startswith("[RdmaClaimMismatch]") for w in verdict.warnings) is warned


def test_templates_that_cannot_be_read_leave_nicguard_undecided_where_they_matter() -> None:
    view = replace(snapshot(WITH_IMEX, BOUND_TR), claim_template_state=Unverifiable("not synced"))
    verdict = created(claim_template("default-rdma", exactly(NETDEV)), view=view)
    # team-runtime names default-rdma alone: no other template is needed to refuse it.
    assert codes(verdict) == ("ClusterStateUnavailable", "RdmaClaimMissing")
    assert verdict.violations[0].message == (
        "nicguard cannot decide: the ResourceClaimTemplates cannot be read: not synced"
    )
    assert created(IMEX, view=view).allowed is False
    assert codes(created(claim_template(), view=view)) == ()


def test_runtimes_that_cannot_be_read_leave_nicguard_undecided() -> None:
    view = replace(snapshot(BOUND_TR), runtime_state=Unverifiable("not synced"))
    verdict = created(ONE_NIC, view=view)
    assert codes(verdict) == ("ClusterStateUnavailable",)
    assert verdict.violations[0].message == (
        "nicguard cannot decide: runtimes cannot be read: not synced"
    )
    lenient = Policy(on_unverifiable=OnUnverifiable.ALLOW)
    assert created(ONE_NIC, view=view, policy=lenient).allowed


@pytest.mark.parametrize(
    ("operation", "username"),
    [
        pytest.param(Operation.UPDATE, "alice", id="update"),
        pytest.param(Operation.DELETE, "alice", id="delete"),
        pytest.param(
            Operation.CREATE,
            "system:serviceaccount:kube-system:generic-garbage-collector",
            id="exempt",
        ),
    ],
)
def test_only_a_create_by_anyone_but_the_exempt_is_judged(
    operation: Operation, username: str
) -> None:
    assert created(ONE_NIC, BOUND_TR, operation=operation, username=username).allowed


# --- the audit of a bound ClusterTrainingRuntime ----------------------------------------------


def in_namespace(namespace: str, name: str = "default-rdma", *requests: object) -> JsonMap:
    return claim_template(name, *requests, namespace=namespace)


AUDITED = (
    in_namespace("good"),
    in_namespace("one-nic", "default-rdma", exactly(mode=None)),
    in_namespace("narrowed", "default-rdma", exactly(selectors=ONE_NIC_SELECTOR)),
    in_namespace("netdev", "default-rdma", exactly(NETDEV)),
    in_namespace("unrelated", "other"),
)
CLAIMS = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.resourceClaims"
IN_EVERY = "bound to profile a4-dranet (8 RDMA NICs per node), but "


def audited(obj: JsonMap, *templates: object, kind: Kind = CTR) -> tuple[tuple[str, str, str], ...]:
    found = cluster_runtime_claims(kind, obj, snapshot(*templates), Policy())
    return tuple((v.code.value, v.field, v.message) for v in found)


def test_the_audit_names_each_namespace_where_a_bound_cluster_runtimes_template_fails() -> None:
    assert audited(BOUND_CTR, *AUDITED) == (
        (
            "RdmaClaimMismatch",
            f"{CLAIMS}[0]",
            f"{IN_EVERY}ResourceClaimTemplate default-rdma does not claim them all in namespace "
            f"narrowed (requests all {RDMA} devices with selectors), one-nic (requests 1 {RDMA} "
            f"device): {EXPECTED}, without selectors, adminAccess, or constraints or config "
            "naming it",
        ),
        (
            "RdmaClaimMissing",
            CLAIMS,
            f"{IN_EVERY}no ResourceClaimTemplate it names requests {RDMA} devices in namespace "
            "netdev: its pods there would run NCCL on the gVNIC",
        ),
    )


def test_a_namespace_lacking_a_template_it_names_is_left_to_its_trainjobs() -> None:
    obj = dra_runtime(by_template(), by_template("imex", name="imex"), kind=CTR)
    found = audited(
        obj,
        in_namespace("imex-only", "imex", exactly(NETDEV)),
        in_namespace("both", "imex", exactly(NETDEV)),
        in_namespace("both", "default-rdma", exactly(NETDEV)),
        in_namespace("two", "default-rdma", exactly(name="a"), exactly(name="b")),
    )
    assert [(code, message.rpartition(" in namespace ")[2]) for code, _, message in found] == [
        ("RdmaClaimMismatch", f"two (requests 2 requests of {RDMA}): {EXPECTED}"),
        ("RdmaClaimMissing", "both: its pods there would run NCCL on the gVNIC"),
    ]


def test_several_wired_templates_are_named_by_job() -> None:
    trainer = claimed_job(by_template(), name="trainer")
    template = trainer["template"]
    assert isinstance(template, dict)
    template["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}
    obj = runtime(
        "r",
        labels={"nicguard.dev/profile": "a4-dranet"},
        jobs=[claimed_job(by_template()), trainer],
    )
    found = audited(obj, in_namespace("one-nic", "default-rdma", exactly(mode=None)))
    assert [message.partition(":")[0] for _, _, message in found] == ["node job", "trainer job"]


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        pytest.param(BOUND_TR, TR, id="training-runtime"),
        pytest.param(runtime("plain", jobs=[claimed_job(by_template())]), CTR, id="unbound"),
        pytest.param(dra_runtime(kind=CTR), CTR, id="no-claims"),
        pytest.param(
            runtime("r", labels={"nicguard.dev/profile": "a4-dranet"}, jobs=[]), CTR, id="no-node"
        ),
    ],
)
def test_nothing_else_is_audited_across_namespaces(obj: JsonMap, kind: Kind) -> None:
    assert audited(obj, *AUDITED, kind=kind) == ()


def test_templates_that_cannot_be_read_give_no_finding() -> None:
    view = replace(snapshot(*AUDITED), claim_template_state=Unverifiable("not synced"))
    assert cluster_runtime_claims(CTR, BOUND_CTR, view, Policy()) == ()


def test_the_audit_fails_a_bound_cluster_runtime_with_its_other_findings() -> None:
    key = (CTR, "", "cluster-runtime")
    standing = judge(key, BOUND_CTR, snapshot(*AUDITED), Policy())
    assert standing.result is Result.FAIL
    assert standing.codes == ("RdmaClaimMismatch", "RdmaClaimMissing")
    passing = judge(key, BOUND_CTR, snapshot(in_namespace("good")), Policy())
    assert passing.result is Result.PASS
    also = dra_runtime(by_template(), name="cluster-runtime", kind=CTR, annotations=wired())
    both = judge(key, also, snapshot(*AUDITED), Policy())
    assert both.codes == ("WiringModeConflict", "RdmaClaimMismatch", "RdmaClaimMissing")
    # One more namespace is a new finding set: the audit says so again.
    more = judge(
        key,
        BOUND_CTR,
        snapshot(*AUDITED, in_namespace("x", "default-rdma", exactly(mode=None))),
        Policy(),
    )
    assert more.codes == standing.codes
    assert more.fingerprint != standing.fingerprint


# An unbound runtime mapping eth1 to gpu-nic-0 (a Device-type Network in the snapshot) and
# claiming by default-rdma: admitted while default-rdma did not exist.
ANNOTATED_TR = runtime("annotated", kind=TR, jobs=[claimed_job(by_template(), annotations=wired())])
ANNOTATED_CTR = runtime(
    "annotated", kind=CTR, jobs=[claimed_job(by_template(), annotations=wired())]
)


@pytest.mark.parametrize(
    ("template", "runtimes", "namespace", "expected"),
    [
        pytest.param(claim_template(), (ANNOTATED_TR,), "team", ("WiringModeConflict",), id="tr"),
        pytest.param(
            claim_template(namespace="team-b"),
            (ANNOTATED_CTR,),
            "team-b",
            ("WiringModeConflict",),
            id="ctr-in-any-namespace",
        ),
        pytest.param(
            claim_template(namespace="team-b"), (ANNOTATED_TR,), "team-b", (), id="tr-elsewhere"
        ),
        pytest.param(claim_template("other"), (ANNOTATED_TR,), "team", (), id="another-name"),
        pytest.param(
            claim_template("default-rdma", exactly(NETDEV)),
            (ANNOTATED_TR,),
            "team",
            (),
            id="no-rdma-request",
        ),
    ],
)
def test_a_template_created_after_a_runtime_mapping_a_device_network_is_a_conflict(
    template: JsonMap, runtimes: tuple[JsonMap, ...], namespace: str, expected: tuple[str, ...]
) -> None:
    """Order does not decide: the runtime, admitted while the template did not exist, is
    judged with it now, at the template's door."""
    verdict = created(template, *runtimes, namespace=namespace)
    assert codes(verdict) == expected
    if expected:
        (conflict,) = verdict.violations
        assert conflict.field == f"{REQUESTS}[0]"
        assert conflict.message.startswith(
            f"ResourceClaimTemplate {namespace}/default-rdma requests {RDMA} devices, and "
        )
        assert "which names it, would then be wired both ways: the interfaces annotation" in (
            conflict.message
        )
        assert "eth1->gpu-nic-0, a Device-type Network" in conflict.message


def test_a_conflict_the_runtime_had_already_is_not_the_templates() -> None:
    """A bound runtime mapping a Device-type Network conflicts whatever its templates: that was
    refused at its own door, not news at the template's."""
    bound = dra_runtime(by_template(), annotations=wired(), name="bound")
    assert codes(created(claim_template(), bound)) == ()


def test_a_conflict_at_the_template_door_follows_the_setting_protect() -> None:
    warned = created(claim_template(), ANNOTATED_TR, policy=Policy(protect=Protect.WARN))
    assert warned.allowed
    assert any("WiringModeConflict" in w for w in warned.warnings)
