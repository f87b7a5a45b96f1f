"""The workload doors (docs/rules.md): a JobSet's, a Job's and a Pod's annotated pod templates,
judged without a binding, each finding naming the object and its controller."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Networks, Unverifiable
from app.domain.evaluate import evaluate, evaluate_object
from app.domain.fields import JsonMap
from app.domain.kinds import Workload
from app.domain.policy import (
    Enforcement,
    OnUnverifiable,
    Placement,
    Policy,
    Workloads,
)
from app.domain.review import Operation
from app.domain.verdict import Decision, Verdict
from app.domain.workloads import describe_workload, judge_workload, workload_templates
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    JOB_SET_API,
    PAIRS,
    annotation,
    batch_job,
    claim_template,
    controller,
    exactly,
    job_set,
    network,
    node_job,
    param_set,
    pod,
    review,
    snapshot,
    wired,
)

MISPLACED = (("eth1", "gpu-nic-1"), ("eth2", "gpu-nic-0"))
MISSING = (("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-9"))
JOB_OF = controller("Job", "llama-node-0")
JOB_SET_OF = controller("JobSet", "llama", JOB_SET_API)
POD_LEAD = "Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0): "
POD_INTERFACES = f"metadata.annotations[{INTERFACES}]"
JOB_INTERFACES = f"spec.template.metadata.annotations[{INTERFACES}]"


def _rjob(position: int) -> str:
    return f"spec.replicatedJobs[{position}].template.spec.template.metadata.annotations"


def _found(verdict: Verdict) -> list[tuple[str, str, str]]:
    return [(v.code.value, v.field, v.message) for v in verdict.violations]


def _judge(
    obj: JsonMap, view: ClusterSnapshot | None = None, policy: Policy | None = None
) -> Verdict:
    return evaluate(review(obj), snapshot() if view is None else view, policy or Policy())


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            pod({}, owners=[JOB_OF]),
            "Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0)",
            id="pod-of-job",
        ),
        pytest.param(
            pod({}, name=None, generate_name="llama-node-0-0-", owners=[JOB_OF]),
            "Pod team-a/llama-node-0-0-… (of Job team-a/llama-node-0)",
            id="generate-name",
        ),
        pytest.param(pod({}, name=None), "Pod team-a/(unnamed)", id="no-name"),
        pytest.param(
            pod({}, owners=[{**JOB_OF, "controller": False}]),
            "Pod team-a/llama-node-0-0-x2k",
            id="owner-not-controller",
        ),
        pytest.param(
            pod({}, owners=["not a map", {"controller": True, "kind": "Job"}, JOB_OF]),
            "Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0)",
            id="unusable-owners-skipped",
        ),
        pytest.param(
            batch_job({}, owners=[JOB_SET_OF]),
            "Job team-a/llama-node-0 (of JobSet team-a/llama)",
            id="job-of-jobset",
        ),
        pytest.param(job_set(), "JobSet team-a/llama", id="jobset"),
        pytest.param(
            pod({}, name="x" * 80),
            f"Pod team-a/{'x' * 63}…",
            id="long-name-cut",
        ),
    ],
)
def test_a_workload_is_named_with_its_controller(obj: JsonMap, expected: str) -> None:
    kind = Workload(str(obj["kind"]))
    assert describe_workload(kind, obj, "team-a") == expected


def test_a_workload_without_namespace_is_named_alone() -> None:
    assert describe_workload(Workload.POD, pod({}), "") == "Pod llama-node-0-0-x2k"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            job_set(
                node_job(wired(), name="node"),
                node_job({"team": "a"}, name="driver"),
                node_job(wired(MISPLACED), name="workers"),
                {"template": {"spec": {"template": {"metadata": {"annotations": wired()}}}}},
            ),
            [
                (f"{_rjob(0)}", "node"),
                (f"{_rjob(2)}", "workers"),
                (f"{_rjob(3)}", "replicatedJobs[3]"),
            ],
            id="jobset-annotated-jobs",
        ),
        pytest.param(
            job_set(node_job(None), "not a job", {"name": "no-template"}),
            [],
            id="jobset-nothing-annotated",
        ),
        pytest.param(batch_job(wired()), [("spec.template.metadata.annotations", "Job")], id="job"),
        pytest.param(batch_job(None), [], id="job-unannotated"),
        pytest.param(pod(wired()), [("metadata.annotations", "Pod")], id="pod"),
        pytest.param(pod({"team": "a"}), [], id="pod-unannotated"),
    ],
)
def test_only_templates_carrying_the_interfaces_key_are_judged(
    obj: JsonMap, expected: list[tuple[str, str]]
) -> None:
    kind = Workload(str(obj["kind"]))
    found = workload_templates(kind, obj)
    assert [(str(t.annotations_path), t.job) for t in found] == expected


@pytest.mark.parametrize(
    ("obj", "view", "expected"),
    [
        pytest.param(
            job_set(
                node_job(wired(), name="node"),
                node_job(wired(MISPLACED), name="workers"),
                node_job(wired(MISSING), name="eval"),
            ),
            None,
            [
                (
                    "NetworkMisplaced",
                    f"{_rjob(1)}[{INTERFACES}]",
                    "JobSet team-a/llama: workers job: Networks on another interface than the "
                    "recipe gives them: eth1->gpu-nic-1 (the recipe places gpu-nic-1 on eth2), "
                    "eth2->gpu-nic-0 (the recipe places gpu-nic-0 on eth1) "
                    "(recipe nicguard-system/nicguard-recipe@7)",
                ),
                (
                    "NetworkNotFound",
                    f"{_rjob(2)}[{INTERFACES}][2].network",
                    "JobSet team-a/llama: eval job: ",
                ),
            ],
            id="jobset-several-jobs",
        ),
        pytest.param(
            job_set(node_job(wired(MISPLACED), name="node")),
            None,
            [("NetworkMisplaced", f"{_rjob(0)}[{INTERFACES}]", "JobSet team-a/llama: node job: ")],
            id="jobset-one-job-named",
        ),
        pytest.param(
            batch_job(wired(MISSING), owners=[JOB_SET_OF]),
            None,
            [
                (
                    "NetworkNotFound",
                    f"{JOB_INTERFACES}[2].network",
                    "Job team-a/llama-node-0 (of JobSet team-a/llama): ",
                )
            ],
            id="job-missing-network",
        ),
        pytest.param(
            pod(wired(MISPLACED), owners=[JOB_OF]),
            None,
            [("NetworkMisplaced", POD_INTERFACES, f"{POD_LEAD}Networks on another interface")],
            id="pod-misplaced",
        ),
        pytest.param(
            pod(wired(default="eth9"), owners=[JOB_OF]),
            None,
            [
                (
                    "DefaultInterfaceInvalid",
                    f"metadata.annotations[{DEFAULT_INTERFACE}]",
                    POD_LEAD,
                )
            ],
            id="pod-structure",
        ),
        pytest.param(
            pod({INTERFACES: "[]", DEFAULT_INTERFACE: "eth0"}, owners=[JOB_OF]),
            None,
            [("InterfacesAnnotationMalformed", POD_INTERFACES, POD_LEAD)],
            id="pod-malformed",
        ),
        pytest.param(
            pod(wired(), owners=[JOB_OF]),
            replace(snapshot(), network_state=Networks({}, served=False)),
            [("NetworkAPINotServed", POD_INTERFACES, POD_LEAD)],
            id="network-api-not-served",
        ),
        pytest.param(
            pod(wired(), owners=[JOB_OF]),
            snapshot(param_set("gpu-nic-3", ready=False)),
            [("NetworkNotReady", f"{POD_INTERFACES}[1].network", POD_LEAD)],
            id="param-set-not-ready",
        ),
        pytest.param(
            pod(wired(), owners=[JOB_OF]),
            replace(snapshot(), network_state=Unverifiable("networks cache not synced")),
            [("ClusterStateUnavailable", POD_INTERFACES, POD_LEAD)],
            id="unsynced-cache",
        ),
        pytest.param(
            pod(wired(MISPLACED[:1]), owners=[JOB_OF]),
            replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced")),
            [("ClusterStateUnavailable", POD_INTERFACES, POD_LEAD)],
            id="unsynced-recipe",
        ),
        pytest.param(pod(wired()), None, [], id="pod-allowed"),
        pytest.param(pod(None), None, [], id="pod-unannotated"),
        pytest.param(job_set(node_job(wired(PAIRS[:2]))), None, [], id="jobset-subset-placed"),
    ],
)
def test_workloads_are_judged_by_the_rules_that_need_no_binding(
    obj: JsonMap, view: ClusterSnapshot | None, expected: list[tuple[str, str, str]]
) -> None:
    found = _found(_judge(obj, view))
    assert [(code, field) for code, field, _ in found] == [(c, f) for c, f, _ in expected]
    for (_, _, message), (_, _, start) in zip(found, expected, strict=True):
        assert message.startswith(start), message


def test_a_network_shared_by_param_set_problems_names_the_param_set() -> None:
    view = snapshot(param_set("gpu-nic-3", ready=False))
    (violation,) = _judge(pod(wired()), view).violations
    assert "gpu-nic-3" in violation.message


def test_an_unverifiable_state_may_be_allowed_with_a_warning() -> None:
    view = replace(snapshot(), network_state=Unverifiable("networks cache not synced"))
    verdict = _judge(pod(wired()), view, Policy(on_unverifiable=OnUnverifiable.ALLOW))
    assert verdict.allowed
    assert verdict.warnings[0].startswith("[ClusterStateUnavailable] Pod team-a/"), verdict


def test_a_refused_pod_names_what_to_fix_on_its_own() -> None:
    """A controller's FailedCreate Event shows only this message: it names the Pod, its owner,
    the pairs and the recipe."""
    (violation,) = _judge(pod(wired(MISPLACED), owners=[JOB_OF])).violations
    assert violation.render() == (
        "[NetworkMisplaced] Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0): "
        "Networks on another interface than the recipe gives them: eth1->gpu-nic-1 (the recipe "
        "places gpu-nic-1 on eth2), eth2->gpu-nic-0 (the recipe places gpu-nic-0 on eth1) "
        "(recipe nicguard-system/nicguard-recipe@7)"
    )


def _update(old: JsonMap, new: JsonMap) -> Verdict:
    return evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), Policy())


def _relabelled(obj: JsonMap) -> dict[str, object]:
    metadata = obj["metadata"]
    assert isinstance(metadata, Mapping)
    return {**obj, "metadata": {**metadata, "labels": {"kueue.x-k8s.io/queue-name": "a"}}}


@pytest.mark.parametrize(
    ("old", "new", "denied", "grandfathered"),
    [
        pytest.param(
            job_set(node_job(wired(MISSING))),
            _relabelled(job_set(node_job(wired(MISSING)))),
            (),
            ("NetworkNotFound",),
            id="jobset-wiring-untouched",
        ),
        pytest.param(
            job_set(node_job(wired()), suspend=True),
            job_set(node_job(wired(MISPLACED)), suspend=True),
            ("NetworkMisplaced",),
            (),
            id="suspended-jobset-annotation-swapped",
        ),
        pytest.param(
            job_set(node_job(None)),
            job_set(node_job(wired(MISSING))),
            ("NetworkNotFound",),
            (),
            id="jobset-annotation-added",
        ),
        pytest.param(
            batch_job(wired(MISSING)),
            _relabelled(batch_job(wired(MISSING))),
            (),
            ("NetworkNotFound",),
            id="job-wiring-untouched",
        ),
        pytest.param(
            batch_job(wired(MISSING)),
            batch_job(wired(MISPLACED)),
            ("NetworkMisplaced",),
            (),
            id="job-wiring-changed",
        ),
        pytest.param(
            job_set(node_job(wired(MISSING), name="node"), node_job(wired(), name="eval")),
            job_set(node_job(wired(MISSING), name="node"), node_job(wired(PAIRS[:2]), name="eval")),
            ("NetworkNotFound",),
            (),
            id="jobset-other-job-rewired",
        ),
        pytest.param(
            pod(wired(MISSING)),
            _relabelled(pod(wired(MISSING))),
            (),
            (),
            id="pod-wiring-untouched-not-judged",
        ),
        pytest.param(
            pod(wired(MISSING)),
            pod(wired(MISSING, default="eth9")),
            ("DefaultInterfaceInvalid", "NetworkNotFound"),
            (),
            id="pod-default-interface-changed-never-grandfathered",
        ),
    ],
)
def test_an_update_is_grandfathered_while_the_wiring_is_untouched(
    old: JsonMap, new: JsonMap, denied: tuple[str, ...], grandfathered: tuple[str, ...]
) -> None:
    verdict = _update(old, new)
    assert tuple(v.code.value for v in verdict.violations) == denied
    assert tuple(v.code.value for v in verdict.grandfathered) == grandfathered


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            pod(wired(), owners=[JOB_OF]),
            pod(wired(MISPLACED), owners=[JOB_OF]),
            [("NetworkMisplaced", POD_INTERFACES, f"{POD_LEAD}Networks on another interface")],
            id="gated-pod-wiring-swapped",
        ),
        pytest.param(
            pod(None, owners=[JOB_OF]),
            pod(wired(MISSING), owners=[JOB_OF]),
            [("NetworkNotFound", f"{POD_INTERFACES}[2].network", POD_LEAD)],
            id="unwired-pod-wired-with-a-missing-network",
        ),
        pytest.param(
            pod(wired(MISSING), owners=[JOB_OF]),
            pod(None, owners=[JOB_OF]),
            [],
            id="pod-wiring-removed",
        ),
        pytest.param(
            pod(wired(MISSING), owners=[JOB_OF]),
            pod({DEFAULT_INTERFACE: "eth0"}, owners=[JOB_OF]),
            [],
            id="pod-interfaces-removed-default-kept",
        ),
        pytest.param(
            pod(wired(MISPLACED), owners=[JOB_OF]),
            pod(wired(), owners=[JOB_OF]),
            [],
            id="pod-wiring-fixed",
        ),
    ],
)
def test_a_pod_update_that_changes_its_wiring_is_judged_as_at_create(
    old: JsonMap, new: JsonMap, expected: list[tuple[str, str, str]]
) -> None:
    """A gated or pending Pod has no sandbox yet: its NICs will be what the annotation says
    then, so the new wiring is judged as a CREATE, and dropping it is allowed."""
    found = _found(_update(old, new))
    assert [(code, field) for code, field, _ in found] == [(c, f) for c, f, _ in expected]
    for (_, _, message), (_, _, start) in zip(found, expected, strict=True):
        assert message.startswith(start), message


JOB_SET_REMOVED = (
    "JobSet team-a/llama: workers job: the update removes the networking.gke.io/interfaces "
    "annotation from the workers pod template: the Jobs the JobSet creates from it from then on "
    "(a Job re-created on failure is one) would get no GPU NICs, only eth0"
)
JOB_REMOVED = (
    "Job team-a/llama-node-0 (of JobSet team-a/llama): the update removes the "
    "networking.gke.io/interfaces annotation from its pod template: the Pods the Job creates "
    "from it from then on would get no GPU NICs, only eth0"
)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            job_set(node_job(wired(), name="node"), node_job(wired(), name="workers")),
            job_set(node_job(wired(), name="node"), node_job({"team": "a"}, name="workers")),
            [("InterfacesAnnotationMissing", f"{_rjob(1)}[{INTERFACES}]", JOB_SET_REMOVED)],
            id="jobset-one-job-unwired",
        ),
        pytest.param(
            job_set(node_job(wired(), name="workers"), node_job(wired(), name="node")),
            job_set(node_job(wired(), name="node"), node_job(None, name="workers")),
            [("InterfacesAnnotationMissing", f"{_rjob(1)}[{INTERFACES}]", JOB_SET_REMOVED)],
            id="jobset-jobs-paired-by-name",
        ),
        pytest.param(
            job_set(node_job(wired(), name="workers"), suspend=True),
            job_set(
                {"name": "workers", "template": {"spec": {}}},
                node_job(None, name="node"),
                suspend=True,
            ),
            [("InterfacesAnnotationMissing", f"{_rjob(0)}[{INTERFACES}]", JOB_SET_REMOVED)],
            id="jobset-template-dropped",
        ),
        pytest.param(
            job_set(node_job(wired(MISSING), name="node"), node_job(wired(), name="workers")),
            job_set(node_job(wired(MISSING), name="node"), node_job(None, name="workers")),
            [
                ("NetworkNotFound", f"{_rjob(0)}[{INTERFACES}][2].network", "JobSet team-a/"),
                ("InterfacesAnnotationMissing", f"{_rjob(1)}[{INTERFACES}]", JOB_SET_REMOVED),
            ],
            id="jobset-removal-beside-a-kept-violation-gets-the-full-verdict",
        ),
        pytest.param(
            job_set(node_job(wired(), name="node")),
            job_set(node_job(wired(), name="evaluator"), node_job(None, name="workers")),
            [],
            id="jobset-job-renamed-is-no-removal",
        ),
        pytest.param(
            job_set(node_job(None, name="node")),
            job_set(node_job(None, name="node")),
            [],
            id="jobset-never-wired",
        ),
        pytest.param(
            batch_job(wired(), owners=[JOB_SET_OF]),
            batch_job({"team": "a"}, owners=[JOB_SET_OF]),
            [("InterfacesAnnotationMissing", JOB_INTERFACES, JOB_REMOVED)],
            id="job-unwired",
        ),
        pytest.param(
            batch_job(wired(), owners=[JOB_SET_OF]),
            batch_job(wired(MISPLACED), owners=[JOB_SET_OF]),
            [("NetworkMisplaced", JOB_INTERFACES, "Job team-a/llama-node-0 (of JobSet ")],
            id="job-rewired-is-no-removal",
        ),
    ],
)
def test_an_update_removing_a_templates_wiring_is_refused(
    old: JsonMap, new: JsonMap, expected: list[tuple[str, str, str]]
) -> None:
    """Jobs a JobSet creates, and Pods a Job creates, after the update would get only eth0:
    the wiring they were admitted with may not be taken away."""
    found = _found(_update(old, new))
    assert [(code, field) for code, field, _ in found] == [(c, f) for c, f, _ in expected]
    for (_, _, message), (_, _, start) in zip(found, expected, strict=True):
        assert message.startswith(start), message


@pytest.mark.parametrize(
    ("policy", "allowed", "warned"),
    [
        pytest.param(Policy(workloads=Workloads.WARN), True, (), id="workloads-warn"),
        pytest.param(Policy(workloads=Workloads.OFF), True, (), id="workloads-off"),
        pytest.param(
            Policy(enforcement=Enforcement.WARN),
            True,
            ("InterfacesAnnotationMissing",),
            id="enforcement-warn",
        ),
    ],
)
def test_a_removed_wiring_follows_the_settings(
    policy: Policy, allowed: bool, warned: tuple[str, ...]
) -> None:
    old, new = batch_job(wired()), batch_job(None)
    verdict = evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), policy)
    assert verdict.allowed is allowed
    assert tuple(v.code.value for v in verdict.warned) == warned
    waived = policy.workloads is Workloads.WARN
    assert [v.code.value for v in verdict.waived] == (["InterfacesAnnotationMissing"] * waived)


@pytest.mark.parametrize(
    ("policy", "decision", "denied", "waived", "warned"),
    [
        pytest.param(Policy(), Decision.DENIED, ("NetworkMisplaced",), (), (), id="deny"),
        pytest.param(
            Policy(workloads=Workloads.WARN),
            Decision.ALLOWED,
            (),
            ("NetworkMisplaced",),
            (),
            id="workloads-warn",
        ),
        pytest.param(
            Policy(workloads=Workloads.OFF), Decision.ALLOWED, (), (), (), id="workloads-off"
        ),
        pytest.param(
            Policy(placement=Placement.WARN),
            Decision.ALLOWED,
            (),
            ("NetworkMisplaced",),
            (),
            id="placement-warn",
        ),
        pytest.param(
            Policy(enforcement=Enforcement.WARN),
            Decision.WARNED,
            (),
            (),
            ("NetworkMisplaced",),
            id="enforcement-warn",
        ),
        pytest.param(
            Policy(workloads=Workloads.WARN, enforcement=Enforcement.WARN),
            Decision.ALLOWED,
            (),
            ("NetworkMisplaced",),
            (),
            id="workloads-and-enforcement-warn",
        ),
        pytest.param(
            Policy(placement=Placement.OFF, workloads=Workloads.WARN),
            Decision.ALLOWED,
            (),
            (),
            (),
            id="placement-off",
        ),
    ],
)
def test_the_most_lenient_setting_wins(
    policy: Policy,
    decision: Decision,
    denied: tuple[str, ...],
    waived: tuple[str, ...],
    warned: tuple[str, ...],
) -> None:
    verdict = _judge(pod(wired(MISPLACED), owners=[JOB_OF]), policy=policy)
    assert verdict.decision is decision
    assert tuple(v.code.value for v in verdict.violations) == denied
    assert tuple(v.code.value for v in verdict.waived) == waived
    assert tuple(v.code.value for v in verdict.warned) == warned
    if waived or warned:
        assert verdict.warnings[0].startswith(f"[NetworkMisplaced] {POD_LEAD}"), verdict
    else:
        assert not verdict.warnings


def test_workloads_warn_keeps_the_other_warnings_after_the_denials() -> None:
    job = job_set(node_job(wired(MISSING), name="a"), node_job(wired(MISPLACED), name="b"))
    verdict = _judge(job, policy=Policy(workloads=Workloads.WARN, placement=Placement.WARN))
    assert verdict.allowed
    assert [w.partition("]")[0] for w in verdict.warnings] == [
        "[NetworkNotFound",
        "[NetworkMisplaced",
    ]


def test_workloads_off_judges_nothing_and_fingerprints_nothing() -> None:
    evaluation = judge_workload(
        Workload.POD,
        pod({INTERFACES: "not json"}),
        "team-a",
        snapshot(),
        Policy(workloads=Workloads.OFF),
    )
    assert evaluation.verdict == Verdict()
    assert evaluation.fingerprint == ()


def test_evaluate_object_dispatches_workloads() -> None:
    obj = batch_job(wired(MISSING))
    direct = judge_workload(Workload.JOB, obj, "team-a", snapshot(), Policy())
    dispatched = evaluate_object(Workload.JOB, obj, "team-a", snapshot(), Policy())
    assert (dispatched.verdict, dispatched.fingerprint) == (direct.verdict, direct.fingerprint)
    assert [v.code.value for v in direct.verdict.violations] == ["NetworkNotFound"]


def test_a_network_the_cluster_has_is_not_reported() -> None:
    view = snapshot(networks=("gpu-nic-0", "gpu-nic-9"))
    assert _judge(batch_job(wired(MISSING)), view).allowed
    assert not _judge(batch_job(wired(MISSING)), snapshot(network("other"))).allowed


def _claiming(obj: dict[str, object], template: str = "default-rdma") -> dict[str, object]:
    """``obj`` (a Pod) with a pod spec claiming ResourceClaimTemplate ``template``."""
    spec = obj["spec"]
    assert isinstance(spec, dict)
    claims = [{"name": "rdma", "resourceClaimTemplateName": template}]
    return {**obj, "spec": {**spec, "resourceClaims": claims}}


@pytest.mark.parametrize(
    ("templates", "expected"),
    [
        pytest.param(
            (claim_template(namespace="team-a"),), ("WiringModeConflict",), id="claims-rdma"
        ),
        pytest.param((claim_template(namespace="team-b"),), (), id="template-elsewhere"),
        pytest.param(
            (claim_template("default-rdma", exactly("netdev.google.com"), namespace="team-a"),),
            (),
            id="claims-netdev-only",
        ),
    ],
)
def test_a_pod_claiming_rdma_nics_and_mapping_networks_conflicts(
    templates: tuple[object, ...], expected: tuple[str, ...]
) -> None:
    obj = _claiming(pod(wired(), owners=[JOB_OF]))
    verdict = _judge(obj, snapshot(*templates))
    assert tuple(v.code.value for v in verdict.violations) == expected
    if expected:
        (found,) = verdict.violations
        assert found.field == f"{POD_INTERFACES}[1]"
        assert found.message.startswith(POD_LEAD)
        assert "ResourceClaimTemplate team-a/default-rdma" in found.message


@pytest.mark.parametrize(
    ("network_type", "expected"),
    [
        pytest.param("L3", (), id="l3-gvnic"),
        pytest.param("L2", (), id="l2"),
        pytest.param("Device", ("WiringModeConflict",), id="device"),
    ],
)
def test_only_a_device_network_beside_the_claim_conflicts(
    network_type: str, expected: tuple[str, ...]
) -> None:
    """The DRANET driver leaves a gVNIC with secondary ranges alone: an L3 (or L2) Network
    beside the claim is the second gVNIC, no conflict (docs/rules.md, WiringModeConflict)."""
    obj = _claiming(pod({INTERFACES: annotation([("eth1", "gvnic-1")])}, owners=[JOB_OF]))
    view = snapshot(
        claim_template(namespace="team-a"), network("gvnic-1", network_type=network_type)
    )
    verdict = _judge(obj, view)
    assert tuple(v.code.value for v in verdict.violations) == expected


def test_a_missing_network_beside_the_claim_is_not_found_not_a_conflict() -> None:
    obj = _claiming(pod({INTERFACES: annotation([("eth1", "absent")])}, owners=[JOB_OF]))
    verdict = _judge(obj, snapshot(claim_template(namespace="team-a")))
    assert tuple(v.code.value for v in verdict.violations) == ("NetworkNotFound",)


def test_a_jobset_template_claiming_rdma_nics_and_mapping_networks_conflicts() -> None:
    claims = [{"name": "r", "resourceClaimTemplateName": "x"}]
    job = {
        "name": "node",
        "template": {
            "spec": {
                "template": {
                    "metadata": {"annotations": wired()},
                    "spec": {"containers": [], "resourceClaims": claims},
                }
            }
        },
    }
    verdict = _judge(
        job_set(job, node_job(wired(), name="other")),
        snapshot(claim_template("x", namespace="team-a")),
    )
    assert [(v.code.value, v.field) for v in verdict.violations] == [
        (
            "WiringModeConflict",
            f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{INTERFACES}][1]",
        )
    ]
    assert "node job: " in verdict.violations[0].message


def test_a_suspended_jobsets_edit_may_wire_fewer_recipe_nics_but_not_move_them() -> None:
    """What docs/rules.md says a suspended JobSet's edit can and cannot do to a bound runtime's
    wiring: the door judges it unbound, so 4 of the recipe's 8 NICs, each on its interface, are
    admitted (a bound template would be MappingDivergesFromRecipe); moved, they are not."""
    queued = job_set(node_job(wired(PAIRS)), suspend=True, owners=[controller("TrainJob", "llama")])
    fewer = job_set(
        node_job(wired(PAIRS[:4])), suspend=True, owners=[controller("TrainJob", "llama")]
    )
    moved = job_set(
        node_job(wired(MISPLACED)), suspend=True, owners=[controller("TrainJob", "llama")]
    )
    state = snapshot()
    edited = [
        evaluate(review(new, operation=Operation.UPDATE, old=queued), state, Policy())
        for new in (fewer, moved)
    ]
    assert [v.code.value for v in edited[0].violations] == []
    assert [v.code.value for v in edited[1].violations] == ["NetworkMisplaced"]
