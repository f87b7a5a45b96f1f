"""``evaluate``: any request, cluster view and policy gives a well-formed verdict, never raises.

Also the policy switches (docs/configuration.md) and the scope of UPDATE grandfathering
(docs/rules.md: only an update that leaves the effective wiring untouched is grandfathered).
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from app.domain.assessment import skip_reason
from app.domain.cluster import ClusterSnapshot, Networks, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind, runtime_ref_of
from app.domain.policy import NotReady, OnUnverifiable, Policy
from app.domain.review import Operation, Review
from app.domain.slim import slim_runtime
from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.verdict import Code, Verdict
from app.domain.wiring import template_wiring, trainjob_wiring
from tests.builders import RECIPE_BOUND, TCPXO_RUNTIME
from tests.properties.strategies import (
    assert_well_formed,
    cluster_views,
    codes_of,
    fuzzed_objects,
    fuzzed_runtimes,
    fuzzed_trainjobs,
    judged_kinds,
    mutated,
    namespaces,
    operations,
    policies,
    subresources,
)
from tests.support.examples import examples

CORE = settings(max_examples=examples(200))
LIGHT = settings(max_examples=examples(100))
"""For properties whose inputs the 200-example ones already cover in part."""

reviews = st.builds(
    Review,
    operation=operations,
    kind=judged_kinds,
    namespace=namespaces,
    obj=st.none() | fuzzed_objects,
    old_obj=st.none() | fuzzed_objects,
    subresource=subresources,
)


def judged(review: Review, view: ClusterSnapshot, policy: Policy) -> Verdict:
    before = (repr(review.obj), repr(review.old_obj))
    verdict = evaluate(review, view, policy)
    assert_well_formed(verdict)
    assert (repr(review.obj), repr(review.old_obj)) == before, "the core mutated its input"
    assert evaluate(review, view, policy) == verdict, "the verdict is not deterministic"
    return verdict


def fully_available(view: ClusterSnapshot) -> bool:
    return not any(
        isinstance(state, Unverifiable)
        for state in (view.network_state, view.recipe_state, view.runtime_state)
    )


@CORE
@given(reviews, cluster_views, policies)
def test_any_request_gets_a_well_formed_verdict(
    review: Review, view: ClusterSnapshot, policy: Policy
) -> None:
    verdict = judged(review, view, policy)
    if skip_reason(review) is not None or review.obj is None:
        assert verdict == Verdict()
    found = codes_of(verdict)
    if policy.on_unverifiable is OnUnverifiable.ALLOW or fully_available(view):
        assert Code.CLUSTER_STATE_UNAVAILABLE not in found
    if policy.not_ready is NotReady.WARN:
        assert Code.NETWORK_NOT_READY not in found
    if not policy.recipe_required:
        assert Code.RECIPE_UNAVAILABLE not in found
    if isinstance(view.network_state, Networks) and view.network_state.served:
        assert Code.NETWORK_API_NOT_SERVED not in found
    if verdict.violations and found == {Code.CLUSTER_STATE_UNAVAILABLE}:
        assert verdict.undecided
    else:
        assert not verdict.undecided


@LIGHT
@given(
    st.sampled_from(Kind),
    st.sampled_from([Operation.CREATE, Operation.UPDATE]),
    fuzzed_objects,
    st.none() | fuzzed_objects,
    cluster_views,
    policies,
)
def test_each_kind_gets_a_well_formed_verdict(
    kind: Kind,
    operation: Operation,
    obj: JsonMap,
    old: JsonMap | None,
    view: ClusterSnapshot,
    policy: Policy,
) -> None:
    review = Review(operation=operation, kind=kind, namespace="team", obj=obj, old_obj=old)
    judged(review, view, policy)


@LIGHT
@given(
    fuzzed_runtimes,
    st.sampled_from([Kind.CLUSTER_TRAINING_RUNTIME, Kind.TRAINING_RUNTIME]),
    st.sampled_from([None, "false", "True", "yes", ""]),
    cluster_views,
)
def test_unbound_runtimes_never_get_recipe_codes(
    obj: dict[str, object], kind: Kind, label: str | None, view: ClusterSnapshot
) -> None:
    """Only recipe-bound objects are judged against the recipe (docs/rules.md): CTRs named in
    ``recipe-runtimes`` and runtimes labelled exactly ``"true"``; a TR's name never binds it."""
    name = TCPXO_RUNTIME if kind is Kind.TRAINING_RUNTIME else "not-in-recipe-runtimes"
    metadata: dict[str, object] = {"name": name, "namespace": "team"}
    if label is not None:
        metadata["labels"] = {RECIPE_BOUND: label}
    obj = {**obj, "metadata": metadata}
    policy = Policy(recipe_runtimes=frozenset({TCPXO_RUNTIME}))
    review = Review(operation=Operation.CREATE, kind=kind, namespace="team", obj=obj)
    found = codes_of(judged(review, view, policy))
    recipe_codes = {
        Code.RECIPE_INVALID,
        Code.RECIPE_UNAVAILABLE,
        Code.MAPPING_DIVERGES_FROM_RECIPE,
        Code.INTERFACES_ANNOTATION_MISSING,
        Code.NODE_JOB_MISSING,
    }
    assert not found & recipe_codes


