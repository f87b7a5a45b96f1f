"""NICs by DRA claim (docs/dra.md): DRA profiles bind runtimes, their templates must claim all the
node's RDMA NICs, and no template both claims them and maps Networks (app.domain.rules.claims)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from app.domain.cluster import ClaimTemplates, ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import OnUnverifiable, Policy
from app.domain.review import Operation
from app.domain.verdict import Verdict
from tests.builders import (
    INTERFACES,
    ONE_NIC_SELECTOR,
    PAIRS,
    PROFILE,
    RDMA,
    bare,
    by_template,
    claim_template,
    claimed_job,
    codes,
    copy_of,
    dra_runtime,
    exactly,
    first_available,
    messages,
    mpi_runtime,
    network,
    node_job,
    review,
    runtime,
    snapshot,
    snapshot_review,
    trainjob,
    wired,
)

NETDEV = "netdev.google.com"
CTR = Kind.CLUSTER_TRAINING_RUNTIME
TR = Kind.TRAINING_RUNTIME
SHARED = {"name": "rdma", "resourceClaimName": "all-nics"}
CLAIMS = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.resourceClaims"
ETH0_ONLY = {INTERFACES: '[{"interfaceName":"eth0","network":"default"}]'}
BOUND = "bound to profile a4-dranet (8 RDMA NICs per node), but "
OPAQUE = {"driver": "mrdma.google.com", "parameters": {"mtu": 8896}}


def judged(
    obj: JsonMap,
    *templates: object,
    view: ClusterSnapshot | None = None,
    policy: Policy | None = None,
) -> Verdict:
    return evaluate(review(obj), view or snapshot(*templates), policy or Policy())


@dataclass(frozen=True)
class Case:
    obj: JsonMap
    templates: tuple[object, ...]
    expected: tuple[str, ...]
    message: str = ""
    field: str = ""


GVNIC_L3 = network("gvnic-1", network_type="L3")
"""The second gVNIC, which Google's DRANET guide lets a pod attach beside its RDMA claim."""

