"""Claimants: the wired objects other than runtimes that name ResourceClaimTemplates — Trainer's
runtime snapshots, JobSets, Jobs and Pods. A template created after one of them is judged with it,
and the audit judges them with the templates (docs/dra.md): order does not decide a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from app.domain.claims import pod_claims
from app.domain.cluster import ClusterView
from app.domain.fields import JsonMap
from app.domain.kinds import Copy, Workload
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.domain.runtime_snapshot import RuntimeSnapshot
from app.domain.snapshot import judge_snapshot
from app.domain.template import PodTemplate, wired_templates
from app.domain.verdict import Code, Verdict
from app.domain.workloads import describe_workload, judge_workload, workload_templates

CLAIM_CODES: Final = frozenset(
    {
        Code.WIRING_MODE_CONFLICT,
        Code.RDMA_CLAIM_MISMATCH,
        Code.RDMA_CLAIM_MISSING,
        Code.RESOURCE_CLAIM_TEMPLATE_NOT_FOUND,
    }
)
"""The findings whose truth depends on the templates a claimant names."""


@dataclass(frozen=True, slots=True)
class Claimant:
    """One wired object that names ResourceClaimTemplates of ``review.namespace``, as the CREATE
    its door judges; ``names``: every template name its wired pod templates use."""

    review: Review
    described: str
    names: frozenset[str]

    @property
    def namespace(self) -> str:
        return self.review.namespace


def snapshot_claimant(configmap: JsonMap, copy: RuntimeSnapshot) -> Claimant | None:
    """A runtime snapshot ConfigMap as read, when the runtime it copies names templates."""
    if copy.runtime is None:
        return None
    names = _names(t for t in wired_templates(copy.runtime) if isinstance(t, PodTemplate))
    if not names:
        return None
    review = Review(
        operation=Operation.CREATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace=copy.namespace,
        obj=configmap,
        snapshot=copy,
    )
    return Claimant(review, copy.describe(), names)


def workload_claimant(kind: Workload, obj: JsonMap, namespace: str) -> Claimant | None:
    """A JobSet, Job or Pod in ``namespace``, when a wired pod template of it names templates."""
    names = _names(workload_templates(kind, obj))
    if not names:
        return None
    review = Review(operation=Operation.CREATE, kind=kind, namespace=namespace, obj=obj)
    return Claimant(review, describe_workload(kind, obj, namespace), names)


def _names(templates: Iterable[PodTemplate]) -> frozenset[str]:
    return frozenset(
        entry.template
        for template in templates
        for entry in pod_claims(template.resource_claims, template.path).entries
        if entry.template
    )


def judge_claimant(claimant: Claimant, view: ClusterView, policy: Policy) -> Verdict:
    """The claimant judged as its door judges its CREATE."""
    review = claimant.review
    if isinstance(review.kind, Workload) and review.obj is not None:
        return judge_workload(review.kind, review.obj, review.namespace, view, policy).verdict
    return judge_snapshot(review, view, policy)
