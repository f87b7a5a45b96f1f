"""Annotated templates: any replicatedJob that is not wired but whose (effective) pod template
carries the interfaces annotation is judged by the rules that need no binding (docs/rules.md,
What nicguard judges). JobSet runs its pods all the same."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Networks, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.review import Operation
from app.domain.slim import slim_runtime
from app.domain.template import job_templates
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    GB200_PAIRS,
    INTERFACES,
    PAIRS,
    RDMA_RUNTIME,
    RECIPE_BOUND,
    annotation,
    gb200,
    network,
    node_job,
    override,
    param_set,
    review,
    runtime,
    runtime_patch,
    snapshot,
    trainjob,
    wired,
)

EVALUATOR = "spec.template.spec.replicatedJobs[1].template.spec.template.metadata.annotations"
EVALUATOR_INTERFACES = f"{EVALUATOR}[{INTERFACES}]"
BOUND = {RECIPE_BOUND: "true"}


def _with_evaluator(
    evaluator: Mapping[str, object] | None,
    *,
    node: Mapping[str, object] | None = None,
    labels: Mapping[str, object] | None = None,
    kind: Kind = Kind.TRAINING_RUNTIME,
    name: str = "eval-runtime",
) -> dict[str, object]:
    """A runtime whose node job is wired (``node``, default the recipe's mapping) and whose
    second job, ``evaluator``, carries ``evaluator`` as its pod annotations."""
    jobs = [node_job(wired() if node is None else node), node_job(evaluator, name="evaluator")]
    return runtime(name, jobs=jobs, labels=labels, kind=kind)


def _codes(verdict: Verdict) -> list[tuple[str, str]]:
    return [(v.code.value, v.field) for v in verdict.violations]


def _judge(obj: JsonMap, view: ClusterSnapshot | None = None) -> Verdict:
    return evaluate(review(obj), snapshot() if view is None else view, Policy())


@pytest.mark.parametrize(
    ("annotations", "view", "expected"),
    [
        pytest.param(
            {INTERFACES: "[]", DEFAULT_INTERFACE: "eth0"},
            None,
            [("InterfacesAnnotationMalformed", EVALUATOR_INTERFACES)],
            id="malformed",
        ),
        pytest.param(
            {INTERFACES: json.dumps([{"interfaceName": "eth1", "network": "gpu-nic-0"}])},
            None,
            [],
            id="no-eth0-first-is-gke-s-business",
        ),
        pytest.param(wired(PAIRS[:1], default=None), None, [], id="no-default-interface"),
        pytest.param(
            wired(PAIRS[:1], default="eth9"),
            None,
            [("DefaultInterfaceInvalid", f"{EVALUATOR}[{DEFAULT_INTERFACE}]")],
            id="default-interface-unlisted",
        ),
        pytest.param(
            wired([("eth1:0", "gpu-nic-9")]),
            snapshot(network("gpu-nic-9")),
            [("InterfaceNameInvalid", f"{EVALUATOR_INTERFACES}[1].interfaceName")],
            id="interface-name",
        ),
        pytest.param(
            wired([("eth1", "gpu-nic-0"), ("eth1", "gpu-nic-9")]),
            snapshot(network("gpu-nic-9")),
            [("InterfaceDuplicated", f"{EVALUATOR_INTERFACES}[2].interfaceName")],
            id="interface-duplicated",
        ),
        pytest.param(
            wired([("eth1", "gpu-nic-9"), ("eth2", "gpu-nic-9")]),
            snapshot(network("gpu-nic-9")),
            [("NetworkDuplicated", f"{EVALUATOR_INTERFACES}[2].network")],
            id="network-duplicated",
        ),
        pytest.param(wired([("eth1", "pod-network")]), None, [], id="pod-network-elsewhere"),
        pytest.param(
            wired([("eth1", "does-not-exist")]),
            None,
            [("NetworkNotFound", f"{EVALUATOR_INTERFACES}[1].network")],
            id="network-not-found",
        ),
        pytest.param(
            wired([("eth1", "flaky")]),
            snapshot(network("flaky", ready=False)),
            [("NetworkNotReady", f"{EVALUATOR_INTERFACES}[1].network")],
            id="network-not-ready",
        ),
        pytest.param(
            wired([("eth1", "gpu-nic-0")]),
            snapshot(param_set("gpu-nic-0", ready=False)),
            [("NetworkNotReady", f"{EVALUATOR_INTERFACES}[1].network")],
            id="param-set-not-ready",
        ),
        pytest.param(
            wired([("eth1", "gpu-nic-0")]),
            replace(snapshot(), network_state=Networks({}, served=False)),
            [("NetworkAPINotServed", EVALUATOR_INTERFACES)],
            id="network-api-not-served",
        ),
        pytest.param(
            wired([("eth1", "gpu-nic-0")]),
            replace(snapshot(), network_state=Unverifiable("networks cache not synced")),
            [("ClusterStateUnavailable", EVALUATOR_INTERFACES)],
            id="networks-unverifiable",
        ),
        pytest.param(wired([("eth4", "gpu-nic-3")]), None, [], id="a-subset-is-fine"),
        pytest.param(
            wired([("eth1", "gpu-nic-3")]),
            None,
            [("NetworkMisplaced", EVALUATOR_INTERFACES)],
            id="network-misplaced",
        ),
        pytest.param({"team": "eval"}, None, [], id="not-annotated-not-judged"),
        pytest.param({DEFAULT_INTERFACE: "eth9"}, None, [], id="default-alone-not-judged"),
    ],
)
def test_each_unbound_rule_judges_an_annotated_job(
    annotations: dict[str, object],
    view: ClusterSnapshot | None,
    expected: list[tuple[str, str]],
) -> None:
    """With a correctly wired node job beside it, the evaluator's annotation alone is judged,
    its field and message naming the job."""
    obj = _with_evaluator(annotations, node={"team": "unwired node"})
    verdict = _judge(obj, view)
    assert _codes(verdict) == expected
    # What is about the whole cluster (the Network API, nicguard's view) is said once.
    about_the_job = [v for v in verdict.violations if v.field != EVALUATOR_INTERFACES]
    assert all(v.message.startswith("evaluator job: ") for v in about_the_job)


def test_an_unnamed_annotated_job_is_named_by_its_position() -> None:
    unnamed = {"template": node_job(wired([("eth1", "absent")]))["template"]}
    obj = runtime("plain", jobs=[node_job(), {"name": "data"}, unnamed])
    verdict = _judge(obj)
    (violation,) = verdict.violations
    assert violation.code.value == "NetworkNotFound"
    assert violation.message.startswith("replicatedJobs[2] job: ")
    assert violation.field.startswith("spec.template.spec.replicatedJobs[2].template")


@pytest.mark.parametrize(
    ("obj", "view"),
    [
        pytest.param(
            _with_evaluator(wired(PAIRS[::-1][:4]), labels=BOUND),
            snapshot(),
            id="recipe-bound-runtime-evaluator-on-its-own-mapping",
        ),
        pytest.param(
            _with_evaluator(wired(PAIRS[1:] + PAIRS[:1])),
            snapshot(),
            id="unbound-runtime-evaluator-holds-the-recipe-set-reordered",
        ),
        pytest.param(
            _with_evaluator(
                wired(GB200_PAIRS[:2]),
                node=wired(GB200_PAIRS),
                kind=Kind.CLUSTER_TRAINING_RUNTIME,
                name=RDMA_RUNTIME,
            ),
            gb200(modes={"rdma-0": "NetDevice"}),
            id="profile-bound-evaluator-mode-is-not-its-business",
        ),
        pytest.param(
            _with_evaluator({"team": "eval"}, labels=BOUND),
            snapshot(),
            id="bound-runtime-unannotated-evaluator",
        ),
    ],
)
def test_binding_rules_stay_with_the_wired_templates(obj: JsonMap, view: ClusterSnapshot) -> None:
    """No recipe or profile mapping, no DeviceModeMismatch, no order warning, no
    InterfacesAnnotationMissing for an annotated (or an unannotated) other job."""
    verdict = _judge(obj, view)
    node_only = [v for v in verdict.violations if not v.message.startswith("node job: ")]
    assert node_only == []
    assert not any("evaluator" in w for w in verdict.warnings)


def test_the_profile_bound_node_still_gets_its_binding_rules() -> None:
    obj = _with_evaluator(
        wired(GB200_PAIRS[:2]),
        node=wired(GB200_PAIRS),
        kind=Kind.CLUSTER_TRAINING_RUNTIME,
        name=RDMA_RUNTIME,
    )
    verdict = _judge(obj, gb200(modes={"rdma-0": "NetDevice"}))
    assert [(v.code.value, v.message[:10]) for v in verdict.violations] == [
        ("DeviceModeMismatch", "node job: ")
    ]


RUNTIME = _with_evaluator(wired([("eth1", "gpu-nic-0")]), name="eval-runtime")
BROKEN = _with_evaluator(wired([("eth1", "does-not-exist")]), name="eval-runtime")
PLAIN = _with_evaluator({"team": "eval"}, name="eval-runtime")
ORIGIN = "inherited unchanged from TrainingRuntime/team/eval-runtime, the object to fix: "
PATCH_FIELD = (
    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    f".template.spec.template.metadata.annotations[{INTERFACES}][1].network"
)


def _trainjob(
    patches: Sequence[Mapping[str, object]] | None = None,
    overrides: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, object]:
    job = trainjob("eval-runtime")
    spec: dict[str, object] = {"runtimeRef": {"name": "eval-runtime", "kind": "TrainingRuntime"}}
    if patches:
        spec["runtimePatches"] = list(patches)
    if overrides:
        spec["podTemplateOverrides"] = list(overrides)
    job["spec"] = spec
    return job


def _evaluator_patch(annotations: dict[str, object] | None) -> dict[str, object]:
    return runtime_patch(annotations, "evaluator")


@pytest.mark.parametrize(
    ("runtime_obj", "job", "expected"),
    [
        pytest.param(RUNTIME, _trainjob(), [], id="inherits-a-good-evaluator"),
        pytest.param(
            BROKEN,
            _trainjob(),
            [("NetworkNotFound", "spec.runtimeRef", ORIGIN)],
            id="inherits-a-broken-evaluator-names-the-runtime",
        ),
        pytest.param(
            PLAIN,
            _trainjob([_evaluator_patch(wired([("eth1", "absent")]))]),
            [("NetworkNotFound", PATCH_FIELD, "evaluator job: no Network")],
            id="patch-adds-the-annotation-to-an-unannotated-job",
        ),
        pytest.param(
            PLAIN,
            _trainjob([_evaluator_patch({DEFAULT_INTERFACE: "eth1"})]),
            [],
            id="patch-adds-only-the-default-interface",
        ),
        pytest.param(
            RUNTIME,
            _trainjob([_evaluator_patch({INTERFACES: annotation([("eth1", "absent")])})]),
            [("NetworkNotFound", PATCH_FIELD, "evaluator job: no Network")],
            id="patch-overrides-a-good-annotation",
        ),
        pytest.param(
            BROKEN,
            _trainjob([_evaluator_patch({INTERFACES: annotation([("eth2", "gpu-nic-1")])})]),
            [],
            id="patch-repairs-the-runtime",
        ),
        pytest.param(
            BROKEN,
            _trainjob([_evaluator_patch({INTERFACES: None})]),
            [("NetworkNotFound", "spec.runtimeRef", ORIGIN)],
            id="a-null-removes-nothing",
        ),
        pytest.param(
            RUNTIME,
            _trainjob(overrides=[override({DEFAULT_INTERFACE: "eth3"}, "evaluator")]),
            [
                (
                    "DefaultInterfaceInvalid",
                    f"spec.podTemplateOverrides[0].metadata.annotations[{DEFAULT_INTERFACE}]",
                    "evaluator job: ",
                )
            ],
            id="override-breaks-the-default-interface",
        ),
        pytest.param(
            PLAIN,
            _trainjob(
                overrides=[override({INTERFACES: "[]", DEFAULT_INTERFACE: "eth0"}, "evaluator")]
            ),
            [
                (
                    "InterfacesAnnotationMalformed",
                    f"spec.podTemplateOverrides[0].metadata.annotations[{INTERFACES}]",
                    "evaluator job: ",
                )
            ],
            id="override-adds-a-malformed-annotation",
        ),
        pytest.param(
            RUNTIME,
            _trainjob([_evaluator_patch({"$patch": "delete"})]),
            [
                (
                    "PatchDirectiveUnsupported",
                    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
                    ".template.spec.template.metadata.annotations[$patch]",
                    '"$patch: delete" is a strategic-merge directive',
                )
            ],
            id="directive-removes-the-annotations",
        ),
        pytest.param(
            RUNTIME,
            _trainjob([{**_evaluator_patch(None), "$patch": "delete"}]),
            [],
            id="directive-beside-the-patch-is-not-on-the-path",
        ),
        pytest.param(
            RUNTIME,
            _trainjob(overrides=[{**override({"$patch": "replace"}, "evaluator")}]),
            [
                (
                    "PatchDirectiveUnsupported",
                    "spec.podTemplateOverrides[0].metadata.annotations[$patch]",
                    '"$patch: replace" is a strategic-merge directive',
                )
            ],
            id="override-directive-replaces-the-annotations",
        ),
        pytest.param(
            PLAIN,
            _trainjob([_evaluator_patch({"$patch": "delete"})]),
            [],
            id="directive-on-a-job-neither-wired-nor-annotated",
        ),
    ],
)
def test_trainjob_patches_to_an_annotated_job_count(
    runtime_obj: JsonMap, job: JsonMap, expected: list[tuple[str, str, str]]
) -> None:
    verdict = evaluate(review(job), snapshot(runtime_obj), Policy())
    found = [(v.code.value, v.field, v.message) for v in verdict.violations]
    assert [(code, field) for code, field, _ in found] == [(c, f) for c, f, _ in expected]
    for (_, _, message), (_, _, start) in zip(found, expected, strict=True):
        assert start in message


def test_a_directive_on_an_annotated_job_entry_is_refused() -> None:
    entry = {"name": "evaluator", "$patch": "delete"}
    patch = {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [entry]}}}}
    verdict = evaluate(review(_trainjob([patch])), snapshot(RUNTIME), Policy())
    assert _codes(verdict) == [
        (
            "PatchDirectiveUnsupported",
            "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0][$patch]",
        )
    ]
    assert "would remove the evaluator job" in verdict.violations[0].message


def test_an_inherited_node_violation_is_attributed_beside_a_patched_evaluator() -> None:
    """The TrainJob judges two templates where its runtime on its own judges one: the runtime's
    verdict is read with the same job names, so the node's violation still names it."""
    obj = _with_evaluator({"team": "eval"}, node=wired([("eth1", "absent")]))
    job = _trainjob([_evaluator_patch(wired([("eth1", "gpu-nic-0")]))])
    verdict = evaluate(review(job), snapshot(obj), Policy())
    (violation,) = verdict.violations
    assert violation.message.startswith(
        "inherited unchanged from TrainingRuntime/team/eval-runtime, the object to fix: "
        "node job: no Network object exists for eth1->absent"
    )


@pytest.mark.parametrize(
    ("new", "grandfathered"),
    [
        pytest.param(
            {**BROKEN, "metadata": {**BROKEN["metadata"], "labels": {"team": "a"}}},  # type: ignore[dict-item]
            True,
            id="label-change-keeps-the-evaluator-wiring",
        ),
        pytest.param(
            _with_evaluator(wired([("eth1", "does-not-exist"), ("eth2", "gpu-nic-1")])),
            False,
            id="evaluator-wiring-change",
        ),
    ],
)
def test_update_grandfathering_compares_the_annotated_wiring(
    new: JsonMap, grandfathered: bool
) -> None:
    verdict = evaluate(review(new, operation=Operation.UPDATE, old=BROKEN), snapshot(), Policy())
    assert verdict.allowed is grandfathered
    assert [v.code.value for v in (*verdict.violations, *verdict.waived)] == ["NetworkNotFound"]


def test_an_update_that_annotates_another_job_gets_the_full_verdict() -> None:
    """A broken node, unchanged, and an evaluator that gains its annotation: the wiring
    changed, so the node's violation is not grandfathered."""
    node = wired([("eth1", "absent")])
    old = _with_evaluator({"team": "eval"}, node=node)
    new = _with_evaluator(wired([("eth1", "gpu-nic-0")]), node=node)
    verdict = evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), Policy())
    assert [v.code.value for v in verdict.violations] == ["NetworkNotFound"]


