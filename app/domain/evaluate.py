"""Evaluating one admission request: what is evaluated, every rule on every wired template,
UPDATE grandfathering and the setting ``enforcement``. The one entry point of the rules
(docs/rules.md, docs/architecture.md).

Runtimes are evaluated on their own wired templates; TrainJobs on their runtime's, overlaid by
their own patches (a violation they inherit unchanged names the runtime as the object to fix).
Every applicable rule reports; the result is a Verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterView, RuntimeKey, Unverifiable, runtime_key
from app.domain.fields import FieldPath, JsonMap, map_at
from app.domain.kinds import Kind, Protected, runtime_ref_of
from app.domain.policy import RECIPE_BOUND_LABEL, Enforcement, Policy, Protect
from app.domain.profiles import Binding, binding_of
from app.domain.recipe import Recipe
from app.domain.rules import cannot_decide
from app.domain.rules.binding import (
    Expected,
    expected_mapping,
    recipe_divergence,
    recipe_expected,
    unwired,
)
from app.domain.rules.directives import directive_violation, patch_directives
from app.domain.rules.networks import device_mode_mismatch, network_findings, network_view
from app.domain.rules.protect import (
    network_deletion,
    param_set_deletion,
    recipe_deletion,
    recipe_write,
)
from app.domain.rules.structure import structure_of
from app.domain.runtime_snapshot import FIELD as SNAPSHOT_FIELD, RuntimeSnapshot
from app.domain.template import (
    LAUNCHER_JOB,
    NODE_JOB,
    PodTemplate,
    PodTemplateMissing,
    wired_templates,
)
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation, shown
from app.domain.wiring import Wiring, patched_ancestors, template_wiring, trainjob_wiring

_RUNTIME_REF = "spec.runtimeRef"
# What a TrainJob inherits unchanged is blamed on its runtime, except what is about the cluster
# (the recipe, a Network's or param set's state, nicguard's view) or names the runtime already.
_NOT_ATTRIBUTED: Final = frozenset(
    {
        Code.RECIPE_UNAVAILABLE,
        Code.RECIPE_INVALID,
        Code.CLUSTER_STATE_UNAVAILABLE,
        Code.NETWORK_API_NOT_SERVED,
        Code.NETWORK_NOT_READY,
        Code.DEVICE_MODE_MISMATCH,
        Code.NODE_JOB_MISSING,
    }
)


class Operation(StrEnum):
    """AdmissionReview operations."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    """The parts of an admission request the rules need.

    ``kind`` is None for objects nicguard does not judge; ``obj`` is required for CREATE/UPDATE.
    ``name`` and ``username`` are the request's; ``written_recipe`` is the recipe ConfigMap of a
    CREATE/UPDATE of it and ``old_recipe`` the one an UPDATE replaces; ``snapshot`` and
    ``old_snapshot`` the copies a runtime snapshot ConfigMap holds; all as parsed by the adapter
    that decodes YAML.
    """

    operation: Operation
    kind: Kind | Protected | None
    namespace: str = ""
    obj: JsonMap | None = None
    old_obj: JsonMap | None = None
    subresource: str = ""
    name: str = ""
    username: str = ""
    written_recipe: Recipe | None = None
    old_recipe: Recipe | None = None
    snapshot: RuntimeSnapshot | None = None
    old_snapshot: RuntimeSnapshot | None = None


# Deleting a namespace or cascading deletes must never deadlock on what nicguard guards: the
# namespace controller and the garbage collector, under their own service accounts or, when the
# controller manager runs without per-controller credentials, under its identity.
EXEMPT_USERS: Final = frozenset(
    {
        "system:serviceaccount:kube-system:namespace-controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:kube-controller-manager",
    }
)
_PROTECTED_OPERATIONS: Final = {
    Protected.NETWORK: frozenset({Operation.DELETE}),
    Protected.PARAM_SET: frozenset({Operation.DELETE}),
    Protected.RECIPE: frozenset({Operation.CREATE, Operation.UPDATE, Operation.DELETE}),
    Protected.RUNTIME_SNAPSHOT: frozenset({Operation.CREATE, Operation.UPDATE}),
}


def skip_reason(review: Review) -> str | None:
    """Why a request is allowed without evaluation, or None when it must be judged."""
    if isinstance(review.kind, Protected):
        return _protected_skip_reason(review.kind, review)
    if review.operation not in (Operation.CREATE, Operation.UPDATE):
        return f"{review.operation} is not checked"
    if review.subresource:
        return f"subresource {review.subresource} is not checked"
    if review.kind is None:
        return "not a Trainer runtime or TrainJob"
    return _terminating_reason(review)


def _terminating_reason(review: Review) -> str | None:
    """An UPDATE of an object being deleted that changes nothing outside ``metadata`` (finalizer
    removal) is never blocked; one that changes more is judged, as Trainer still acts on it."""
    metadata = map_at(review.obj, "metadata")
    if metadata is None or not metadata.get("deletionTimestamp"):
        return None
    if review.operation is not Operation.UPDATE or review.obj is None or review.old_obj is None:
        return None
    if _beyond_metadata(review.obj) != _beyond_metadata(review.old_obj):
        return None
    return "object is being deleted and the update changes nothing outside metadata"


def _beyond_metadata(obj: JsonMap) -> dict[str, object]:
    return {key: value for key, value in obj.items() if key != "metadata"}


def _protected_skip_reason(kind: Protected, review: Review) -> str | None:
    if review.operation not in _PROTECTED_OPERATIONS[kind]:
        return f"{review.operation} of a {kind.value} is not checked"
    if review.subresource:
        return f"subresource {review.subresource} is not checked"
    if review.username in EXEMPT_USERS:
        return f"{review.username} is never blocked (namespace deletion, garbage collection)"
    return _terminating_reason(review)


def runtime_needed(review: Review) -> RuntimeKey | None:
    """The runtime a TrainJob request is judged against, or None for every other request."""
    if review.kind is not Kind.TRAIN_JOB or review.obj is None or skip_reason(review):
        return None
    ref = runtime_ref_of(review.obj)
    kind = None if ref is None else ref.runtime_kind()
    if ref is None or kind is None:
        return None
    return runtime_key(kind, review.namespace, ref.name)


def evaluate(review: Review, view: ClusterView, policy: Policy) -> Verdict:
    """The verdict for one request; never raises for any input."""
    verdict = _judge(review, view, policy)
    if policy.enforcement is Enforcement.DENY or verdict.allowed:
        return verdict
    # enforcement=warn (docs/rollout.md): what would deny is allowed, its lines the first warnings.
    return replace(
        verdict,
        violations=(),
        warned=verdict.violations,
        warnings=tuple(v.render() for v in verdict.violations) + verdict.warnings,
    )


def _judge(review: Review, view: ClusterView, policy: Policy) -> Verdict:
    if review.kind is Protected.RUNTIME_SNAPSHOT:
        return _evaluate_snapshot(review, view, policy)
    if isinstance(review.kind, Protected):
        return _judge_protected(review.kind, review, view, policy)
    if skip_reason(review) is not None or review.kind is None or review.obj is None:
        return Verdict()
    current = evaluate_object(review.kind, review.obj, review.namespace, view, policy)
    verdict = current.verdict
    if review.operation is not Operation.UPDATE or verdict.allowed or review.old_obj is None:
        return verdict
    previous = evaluate_object(review.kind, review.old_obj, review.namespace, view, policy)
    if previous.fingerprint != current.fingerprint:
        return verdict  # the update changes the wiring: full verdict
    return _grandfather(verdict, previous.verdict)


def _judge_protected(kind: Protected, review: Review, view: ClusterView, policy: Policy) -> Verdict:
    """What the wiring depends on (docs/rules.md: NetworkInUse, ParamSetInUse, RecipeInUse)."""
    if policy.protect is Protect.OFF or skip_reason(review) is not None:
        return Verdict()
    out = VerdictBuilder()
    if kind is Protected.NETWORK:
        network_deletion(review.name, view, policy, out)
    elif kind is Protected.PARAM_SET:
        param_set_deletion(review.name, view, policy, out)
    elif review.operation is Operation.DELETE:
        recipe_deletion(view, policy, out)
    elif review.written_recipe is not None:
        recipe_write(
            review.written_recipe,
            view,
            policy,
            out,
            old=review.old_recipe,
            owners=(_owners(review.obj), _owners(review.old_obj)),
        )
    return out.build()


def _owners(obj: JsonMap | None) -> tuple[JsonMap, ...]:
    found = map_at(obj, "metadata")
    items = found.get("ownerReferences") if found is not None else None
    if not isinstance(items, list):
        return ()
    return tuple(item for item in items if isinstance(item, dict))


def _evaluate_snapshot(review: Review, view: ClusterView, policy: Policy) -> Verdict:
    """A runtime snapshot ConfigMap judged as a CREATE of the runtime it copies (docs/rules.md,
    RuntimeSnapshotInvalid); bound when the copy, the old copy or the live runtime is."""
    copy = review.snapshot
    if copy is None or skip_reason(review) is not None:
        return Verdict()
    lead = copy.describe()
    if copy.runtime is None or copy.kind is None:
        out = VerdictBuilder()
        out.deny(
            Violation(
                code=Code.RUNTIME_SNAPSHOT_INVALID,
                field=SNAPSHOT_FIELD,
                message=f"{lead}: {copy.problem}; Trainer builds the TrainJob's pods from this "
                "copy and cannot read it",
            )
        )
        return out.build()
    live = view.runtime(copy.kind, copy.namespace, copy.runtime_name)
    if isinstance(live, Unverifiable):
        out = VerdictBuilder()
        cannot_decide(
            out,
            policy,
            SNAPSHOT_FIELD,
            f"{lead}: the runtime it copies cannot be looked up: {live.reason}",
        )
        return out.build()
    old = review.old_snapshot
    old_copy = None
    if old is not None and old.kind is not None and old.runtime is not None:
        old_copy = (old.kind, old.runtime)
    binding = _snapshot_binding((copy.kind, copy.runtime), old_copy, live, policy)
    current = evaluate_object(copy.kind, copy.runtime, copy.namespace, view, policy, binding)
    verdict = current.verdict
    if review.operation is Operation.UPDATE and not verdict.allowed and old_copy is not None:
        previous = evaluate_object(*old_copy, copy.namespace, view, policy, binding)
        if previous.fingerprint == current.fingerprint:
            verdict = _grandfather(verdict, previous.verdict)
    return _in_copy(verdict, lead)


def _snapshot_binding(
    copy: tuple[Kind, JsonMap],
    old: tuple[Kind, JsonMap] | None,
    live: JsonMap | None,
    policy: Policy,
) -> Binding:
    """The copy's own binding, else the old copy's, else the live runtime's: rewriting the
    labels inside a copy never unbinds it."""
    kind, runtime = copy
    own = binding_of(kind, runtime, policy)
    if own.profile is not None:
        return own
    others = []
    if old is not None:
        others.append(binding_of(*old, policy))
    if live is not None:
        others.append(binding_of(kind, live, policy))
    for other in others:
        if other.profile is not None:
            return replace(other, warning=own.warning)
    return own


def _in_copy(verdict: Verdict, lead: str) -> Verdict:
    """Each finding names the snapshot ConfigMap, its TrainJob and the runtime; each field points
    into the copy (``data.runtime: spec...``)."""

    def moved(violation: Violation) -> Violation:
        return replace(
            violation,
            field=f"{SNAPSHOT_FIELD}: {violation.field}",
            message=f"{lead}: {violation.message}",
            causes=tuple(
                (f"{SNAPSHOT_FIELD}: {field}", f"{lead}: {message}")
                for field, message in violation.causes
            ),
        )

    def named(warning: str) -> str:
        # A warning led by its code keeps it first (a cut warning still says what it is).
        code, bracket, rest = warning.partition("] ")
        if warning.startswith("[") and bracket:
            return f"{code}] {lead}: {rest}"
        return f"{lead}: {warning}"

    return replace(
        verdict,
        violations=tuple(map(moved, verdict.violations)),
        waived=tuple(map(moved, verdict.waived)),
        grandfathered=tuple(map(moved, verdict.grandfathered)),
        warnings=tuple(map(named, verdict.warnings)),
    )


def _grandfather(verdict: Verdict, previous: Verdict) -> Verdict:
    """Downgrade violations the old object already had to warnings, each led by its code."""
    had = {violation.code for violation in (*previous.violations, *previous.waived)}
    kept = tuple(v for v in verdict.violations if v.code not in had)
    old = tuple(v for v in verdict.violations if v.code in had)
    return replace(
        verdict,
        violations=kept,
        waived=verdict.waived + old,
        grandfathered=old,
        warnings=verdict.warnings
        + tuple(f"[{v.code}] pre-existing, wiring unchanged: {v.message}" for v in old),
    )


@dataclass(frozen=True, slots=True)
class Evaluation:
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


def evaluate_object(
    kind: Kind,
    obj: JsonMap,
    namespace: str,
    view: ClusterView,
    policy: Policy,
    binding: Binding | None = None,
) -> Evaluation:
    """Judge a ClusterTrainingRuntime, TrainingRuntime or TrainJob; never raises. ``binding``
    replaces a runtime's own (a runtime snapshot is bound as its runtime is)."""
    if kind is Kind.TRAIN_JOB:
        return _evaluate_trainjob(obj, namespace, view, policy)
    subjects = tuple(
        _Subject(t.job, template_wiring(t))
        if isinstance(t, PodTemplate)
        else _Subject(t.job, Wiring(None, None, t.path), t)
        for t in wired_templates(obj)
    )
    out = VerdictBuilder()
    _evaluate_templates(
        subjects,
        binding=binding_of(kind, obj, policy) if binding is None else binding,
        view=view,
        policy=policy,
        out=out,
    )
    return Evaluation(out.build(), tuple(s.fingerprint() for s in subjects))


