"""Trainer's runtime snapshots judged as the runtime they copy (docs/rules.md,
RuntimeSnapshotInvalid): binding by copy, old copy or live runtime, UPDATE grandfathering, a copy
that holds no runtime. Reading a copy: tests/domain/test_runtime_snapshot.py."""

from __future__ import annotations

import pytest

from app.documents import load_yaml
from app.domain.assessment import skip_reason
from app.domain.cluster import ClusterSnapshot, Unverifiable, with_runtimes
from app.domain.evaluate import evaluate
from app.domain.kinds import Copy, Kind
from app.domain.policy import Enforcement, OnUnverifiable, Policy
from app.domain.review import Operation, Review
from app.domain.runtime_snapshot import read_snapshot, snapshot_owner
from app.domain.verdict import Verdict
from tests.builders import (
    INTERFACES_PATH,
    PAIRS,
    RECIPE_BOUND,
    bare,
    codes,
    copy_of,
    node_job,
    runtime,
    snapshot,
    wired,
)

SWAPPED = [*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]
LEAD = (
    "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job: "
    "ClusterTrainingRuntime torch-distributed-tcpxo)"
)


def judged(
    configmap: dict[str, object],
    *,
    old: dict[str, object] | None = None,
    view: ClusterSnapshot | None = None,
    policy: Policy | None = None,
) -> Verdict:
    owner = snapshot_owner(configmap)
    assert owner is not None
    old_owner = None if old is None else snapshot_owner(old)
    request = Review(
        operation=Operation.CREATE if old is None else Operation.UPDATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace="team",
        obj=configmap,
        old_obj=old,
        snapshot=read_snapshot(configmap, owner, load_yaml),
        old_snapshot=None
        if old is None or old_owner is None
        else read_snapshot(old, old_owner, load_yaml),
    )
    return evaluate(request, view or snapshot(), policy or Policy())


TCPXO = runtime(annotations=wired())


@pytest.mark.parametrize(
    "copied",
    [
        pytest.param(bare(TCPXO), id="v2.3.0-without-apiVersion-and-kind"),
        pytest.param(TCPXO, id="fixed-release-with-apiVersion-and-kind"),
        pytest.param(
            bare(runtime("team-tcpxo", kind=Kind.TRAINING_RUNTIME, annotations=wired())),
            id="training-runtime-by-its-namespace",
        ),
    ],
)
def test_an_untouched_copy_is_admitted(copied: dict[str, object]) -> None:
    verdict = judged(copy_of(copied))
    assert verdict.allowed, verdict
    assert verdict.warnings == ()


def test_a_tampered_copy_is_refused_naming_the_configmap_its_trainjob_and_the_runtime() -> None:
    verdict = judged(copy_of(bare(runtime(annotations=wired(SWAPPED)))))
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    (violation,) = verdict.violations
    assert violation.message.startswith(f"{LEAD}: at position eth3 the object maps")
    assert violation.field == f"data.runtime: {INTERFACES_PATH}[3]"


def test_a_copy_without_kind_but_with_a_namespace_is_read_as_a_training_runtime() -> None:
    tr = runtime("x", kind=Kind.TRAINING_RUNTIME, annotations=wired(SWAPPED))
    tr["metadata"] = {**tr["metadata"], "labels": {RECIPE_BOUND: "true"}}  # type: ignore[dict-item]
    verdict = judged(copy_of(bare(tr)))
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert "(runtime snapshot of TrainJob team/job: TrainingRuntime x): " in (
        verdict.violations[0].message
    )


LIVE_BOUND = runtime("custom", annotations=wired(), labels={RECIPE_BOUND: "true"})


@pytest.mark.parametrize(
    ("labels", "old_labels", "live"),
    [
        pytest.param({RECIPE_BOUND: "false"}, None, LIVE_BOUND, id="live-runtime-bound"),
        pytest.param({}, {RECIPE_BOUND: "true"}, None, id="old-copy-bound"),
        pytest.param({RECIPE_BOUND: "true"}, None, None, id="copy-bound"),
    ],
)
def test_rewriting_labels_inside_a_copy_never_unbinds_it(
    labels: dict[str, str], old_labels: dict[str, str] | None, live: dict[str, object] | None
) -> None:
    tampered = bare(runtime("custom", annotations=wired(SWAPPED), labels=labels))
    old = None
    if old_labels is not None:
        old = copy_of(bare(runtime("custom", annotations=wired(), labels=old_labels)))
    view = snapshot() if live is None else snapshot(live)
    verdict = judged(copy_of(tampered), old=old, view=view)
    assert codes(verdict) == ("MappingDivergesFromRecipe",)