CASES = {
    "all-nics": Case(dra_runtime(by_template()), (claim_template(),), ()),
    "exact-count-of-eight": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(mode="ExactCount", count=8)),),
        (),
    ),
    "a4x-four-nics": Case(
        dra_runtime(by_template(), profile="a4x-dranet"),
        (claim_template("default-rdma", exactly(mode=None, count=4)),),
        (),
    ),
    "four-of-eight": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(mode="ExactCount", count=4)),),
        ("RdmaClaimMismatch",),
        f"{BOUND}ResourceClaimTemplate team/default-rdma requests 4 {RDMA} devices: request "
        f"exactly one {RDMA}, allocationMode All or ExactCount count 8",
        f"{CLAIMS}[0]",
    ),
    "count-omitted-is-one": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(mode=None)),),
        ("RdmaClaimMismatch",),
        f"requests 1 {RDMA} device:",
    ),
    "first-available": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", first_available(RDMA, NETDEV)),),
        ("RdmaClaimMismatch",),
        f"requests a firstAvailable list of {RDMA}, {NETDEV}:",
    ),
    "two-requests-of-the-class": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(name="a"), exactly(name="b")),),
        ("RdmaClaimMismatch",),
        f"requests 2 requests of {RDMA}:",
    ),
    "unknown-allocation-mode": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(mode="Some")),),
        ("RdmaClaimMismatch",),
        "by allocationMode Some",
    ),
    "selectors": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(selectors=ONE_NIC_SELECTOR)),),
        ("RdmaClaimMismatch",),
        f"{BOUND}ResourceClaimTemplate team/default-rdma requests all {RDMA} devices with "
        f"selectors: request exactly one {RDMA}, allocationMode All or ExactCount count 8, "
        "without selectors, adminAccess, or constraints or config naming it",
        f"{CLAIMS}[0]",
    ),
    "admin-access": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(adminAccess=True)),),
        ("RdmaClaimMismatch",),
        f"requests all {RDMA} devices with adminAccess: true:",
    ),
    "constraints-naming-the-request": Case(
        dra_runtime(by_template()),
        (
            claim_template(
                "default-rdma",
                exactly(),
                exactly(NETDEV, name="net"),
                constraints=[{"requests": ["rdma", "net"], "matchAttribute": "dra.net/numa"}],
            ),
        ),
        ("RdmaClaimMismatch",),
        f"requests all {RDMA} devices with constraints naming it:",
    ),
    "constraints-naming-every-request": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", constraints=[{"matchAttribute": "dra.net/numa"}]),),
        ("RdmaClaimMismatch",),
        "with constraints naming it:",
    ),
    "constraints-naming-another-request": Case(
        dra_runtime(by_template()),
        (
            claim_template(
                "default-rdma",
                exactly(),
                exactly(NETDEV, name="net"),
                constraints=[{"requests": ["net"], "matchAttribute": "dra.net/numa"}],
            ),
        ),
        (),
    ),
    "config-naming-the-request": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", config=[{"requests": ["rdma"], "opaque": OPAQUE}]),),
        ("RdmaClaimMismatch",),
        "with config naming it:",
    ),
    "none-of-these": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(selectors=[], adminAccess=False)),),
        (),
    ),
    "netdev-only": Case(
        dra_runtime(by_template()),
        (claim_template("default-rdma", exactly(NETDEV)),),
        ("RdmaClaimMissing",),
        f"{BOUND}no ResourceClaimTemplate it names requests {RDMA} devices: its pods would run "
        "NCCL on the gVNIC",
        CLAIMS,
    ),
    "no-resource-claims": Case(
        runtime("r", kind=TR, labels={PROFILE: "a4-dranet"}),
        (),
        ("RdmaClaimMissing",),
        f"{BOUND}the pod template has no resourceClaims: its pods would run NCCL on the gVNIC",
        CLAIMS,
    ),
    "empty-resource-claims": Case(dra_runtime(), (claim_template(),), ("RdmaClaimMissing",)),
    "entries-naming-nothing": Case(
        dra_runtime({"name": "x"}), (claim_template(),), ("RdmaClaimMissing",)
    ),
    "shared-claim": Case(
        dra_runtime(SHARED),
        (),
        ("RdmaClaimMismatch",),
        f"{BOUND}it claims only ResourceClaim all-nics, shared by every pod naming it",
        f"{CLAIMS}[0]",
    ),
    "shared-claim-and-a-netdev-template": Case(
        dra_runtime(by_template(name="net"), SHARED),
        (claim_template("default-rdma", exactly(NETDEV)),),
        ("RdmaClaimMismatch",),
        "ResourceClaim all-nics",
        f"{CLAIMS}[1]",
    ),
    "template-missing": Case(
        dra_runtime(by_template()),
        (),
        ("ResourceClaimTemplateNotFound",),
        f"{BOUND}ResourceClaimTemplate default-rdma does not exist in namespace team, and no "
        "template it names claims the NICs",
        f"{CLAIMS}[0]",
    ),
    "template-in-another-namespace": Case(
        dra_runtime(by_template()),
        (claim_template(namespace="other"),),
        ("ResourceClaimTemplateNotFound",),
    ),
    "a-missing-imex-template-beside-the-nics": Case(
        dra_runtime(by_template(), by_template("imex-channel", name="imex")),
        (claim_template(),),
        (),
    ),
    "missing-templates-beside-a-mismatch": Case(
        dra_runtime(by_template("imex-channel", name="imex"), by_template(), by_template("x")),
        (claim_template("default-rdma", exactly(mode=None)),),
        ("ResourceClaimTemplateNotFound", "RdmaClaimMismatch"),
        "ResourceClaimTemplate imex-channel, x does not exist",
        f"{CLAIMS}[0]",
    ),
    "bound-and-annotated": Case(
        dra_runtime(by_template(), annotations=wired()),
        (claim_template(),),
        ("WiringModeConflict",),
        "bound to profile a4-dranet, whose NICs are claimed by DRA, but the interfaces "
        "annotation maps eth1->gpu-nic-0, a Device-type Network, too; GKE's DRANET driver and "
        "Device-type Networks must not manage the same NICs: wire them one way",
        "spec.template.spec.replicatedJobs[0].template.spec.template.metadata.annotations"
        f"[{INTERFACES}][1]",
    ),
    "bound-and-eth0-only": Case(
        dra_runtime(
            by_template(), annotations={**ETH0_ONLY, "networking.gke.io/default-interface": "eth0"}
        ),
        (claim_template(),),
        (),
    ),
    "no-node-job": Case(
        runtime("r", kind=TR, labels={PROFILE: "a4-dranet"}, jobs=[]),
        (),
        ("NodeJobMissing",),
        "bound to profile a4-dranet, but spec.template.spec.replicatedJobs declares no "
        '"node" job and none labelled trainer.kubeflow.org/trainjob-ancestor-step: trainer, so '
        "its pods cannot claim their NICs",
    ),
    "ctr-alone-without-claims": Case(
        dra_runtime(kind=CTR), (), ("RdmaClaimMissing",), "has no resourceClaims"
    ),
    "ctr-alone-is-judged-with-each-trainjob": Case(
        dra_runtime(by_template("absent"), SHARED, kind=CTR), (), ()
    ),
    "unbound-annotated-and-claiming-rdma": Case(
        runtime("r", kind=TR, jobs=[claimed_job(by_template(), annotations=wired())]),
        (claim_template(),),
        ("WiringModeConflict",),
        "the interfaces annotation maps eth1->gpu-nic-0, a Device-type Network, and the pod "
        "claims mrdma.google.com devices by ResourceClaimTemplate team/default-rdma; GKE's "
        "DRANET driver",
    ),
    "bound-and-an-l3-gvnic": Case(
        dra_runtime(by_template(), annotations=wired([("eth1", "gvnic-1")])),
        (claim_template(), GVNIC_L3),
        (),
    ),
    "bound-and-an-l2-network": Case(
        dra_runtime(by_template(), annotations=wired([("eth1", "vlan-10")])),
        (claim_template(), network("vlan-10", network_type="L2")),
        (),
    ),
    "bound-a-device-network-after-an-l3-gvnic": Case(
        dra_runtime(by_template(), annotations=wired([("eth1", "gvnic-1"), ("eth2", "rdma-0")])),
        (claim_template(), GVNIC_L3, network("rdma-0")),
        ("WiringModeConflict",),
        "maps eth2->rdma-0, a Device-type Network, too",
        "spec.template.spec.replicatedJobs[0].template.spec.template.metadata.annotations"
        f"[{INTERFACES}][2]",
    ),
    "bound-and-a-network-that-does-not-exist": Case(
        dra_runtime(by_template(), annotations=wired([("eth1", "absent")])),
        (claim_template(),),
        ("NetworkNotFound",),
    ),
    "unbound-an-l3-gvnic-and-claiming-rdma": Case(
        runtime(
            "r",
            kind=TR,
            jobs=[claimed_job(by_template(), annotations=wired([("eth1", "gvnic-1")]))],
        ),
        (claim_template(), GVNIC_L3),
        (),
    ),
    "unbound-a-missing-network-and-claiming-rdma": Case(
        runtime(
            "r", kind=TR, jobs=[claimed_job(by_template(), annotations=wired([("eth1", "x")]))]
        ),
        (claim_template(),),
        ("NetworkNotFound",),
    ),
    "unbound-annotated-and-claiming-imex": Case(
        runtime("r", kind=TR, jobs=[claimed_job(by_template("imex"), annotations=wired())]),
        (claim_template("imex", exactly("compute-domain-default-channel.nvidia.com")),),
        (),
    ),
    "unbound-annotated-and-a-missing-template": Case(
        runtime("r", kind=TR, jobs=[claimed_job(by_template(), annotations=wired())]), (), ()
    ),
    "unbound-eth0-only-and-claiming-rdma": Case(
        runtime(
            "r",
            kind=TR,
            jobs=[
                claimed_job(
                    by_template(),
                    annotations={**ETH0_ONLY, "networking.gke.io/default-interface": "eth0"},
                )
            ],
        ),
        (claim_template(),),
        (),
    ),
    "unbound-ctr-alone": Case(
        runtime("r", jobs=[claimed_job(by_template(), annotations=wired())]),
        (claim_template(),),
        (),
    ),
    "unbound-other-annotated-job": Case(
        runtime(
            "r",
            kind=TR,
            jobs=[node_job(), claimed_job(by_template(), annotations=wired(), name="evaluator")],
        ),
        (claim_template(),),
        ("WiringModeConflict",),
        "evaluator job: the interfaces annotation maps",
    ),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_each_dra_case_gets_its_codes_message_and_field(case: Case) -> None:
    verdict = judged(case.obj, *case.templates)
    assert codes(verdict) == case.expected
    if case.message:
        assert case.message in messages(verdict)
    if case.field:
        assert verdict.violations[0].field == case.field


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(
            replace(snapshot(), claim_template_state=ClaimTemplates({}, served=False)),
            id="not-served",
        ),
    ],
)
def test_a_cluster_that_does_not_serve_the_resource_api_has_no_templates(
    view: ClusterSnapshot,
) -> None:
    verdict = judged(dra_runtime(by_template(), by_template("x", name="y")), view=view)
    assert codes(verdict) == ("ResourceClaimTemplateNotFound",)
    assert verdict.violations[0].message == (
        f"{BOUND}the cluster does not serve resource.k8s.io/v1, so no ResourceClaimTemplate it "
        "names (default-rdma, x) can exist"
    )
    assert verdict.violations[0].field == f"{CLAIMS}[0]"
    # Unbound, nothing can conflict: no template exists.
    unbound = runtime("r", kind=TR, jobs=[claimed_job(by_template(), annotations=wired())])
    assert judged(unbound, view=view).allowed