def effective_wiring(kind: Kind, obj: JsonMap, view: ClusterSnapshot, namespace: str) -> object:
    """What docs/rules.md compares on UPDATE: the effective annotations (and the runtimeRef).

    When the runtime cannot be read, the TrainJob's own patches are all that is known.
    """
    if kind is not Kind.TRAIN_JOB:
        template = job_template(obj, NODE_JOB)
        return (
            template_wiring(template).fingerprint() if isinstance(template, PodTemplate) else None
        )
    ref = runtime_ref_of(obj)
    runtime_kind = None if ref is None else ref.runtime_kind()
    runtime = None
    if ref is not None and runtime_kind is not None:
        runtime = view.runtime(runtime_kind, namespace, ref.name)
    located = job_template(runtime, NODE_JOB) if isinstance(runtime, dict) else None
    found = trainjob_wiring(obj, located if isinstance(located, PodTemplate) else None)
    return (ref, found.fingerprint())


@st.composite
def patches_changed(draw: st.DrawFn, old: dict[str, object]) -> dict[str, object]:
    """``old`` with only its TrainJob patches mutated: the runtimeRef stays as it was."""
    spec = old.get("spec")
    if not isinstance(spec, dict):
        return old
    key = draw(st.sampled_from(["runtimePatches", "podTemplateOverrides"]))
    return {**old, "spec": {**spec, key: draw(mutated(spec.get(key)))}}


def _updates(old: dict[str, object]) -> st.SearchStrategy[tuple[dict[str, object], object]]:
    return st.tuples(st.just(old), mutated(old) | patches_changed(old))


def _without_runtimes(view: ClusterSnapshot) -> ClusterSnapshot:
    return ClusterSnapshot(view.network_state, view.recipe_state, Unverifiable("not synced"))


def check_update(
    kind: Kind, old: JsonMap, new: object, view: ClusterSnapshot, policy: Policy
) -> None:
    """UPDATE only waives what the old object had, and only when the wiring is untouched."""
    if not isinstance(new, dict):
        new = {"metadata": new}
    create = Review(operation=Operation.CREATE, kind=kind, namespace="team", obj=new)
    update = Review(operation=Operation.UPDATE, kind=kind, namespace="team", obj=new, old_obj=old)
    full = evaluate(create, view, policy)
    verdict = evaluate(update, view, policy)
    assert_well_formed(verdict)
    assert {v.code for v in verdict.violations} <= {v.code for v in full.violations}
    if effective_wiring(kind, old, view, "team") != effective_wiring(kind, new, view, "team"):
        assert verdict == full


@LIGHT
@given(
    st.sampled_from([Kind.CLUSTER_TRAINING_RUNTIME, Kind.TRAINING_RUNTIME]),
    fuzzed_runtimes.flatmap(_updates),
    cluster_views,
    policies,
)
def test_a_runtime_update_that_changes_the_wiring_gets_the_full_verdict(
    kind: Kind, case: tuple[JsonMap, object], view: ClusterSnapshot, policy: Policy
) -> None:
    check_update(kind, *case, view, policy)


@CORE
@given(
    fuzzed_trainjobs.flatmap(_updates),
    cluster_views | cluster_views.map(_without_runtimes),
    policies,
)
def test_a_trainjob_update_that_changes_the_wiring_gets_the_full_verdict(
    case: tuple[JsonMap, object], view: ClusterSnapshot, policy: Policy
) -> None:
    check_update(Kind.TRAIN_JOB, *case, view, policy)


def _slimmed(view: ClusterSnapshot) -> ClusterSnapshot:
    if isinstance(view.runtime_state, Unverifiable):
        return view
    runtimes = {key: slim_runtime(obj) for key, obj in view.runtime_state.items()}
    return ClusterSnapshot(view.network_state, view.recipe_state, runtimes)


@CORE
@given(
    st.builds(
        Review,
        operation=operations,
        kind=st.just(Kind.TRAIN_JOB),
        namespace=st.just("team"),
        obj=fuzzed_trainjobs,
    ),
    cluster_views,
    policies,
)
def test_a_view_of_slim_runtimes_judges_trainjobs_as_the_whole_runtimes_do(
    review: Review, view: ClusterSnapshot, policy: Policy
) -> None:
    assert evaluate(review, _slimmed(view), policy) == evaluate(review, view, policy)
