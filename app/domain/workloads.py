"""The workload doors (docs/rules.md): the annotated pod templates of a JobSet, a Job or a Pod,
judged without a binding (WiringModeConflict included), and the wiring an UPDATE removes from a
JobSet's or Job's template; every finding naming the object and its controller."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Final

from app.domain.annotation import INTERFACES_ANNOTATION
from app.domain.cluster import ClusterView
from app.domain.fields import FieldPath, JsonMap, as_list, map_at, str_at, value_at
from app.domain.judge import (
    Evaluation,
    Subject,
    fingerprint_of,
    judge_subjects,
    known,
    template_subject,
)
from app.domain.kinds import Workload
from app.domain.policy import Policy, Workloads
from app.domain.profiles import UNBOUND
from app.domain.template import PodTemplate, job_name
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation, shown
from app.domain.wiring import template_wiring

_REPLICATED_JOBS: Final = FieldPath("spec.replicatedJobs")
_JOB_TEMPLATE: Final = FieldPath("spec.template")
_POD: Final = FieldPath()
# Who creates pods from the template that lost its wiring, as the refusal says it.
_CREATED_FROM: Final = {
    Workload.JOB_SET: "the Jobs the JobSet creates from it from then on (a Job re-created on "
    "failure is one)",
    Workload.JOB: "the Pods the Job creates from it from then on",
}


def judge_workload(
    kind: Workload,
    obj: JsonMap,
    namespace: str,
    view: ClusterView,
    policy: Policy,
    *,
    old: JsonMap | None = None,
) -> Evaluation:
    """Judge a JobSet, Job or Pod on its annotated pod templates by the rules that need no
    binding (structure, placement, Networks); never raises. ``old`` is the object an UPDATE
    replaces: a JobSet's or Job's template that loses the interfaces annotation is refused (a
    Pod may lose its wiring). ``workloads=off`` judges nothing, ``warn`` makes each denial a
    warning."""
    if policy.workloads is Workloads.OFF:
        return Evaluation(Verdict(), known(()))
    templates = workload_templates(kind, obj)
    subjects = _subjects(templates)
    out = VerdictBuilder(subject=lambda: f"{describe_workload(kind, obj, namespace)}: ")
    # A JobSet's findings name their replicatedJob, as a runtime's do; a Job or Pod has one.
    named = kind is Workload.JOB_SET
    # The pods run in the object's namespace: its ResourceClaimTemplates are the ones to read.
    judge_subjects(
        subjects,
        binding=UNBOUND,
        view=view,
        policy=policy,
        out=out,
        named=named,
        namespace=namespace,
    )
    if old is not None and kind is not Workload.POD:
        _removed_wiring(kind, old, obj, {t.job for t in templates}, out)
    verdict = out.build()
    if policy.workloads is Workloads.WARN and not verdict.allowed:
        verdict = verdict.allowing(warned=False)
    return Evaluation(verdict, partial(fingerprint_of, subjects))


def workload_fingerprint(kind: Workload, obj: JsonMap) -> tuple[object, ...]:
    """The fingerprint ``judge_workload`` gives ``obj``, read without judging it.

    Every rule at this door reads only what the fingerprint holds (each annotated template's job,
    wiring values and claims) besides the view, the policy and the namespace, which an UPDATE
    shares between its objects: two objects with one fingerprint get the same codes. (An UPDATE
    that removes a template's wiring changes the jobs the fingerprint lists.)
    """
    return fingerprint_of(_subjects(workload_templates(kind, obj)))


def _subjects(templates: tuple[PodTemplate, ...]) -> tuple[Subject, ...]:
    return tuple(template_subject(t, template_wiring(t), wired=False) for t in templates)


def _removed_wiring(
    kind: Workload, old: JsonMap, obj: JsonMap, kept: set[str], out: VerdictBuilder
) -> None:
    """InterfacesAnnotationMissing for each template that carried the interfaces annotation in
    ``old`` and does not in ``obj`` (``kept``: the jobs whose templates still do), paired by
    replicatedJob name (by position when unnamed)."""
    had = {job for pod, job, _ in _pod_templates(kind, old) if _annotations(pod) is not None}
    removed = had - kept
    if not removed:
        return
    for _, job, position in _pod_templates(kind, obj):
        if job not in removed:
            continue
        path = _template_path(kind, position).child("metadata.annotations")
        scoped = out.scoped(f"{job} job: " if kind is Workload.JOB_SET else "")
        whose = f"the {job} pod template" if kind is Workload.JOB_SET else "its pod template"
        scoped.deny(
            Violation(
                code=Code.INTERFACES_ANNOTATION_MISSING,
                field=str(path.key(INTERFACES_ANNOTATION)),
                message=f"the update removes the {INTERFACES_ANNOTATION} annotation from "
                f"{whose}: {_CREATED_FROM[kind]} would get no GPU NICs, only eth0",
            )
        )


def workload_templates(kind: Workload, obj: JsonMap) -> tuple[PodTemplate, ...]:
    """The pod templates of the object that carry the interfaces annotation: each of a JobSet's
    replicatedJobs', a Job's, or the Pod itself."""
    return tuple(
        PodTemplate(
            annotations=annotations,
            path=_template_path(kind, position),
            job=job,
            resource_claims=value_at(pod, "spec", "resourceClaims"),
        )
        for pod, job, position in _pod_templates(kind, obj)
        if (annotations := _annotations(pod)) is not None
    )


def _pod_templates(kind: Workload, obj: JsonMap) -> Iterator[tuple[JsonMap | None, str, int]]:
    """Every pod template of the object (None where a job has none), its job and position."""
    if kind is Workload.JOB_SET:
        for position, job in enumerate(as_list(value_at(obj, "spec", "replicatedJobs")) or ()):
            yield map_at(job, "template", "spec", "template"), job_name(job, position), position
    else:
        yield map_at(obj, "spec", "template") if kind is Workload.JOB else obj, kind.value, 0


def _template_path(kind: Workload, position: int) -> FieldPath:
    if kind is Workload.JOB_SET:
        return _REPLICATED_JOBS.index(position).child("template.spec.template")
    return _JOB_TEMPLATE if kind is Workload.JOB else _POD


def _annotations(pod: JsonMap | None) -> JsonMap | None:
    """The template's annotations when they hold the interfaces key, else None."""
    annotations = map_at(pod, "metadata", "annotations")
    if annotations is None or INTERFACES_ANNOTATION not in annotations:
        return None
    return annotations


def describe_workload(kind: Workload, obj: JsonMap, namespace: str) -> str:
    """``Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0)``: the object and its
    controller, as a user reads it in a controller's event; a Pod known only by its
    ``generateName`` is ``team-a/llama-node-0-0-…``."""
    name = str_at(obj, "metadata", "name")
    if not name:
        prefix = str_at(obj, "metadata", "generateName")
        name = f"{prefix}…" if prefix else "(unnamed)"
    lead = f"{kind.value} {_in(namespace, name)}"
    for owner in as_list(value_at(obj, "metadata", "ownerReferences")) or ():
        owner_kind, owner_name = str_at(owner, "kind"), str_at(owner, "name")
        if value_at(owner, "controller") is True and owner_kind and owner_name:
            return f"{lead} (of {shown(owner_kind)} {_in(namespace, owner_name)})"
    return lead


def _in(namespace: str, name: str) -> str:
    # Each cut on its own: a long Pod name keeps its namespace.
    return f"{shown(namespace)}/{shown(name)}" if namespace else shown(name)