UNSYNCED = Unverifiable("resourceclaimtemplates cache not synced")


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(dra_runtime(by_template()), id="bound"),
        pytest.param(
            runtime("r", kind=TR, jobs=[claimed_job(by_template(), annotations=wired())]),
            id="unbound-annotated",
        ),
    ],
)
def test_templates_that_cannot_be_read_leave_nicguard_undecided(obj: JsonMap) -> None:
    view = replace(snapshot(claim_template()), claim_template_state=UNSYNCED)
    verdict = judged(obj, view=view)
    assert codes(verdict) == ("ClusterStateUnavailable",)
    assert verdict.undecided
    assert verdict.violations[0].message == (
        "nicguard cannot decide: the ResourceClaimTemplates cannot be read: "
        "resourceclaimtemplates cache not synced"
    )
    assert verdict.violations[0].field == CLAIMS
    allowed = judged(obj, view=view, policy=Policy(on_unverifiable=OnUnverifiable.ALLOW))
    assert allowed.allowed
    assert allowed.warnings[0].startswith("[ClusterStateUnavailable]")


def test_nothing_that_needs_no_template_reads_them() -> None:
    view = replace(snapshot(), claim_template_state=UNSYNCED)
    assert judged(runtime("plain", annotations=wired()), view=view).allowed
    assert judged(dra_runtime(SHARED), view=view).violations[0].code == "RdmaClaimMismatch"


