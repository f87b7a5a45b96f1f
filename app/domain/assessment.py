"""Judging one object's wiring against the recipe and the cluster (SPEC sections 2-4).

Runtimes are judged on their own wired templates; TrainJobs on the effective annotations of their
runtime's overlaid by their patches. Every applicable rule reports; the result is a Verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterView, Networks, Unverifiable
from app.domain.fields import FieldPath, JsonMap, map_at, str_at
from app.domain.kinds import Kind, runtime_ref_of
from app.domain.network_checks import (
    api_not_served,
    missing_networks,
    network_targets,
    unusable_networks,
)
from app.domain.overlay import trainjob_wiring
from app.domain.policy import RECIPE_BOUND_LABEL, NotReady, OnUnverifiable, Policy
from app.domain.recipe import RecipeMissing
from app.domain.recipe_match import compare_with_recipe
from app.domain.structure import check_structure
from app.domain.template import (
    LAUNCHER_JOB,
    NODE_JOB,
    PodTemplate,
    PodTemplateMissing,
    wired_templates,
)
from app.domain.verdict import Verdict, VerdictBuilder
from app.domain.violations import Code, Violation, shown
from app.domain.wiring import Wiring, template_wiring

_RUNTIME_REF = "spec.runtimeRef"


@dataclass(frozen=True, slots=True)
class Assessment:
    """A verdict plus the wiring fingerprint that UPDATE grandfathering compares."""

    verdict: Verdict
    fingerprint: tuple[object, ...]


@dataclass(frozen=True, slots=True)
class _Subject:
    """One wired template of the judged object: its job, its wiring, or why it has none."""

    job: str
    wiring: Wiring
    missing: PodTemplateMissing | None = None

    def fingerprint(self) -> tuple[object, ...]:
        # Losing or gaining the pod template changes the wiring even when both lack annotations.
        if self.missing is not None:
            return (self.job, "no pod template")
        return (self.job, *self.wiring.fingerprint())


def assess(
    kind: Kind, obj: JsonMap, namespace: str, view: ClusterView, policy: Policy
) -> Assessment:
    """Judge a ClusterTrainingRuntime, TrainingRuntime or TrainJob; never raises."""
    if kind is Kind.TRAIN_JOB:
        return _assess_trainjob(obj, namespace, view, policy)
    subjects = tuple(
        _Subject(t.job, template_wiring(t))
        if isinstance(t, PodTemplate)
        else _Subject(t.job, Wiring(None, None, t.path), t)
        for t in wired_templates(obj)
    )
    out = VerdictBuilder()
    _judge(
        subjects,
        candidate=_is_recipe_candidate(kind, obj, policy),
        view=view,
        policy=policy,
        out=out,
    )
    return Assessment(out.build(), tuple(s.fingerprint() for s in subjects))


def _assess_trainjob(obj: JsonMap, namespace: str, view: ClusterView, policy: Policy) -> Assessment:
    out = VerdictBuilder()
    ref = runtime_ref_of(obj)
    fingerprint: tuple[object, ...] = (ref,)
    runtime_kind = ref.runtime_kind() if ref is not None else None
    if ref is None or runtime_kind is None:
        named = "has no name" if ref is None else f"names {shown(ref.describe())}"
        out.note(f"spec.runtimeRef {named}, not a Trainer runtime; wiring not checked")
        return Assessment(out.build(), fingerprint)
    runtime = view.runtime(runtime_kind, namespace, ref.name)
    if isinstance(runtime, Unverifiable):
        # The TrainJob's own patches still count: an UPDATE that changes them changes the wiring.
        fingerprint = (
            ref,
            *(trainjob_wiring(obj, None, job).fingerprint() for job in (NODE_JOB, LAUNCHER_JOB)),
        )
        _unverifiable(
            out,
            policy,
            _RUNTIME_REF,
            f"the runtime {shown(ref.describe())} cannot be looked up: {runtime.reason}",
        )
        return Assessment(out.build(), fingerprint)
    if runtime is None:
        out.note(f"runtime {shown(ref.describe())} not found; wiring not checked")
        return Assessment(out.build(), fingerprint)
    subjects = tuple(
        _Subject(t.job, trainjob_wiring(obj, t, t.job))
        if isinstance(t, PodTemplate)
        else _Subject(
            t.job,
            trainjob_wiring(obj, None, t.job),
            PodTemplateMissing(
                f"runtime {shown(ref.describe())}: {t.reason}", FieldPath(_RUNTIME_REF), t.job
            ),
        )
        for t in wired_templates(runtime)
    )
    candidate = _is_recipe_candidate(runtime_kind, runtime, policy)
    _judge(subjects, candidate=candidate, view=view, policy=policy, out=out)
    return Assessment(out.build(), (ref, *(s.wiring.fingerprint() for s in subjects)))


def _is_recipe_candidate(kind: Kind, runtime: JsonMap, policy: Policy) -> bool:
    """Recipe-bound by name (CTRs only) or label; binding also needs a delivering recipe."""
    labelled = str_at(map_at(runtime, "metadata", "labels"), RECIPE_BOUND_LABEL) == "true"
    named = str_at(runtime, "metadata", "name") in policy.recipe_runtimes
    return labelled or (kind is Kind.CLUSTER_TRAINING_RUNTIME and named)


def _judge(
    subjects: tuple[_Subject, ...],
    *,
    candidate: bool,
    view: ClusterView,
    policy: Policy,
    out: VerdictBuilder,
) -> None:
    """Every rule on every wired template; findings name the job when there are several."""
    recorded = _recipe_mapping(subjects[0].wiring, view, policy, out) if candidate else None
    named = len(subjects) > 1
    checked: list[tuple[Wiring, tuple[InterfaceRef, ...], VerdictBuilder]] = []
    for subject in subjects:
        scoped = out.scoped(f"{subject.job} job: " if named else "")
        secondaries = _judge_template(subject, recorded, recipe_ref=out.recipe, out=scoped)
        if secondaries is not None:
            checked.append((subject.wiring, secondaries, scoped))
    if not checked:
        return
    # The Network view answers for the whole object: when it cannot, that is said once.
    networks = _networks(checked[0][0], view, policy, out)
    if networks is None:
        return
    for wiring, secondaries, scoped in checked:
        _check_networks(wiring, secondaries, networks, policy, scoped)


def _judge_template(
    subject: _Subject,
    recorded: tuple[InterfaceRef, ...] | None,
    *,
    recipe_ref: str,
    out: VerdictBuilder,
) -> tuple[InterfaceRef, ...] | None:
    """Structure and recipe rules of one template; its secondaries when Networks are next."""
    wiring = subject.wiring
    if not wiring.wired:
        if recorded is not None:
            out.deny(_unwired(subject))
        return None
    structure = check_structure(wiring)
    for violation in structure.violations:
        out.deny(violation)
    if structure.secondaries is None:
        return None
    for position, entry in enumerate(structure.secondaries, start=1):
        if entry.interface is not None:
            out.note(f"{entry.pair()} (entry {position}) uses a NetworkInterface; not checked")
    if recorded is not None:
        divergence = compare_with_recipe(
            wiring, structure.secondaries, recorded, recipe_ref=recipe_ref
        )
        if divergence is not None:
            out.deny(divergence)
    return structure.secondaries


def _unwired(subject: _Subject) -> Violation:
    if subject.missing is not None:
        return Violation(
            code=Code.NODE_JOB_MISSING,
            field=str(subject.missing.path),
            message=f"recipe-bound, but {subject.missing.reason}, so its pods cannot be wired",
        )
    return Violation(
        code=Code.INTERFACES_ANNOTATION_MISSING,
        field=subject.wiring.interfaces_path(),
        message=f"recipe-bound, but the {subject.job} pod template has no "
        "networking.gke.io/interfaces annotation; its pods would get only eth0",
    )


def _recipe_mapping(
    wiring: Wiring, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> tuple[InterfaceRef, ...] | None:
    """The mapping this candidate is bound to, or None (reporting why it cannot be had)."""
    recipe = view.recipe()
    field = wiring.interfaces_path()
    if isinstance(recipe, Unverifiable):
        _unverifiable(out, policy, field, f"the recipe ConfigMap cannot be read: {recipe.reason}")
        return None
    out.recipe = recipe.ref
    if isinstance(recipe, RecipeMissing):
        out.judge(
            Violation(
                code=Code.RECIPE_UNAVAILABLE,
                field=field,
                message=f"recipe-bound, but the recipe ConfigMap {recipe.ref} does not exist, "
                "so the mapping cannot be checked against it",
            ),
            enforce=policy.recipe_required,
        )
        return None
    if recipe.problem is not None:
        out.deny(
            Violation(
                code=Code.RECIPE_INVALID,
                field=field,
                message=f"recipe-bound, but the recipe ConfigMap {recipe.ref} is invalid: "
                f"{recipe.problem}",
            )
        )
    return recipe.mapping


def _networks(
    wiring: Wiring, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> Networks | None:
    """The Network view, or None after reporting why Networks cannot be checked."""
    # Any wired object needs the Network API served (NetworkInterface references too), so the
    # Network view is consulted even when no entry names a Network.
    networks = view.networks()
    if isinstance(networks, Unverifiable):
        _unverifiable(
            out, policy, wiring.interfaces_path(), f"Networks cannot be listed: {networks.reason}"
        )
        return None
    if not networks.served:
        out.deny(api_not_served(wiring))
        return None
    return networks


def _check_networks(
    wiring: Wiring,
    secondaries: tuple[InterfaceRef, ...],
    networks: Networks,
    policy: Policy,
    out: VerdictBuilder,
) -> None:
    targets = network_targets(secondaries)
    missing = missing_networks(wiring, targets, networks)
    if missing is not None:
        out.deny(missing)
    unusable = unusable_networks(wiring, targets, networks)
    if unusable is not None:
        out.judge(unusable, enforce=policy.not_ready is NotReady.DENY)


def _unverifiable(out: VerdictBuilder, policy: Policy, field: str, reason: str) -> None:
    out.judge(
        Violation(
            code=Code.CLUSTER_STATE_UNAVAILABLE,
            field=field,
            message=f"nicguard cannot decide: {reason}",
        ),
        enforce=policy.on_unverifiable is OnUnverifiable.DENY,
    )
