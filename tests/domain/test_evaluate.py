"""One admission request judged per docs/rules.md (app.domain.evaluate)."""

from __future__ import annotations

import pytest

from app.domain.assessment import assess, skip_reason
from app.domain.cluster import WithRuntime
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    codes,
    override,
    review,
    runtime,
    snapshot,
    trainjob,
    waived_codes,
    wired,
    with_metadata,
)

BAD = runtime("plain", annotations=wired([("eth1", "absent")], default="eth7"))
REVERSED = list(reversed(PAIRS))


def _deleting(obj: JsonMap) -> dict[str, object]:
    return with_metadata(obj, deletionTimestamp="2026-01-01T00:00:00Z")


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(
            review(_deleting(BAD), operation=Operation.UPDATE, old=_deleting(runtime("plain"))),
            id="spec-change-of-a-terminating-object",
        ),
        pytest.param(
            review(_deleting(BAD), operation=Operation.UPDATE), id="terminating-without-old-object"
        ),
        pytest.param(review(_deleting(BAD)), id="create-with-deletion-timestamp"),
    ],
)
def test_terminating_objects_are_judged_unless_only_metadata_changes(request_: Review) -> None:
    assert skip_reason(request_) is None
    assert not evaluate(request_, snapshot(), Policy()).allowed


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        pytest.param(review(BAD, operation=Operation.DELETE), "DELETE is not checked", id="delete"),
        pytest.param(
            review(BAD, operation=Operation.CONNECT), "CONNECT is not checked", id="connect"
        ),
        pytest.param(
            review(BAD, subresource="status"), "subresource status is not checked", id="sub"
        ),
        pytest.param(
            review(BAD, operation=Operation.UPDATE, subresource="status", old=BAD),
            "subresource status is not checked",
            id="status-update",
        ),
        pytest.param(
            review(_deleting(BAD), operation=Operation.UPDATE, old=_deleting(BAD)),
            "object is being deleted and the update changes nothing outside metadata",
            id="finalizer-removal-update",
        ),
        pytest.param(
            Review(operation=Operation.CREATE, kind=None, obj=BAD),
            "not a kind nicguard judges",
            id="kind-none",
        ),
    ],
)
def test_requests_outside_the_rules_are_allowed_without_evaluation(
    request_: Review, reason: str
) -> None:
    assert skip_reason(request_) == reason
    assert evaluate(request_, snapshot(), Policy()) == Verdict()


def test_a_create_without_an_object_is_allowed() -> None:
    request_ = Review(operation=Operation.CREATE, kind=Kind.CLUSTER_TRAINING_RUNTIME)
    assert skip_reason(request_) is None
    assert evaluate(request_, snapshot(), Policy()) == Verdict()


def test_an_empty_deletion_timestamp_does_not_skip_evaluation() -> None:
    obj = with_metadata(BAD, deletionTimestamp=None)
    assert skip_reason(review(obj)) is None
    assert codes(evaluate(review(obj), snapshot(), Policy())) == (
        "DefaultInterfaceInvalid",
        "NetworkNotFound",
    )


def _label(obj: JsonMap, **labels: str) -> dict[str, object]:
    return with_metadata(obj, labels=labels)


def _update(new: JsonMap, old: JsonMap | None) -> Verdict:
    return evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), Policy())


def test_an_update_leaving_the_wiring_untouched_downgrades_old_violations_to_warnings() -> None:
    verdict = _update(_label(BAD, team="a"), BAD)
    assert verdict.allowed
    assert waived_codes(verdict) == ("DefaultInterfaceInvalid", "NetworkNotFound")
    assert [v.code.value for v in verdict.grandfathered] == [
        "DefaultInterfaceInvalid",
        "NetworkNotFound",
    ]
    assert verdict.decision == "allowed"
    # Each warning is led by its code, so one cut to 120 characters still says what it is.
    assert verdict.warnings[0].startswith(
        "[DefaultInterfaceInvalid] pre-existing, wiring unchanged: "
        "networking.gke.io/default-interface"
    )
    assert verdict.warnings[1].startswith("[NetworkNotFound] pre-existing, wiring unchanged: ")
    assert "eth1->absent" in verdict.warnings[1]


@pytest.mark.parametrize(
    "old",
    [
        pytest.param(runtime("plain", annotations=wired()), id="interfaces-changed"),
        pytest.param(
            runtime("plain", annotations=wired([("eth1", "absent")], default="eth0")),
            id="default-interface-changed",
        ),
        pytest.param(
            runtime("plain", annotations={INTERFACES: annotation([("eth1", "absent")])}),
            id="default-interface-added",
        ),
        pytest.param(runtime("plain"), id="newly-wired"),
        pytest.param(None, id="no-old-object"),
    ],
)
def test_an_update_that_changes_the_wiring_gets_the_full_verdict(
    old: JsonMap | None,
) -> None:
    verdict = _update(BAD, old)
    assert codes(verdict) == ("DefaultInterfaceInvalid", "NetworkNotFound")
    assert verdict.waived == ()


def test_a_label_that_newly_binds_an_object_to_the_recipe_is_still_denied() -> None:
    old = runtime("plain", annotations=wired([*REVERSED[:7], ("eth1", "absent")]))
    verdict = _update(_label(old, **{RECIPE_BOUND: "true"}), old)
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert waived_codes(verdict) == ("NetworkNotFound",)


def test_a_label_that_newly_binds_an_unwired_runtime_is_denied() -> None:
    old = runtime("plain")
    verdict = _update(_label(old, **{RECIPE_BOUND: "true"}), old)
    assert codes(verdict) == ("InterfacesAnnotationMissing",)