def test_an_unbound_copy_of_an_unbound_runtime_is_judged_on_its_own() -> None:
    assert judged(copy_of(bare(runtime("custom", annotations=wired(SWAPPED))))).allowed
    misplaced = [*PAIRS[:2], ("eth3", "gpu-nic-3"), ("eth4", "gpu-nic-2"), *PAIRS[4:]]
    verdict = judged(copy_of(bare(runtime("custom", annotations=wired(misplaced)))))
    assert codes(verdict) == ("NetworkMisplaced",)
    assert verdict.violations[0].message.startswith(
        "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job: "
        "ClusterTrainingRuntime custom): Networks on another interface than the recipe gives them"
    )


def test_an_update_that_leaves_the_copys_wiring_untouched_is_grandfathered() -> None:
    drifted = runtime(annotations=wired(SWAPPED))
    relabelled = runtime(annotations=wired(SWAPPED), labels={"team": "a"})
    verdict = judged(copy_of(bare(relabelled)), old=copy_of(bare(drifted)))
    assert verdict.allowed
    assert [v.code for v in verdict.grandfathered] == ["MappingDivergesFromRecipe"]
    assert verdict.warnings[0].startswith(f"[MappingDivergesFromRecipe] {LEAD}: pre-existing")


def test_an_update_that_changes_the_copys_wiring_gets_the_full_verdict() -> None:
    verdict = judged(copy_of(bare(runtime(annotations=wired(SWAPPED)))), old=copy_of(TCPXO))
    assert codes(verdict) == ("MappingDivergesFromRecipe",)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param({}, "data has no runtime key", id="no-runtime-key"),
        pytest.param({"runtime": "a: [b"}, "is not YAML of one runtime", id="not-yaml"),
        pytest.param({"runtime": "- a\n- b\n"}, "data.runtime is a list", id="a-list"),
        pytest.param({"runtime": "42"}, "data.runtime is not an object", id="a-scalar"),
        pytest.param(
            {"runtime": "kind: ConfigMap\nmetadata: {name: x}\n"},
            'is of kind "ConfigMap"',
            id="another-kind",
        ),
        pytest.param(
            {"runtime": "apiVersion: v1\nmetadata: {name: x}\n"},
            'has apiVersion "v1", not trainer.kubeflow.org',
            id="another-group",
        ),
        pytest.param(
            {"runtime": "apiVersion: 7\nmetadata: {name: x}\n"},
            "has apiVersion that is not a string",
            id="apiVersion-not-a-string",
        ),
        pytest.param({"runtime": "spec: {}\n"}, "has no metadata.name", id="no-name"),
        pytest.param(
            {"runtime": "a: 1\n---\nb: 2\n"}, "is not YAML of one runtime", id="two-documents"
        ),
    ],
)
def test_a_copy_that_is_not_one_runtime_is_runtime_snapshot_invalid(
    data: dict[str, object], problem: str
) -> None:
    configmap = copy_of("")
    configmap["data"] = data
    verdict = judged(configmap)
    assert codes(verdict) == ("RuntimeSnapshotInvalid",)
    (violation,) = verdict.violations
    assert violation.field == "data.runtime"
    assert violation.message.startswith(
        "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job): "
    )
    assert problem in violation.message


def test_a_runtime_key_that_is_not_a_string_is_invalid() -> None:
    configmap = copy_of("")
    configmap["data"] = {"runtime": 7}
    assert codes(judged(configmap)) == ("RuntimeSnapshotInvalid",)


def test_enforcement_warn_applies_to_snapshots() -> None:
    verdict = judged(
        copy_of(bare(runtime(annotations=wired(SWAPPED)))),
        policy=Policy(enforcement=Enforcement.WARN),
    )
    assert verdict.allowed
    assert verdict.warnings[0].startswith(f"[MappingDivergesFromRecipe] {LEAD}: ")