def _evaluate_trainjob(
    obj: JsonMap, namespace: str, view: ClusterView, policy: Policy
) -> Evaluation:
    out = VerdictBuilder()
    ref = runtime_ref_of(obj)
    fingerprint: tuple[object, ...] = (ref,)
    runtime_kind = ref.runtime_kind() if ref is not None else None
    if ref is None or runtime_kind is None:
        named = "has no name" if ref is None else f"names {shown(ref.describe())}"
        out.note(f"spec.runtimeRef {named}, not a Trainer runtime; wiring not checked")
        return Evaluation(out.build(), fingerprint)
    runtime = view.runtime(runtime_kind, namespace, ref.name)
    if isinstance(runtime, Unverifiable):
        # The TrainJob's own patches still count: an UPDATE that changes them changes the wiring.
        fingerprint = (
            ref,
            *(trainjob_wiring(obj, None, job).fingerprint() for job in (NODE_JOB, LAUNCHER_JOB)),
        )
        cannot_decide(
            out,
            policy,
            _RUNTIME_REF,
            f"the runtime {shown(ref.describe())} cannot be looked up: {runtime.reason}",
        )
        return Evaluation(out.build(), fingerprint)
    if runtime is None:
        out.note(f"runtime {shown(ref.describe())} not found; wiring not checked")
        return Evaluation(out.build(), fingerprint)
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
        for t in wired_templates(runtime, ancestors=patched_ancestors(obj))
    )
    # Directives of Trainer's merge that can reach a wired template: refused, whatever binds it
    # (its effect on the wiring is not computed, so nothing judged below is what would run).
    directives = patch_directives(obj, {s.job for s in subjects})
    for directive in directives:
        out.deny(directive_violation(directive))
    # A TrainJob is held to its runtime's profile.
    binding = binding_of(runtime_kind, runtime, policy)
    scope = f"{namespace}/" if runtime_kind.namespaced else ""
    origin = shown(f"{runtime_kind.value}/{scope}{ref.name}")
    _evaluate_templates(subjects, binding=binding, view=view, policy=policy, out=out, origin=origin)
    _attribute(out, origin, lambda: evaluate_object(runtime_kind, runtime, namespace, view, policy))
    return Evaluation(
        out.build(),
        (
            ref,
            *(s.wiring.fingerprint() for s in subjects),
            tuple(d.fingerprint() for d in directives),
        ),
    )


