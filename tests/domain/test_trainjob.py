"""Judging TrainJobs through their runtime (app.domain.trainjob, docs/rules.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate_object
from app.domain.kinds import Kind
from app.domain.policy import OnUnverifiable, Policy
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    bound,
    codes,
    messages,
    override,
    runtime,
    snapshot,
    trainjob,
    waived_codes,
    wired,
)

RECIPE_REF = "nicguard-system/nicguard-recipe@7"
REVERSED = list(reversed(PAIRS))
OVERRIDE_INTERFACES = f"spec.podTemplateOverrides[0].metadata.annotations[{INTERFACES}]"
PATCH_ANNOTATIONS = (
    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    ".template.spec.template.metadata.annotations"
)
TCPXO = runtime(annotations=wired())
UNWIRED_TCPXO = runtime()
BROKEN = [override({INTERFACES: "not json"})]


def _assess(job: dict[str, object], view: ClusterSnapshot, policy: Policy | None = None) -> Verdict:
    return evaluate_object(Kind.TRAIN_JOB, job, "team", view, policy or Policy()).verdict


def test_a_trainjob_inherits_a_correct_runtime_wiring() -> None:
    assert _assess(trainjob(), snapshot(TCPXO)) == Verdict(recipe=RECIPE_REF)


def test_violations_of_inherited_wiring_point_at_the_runtime_ref() -> None:
    view = snapshot(runtime("plain", annotations=wired([("eth1", "absent")], default="eth7")))
    verdict = _assess(trainjob("plain"), view)
    assert codes(verdict) == ("DefaultInterfaceInvalid", "NetworkNotFound")
    assert [v.field for v in verdict.violations] == ["spec.runtimeRef", "spec.runtimeRef"]


@pytest.mark.parametrize(
    ("job", "expected", "field"),
    [
        pytest.param(
            trainjob(overrides=[override({INTERFACES: annotation(REVERSED)})]),
            ("MappingDivergesFromRecipe",),
            f"{OVERRIDE_INTERFACES}[1]",
            id="override-diverges",
        ),
        pytest.param(
            trainjob(patches=[{INTERFACES: annotation(REVERSED)}]),
            ("MappingDivergesFromRecipe",),
            f"{PATCH_ANNOTATIONS}[{INTERFACES}][1]",
            id="runtime-patch-diverges",
        ),
        pytest.param(
            trainjob(patches=[{INTERFACES: annotation(REVERSED)}, {INTERFACES: annotation()}]),
            (),
            "",
            id="later-patch-restores",
        ),
        pytest.param(
            trainjob(patches=[{INTERFACES: None}]),
            (),
            "",
            id="null-leaves-the-runtime-wiring",
        ),
        pytest.param(
            trainjob(overrides=[override({DEFAULT_INTERFACE: "eth3"})]),
            ("DefaultInterfaceInvalid",),
            f"spec.podTemplateOverrides[0].metadata.annotations[{DEFAULT_INTERFACE}]",
            id="override-breaks-default-interface",
        ),
        pytest.param(
            trainjob(overrides=[override({DEFAULT_INTERFACE: None})]),
            (),
            "",
            id="null-leaves-the-default-interface",
        ),
    ],
)
def test_a_trainjob_bound_via_its_runtime_is_judged_on_its_effective_wiring(
    job: dict[str, object], expected: tuple[str, ...], field: str
) -> None:
    verdict = _assess(job, snapshot(TCPXO))
    assert codes(verdict) == expected
    assert [v.field for v in verdict.violations] == ([field] if expected else [])


@pytest.mark.parametrize(
    ("runtime_obj", "job", "expected"),
    [
        pytest.param(UNWIRED_TCPXO, trainjob(), ("InterfacesAnnotationMissing",), id="ctr-by-name"),
        pytest.param(bound("mine"), trainjob("mine"), ("InterfacesAnnotationMissing",), id="label"),
        pytest.param(runtime("plain"), trainjob("plain"), (), id="unbound-runtime"),
        pytest.param(
            runtime(kind=Kind.TRAINING_RUNTIME),
            trainjob(ref={"name": "torch-distributed-tcpxo", "kind": "TrainingRuntime"}),
            (),
            id="tr-with-recipe-name-not-bound",
        ),
        pytest.param(
            runtime("plain"),
            trainjob("plain") | {"metadata": {"name": "j", "labels": {RECIPE_BOUND: "true"}}},
            (),
            id="trainjob-label-does-not-bind",
        ),
        pytest.param(
            runtime(jobs=[]),
            trainjob(),
            ("NodeJobMissing",),
            id="bound-runtime-without-node-job",
        ),
        pytest.param(
            runtime(jobs=[]),
            trainjob(patches=[wired()]),
            (),
            id="patches-wire-a-runtime-without-node-job",
        ),
        pytest.param(
            runtime("plain", jobs=[]), trainjob("plain"), (), id="unbound-runtime-no-node-job"
        ),
    ],
)
def test_a_trainjob_is_recipe_bound_only_through_its_runtime(
    runtime_obj: dict[str, object], job: dict[str, object], expected: tuple[str, ...]
) -> None:
    verdict = _assess(job, snapshot(runtime_obj))
    assert codes(verdict) == expected
    if expected:
        assert verdict.violations[0].field == "spec.runtimeRef"


def test_node_job_missing_names_the_runtime() -> None:
    verdict = _assess(trainjob(), snapshot(runtime(jobs=[])))
    assert "runtime ClusterTrainingRuntime/torch-distributed-tcpxo: " in messages(verdict)
    assert 'declares no "node" job' in messages(verdict)


@pytest.mark.parametrize(
    ("job_namespace", "found"),
    [pytest.param("team", True, id="same-namespace"), pytest.param("other", False, id="other")],
)
def test_a_training_runtime_is_looked_up_in_the_trainjob_namespace(
    job_namespace: str, found: bool
) -> None:
    tr = runtime("tr", kind=Kind.TRAINING_RUNTIME, annotations=wired([("eth1", "absent")]))
    job = trainjob(ref={"name": "tr", "kind": "TrainingRuntime"}, namespace=job_namespace)
    verdict = evaluate_object(Kind.TRAIN_JOB, job, job_namespace, snapshot(tr), Policy()).verdict
    assert codes(verdict) == (("NetworkNotFound",) if found else ())
    assert ("not found" in messages(verdict)) is not found


@pytest.mark.parametrize(
    ("job", "warning"),
    [
        pytest.param(
            trainjob("gone", overrides=BROKEN),
            "runtime ClusterTrainingRuntime/gone not found; wiring not checked",
            id="runtime-not-found",
        ),
        pytest.param(
            trainjob(
                ref={"name": "x", "kind": "JobSet", "apiGroup": "jobset.x-k8s.io"},
                overrides=BROKEN,
            ),
            "spec.runtimeRef names JobSet/x, not a Trainer runtime; wiring not checked",
            id="non-trainer-runtime-ref",
        ),
        pytest.param(
            trainjob(ref={"name": "x", "kind": "TrainJob"}, overrides=BROKEN),
            "spec.runtimeRef names TrainJob/x, not a Trainer runtime; wiring not checked",
            id="trainjob-as-runtime",
        ),
        pytest.param(
            trainjob(ref={"kind": "ClusterTrainingRuntime"}, overrides=BROKEN),
            "spec.runtimeRef has no name, not a Trainer runtime; wiring not checked",
            id="no-name",
        ),
    ],
)
def test_an_unresolvable_runtime_ref_is_allowed_with_a_warning(
    job: dict[str, object], warning: str
) -> None:
    verdict = _assess(job, snapshot(TCPXO))
    assert verdict == Verdict(warnings=(warning,))


@pytest.mark.parametrize(
    ("on_unverifiable", "denied", "waived"),
    [
        pytest.param(OnUnverifiable.DENY, ("ClusterStateUnavailable",), (), id="deny"),
        pytest.param(OnUnverifiable.ALLOW, (), ("ClusterStateUnavailable",), id="allow"),
    ],
)
def test_an_unanswerable_runtime_lookup_is_cluster_state_unavailable(
    on_unverifiable: OnUnverifiable, denied: tuple[str, ...], waived: tuple[str, ...]
) -> None:
    view = replace(snapshot(), runtime_state=Unverifiable("runtime cache not synced"))
    verdict = _assess(trainjob(), view, Policy(on_unverifiable=on_unverifiable))
    assert codes(verdict) == denied
    assert waived_codes(verdict) == waived
    assert (
        "the runtime ClusterTrainingRuntime/torch-distributed-tcpxo cannot be looked up: "
        "runtime cache not synced" in messages(verdict)
    )
    assert [v.field for v in (*verdict.violations, *verdict.waived)] == ["spec.runtimeRef"]
