"""The workload doors (docs/rules.md): the annotated pod templates of a JobSet, a Job or a Pod,
judged without a binding (WiringModeConflict included), every finding naming the object and its
controller."""

from __future__ import annotations

from typing import Final

from app.domain.annotation import INTERFACES_ANNOTATION
from app.domain.cluster import ClusterView
from app.domain.fields import FieldPath, JsonMap, as_list, map_at, str_at, value_at
from app.domain.judge import Evaluation, judge_subjects, template_subject
from app.domain.kinds import Workload
from app.domain.policy import Policy, Workloads
from app.domain.profiles import UNBOUND
from app.domain.template import PodTemplate, job_name
from app.domain.verdict import Verdict, VerdictBuilder, shown
from app.domain.wiring import template_wiring

_REPLICATED_JOBS: Final = FieldPath("spec.replicatedJobs")
_JOB_TEMPLATE: Final = FieldPath("spec.template")
_POD: Final = FieldPath()


def judge_workload(
    kind: Workload, obj: JsonMap, namespace: str, view: ClusterView, policy: Policy
) -> Evaluation:
    """Judge a JobSet, Job or Pod on its annotated pod templates by the rules that need no
    binding (structure, placement, Networks); never raises. ``workloads=off`` judges nothing,
    ``warn`` makes each denial a warning."""
    if policy.workloads is Workloads.OFF:
        return Evaluation(Verdict(), ())
    subjects = tuple(
        template_subject(t, template_wiring(t), wired=False) for t in workload_templates(kind, obj)
    )
    out = VerdictBuilder().scoped(f"{describe_workload(kind, obj, namespace)}: ")
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
    verdict = out.build()
    if policy.workloads is Workloads.WARN and not verdict.allowed:
        verdict = verdict.allowing(warned=False)
    return Evaluation(verdict, tuple(s.fingerprint() for s in subjects))


def workload_templates(kind: Workload, obj: JsonMap) -> tuple[PodTemplate, ...]:
    """The pod templates of the object that carry the interfaces annotation: each of a JobSet's
    replicatedJobs', a Job's, or the Pod itself."""
    if kind is Workload.JOB_SET:
        jobs = as_list(value_at(obj, "spec", "replicatedJobs")) or ()
        found = (
            _annotated(
                map_at(job, "template", "spec", "template"),
                _REPLICATED_JOBS.index(position).child("template.spec.template"),
                job_name(job, position),
            )
            for position, job in enumerate(jobs)
        )
        return tuple(t for t in found if t is not None)
    if kind is Workload.JOB:
        template = _annotated(map_at(obj, "spec", "template"), _JOB_TEMPLATE, kind.value)
    else:
        template = _annotated(obj, _POD, kind.value)
    return () if template is None else (template,)


def _annotated(pod: JsonMap | None, path: FieldPath, job: str) -> PodTemplate | None:
    annotations = map_at(pod, "metadata", "annotations")
    if annotations is None or INTERFACES_ANNOTATION not in annotations:
        return None
    return PodTemplate(
        annotations=annotations,
        path=path,
        job=job,
        resource_claims=value_at(pod, "spec", "resourceClaims"),
    )


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
