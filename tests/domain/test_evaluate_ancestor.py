"""Jobs labelled as the trainer ancestor are wired templates, judged like node (SPEC §2)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from app.domain.evaluate import evaluate
from app.domain.policy import Policy
from app.domain.slim import slim_runtime
from app.domain.template import (
    ANCESTOR_LABEL,
    PodTemplate,
    PodTemplateMissing,
    interfaces_annotations,
    wired_jobs,
    wired_templates,
)
from tests.builders import (
    PAIRS,
    codes,
    mpi_runtime,
    node_job,
    review,
    runtime,
    runtime_patch,
    snapshot,
    trainjob,
    wired,
)

TRAINER = {ANCESTOR_LABEL: "trainer"}
DRIFTED = wired(PAIRS[::-1])


def job(
    name: object,
    annotations: Mapping[str, object] | None = None,
    *,
    labels: Mapping[str, object] | None = TRAINER,
) -> dict[str, object]:
    """A replicatedJob named ``name`` (any value) with pod ``annotations``, labelled."""
    found = node_job(annotations) | {"name": name}
    template = found["template"]
    assert isinstance(template, dict)
    if labels is not None:
        template["metadata"] = {"labels": dict(labels)}
    return found


def decoy(worker: Mapping[str, object] | None) -> dict[str, object]:
    """The recipe-bound runtime with a correctly wired ``node`` job that lost the label and a
    ``worker`` job that carries it."""
    return runtime(jobs=[job("node", wired(), labels=None), job("worker", worker)])


@pytest.mark.parametrize(
    ("obj", "jobs", "paths"),
    [
        pytest.param(runtime(jobs=[job("node")]), ["node"], [0], id="label-on-node-once"),
        pytest.param(
            runtime(jobs=[job("node", labels=None), job("worker")]),
            ["node", "worker"],
            [0, 1],
            id="node-and-labelled-worker",
        ),
        pytest.param(
            runtime(jobs=[job("init", labels={ANCESTOR_LABEL: "dataset-initializer"}), job("w")]),
            ["w"],
            [1],
            id="no-node-the-labelled-job-alone",
        ),
        pytest.param(
            runtime(jobs=[job("a"), job("node", labels=None), job("b")]),
            ["node", "a", "b"],
            [1, 0, 2],
            id="node-first-then-list-order",
        ),
        pytest.param(
            runtime(jobs=[job("node", labels=None), job("node")]),
            ["node", "node"],
            [0, 1],
            id="a-labelled-second-node-job-too",
        ),
        pytest.param(
            runtime(jobs=[job("node", labels=None), job(None), job(7)]),
            ["node", "replicatedJobs[1]", "replicatedJobs[2]"],
            [0, 1, 2],
            id="unnamed-by-position",
        ),
        pytest.param(
            runtime(jobs=[job("node", labels=None), job("w", labels={ANCESTOR_LABEL: "Trainer"})]),
            ["node"],
            [0],
            id="other-values-are-not-the-label",
        ),
        pytest.param(
            runtime(jobs=[job("node", labels=None), "text", {"name": "x", "template": []}]),
            ["node"],
            [0],
            id="non-map-jobs-and-templates-skipped",
        ),
    ],
)
def test_every_labelled_job_is_a_wired_template_after_node(
    obj: dict[str, object], jobs: list[str], paths: list[int]
) -> None:
    found = wired_templates(obj)
    assert wired_jobs(obj) == tuple(jobs)
    assert [t.job for t in found] == jobs
    assert [str(t.path) for t in found] == [
        f"spec.template.spec.replicatedJobs[{i}].template.spec.template" for i in paths
    ]
    # The cache's slim copy keeps what these read: same templates, same annotations.
    slim = slim_runtime(obj)
    assert wired_templates(slim) == found
    assert list(interfaces_annotations(slim)) == list(interfaces_annotations(obj))


def test_a_labelled_job_without_a_pod_template_is_missing_it() -> None:
    labelled = {"name": "w", "template": {"metadata": {"labels": TRAINER}}}
    obj = runtime(jobs=[job("node", labels=None), labelled])
    node, worker = wired_templates(obj)
    assert isinstance(node, PodTemplate)
    assert worker == PodTemplateMissing(
        reason='the "w" replicatedJob has no template.spec.template',
        path=worker.path,
        job="w",
    )
    assert wired_templates(slim_runtime(obj)) == (node, worker)


def test_launcher_as_node_and_a_labelled_job_are_all_wired() -> None:
    obj = mpi_runtime(launcher=wired(), node=wired())
    jobs = obj["spec"]["template"]["spec"]["replicatedJobs"]  # type: ignore[index]
    jobs.append(job("worker", wired()))
    assert wired_jobs(obj) == ("node", "launcher", "worker")
    assert wired_templates(slim_runtime(obj)) == wired_templates(obj)


@pytest.mark.parametrize(
    ("obj", "expected", "fragment"),
    [
        pytest.param(
            decoy(None),
            ("InterfacesAnnotationMissing",),
            "worker job: recipe-bound, but",
            id="decoy-unwired-worker",
        ),
        pytest.param(
            decoy(DRIFTED),
            ("MappingDivergesFromRecipe",),
            "worker job: at position eth1",
            id="decoy-drifted-worker",
        ),
        pytest.param(decoy(wired()), (), "", id="both-wired-as-recorded"),
        pytest.param(
            runtime(jobs=[job("worker", wired())]), (), "", id="labelled-worker-instead-of-node"
        ),
        pytest.param(
            runtime(jobs=[job("worker", wired(), labels=None)]),
            ("NodeJobMissing",),
            'declares no "node" job and none labelled trainer.kubeflow.org/trainjob-ancestor-step',
            id="neither-node-nor-label",
        ),
    ],
)
def test_a_labelled_job_is_judged_by_every_rule(
    obj: dict[str, object], expected: tuple[str, ...], fragment: str
) -> None:
    verdict = evaluate(review(obj), snapshot(), Policy())
    assert codes(verdict) == expected
    assert fragment in "\n".join(v.message for v in verdict.violations)
    for violation in verdict.violations:
        if violation.code != "NodeJobMissing":
            assert violation.field.startswith("spec.template.spec.replicatedJobs[1]")
    # A TrainJob on the runtime inherits the same findings, as does one on its cached copy.
    for runtime_obj in (obj, slim_runtime(obj)):
        inherited = evaluate(review(trainjob()), snapshot(runtime_obj), Policy())
        assert codes(inherited) == expected


def test_a_trainjob_patch_of_the_labelled_job_counts() -> None:
    job_obj = trainjob()
    job_obj["spec"]["runtimePatches"] = [runtime_patch(wired(), job="worker")]  # type: ignore[index]
    verdict = evaluate(review(job_obj), snapshot(decoy(None)), Policy())
    assert codes(verdict) == ()
    job_obj["spec"]["runtimePatches"] = [runtime_patch(DRIFTED, job="worker")]  # type: ignore[index]
    verdict = evaluate(review(job_obj), snapshot(decoy(wired())), Policy())
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert verdict.violations[0].field.startswith("spec.runtimePatches[0]")
    assert verdict.violations[0].message.startswith("worker job: ")


def _labelling(*patches: tuple[str, object]) -> dict[str, object]:
    """A TrainJob whose runtime patches each set the ancestor label of one job to a value."""
    job_obj = trainjob()
    job_obj["spec"]["runtimePatches"] = [  # type: ignore[index]
        {
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": name,
                                "template": {"metadata": {"labels": {ANCESTOR_LABEL: v}}},
                            }
                        ]
                    }
                }
            }
        }
        for name, v in patches
    ]
    return job_obj


WORKER_RUNTIME = runtime(jobs=[job("node", wired(), labels=None), job("worker", None, labels=None)])


@pytest.mark.parametrize(
    ("patches", "expected"),
    [
        pytest.param([("worker", "trainer")], ("InterfacesAnnotationMissing",), id="labelled"),
        pytest.param(
            [("worker", "trainer"), ("worker", "dataset-initializer")], (), id="last-value-wins"
        ),
        pytest.param(
            [("worker", "dataset-initializer"), ("worker", None), ("worker", "trainer")],
            ("InterfacesAnnotationMissing",),
            id="null-changes-nothing",
        ),
        pytest.param([("absent", "trainer")], (), id="a-job-the-runtime-lacks"),
        pytest.param([("worker", 1)], (), id="not-a-string"),
    ],
)
def test_a_job_a_trainjob_patch_labels_as_the_trainer_is_wired(
    patches: list[tuple[str, object]], expected: tuple[str, ...]
) -> None:
    """Trainer reads the ancestor label after merging the patches (newRuntimeInfo)."""
    job_obj = _labelling(*patches)
    for runtime_obj in (WORKER_RUNTIME, slim_runtime(WORKER_RUNTIME)):
        verdict = evaluate(review(job_obj), snapshot(runtime_obj), Policy())
        assert codes(verdict) == expected
        for violation in verdict.violations:
            assert violation.message.startswith("worker job: recipe-bound, but the worker pod")
            assert violation.field == "spec.runtimeRef"
    assert codes(evaluate(review(WORKER_RUNTIME), snapshot(), Policy())) == ()


LAUNCHER_RUNTIME = runtime(jobs=[job("launcher", wired(), labels=TRAINER)])


@pytest.mark.parametrize(
    ("patches", "expected"),
    [
        pytest.param([], (), id="the-runtime-labels-it"),
        pytest.param(
            [("launcher", "dataset-initializer")], ("NodeJobMissing",), id="relabelled-away"
        ),
        pytest.param(
            [("launcher", "dataset-initializer"), ("launcher", "trainer")], (), id="and-back"
        ),
    ],
)
def test_a_patch_relabelling_the_only_trainer_job_leaves_none(
    patches: list[tuple[str, object]], expected: tuple[str, ...]
) -> None:
    """Trainer's merge leaves no job labelled as the trainer: no wired template remains, which a
    recipe-bound runtime may not have (NodeJobMissing), as Trainer's own reading says."""
    job_obj = _labelling(*patches)
    for runtime_obj in (LAUNCHER_RUNTIME, slim_runtime(LAUNCHER_RUNTIME)):
        assert codes(evaluate(review(job_obj), snapshot(runtime_obj), Policy())) == expected