@pytest.mark.parametrize(
    ("profile", "nics"),
    [("a3-ultra-dranet", 8), ("a4-dranet", 8), ("a4x-dranet", 4), ("a4x-max-dranet", 8)],
)
def test_each_dra_profile_wants_all_its_nodes_nics(profile: str, nics: int) -> None:
    for count, allowed in ((nics, True), (nics - 1, False), (nics + 1, False)):
        template = claim_template("default-rdma", exactly(mode="ExactCount", count=count))
        verdict = judged(dra_runtime(by_template(), profile=profile), template)
        assert verdict.allowed is allowed, (profile, count)
    verdict = judged(dra_runtime(by_template(), profile=profile), claim_template())
    assert verdict.allowed


NAMED = frozenset({"dranet"})


@pytest.mark.parametrize(
    ("policy", "profile"),
    [
        (Policy(a3_ultra_dranet_runtimes=NAMED), "a3-ultra-dranet"),
        (Policy(a4_dranet_runtimes=NAMED), "a4-dranet"),
        (Policy(a4x_dranet_runtimes=NAMED), "a4x-dranet"),
        (Policy(a4x_max_dranet_runtimes=NAMED), "a4x-max-dranet"),
    ],
)
def test_a_setting_binds_cluster_training_runtimes_by_name(policy: Policy, profile: str) -> None:
    obj = runtime("dranet", jobs=[node_job()])
    verdict = judged(obj, policy=policy)
    assert codes(verdict) == ("RdmaClaimMissing",)
    assert f"bound to profile {profile} (" in messages(verdict)
    assert judged(obj).allowed  # default: bound by no name


def test_a_name_binding_outranks_the_label() -> None:
    obj = runtime("dranet", labels={PROFILE: "a3-mega-tcpxo"}, jobs=[node_job()])
    verdict = judged(obj, policy=Policy(a4_dranet_runtimes=frozenset({"dranet"})))
    assert codes(verdict) == ("RdmaClaimMissing",)
    assert verdict.warnings == (
        'label nicguard.dev/profile: "a3-mega-tcpxo" ignored: ClusterTrainingRuntime dranet is '
        "bound to profile a4-dranet by name (setting a4-dranet-runtimes), which labels never undo",
    )


def test_a_launcher_that_runs_ranks_claims_its_nics_too() -> None:
    obj = mpi_runtime("mpi", labels={PROFILE: "a4-dranet"})
    jobs = obj["spec"]["template"]["spec"]["replicatedJobs"]  # type: ignore[index]
    jobs[1] = claimed_job(by_template())
    verdict = judged(obj)
    assert codes(verdict) == ("RdmaClaimMissing",)
    assert verdict.violations[0].message.startswith("launcher job: bound to profile a4-dranet")


TRAINJOB_NS = "team"


