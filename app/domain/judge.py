"""Every rule on every wired template of one object: structure, the binding's expectation (a
mapping, or a DRA profile's claim; unbound, the recipe's placement), the Networks and their param
sets; the unbound rules (structure, placement, Networks, a DRA claim beside Networks) on every
annotated template. A runtime is judged on its own templates; a TrainJob's are its runtime's
overlaid by its patches (app/domain/trainjob.py)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from app.domain.claims import DEFAULT_NAMESPACE, NO_CLAIMS, PodClaims, pod_claims
from app.domain.cluster import ClusterView
from app.domain.fields import JsonMap, str_at
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.profiles import Binding, Profile, binding_of
from app.domain.recipe import Recipe
from app.domain.rules.binding import Expected, expected_mapping, recipe_divergence, unwired
from app.domain.rules.claims import Templates, bound_conflict, claim_findings, claimed_conflict
from app.domain.rules.networks import device_mode_mismatch, network_findings, network_view
from app.domain.rules.placement import Placeable, place
from app.domain.rules.structure import Structure, structure_of
from app.domain.template import PodTemplate, PodTemplateMissing, job_templates
from app.domain.value_type import value_type
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation
from app.domain.wiring import Wiring, template_wiring


@value_type
class Evaluation:
    """A verdict plus the wiring fingerprint that UPDATE grandfathering compares, made when
    asked: only an UPDATE that would be denied asks."""

    verdict: Verdict
    fingerprinted: Callable[[], tuple[object, ...]]

    @property
    def fingerprint(self) -> tuple[object, ...]:
        return self.fingerprinted()


def known(fingerprint: tuple[object, ...]) -> Callable[[], tuple[object, ...]]:
    """A fingerprint already made, as an ``Evaluation`` takes it."""
    return lambda: fingerprint


@value_type
class Subject:
    """One judged template of the object: its job, its wiring, or why it has none. ``wired``
    ones are judged by every rule; annotated ones (any other job whose pod template carries the
    interfaces annotation) only by the rules that need no binding."""

    job: str
    wiring: Wiring
    missing: PodTemplateMissing | None = None
    wired: bool = True
    claims: PodClaims = NO_CLAIMS
    """The pod's ``spec.resourceClaims`` (DRA-wired NICs, docs/dra.md)."""

    def fingerprint(self) -> tuple[object, ...]:
        # Losing or gaining the pod template changes the wiring even when both lack annotations.
        if self.missing is not None:
            return (self.job, "no pod template")
        if self.claims.entries:
            return (self.job, *self.wiring.fingerprint(), self.claims.fingerprint())
        return (self.job, *self.wiring.fingerprint())


def template_subject(
    template: PodTemplate, wiring: Wiring, *, wired: bool = True, inherited: str | None = None
) -> Subject:
    """A wired (or annotated) template's subject: ``wiring``, and the template's claims (each
    located at ``inherited`` when the judged object does not hold them itself)."""
    claims = pod_claims(template.resource_claims, template.path, inherited=inherited)
    return Subject(template.job, wiring, wired=wired, claims=claims)


def judge_runtime(
    kind: Kind,
    obj: JsonMap,
    view: ClusterView,
    policy: Policy,
    binding: Binding | None = None,
    *,
    named: bool | None = None,
    pods_in: str | None = None,
) -> Evaluation:
    """Judge a ClusterTrainingRuntime or TrainingRuntime on its own wired and annotated
    templates; never raises. ``binding`` replaces its own (a runtime snapshot is bound as its
    runtime is); ``named`` as for ``judge_subjects``; ``pods_in`` is the namespace its pods run
    in when that is not its own (a runtime snapshot's TrainJob's)."""
    subjects = _runtime_subjects(obj)
    if pods_in is None and kind.namespaced:
        pods_in = str_at(obj, "metadata", "namespace") or DEFAULT_NAMESPACE
    out = VerdictBuilder()
    judge_subjects(
        subjects,
        binding=binding_of(kind, obj, policy) if binding is None else binding,
        view=view,
        policy=policy,
        out=out,
        named=named,
        namespace=pods_in,
    )
    return Evaluation(out.build(), partial(fingerprint_of, subjects))


def runtime_fingerprint(obj: JsonMap) -> tuple[object, ...]:
    """The fingerprint ``judge_runtime`` gives a runtime, read without judging it."""
    return fingerprint_of(_runtime_subjects(obj))


def fingerprint_of(subjects: tuple[Subject, ...]) -> tuple[object, ...]:
    """What UPDATE grandfathering compares: each judged template's job, wiring and claims."""
    return tuple(s.fingerprint() for s in subjects)


def _runtime_subjects(obj: JsonMap) -> tuple[Subject, ...]:
    """A runtime's wired templates (first), then its annotated ones."""
    templates = job_templates(obj)
    subjects = tuple(
        [
            template_subject(t, template_wiring(t))
            if isinstance(t, PodTemplate)
            else Subject(t.job, Wiring(None, None, t.path), t)
            for t in templates.wired
        ]
    )
    annotated = templates.annotated
    if annotated:
        subjects += tuple(template_subject(t, template_wiring(t), wired=False) for t in annotated)
    return subjects