def _attribute(out: VerdictBuilder, origin: str, own: Callable[[], Evaluation]) -> None:
    """Name the runtime as the object to fix in each violation the TrainJob inherits unchanged:
    at a value it does not patch (``spec.runtimeRef``), and the runtime on its own has it too
    (``own``, judged only when needed). What its own patches introduce stays its own."""
    candidates = [
        i
        for i, v in enumerate(out.violations)
        if v.field == _RUNTIME_REF and v.code not in _NOT_ATTRIBUTED
    ]
    if not candidates:
        return
    its = {(v.code, v.message) for v in own().verdict.violations}
    for i in candidates:
        violation = out.violations[i]
        if (violation.code, violation.message) in its:
            out.violations[i] = replace(
                violation,
                message=f"inherited unchanged from {origin}, the object to fix: "
                f"{violation.message}",
            )


def _evaluate_templates(
    subjects: tuple[_Subject, ...],
    *,
    binding: Binding,
    view: ClusterView,
    policy: Policy,
    out: VerdictBuilder,
    origin: str = "",
) -> None:
    """Every rule on every wired template; findings name the job when there are several.
    ``origin`` names the runtime a TrainJob inherits its wiring from."""
    if binding.warning:
        out.note(binding.warning)
    profile = binding.profile
    expected = (
        None
        if profile is None
        else expected_mapping(profile, subjects[0].wiring, view, policy, out)
    )
    named = len(subjects) > 1
    checked: list[tuple[Wiring, tuple[InterfaceRef, ...], VerdictBuilder]] = []
    for subject in subjects:
        scoped = out.scoped(f"{subject.job} job: " if named else "")
        secondaries = _evaluate_template(subject, expected, out=scoped)
        if secondaries is not None:
            checked.append((subject.wiring, secondaries, scoped))
            if profile is None:
                _order_warning(subject.wiring, secondaries, view, out, scoped.prefix, origin)
    if not checked:
        return
    # The Network view answers for the whole object: when it cannot, that is said once.
    networks = network_view(checked[0][0], view, policy, out)
    if networks is None:
        return
    for wiring, secondaries, scoped in checked:
        network_findings(wiring, secondaries, networks, policy, scoped)
        # Bound (for the recipe's profile: while the recipe delivers), the param sets' modes.
        if profile is not None and expected is not None:
            mismatch = device_mode_mismatch(wiring, secondaries, networks, profile)
            if mismatch is not None:
                scoped.deny(mismatch)


