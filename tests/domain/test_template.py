"""Finding the worker ("node") pod template of a runtime (app.domain.template, docs/rules.md)."""

from __future__ import annotations

import pytest

from app.domain.fields import FieldPath
from app.domain.slim import slim_runtime
from app.domain.template import (
    NODE_JOB,
    PodTemplate,
    PodTemplateMissing,
    interfaces_annotations,
    job_template,
    job_templates,
)
from tests.builders import INTERFACES, mpi_runtime, node_job, runtime


def _job(name: str, note: str) -> dict[str, object]:
    return node_job({"note": note}) | {"name": name}


@pytest.mark.parametrize(
    ("jobs", "annotations", "path"),
    [
        pytest.param(
            [node_job({INTERFACES: "[]"})],
            {INTERFACES: "[]"},
            "spec.template.spec.replicatedJobs[0].template.spec.template",
            id="single-node-job",
        ),
        pytest.param(
            ["not-a-map", None, _job("launcher", "l"), _job("node", "n")],
            {"note": "n"},
            "spec.template.spec.replicatedJobs[3].template.spec.template",
            id="non-map-entries-and-other-jobs-skipped",
        ),
        pytest.param(
            [_job("node", "first"), _job("node", "second")],
            {"note": "first"},
            "spec.template.spec.replicatedJobs[0].template.spec.template",
            id="first-node-job-wins",
        ),
        pytest.param(
            [node_job(None)],
            {},
            "spec.template.spec.replicatedJobs[0].template.spec.template",
            id="no-annotations",
        ),
        pytest.param(
            [
                {
                    "name": "node",
                    "template": {"spec": {"template": {"metadata": {"annotations": 1}}}},
                }
            ],
            {},
            "spec.template.spec.replicatedJobs[0].template.spec.template",
            id="annotations-not-a-map",
        ),
    ],
)
def test_the_first_map_entry_named_node_supplies_the_pod_template(
    jobs: list[object], annotations: dict[str, object], path: str
) -> None:
    found = job_template(runtime(jobs=jobs), NODE_JOB)
    assert found == PodTemplate(annotations=annotations, path=FieldPath(path))


@pytest.mark.parametrize(
    ("obj", "reason", "path"),
    [
        pytest.param(
            runtime(jobs=[_job("launcher", "l")]),
            'declares no "node" job',
            "spec.template.spec.replicatedJobs",
            id="no-node-job",
        ),
        pytest.param(
            runtime(jobs=[]),
            'declares no "node" job',
            "spec.template.spec.replicatedJobs",
            id="empty",
        ),
        pytest.param(
            {"spec": {"template": {"spec": {"replicatedJobs": {"name": "node"}}}}},
            'declares no "node" job',
            "spec.template.spec.replicatedJobs",
            id="replicated-jobs-not-a-list",
        ),
        pytest.param(
            {}, 'declares no "node" job', "spec.template.spec.replicatedJobs", id="no-spec"
        ),
        pytest.param(
            runtime(jobs=["x", {"name": "node", "template": {"spec": {}}}]),
            'the "node" replicatedJob has no template.spec.template',
            "spec.template.spec.replicatedJobs[1]",
            id="node-job-without-pod-template",
        ),
        pytest.param(
            runtime(jobs=[{"name": "node"}, node_job()]),
            'the "node" replicatedJob has no template.spec.template',
            "spec.template.spec.replicatedJobs[0]",
            id="first-node-job-wins-even-without-template",
        ),
    ],
)
def test_a_runtime_without_a_node_pod_template_says_why_and_where(
    obj: object, reason: str, path: str
) -> None:
    found = job_template(obj, NODE_JOB)
    assert isinstance(found, PodTemplateMissing)
    assert reason in found.reason
    assert str(found.path) == path


def test_annotation_paths_are_keyed_under_the_pod_template_metadata() -> None:
    found = job_template(runtime(annotations={}), NODE_JOB)
    assert isinstance(found, PodTemplate)
    assert str(found.annotation_path(INTERFACES)) == (
        "spec.template.spec.replicatedJobs[0].template.spec.template"
        f".metadata.annotations[{INTERFACES}]"
    )


def _wired_job(name: str, note: str) -> dict[str, object]:
    return node_job({INTERFACES: note, "note": note}) | {"name": name}


_UNNAMED = {"template": node_job({INTERFACES: "unnamed"})["template"]}
_WIRED_SHAPES = [
    pytest.param(runtime(annotations={INTERFACES: "[]", "note": "n"}), id="node"),
    pytest.param(
        runtime(jobs=["x", None, _wired_job("launcher", "l"), _wired_job("node", "n")]),
        id="skips",
    ),
    pytest.param(
        runtime(jobs=[_wired_job("node", "first"), _wired_job("node", "second")]),
        id="first-wins",
    ),
    pytest.param(runtime(jobs=[{"name": "node"}, node_job()]), id="first-without-template"),
    pytest.param(runtime(jobs=[_wired_job("launcher", "l")]), id="no-node-job"),
    pytest.param({"spec": {"template": {"spec": {"replicatedJobs": {}}}}}, id="not-a-list"),
    pytest.param({}, id="no-spec"),
    pytest.param(mpi_runtime(launcher={"a": "l"}, node={INTERFACES: "n"}), id="launcher-as-node"),
    pytest.param(
        mpi_runtime(node={"a": "n"}, launcher={INTERFACES: "l"}, launcher_as_node=False),
        id="launcher-not-a-node-annotated",
    ),
    pytest.param(mpi_runtime(launcher=None, node={"a": "n"}), id="launcher-unannotated"),
    pytest.param(
        runtime(jobs=[node_job(), _wired_job("evaluator", "e"), {"name": "x"}, _UNNAMED]),
        id="annotated-named-and-unnamed",
    ),
]


@pytest.mark.parametrize("obj", _WIRED_SHAPES)
def test_interfaces_annotations_are_those_of_the_wired_and_annotated_templates(
    obj: dict[str, object],
) -> None:
    def judged(found: object) -> list[object]:
        templates = job_templates(found)
        carrying = [
            t
            for t in (*templates.wired, *templates.annotated)
            if isinstance(t, PodTemplate) and INTERFACES in t.annotations
        ]
        return [t.annotations for t in sorted(carrying, key=lambda t: str(t.path))]

    assert list(interfaces_annotations(obj)) == judged(obj)
    # A cached runtime yields its wiring annotations, as job_templates sees them there too.
    assert list(interfaces_annotations(slim_runtime(obj))) == judged(slim_runtime(obj))