def judge_subjects(
    subjects: tuple[Subject, ...],
    *,
    binding: Binding,
    view: ClusterView,
    policy: Policy,
    out: VerdictBuilder,
    named: bool | None = None,
    namespace: str | None = None,
) -> None:
    """Every rule on every wired template (first in ``subjects``), the unbound ones on every
    annotated template; findings name the job when there are several (or as ``named`` says).
    ``namespace`` is where the pods run (their ResourceClaimTemplates' namespace); None for a
    ClusterTrainingRuntime alone, whose claims are judged with each TrainJob."""
    if binding.warning:
        out.note(binding.warning)
    profile = binding.profile
    claimed = profile if profile is not None and profile.by_claim else None
    expected = (
        None
        if profile is None or claimed is not None
        else expected_mapping(profile, subjects[0].wiring, view, policy, out)
    )
    if named is None:
        named = len(subjects) > 1
    held = _held(profile, expected, view)
    # The templates are read when a rule first needs them: most objects claim nothing.
    templates: Templates | None = None
    checked: list[tuple[Subject, Structure, VerdictBuilder, Profile | None]] = []
    placeable: list[Placeable] = []
    for subject in subjects:
        scoped = out.scoped(f"{subject.job} job: " if named else "")
        # Annotated templates are bound to nothing: no expected mapping; the recipe places them.
        bound = expected if subject.wired else None
        by_claim = claimed if subject.wired else None
        if by_claim is not None:
            templates = templates or _templates(subjects, view, policy, out)
            _judge_claims(subject, by_claim, namespace, templates, scoped)
        structure = _judge_template(subject, bound, held=held and subject.wired, out=scoped)
        if structure is None or structure.entries is None:
            continue
        checked.append((subject, structure, scoped, by_claim))
        if profile is None or not subject.wired:
            placeable.append((subject.wiring, structure.entries, scoped))
    if not checked:
        return
    if placeable:
        # A binding to the recipe's profile has read the recipe already, and said if it cannot.
        said = profile is not None and profile.from_recipe
        place(placeable, view.recipe(), policy, out, said=said)
    # The Network view answers for the whole object: when it cannot, that is said once.
    networks = network_view(checked[0][0].wiring, view, policy, out)
    if networks is None:
        return
    for subject, structure, scoped, by_claim in checked:
        wiring, entries = subject.wiring, structure.entries or ()
        network_findings(wiring, structure, networks, policy, scoped)
        # Bound (for the recipe's profile: while the recipe delivers), the param sets' modes.
        if profile is not None and expected is not None and subject.wired:
            mismatch = device_mode_mismatch(wiring, structure, networks, profile)
            if mismatch is not None:
                scoped.deny(mismatch)
        if by_claim is not None:
            conflict = bound_conflict(wiring, entries, networks, by_claim)
        elif subject.claims.entries:
            templates = templates or _templates(subjects, view, policy, out)
            conflict = claimed_conflict(
                wiring, entries, networks, subject.claims, namespace, templates.state
            )
        else:
            continue
        if conflict is not None:
            scoped.deny(conflict)


def _templates(
    subjects: tuple[Subject, ...], view: ClusterView, policy: Policy, out: VerdictBuilder
) -> Templates:
    """The claim templates' reader of one object, whose first template's claims an unreadable
    state is reported at."""
    return Templates(view, policy, out, subjects[0].claims)


def _held(profile: Profile | None, expected: Expected | None, view: ClusterView) -> bool:
    """Whether the object's wired templates are held to AICR's conventions (docs/rules.md): it
    is bound, unless only to the recipe's profile while the recipe delivers nothing."""
    if profile is None:
        return False
    if not profile.from_recipe or expected is not None:
        return True
    recipe = view.recipe()
    return not (isinstance(recipe, Recipe) and recipe.mapping is None and recipe.problem is None)


def _judge_claims(
    subject: Subject,
    profile: Profile,
    namespace: str | None,
    templates: Templates,
    out: VerdictBuilder,
) -> None:
    """A DRA profile's rules on one wired template (docs/dra.md)."""
    missing = subject.missing
    if missing is not None:
        out.deny(
            Violation(
                code=Code.NODE_JOB_MISSING,
                field=str(missing.path),
                message=f"bound to profile {profile.name}, but {missing.reason}, so its pods "
                "cannot claim their NICs",
            )
        )
        return
    claim_findings(subject.claims, profile, namespace, templates.state, out)


def _judge_template(
    subject: Subject, expected: Expected | None, *, held: bool, out: VerdictBuilder
) -> Structure | None:
    """Structure (AICR's when ``held``, else GKE's) and binding rules of one template; its
    structure, entries read, when Networks are next."""
    wiring = subject.wiring
    if not wiring.wired:
        if expected is not None:
            out.deny(unwired(subject.job, subject.wiring, subject.missing, expected))
        return None
    structure = structure_of(wiring, bound=held)
    for violation in structure.violations:
        out.deny(violation)
    entries = structure.entries
    if entries is None:
        return None
    for note in structure.notes:
        out.note(note)
    if expected is not None:
        # Held to a mapping, the list starts with eth0->default: the rest is the mapping.
        divergence = recipe_divergence(wiring, entries[1:], expected)
        if divergence is not None:
            out.deny(divergence)
    return structure
