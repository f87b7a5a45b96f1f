"""The claimants among objects as read from files or a cluster's lists (docs/dra.md): a runtime
snapshot ConfigMap, read as Trainer reads its copy, or a wired JobSet, Job or Pod that names
ResourceClaimTemplates."""

from __future__ import annotations

from app.domain.claimants import Claimant, snapshot_claimant, workload_claimant
from app.domain.claims import DEFAULT_NAMESPACE
from app.domain.fields import JsonMap, map_at, str_at
from app.domain.kinds import Copy, workload_kind
from app.domain.review import Operation, Review
from app.domain.runtime_snapshot import read_snapshot, snapshot_owner
from app.kubeyaml import load_snapshot_yaml


def claimant_in(obj: JsonMap, default: str = DEFAULT_NAMESPACE) -> Claimant | None:
    """``obj`` as a claimant (in ``default`` unless it names its namespace), or None."""
    kind = workload_kind(obj)
    if kind is not None:
        return workload_claimant(kind, obj, str_at(obj, "metadata", "namespace") or default)
    review = copy_review(obj, default)
    if review is None or review.snapshot is None or review.obj is None:
        return None
    return snapshot_claimant(review.obj, review.snapshot)


def copy_review(obj: JsonMap, default: str = DEFAULT_NAMESPACE) -> Review | None:
    """The CREATE of a runtime snapshot ConfigMap, its copy read; None for any other object."""
    owner = copy_owner(obj)
    if owner is None:
        return None
    namespace = str_at(obj, "metadata", "namespace") or default
    configmap = {**obj, "metadata": {**(map_at(obj, "metadata") or {}), "namespace": namespace}}
    return Review(
        operation=Operation.CREATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace=namespace,
        obj=configmap,
        snapshot=read_snapshot(configmap, owner, load_snapshot_yaml),
    )


def copy_owner(obj: JsonMap) -> str | None:
    """The TrainJob whose runtime snapshot ConfigMap ``obj`` is, or None for any other object."""
    if str_at(obj, "apiVersion") != "v1" or str_at(obj, "kind") != "ConfigMap":
        return None
    return snapshot_owner(obj)