@pytest.mark.parametrize(
    ("runtime_obj", "templates", "expected", "message"),
    [
        pytest.param(
            dra_runtime(by_template(), kind=CTR), (claim_template(),), (), "", id="ctr-good"
        ),
        pytest.param(
            dra_runtime(by_template(), kind=CTR),
            (claim_template(namespace="other"),),
            ("ResourceClaimTemplateNotFound",),
            "does not exist in namespace team",
            id="ctr-template-missing-in-the-trainjobs-namespace",
        ),
        pytest.param(
            dra_runtime(by_template(), kind=CTR),
            (claim_template("default-rdma", exactly(mode=None)),),
            ("RdmaClaimMismatch",),
            f"{BOUND}ResourceClaimTemplate team/default-rdma requests 1",
            id="ctr-mismatch-judged-with-the-trainjob",
        ),
        pytest.param(
            dra_runtime(by_template()),
            (claim_template("default-rdma", exactly(mode=None)),),
            ("RdmaClaimMismatch",),
            "inherited unchanged from TrainingRuntime/team/torch-distributed-dranet, the object "
            f"to fix: {BOUND}",
            id="tr-mismatch-inherited",
        ),
        pytest.param(
            dra_runtime(kind=CTR),
            (),
            ("RdmaClaimMissing",),
            "inherited unchanged from ClusterTrainingRuntime/torch-distributed-dranet",
            id="ctr-missing-inherited",
        ),
        pytest.param(
            runtime("plain", jobs=[claimed_job(by_template(), annotations=wired())]),
            (claim_template(),),
            ("WiringModeConflict",),
            "the pod claims mrdma.google.com devices by ResourceClaimTemplate team/default-rdma",
            id="unbound-ctr-conflict-judged-with-the-trainjob",
        ),
    ],
)
def test_a_trainjob_is_judged_with_its_runtimes_claims_in_its_namespace(
    runtime_obj: dict[str, object],
    templates: tuple[object, ...],
    expected: tuple[str, ...],
    message: str,
) -> None:
    name = str(runtime_obj["metadata"]["name"])  # type: ignore[index]
    kind = str(runtime_obj["kind"])
    job = trainjob(ref={"name": name, "kind": kind}, namespace=TRAINJOB_NS)
    verdict = judged(job, view=snapshot(runtime_obj, *templates))
    assert codes(verdict) == expected
    assert verdict.violations == () or verdict.violations[0].field == "spec.runtimeRef"
    if message:
        assert message in messages(verdict)


def _nested(value: object, *keys: str) -> dict[str, object]:
    for key in reversed(keys):
        value = {key: value}
    assert isinstance(value, dict)
    return value


def test_trainjob_patches_cannot_reach_the_claims() -> None:
    # Trainer v2.3.0's patch types have no resourceClaims: the runtime's claims are what run.
    runtime_obj = dra_runtime(kind=CTR)
    job = trainjob("torch-distributed-dranet")
    claims = _nested({"resourceClaims": [by_template()]}, "template", "spec", "template", "spec")
    node = {"name": "node", **claims}
    patch = _nested([node], "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
    job["spec"]["runtimePatches"] = [patch]  # type: ignore[index]
    verdict = judged(job, view=snapshot(runtime_obj, claim_template()))
    assert codes(verdict) == ("RdmaClaimMissing",)


def test_an_update_that_changes_the_claims_gets_the_full_verdict() -> None:
    old = dra_runtime(by_template("gone"))
    new = dra_runtime(by_template("also-gone"))
    verdict = evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), Policy())
    assert codes(verdict) == ("ResourceClaimTemplateNotFound",)
    same = evaluate(review(old, operation=Operation.UPDATE, old=old), snapshot(), Policy())
    assert (codes(same), [v.code.value for v in same.grandfathered]) == (
        (),
        ["ResourceClaimTemplateNotFound"],
    )


def test_a_runtime_snapshot_of_a_cluster_runtime_is_judged_in_its_trainjobs_namespace() -> None:
    runtime_obj = dra_runtime(by_template(), kind=CTR)
    request = snapshot_review(copy_of(bare(runtime_obj)))
    view = snapshot(runtime_obj)
    assert codes(evaluate(request, view, Policy())) == ("ResourceClaimTemplateNotFound",)
    assert evaluate(request, snapshot(runtime_obj, claim_template()), Policy()).allowed


def test_clusters_without_dra_see_no_change() -> None:
    # A runtime that claims nothing and is bound to no DRA profile: nothing reads the templates.
    view = replace(snapshot(), claim_template_state=UNSYNCED)
    assert judged(runtime(annotations=wired(PAIRS)), view=view).allowed