def test_an_update_of_an_allowed_object_is_allowed() -> None:
    good = runtime("plain", annotations=wired())
    assert _update(_label(good, x="y"), good) == Verdict()


def _job_update(new: JsonMap, old: JsonMap) -> Verdict:
    view = snapshot(runtime("a", annotations=wired([("eth1", "absent")])), runtime("b"))
    return evaluate(review(new, operation=Operation.UPDATE, old=old), view, Policy())


def test_a_trainjob_update_with_the_same_runtime_ref_and_wiring_is_grandfathered() -> None:
    old = trainjob("a")
    verdict = _job_update(trainjob("a", overrides=[override({"team": "x"})]), old)
    assert verdict.allowed
    assert waived_codes(verdict) == ("NetworkNotFound",)


@pytest.mark.parametrize(
    "old",
    [
        pytest.param(
            trainjob("b", patches=[wired([("eth1", "absent")])]), id="runtime-ref-changed"
        ),
        pytest.param(
            trainjob("a", ref={"name": "a", "kind": "ClusterTrainingRuntime"}) | {"spec": {}},
            id="runtime-ref-added",
        ),
        pytest.param(
            trainjob("a", patches=[{DEFAULT_INTERFACE: "eth1"}]), id="default-interface-patched"
        ),
    ],
)
def test_a_trainjob_update_changing_runtime_ref_or_wiring_gets_the_full_verdict(
    old: JsonMap,
) -> None:
    assert codes(_job_update(trainjob("a"), old)) == ("NetworkNotFound",)


@pytest.mark.parametrize(
    ("obj", "expected", "warned"),
    [
        pytest.param(runtime() | {"spec": []}, ("NodeJobMissing",), False, id="spec-is-a-list"),
        pytest.param(
            runtime(jobs=[{"name": "node", "template": {"spec": {"template": []}}}]),
            ("NodeJobMissing",),
            False,
            id="pod-template-is-a-list",
        ),
        pytest.param(
            runtime(annotations={INTERFACES: ["eth0"], DEFAULT_INTERFACE: "eth0"}),
            ("InterfacesAnnotationMalformed",),
            False,
            id="annotation-value-is-a-list",
        ),
        pytest.param(
            runtime(annotations={INTERFACES: "\x00" * 10_000, DEFAULT_INTERFACE: "eth0"}),
            ("InterfacesAnnotationMalformed",),
            False,
            id="binary-garbage",
        ),
        pytest.param(trainjob() | {"spec": "x"}, (), True, id="trainjob-spec-is-a-string"),
        pytest.param(
            trainjob()
            | {"spec": {"runtimeRef": {"name": "torch-distributed-tcpxo"}, "runtimePatches": {}}},
            ("InterfacesAnnotationMissing",),
            False,
            id="runtime-patches-not-a-list",
        ),
    ],
)
def test_adversarial_objects_get_a_verdict_and_never_raise(
    obj: JsonMap, expected: tuple[str, ...], warned: bool
) -> None:
    verdict = evaluate(review(obj), snapshot(runtime()), Policy())
    assert codes(verdict) == expected
    assert bool(verdict.warnings) is warned


def test_an_update_removing_the_node_job_changes_the_wiring() -> None:
    # Both versions lack the annotations, but losing the node pod template is a wiring change:
    # the recipe-bound runtime keeps its RecipeUnavailable denial instead of a waiver.
    old = runtime(annotations={})
    new = runtime(jobs=[{"name": "worker"}])
    verdict = evaluate(
        review(new, operation=Operation.UPDATE, old=old), snapshot(no_recipe=True), Policy()
    )
    assert codes(verdict) == ("RecipeUnavailable",)
    assert waived_codes(verdict) == ()


@pytest.mark.parametrize(
    ("request_", "needed"),
    [
        pytest.param(
            review(trainjob()),
            (Kind.CLUSTER_TRAINING_RUNTIME, "", "torch-distributed-tcpxo"),
            id="ctr",
        ),
        pytest.param(
            review(trainjob(ref={"name": "r", "kind": "TrainingRuntime"})),
            (Kind.TRAINING_RUNTIME, "team", "r"),
            id="tr-in-the-trainjobs-namespace",
        ),
        pytest.param(review(trainjob(ref={"kind": "TrainingRuntime"})), None, id="no-name"),
        pytest.param(review(trainjob(ref={"name": "r", "kind": "Pod"})), None, id="not-a-runtime"),
        pytest.param(review(trainjob(), subresource="status"), None, id="subresource"),
        pytest.param(review(runtime()), None, id="a-runtime"),
    ],
)
def test_the_assessment_names_the_runtime_a_trainjob_is_judged_against(
    request_: Review, needed: tuple[Kind, str, str] | None
) -> None:
    assert assess(request_).runtime == needed


def test_a_view_with_one_runtime_read_directly_answers_it_and_delegates_the_rest() -> None:
    base = snapshot(runtime("other"))
    key = (Kind.CLUSTER_TRAINING_RUNTIME, "", "fetched")
    found = runtime("fetched")
    view = WithRuntime(base, key, found)
    assert view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "ignored", "fetched") is found
    assert view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "other") == base.runtime(
        Kind.CLUSTER_TRAINING_RUNTIME, "", "other"
    )
    assert (view.networks(), view.recipe()) == (base.networks(), base.recipe())
    assert view.runtimes() == base.runtimes()
