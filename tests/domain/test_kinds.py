"""Trainer kinds and a TrainJob's runtimeRef with CRD defaults (app.domain.kinds)."""

from __future__ import annotations

import pytest

from app.domain.kinds import (
    Kind,
    RuntimeRef,
    Workload,
    kind_of,
    runtime_ref_of,
    workload_kind,
    workload_of,
)
from tests.builders import batch_job, job_set, pod, trainjob


@pytest.mark.parametrize(
    ("group", "kind", "expected"),
    [
        pytest.param(
            "trainer.kubeflow.org",
            "ClusterTrainingRuntime",
            Kind.CLUSTER_TRAINING_RUNTIME,
            id="ctr",
        ),
        pytest.param("trainer.kubeflow.org", "TrainingRuntime", Kind.TRAINING_RUNTIME, id="tr"),
        pytest.param("trainer.kubeflow.org", "TrainJob", Kind.TRAIN_JOB, id="trainjob"),
        pytest.param("trainer.kubeflow.org", "JobSet", None, id="unknown-kind"),
        pytest.param("kubeflow.org", "TrainJob", None, id="other-group"),
        pytest.param("", "ClusterTrainingRuntime", None, id="core-group"),
    ],
)
def test_only_trainer_group_kinds_are_judged(group: str, kind: str, expected: Kind | None) -> None:
    assert kind_of(group, kind) is expected


@pytest.mark.parametrize(
    ("kind", "is_runtime", "namespaced"),
    [
        pytest.param(Kind.CLUSTER_TRAINING_RUNTIME, True, False, id="ctr"),
        pytest.param(Kind.TRAINING_RUNTIME, True, True, id="tr"),
        pytest.param(Kind.TRAIN_JOB, False, True, id="trainjob"),
    ],
)
def test_kinds_know_whether_they_are_runtimes_and_namespaced(
    kind: Kind, is_runtime: bool, namespaced: bool
) -> None:
    assert (kind.is_runtime, kind.namespaced) == (is_runtime, namespaced)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        pytest.param(
            {"name": "rt"},
            RuntimeRef("rt", "ClusterTrainingRuntime", "trainer.kubeflow.org"),
            id="defaults-kind-and-api-group",
        ),
        pytest.param(
            {"name": "rt", "kind": "", "apiGroup": ""},
            RuntimeRef("rt", "ClusterTrainingRuntime", "trainer.kubeflow.org"),
            id="empty-strings-default-too",
        ),
        pytest.param(
            {"name": "rt", "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            RuntimeRef("rt", "TrainingRuntime", "trainer.kubeflow.org"),
            id="explicit",
        ),
        pytest.param({"kind": "TrainingRuntime"}, None, id="no-name"),
        pytest.param({"name": ""}, None, id="empty-name"),
        pytest.param({"name": 3}, None, id="non-string-name"),
    ],
)
def test_runtime_ref_applies_trainer_crd_defaults(
    ref: dict[str, object], expected: RuntimeRef | None
) -> None:
    assert runtime_ref_of(trainjob(ref=ref)) == expected


def test_a_trainjob_without_runtime_ref_has_none() -> None:
    assert runtime_ref_of({"spec": {}}) is None
    assert runtime_ref_of({"spec": {"runtimeRef": "rt"}}) is None


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        pytest.param(RuntimeRef("rt"), Kind.CLUSTER_TRAINING_RUNTIME, id="ctr"),
        pytest.param(RuntimeRef("rt", "TrainingRuntime"), Kind.TRAINING_RUNTIME, id="tr"),
        pytest.param(RuntimeRef("rt", "TrainJob"), None, id="trainjob-is-not-a-runtime"),
        pytest.param(RuntimeRef("rt", "JobSet", "jobset.x-k8s.io"), None, id="other-group"),
    ],
)
def test_only_trainer_runtime_kinds_can_be_resolved(ref: RuntimeRef, expected: Kind | None) -> None:
    assert ref.runtime_kind() is expected


def test_a_runtime_ref_describes_itself_as_kind_slash_name() -> None:
    assert RuntimeRef("rt", "TrainingRuntime").describe() == "TrainingRuntime/rt"


@pytest.mark.parametrize(
    ("group", "kind", "expected"),
    [
        pytest.param("jobset.x-k8s.io", "JobSet", Workload.JOB_SET, id="jobset"),
        pytest.param("batch", "Job", Workload.JOB, id="job"),
        pytest.param("", "Pod", Workload.POD, id="pod"),
        pytest.param("batch", "CronJob", None, id="cronjob"),
        pytest.param("", "Job", None, id="job-in-core-group"),
        pytest.param("leaderworkerset.x-k8s.io", "Pod", None, id="pod-in-other-group"),
        pytest.param("trainer.kubeflow.org", "TrainJob", None, id="trainer-kind"),
    ],
)
def test_workloads_are_known_by_group_and_kind(
    group: str, kind: str, expected: Workload | None
) -> None:
    assert workload_of(group, kind) is expected


@pytest.mark.parametrize("workload", list(Workload))
def test_a_workload_is_known_by_its_own_group_and_version(workload: Workload) -> None:
    assert workload_of(workload.group, workload) is workload
    prefix = f"{workload.group}/" if workload.group else ""
    assert workload.api_version == f"{prefix}{workload.version}"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(job_set(), Workload.JOB_SET, id="jobset"),
        pytest.param(batch_job(None), Workload.JOB, id="job"),
        pytest.param(pod(None), Workload.POD, id="pod"),
        pytest.param({"apiVersion": "batch/v1", "kind": "Pod"}, None, id="pod-in-batch"),
        pytest.param({"kind": "Pod"}, Workload.POD, id="no-api-version-is-core"),
        pytest.param({"apiVersion": "v1"}, None, id="no-kind"),
        pytest.param("Pod", None, id="not-an-object"),
    ],
)
def test_a_workload_is_known_by_api_version_and_kind(
    obj: object, expected: Workload | None
) -> None:
    assert workload_kind(obj) is expected


@pytest.mark.parametrize(
    "obj", [job_set(), batch_job(None), pod(None)], ids=["jobset", "job", "pod"]
)
def test_a_workload_writes_the_api_version_it_is_judged_in(obj: dict[str, object]) -> None:
    kind = workload_kind(obj)
    assert kind is not None
    assert kind.api_version == obj["apiVersion"]
    assert workload_kind({"apiVersion": kind.api_version, "kind": kind.value}) is kind
