"""The Kubeflow Trainer kinds nicguard judges, and how a TrainJob names its runtime."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from app.domain.fields import map_at, str_at

TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_VERSION: Final = "v1alpha1"


class Kind(StrEnum):
    """Trainer kinds in group ``trainer.kubeflow.org``."""

    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
    TRAINING_RUNTIME = "TrainingRuntime"
    TRAIN_JOB = "TrainJob"

    @property
    def is_runtime(self) -> bool:
        return self is not Kind.TRAIN_JOB

    @property
    def namespaced(self) -> bool:
        return self is not Kind.CLUSTER_TRAINING_RUNTIME


def kind_of(group: str, kind: str) -> Kind | None:
    """The Trainer kind for a group/kind pair, or None for anything nicguard does not judge."""
    if group != TRAINER_GROUP:
        return None
    try:
        return Kind(kind)
    except ValueError:
        return None


def trainer_kind(obj: object) -> Kind | None:
    """The Trainer kind of an object by apiVersion group and kind, or None."""
    group = (str_at(obj, "apiVersion") or "").partition("/")[0]
    return kind_of(group, str_at(obj, "kind") or "")


class Protected(StrEnum):
    """What the wiring depends on, protected against writes that would break it, and the runtime
    snapshots Trainer builds a TrainJob's pods from (docs/rules.md)."""

    NETWORK = "Network"
    PARAM_SET = "GKENetworkParamSet"
    RECIPE = "ConfigMap"
    RUNTIME_SNAPSHOT = "RuntimeSnapshot"


@dataclass(frozen=True, slots=True)
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
