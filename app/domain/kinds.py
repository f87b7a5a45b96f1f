"""The roles of what nicguard judges, one enum each (Trainer kinds, workloads, what the wiring
depends on, runtime snapshots), and how a TrainJob names its runtime."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from app.domain.fields import map_at, str_at
from app.domain.value_type import value_type

TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_VERSION: Final = "v1alpha1"


class Kind(StrEnum):
    """Trainer kinds in group ``trainer.kubeflow.org``."""

    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
    TRAINING_RUNTIME = "TrainingRuntime"
    TRAIN_JOB = "TrainJob"

    @property
    def is_runtime(self) -> bool:
        return self is not TRAIN_JOB

    @property
    def namespaced(self) -> bool:
        return self is not CLUSTER_TRAINING_RUNTIME


# The members a review reads, as module names to import: Python 3.11 looks an enum's member up
# through EnumType.__getattr__'s hook, several times the cost of a global (docs/request-cost.md).
CLUSTER_TRAINING_RUNTIME: Final = Kind.CLUSTER_TRAINING_RUNTIME
TRAIN_JOB: Final = Kind.TRAIN_JOB


_KINDS: Final = {kind.value: kind for kind in Kind}


def kind_of(group: str, kind: str) -> Kind | None:
    """The Trainer kind for a group/kind pair, or None for anything nicguard does not judge."""
    return _KINDS.get(kind) if group == TRAINER_GROUP else None


def trainer_kind(obj: object) -> Kind | None:
    """The Trainer kind of an object by apiVersion group and kind, or None."""
    group = (str_at(obj, "apiVersion") or "").partition("/")[0]
    return kind_of(group, str_at(obj, "kind") or "")


class Workload(StrEnum):
    """What runs pods, judged without a binding (docs/rules.md, the workload doors)."""

    JOB_SET = "JobSet"
    JOB = "Job"
    POD = "Pod"

    @property
    def group(self) -> str:
        return _WORKLOAD_APIS[self][0]

    @property
    def version(self) -> str:
        """The API version nicguard judges (and ``audit`` lists) it in."""
        return _WORKLOAD_APIS[self][1]

    @property
    def api_version(self) -> str:
        """``apiVersion`` as objects of the version write it (the core group has no prefix)."""
        group, version = _WORKLOAD_APIS[self]
        return f"{group}/{version}" if group else version


POD: Final = Workload.POD  # read per review, as TRAIN_JOB above
_WORKLOAD_APIS: Final = {
    Workload.JOB_SET: ("jobset.x-k8s.io", "v1alpha2"),
    Workload.JOB: ("batch", "v1"),
    Workload.POD: ("", "v1"),
}
# Looked up for every review: a missing key is a dict miss, not a ValueError raised and caught.
_WORKLOADS: Final = {
    (group, workload.value): workload for workload, (group, _) in _WORKLOAD_APIS.items()
}


def workload_of(group: str, kind: str) -> Workload | None:
    """The workload for a group/kind pair, or None."""
    return _WORKLOADS.get((group, kind))


def workload_kind(obj: object) -> Workload | None:
    """The workload an object is by apiVersion group (none for the core group) and kind, or
    None."""
    group = (str_at(obj, "apiVersion") or "").rpartition("/")[0]
    return workload_of(group, str_at(obj, "kind") or "")


class Protected(StrEnum):
    """What the wiring depends on, protected against writes that would break it."""

    NETWORK = "Network"
    PARAM_SET = "GKENetworkParamSet"
    RECIPE = "ConfigMap"
    CLAIM_TEMPLATE = "ResourceClaimTemplate"
    """A ResourceClaimTemplate whose name a DRA-bound runtime uses (docs/dra.md)."""


class Copy(StrEnum):
    """The copies Trainer builds a TrainJob's pods from, judged as what they copy."""

    RUNTIME_SNAPSHOT = "RuntimeSnapshot"


Role = Kind | Workload | Protected | Copy
"""What a judged request is: the dispatcher's one question (app/domain/evaluate.py)."""


@value_type
class RuntimeRef:
    """``spec.runtimeRef`` of a TrainJob with Trainer's CRD defaults applied."""

    name: str
    kind: str = Kind.CLUSTER_TRAINING_RUNTIME.value
    api_group: str = TRAINER_GROUP

    def runtime_kind(self) -> Kind | None:
        """The referenced kind when it is a runtime kind nicguard can resolve, else None."""
        found = kind_of(self.api_group, self.kind)
        return found if found is not None and found.is_runtime else None

    def describe(self) -> str:
        return f"{self.kind}/{self.name}"


def runtime_ref_of(trainjob: object) -> RuntimeRef | None:
    """Read ``spec.runtimeRef``; None when it has no name. Defaults follow Trainer's CRD."""
    ref = map_at(trainjob, "spec", "runtimeRef")
    name = str_at(ref, "name")
    if ref is None or not name:
        return None
    kind = str_at(ref, "kind") or Kind.CLUSTER_TRAINING_RUNTIME.value
    group = str_at(ref, "apiGroup") or TRAINER_GROUP
    return RuntimeRef(name=name, kind=kind, api_group=group)
