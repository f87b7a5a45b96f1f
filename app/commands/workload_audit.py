"""What Trainer builds pods from and what runs, for ``nicguard audit``: every runtime snapshot
ConfigMap, judged as its door judges a CREATE with the templates it names; with
``--include-workloads``, every JobSet, Job and Pod whose pod templates carry the interfaces
annotation, judged as the workload doors judge a CREATE.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from app.domain.cluster import ClusterView
from app.domain.drift import Standing, standing_of
from app.domain.evaluate import evaluate_object
from app.domain.fields import JsonMap, str_at
from app.domain.kinds import Workload, workload_kind
from app.domain.policy import Policy
from app.domain.snapshot import judge_snapshot
from app.domain.workloads import describe_workload, workload_templates
from app.files.state import iter_objects
from app.kubeyaml.claimants import copy_owner, copy_review


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """One wired JobSet's, Job's or Pod's standing, ``heading`` naming it and its controller; or
    a runtime snapshot ConfigMap's, ``heading`` naming its TrainJob and the runtime copied."""

    api_version: str
    kind: str
    namespace: str
    name: str
    heading: str
    standing: Standing

    def to_json(self) -> dict[str, object]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "result": self.standing.result.value,
            "violations": [v.to_json() for v in self.standing.findings],
        }


def audit_workloads(
    workloads: Iterable[tuple[Workload, JsonMap]],
    view: ClusterView,
    policy: Policy,
    namespace: str | None,
) -> list[WorkloadResult]:
    """Each wired workload (only ``namespace``'s when given) judged as a CREATE, sorted by kind
    (JobSets, Jobs, Pods), namespace and name."""
    results = []
    for kind, obj in workloads:
        namespace_of = str_at(obj, "metadata", "namespace") or ""
        if not workload_templates(kind, obj) or namespace not in (None, namespace_of):
            continue
        evaluation = evaluate_object(kind, obj, namespace_of, view, policy)
        results.append(
            WorkloadResult(
                # A live cluster's lists leave the version off their items.
                api_version=str_at(obj, "apiVersion") or kind.api_version,
                kind=kind.value,
                namespace=namespace_of,
                name=str_at(obj, "metadata", "name") or "",
                heading=describe_workload(kind, obj, namespace_of),
                standing=standing_of(evaluation.verdict),
            )
        )
    order = [w.value for w in Workload]
    return sorted(results, key=lambda r: (order.index(r.kind), r.namespace, r.name))


def audit_copies(
    copies: Iterable[JsonMap], view: ClusterView, policy: Policy, namespace: str | None
) -> list[WorkloadResult]:
    """Each runtime snapshot ConfigMap (only ``namespace``'s when given) judged as a CREATE:
    the copy Trainer builds a TrainJob's pods from, with the templates it names, sorted."""
    results = []
    for configmap in copies:
        review = copy_review(configmap)
        if review is None or namespace not in (None, review.namespace):
            continue
        verdict = judge_snapshot(review, view, policy)
        results.append(
            WorkloadResult(
                api_version="v1",
                kind="ConfigMap",
                namespace=review.namespace,
                name=str_at(configmap, "metadata", "name") or "",
                heading=review.snapshot.describe() if review.snapshot else "",
                standing=standing_of(verdict),
            )
        )
    return sorted(results, key=lambda r: (r.namespace, r.name))


def state_workloads(state: Path) -> Iterator[tuple[Workload, JsonMap]]:
    """The JobSets, Jobs and Pods of a file state; raises ``StateFileError``."""
    for sourced in iter_objects([state]):
        kind = workload_kind(sourced.obj)
        if kind is not None:
            yield kind, sourced.obj


def state_copies(state: Path) -> Iterator[JsonMap]:
    """The runtime snapshot ConfigMaps of a file state; raises ``StateFileError``."""
    for sourced in iter_objects([state]):
        if copy_owner(sourced.obj) is not None:
            yield sourced.obj
