"""Judging a TrainJob: its runtime's wired and annotated templates (from the view) overlaid by
its own patches, directives of Trainer's merge refused, and each violation it inherits unchanged
blamed on the runtime, the object to fix (docs/rules.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from app.domain.cluster import ClusterView, Unverifiable
from app.domain.fields import FieldPath, JsonMap
from app.domain.judge import (
    Evaluation,
    Subject,
    judge_runtime,
    judge_subjects,
    known,
    template_subject,
)
from app.domain.kinds import runtime_ref_of
from app.domain.policy import Policy
from app.domain.profiles import binding_of
from app.domain.rules import cannot_decide
from app.domain.rules.directives import directive_violation, patch_directives
from app.domain.template import (
    LAUNCHER_JOB,
    NODE_JOB,
    PodTemplate,
    PodTemplateMissing,
    job_templates,
)
from app.domain.verdict import Code, VerdictBuilder, shown
from app.domain.wiring import Wiring, patched_ancestors, patched_jobs, trainjob_wiring

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
        Code.RESOURCE_CLAIM_TEMPLATE_NOT_FOUND,
    }
)


def judge_trainjob(obj: JsonMap, namespace: str, view: ClusterView, policy: Policy) -> Evaluation:
    """Judge a TrainJob on its runtime's wired and annotated templates overlaid by its own
    patches; never raises."""
    out = VerdictBuilder()
    ref = runtime_ref_of(obj)
    fingerprint: tuple[object, ...] = (ref,)
    runtime_kind = ref.runtime_kind() if ref is not None else None
    if ref is None or runtime_kind is None:
        named = "has no name" if ref is None else f"names {shown(ref.describe())}"
        out.note(f"spec.runtimeRef {named}, not a Trainer runtime; wiring not checked")
        return Evaluation(out.build(), known(fingerprint))
    runtime = view.runtime(runtime_kind, namespace, ref.name)
    if isinstance(runtime, Unverifiable):
        # The TrainJob's own patches still count: an UPDATE that changes them changes the wiring.
        jobs = dict.fromkeys((NODE_JOB, LAUNCHER_JOB, *patched_jobs(obj)))
        fingerprint = (
            ref,
            *((job, *trainjob_wiring(obj, None, job).fingerprint()) for job in jobs),
        )
        cannot_decide(
            out,
            policy,
            _RUNTIME_REF,
            f"the runtime {shown(ref.describe())} cannot be looked up: {runtime.reason}",
        )
        return Evaluation(out.build(), known(fingerprint))
    if runtime is None:
        out.note(f"runtime {shown(ref.describe())} not found; wiring not checked")
        return Evaluation(out.build(), known(fingerprint))
    templates = job_templates(runtime, ancestors=patched_ancestors(obj))
    subjects = tuple(
        [
            _subject(t, trainjob_wiring(obj, t, t.job))
            if isinstance(t, PodTemplate)
            else Subject(
                t.job,
                trainjob_wiring(obj, None, t.job),
                PodTemplateMissing(
                    f"runtime {shown(ref.describe())}: {t.reason}", FieldPath(_RUNTIME_REF), t.job
                ),
            )
            for t in templates.wired
        ]
    )
    if templates.others:
        # Any other job is annotated when its effective pod annotations carry the interfaces
        # annotation: the runtime's, or what the TrainJob's own patches add.
        subjects += tuple(
            _subject(t, wiring, wired=False)
            for t in templates.others
            for wiring in (trainjob_wiring(obj, t, t.job),)
            if wiring.wired
        )
    # Directives of Trainer's merge that can reach a judged template: refused, whatever binds
    # it (its effect on the wiring is not computed, so nothing judged below is what would run).
    directives = patch_directives(obj, {s.job for s in subjects})
    for directive in directives:
        out.deny(directive_violation(directive))
    # A TrainJob is held to its runtime's profile.
    binding = binding_of(runtime_kind, runtime, policy)
    scope = f"{namespace}/" if runtime_kind.namespaced else ""
    origin = shown(f"{runtime_kind.value}/{scope}{ref.name}")
    # Messages name the job as the runtime's own verdict does, so inherited ones compare.
    by_job = len(subjects) > 1
    judge_subjects(
        subjects,
        binding=binding,
        view=view,
        policy=policy,
        out=out,
        named=by_job,
        namespace=namespace,
    )
    pods_in = namespace if runtime_kind.namespaced else None
    _attribute(
        out,
        origin,
        lambda: judge_runtime(runtime_kind, runtime, view, policy, named=by_job, pods_in=pods_in),
    )
    return Evaluation(
        out.build(),
        lambda: (
            ref,
            *((s.job, *s.wiring.fingerprint()) for s in subjects),
            tuple(d.fingerprint() for d in directives),
        ),
    )


def _subject(template: PodTemplate, wiring: Wiring, *, wired: bool = True) -> Subject:
    # Trainer v2.3.0's patch types cannot reach resourceClaims: the pod spec of a runtimePatches
    # job template (and of a v2.1 podTemplateOverrides entry) has affinity, containers,
    # imagePullSecrets, initContainers, nodeSelector, schedulingGates, securityContext,
    # serviceAccountName, terminationGracePeriodSeconds, tolerations and volumes only. So the
    # pods claim what the runtime's template claims, whatever a TrainJob's patches say.
    return template_subject(template, wiring, wired=wired, inherited=_RUNTIME_REF)


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