def test_an_unreadable_runtime_cache_cannot_decide_an_unbound_copy() -> None:
    view = snapshot()
    unknown = ClusterSnapshot(view.network_state, view.recipe_state, Unverifiable("not synced"))
    copied = copy_of(bare(runtime("custom", annotations=wired())))
    assert codes(judged(copied, view=unknown)) == ("ClusterStateUnavailable",)
    allowed = judged(copied, view=unknown, policy=Policy(on_unverifiable=OnUnverifiable.ALLOW))
    assert allowed.allowed


def test_the_live_runtime_of_a_training_runtime_copy_is_looked_up_in_its_namespace() -> None:
    live = runtime("x", kind=Kind.TRAINING_RUNTIME, labels={RECIPE_BOUND: "true"})
    view = with_runtimes(snapshot(), {(Kind.TRAINING_RUNTIME, "team", "x"): live})
    tampered = bare(runtime("x", kind=Kind.TRAINING_RUNTIME, annotations=wired(SWAPPED)))
    assert codes(judged(copy_of(tampered), view=view)) == ("MappingDivergesFromRecipe",)


def test_a_snapshot_write_without_its_copy_is_not_judged() -> None:
    request = Review(operation=Operation.CREATE, kind=Copy.RUNTIME_SNAPSHOT, obj={})
    assert evaluate(request, snapshot(), Policy()).allowed


def _terminating(obj: dict[str, object]) -> dict[str, object]:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return {**obj, "metadata": {**metadata, "deletionTimestamp": "2026-12-01T10:00:00Z"}}


def test_a_terminating_copy_is_skipped_only_when_nothing_outside_metadata_changes() -> None:
    old = _terminating(copy_of(bare(runtime(annotations=wired(SWAPPED)))))
    finalizer_removed = {**old, "metadata": {**old["metadata"], "finalizers": []}}  # type: ignore[dict-item]
    assert judged(finalizer_removed, old=old).allowed
    tampered = _terminating(copy_of(bare(runtime(annotations=wired([*PAIRS[:7]])))))
    assert codes(judged(tampered, old=old)) == ("MappingDivergesFromRecipe",)


def test_exempt_controllers_are_never_blocked_on_snapshots() -> None:
    configmap = copy_of(bare(runtime(annotations=wired(SWAPPED))))
    request = Review(
        operation=Operation.UPDATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        obj=configmap,
        username="system:serviceaccount:kube-system:generic-garbage-collector",
    )
    assert skip_reason(request) is not None


def test_an_unbound_old_copy_leaves_the_live_runtimes_binding() -> None:
    old = copy_of(bare(runtime("custom", annotations=wired())))
    tampered = copy_of(bare(runtime("custom", annotations=wired(SWAPPED))))
    verdict = judged(tampered, old=old, view=snapshot(LIVE_BOUND))
    assert codes(verdict) == ("MappingDivergesFromRecipe",)


def test_a_warning_not_led_by_a_code_names_the_copy_first() -> None:
    labelled = runtime("custom", annotations=wired(), labels={"nicguard.dev/profile": "nope"})
    verdict = judged(copy_of(bare(labelled)))
    assert verdict.allowed
    assert verdict.warnings[0].startswith(
        "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job: "
        "ClusterTrainingRuntime custom): label nicguard.dev/profile: nope names no known profile"
    )


def test_a_copy_whose_annotated_job_names_a_missing_network_is_refused() -> None:
    """Trainer builds the evaluator's pods from the copy too: the rules that need no binding
    judge it there as in the runtime."""
    evaluator = node_job(wired([("eth1", "does-not-exist")]), name="evaluator")
    tampered = runtime(jobs=[node_job(wired()), evaluator])
    verdict = judged(copy_of(bare(tampered)))
    assert codes(verdict) == ("NetworkNotFound",)
    (violation,) = verdict.violations
    assert violation.message.startswith(f"{LEAD}: evaluator job: no Network object exists")
    assert violation.field.startswith("data.runtime: spec.template.spec.replicatedJobs[1].")