def _order_warning(
    wiring: Wiring,
    secondaries: tuple[InterfaceRef, ...],
    view: ClusterView,
    out: VerdictBuilder,
    job: str,
    origin: str,
) -> None:
    """An unbound template whose Networks are exactly the delivered recipe's, in another order:
    allowed, with a warning that names the label that would bind it (docs/rules.md)."""
    recipe = view.recipe()
    if not isinstance(recipe, Recipe) or recipe.mapping is None or recipe.problem is not None:
        return
    recorded = recipe.mapping
    if len(secondaries) != len(recorded) or sorted(e.network or "" for e in secondaries) != sorted(
        e.network or "" for e in recorded
    ):
        return
    divergence = recipe_divergence(wiring, secondaries, recipe_expected(recorded, recipe.ref))
    if divergence is None:
        return
    out.recipe = recipe.ref
    assert wiring.interfaces is not None  # noqa: S101 - secondaries come from a wired template
    inherited = f"inherited unchanged from {origin}: " if wiring.interfaces.inherited else ""
    # Led by its code, before the job's name: a warning cut to 120 characters still says it.
    out.note(
        f"[{divergence.code}] {job}{inherited}not recipe-bound (label {RECIPE_BOUND_LABEL}=true "
        f"binds it): {divergence.message}"
    )


def _evaluate_template(
    subject: _Subject, expected: Expected | None, *, out: VerdictBuilder
) -> tuple[InterfaceRef, ...] | None:
    """Structure and binding rules of one template; its secondaries when Networks are next."""
    wiring = subject.wiring
    if not wiring.wired:
        if expected is not None:
            out.deny(unwired(subject.job, subject.wiring, subject.missing, expected))
        return None
    structure = structure_of(wiring)
    for violation in structure.violations:
        out.deny(violation)
    if structure.secondaries is None:
        return None
    for position, entry in enumerate(structure.secondaries, start=1):
        if entry.interface is not None:
            out.note(f"{entry.pair()} (entry {position}) uses a NetworkInterface; not checked")
    if expected is not None:
        divergence = recipe_divergence(wiring, structure.secondaries, expected)
        if divergence is not None:
            out.deny(divergence)
    return structure.secondaries