def test_a_trainjob_update_on_an_unknowable_runtime_compares_its_evaluator_patches() -> None:
    old = _trainjob([_evaluator_patch(wired([("eth1", "gpu-nic-0")]))])
    new = _trainjob([_evaluator_patch(wired([("eth1", "absent")]))])
    view = replace(snapshot(), runtime_state=Unverifiable("runtimes cache not synced"))
    policy = Policy()
    changed = evaluate(review(new, operation=Operation.UPDATE, old=old), view, policy)
    assert [v.code.value for v in changed.violations] == ["ClusterStateUnavailable"]
    kept = evaluate(review(old, operation=Operation.UPDATE, old=old), view, policy)
    assert kept.allowed


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(BROKEN, id="named"),
        pytest.param(
            runtime(
                "plain",
                jobs=[
                    node_job(),
                    {"template": node_job(wired([("eth1", "absent")]))["template"]},
                    {"no": "name"},
                ],
            ),
            id="unnamed",
        ),
        pytest.param(
            _with_evaluator({INTERFACES: ["not", "a", "string"]}), id="unhashable-annotation"
        ),
    ],
)
def test_the_slim_copy_keeps_what_annotated_jobs_are_judged_on(obj: JsonMap) -> None:
    slim = slim_runtime(obj)
    assert job_templates(slim).annotated == job_templates(obj).annotated
    assert job_templates(slim).wired == job_templates(obj).wired
    job = {**trainjob("x"), "spec": {"runtimeRef": dict(_ref(obj))}}
    whole = evaluate(review(job), snapshot(obj), Policy())
    assert not whole.allowed
    assert evaluate(review(job), snapshot(slim), Policy()) == whole


def _ref(obj: JsonMap) -> dict[str, str]:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return {"name": str(metadata["name"]), "kind": str(obj["kind"])}


def test_a_job_a_patch_unlabels_as_the_trainer_is_still_judged_as_annotated() -> None:
    """Trainer no longer runs the trainer in ``worker`` once the TrainJob's patch relabels it,
    but JobSet still runs its pods with the runtime's annotation: judged by the unbound rules."""
    worker = node_job(wired([("eth1", "absent")]), name="worker")
    worker["template"]["metadata"] = {  # type: ignore[index]
        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    }
    obj = runtime("eval-runtime", kind=Kind.TRAINING_RUNTIME, jobs=[node_job(wired()), worker])
    relabel = {
        "name": "worker",
        "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "x"}}},
    }
    patch = {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [relabel]}}}}
    verdict = evaluate(review(_trainjob([patch])), snapshot(obj), Policy())
    (violation,) = verdict.violations
    assert (violation.code.value, violation.field) == ("NetworkNotFound", "spec.runtimeRef")
    assert violation.message.startswith(f"{ORIGIN}worker job: no Network object exists")
