"""Strategic-merge directives in a TrainJob's patches (app.domain.rules.directives, docs/rules.md
#PatchDirectiveUnsupported)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.policy import Policy
from app.domain.review import Operation
from app.domain.template import ANCESTOR_LABEL
from tests.builders import (
    codes,
    mpi_runtime,
    node_job,
    override,
    review,
    runtime,
    snapshot,
    trainjob,
    wired,
    with_metadata,
)

CODE = "PatchDirectiveUnsupported"
SPEC = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec"
JOB0 = f"{SPEC}.replicatedJobs[0]"
POD = f"{JOB0}.template.spec.template"


def patched(*jobs: object, **spec: object) -> dict[str, object]:
    """A TrainJob on the TCPXO runtime whose one runtime patch lists ``jobs`` (and ``spec``)."""
    job = trainjob()
    patch_spec = {"replicatedJobs": list(jobs), **spec}
    job["spec"]["runtimePatches"] = [  # type: ignore[index]
        {"manager": "example.com/m", "trainingRuntimeSpec": {"template": {"spec": patch_spec}}}
    ]
    return job


def node(
    annotations: Mapping[str, object] | None = None,
    *,
    name: object = "node",
    entry: Mapping[str, object] | None = None,
    job_template: Mapping[str, object] | None = None,
    job_spec: Mapping[str, object] | None = None,
    pod: Mapping[str, object] | None = None,
    metadata: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """A patched replicatedJob with extra keys at each level down to its pod annotations."""
    pod_metadata = {**(metadata or {})}
    if annotations is not None:
        pod_metadata["annotations"] = dict(annotations)
    pod_template = {**(pod or {}), "metadata": pod_metadata}
    spec = {**(job_spec or {}), "template": pod_template}
    template = {**(job_template or {}), "spec": spec}
    return {"name": name, **(entry or {}), "template": template}


@dataclass(frozen=True)
class Case:
    trainjob: JsonMap
    fields: tuple[str, ...]
    fragment: str = ""
    runtime: JsonMap = field(default_factory=lambda: runtime(annotations=wired()))


CASES = [
    pytest.param(
        Case(
            patched(node({"$patch": "delete"})),
            (f"{POD}.metadata.annotations[$patch]",),
            '"$patch: delete" is a strategic-merge directive: Trainer\'s merge of runtimePatches '
            "would remove the node job's pod annotations, wiring included. nicguard does not "
            "compute directives; set the annotation values explicitly instead",
        ),
        id="annotations-delete",
    ),
    pytest.param(
        Case(
            patched(node({"$patch": "replace", "team": "x"})),
            (f"{POD}.metadata.annotations[$patch]",),
            "would replace the node job's pod annotations by the patch's",
        ),
        id="annotations-replace",
    ),
    pytest.param(
        Case(
            patched(node({}, job_template={"metadata": {"labels": {"$patch": "delete"}}})),
            (f"{JOB0}.template.metadata.labels[$patch]",),
            '"$patch: delete" is a strategic-merge directive: Trainer\'s merge of runtimePatches '
            "would remove the node job's labels, the trainer-ancestor label included. nicguard "
            "does not compute directives; set the labels explicitly instead",
        ),
        id="job-labels-delete",
    ),
    pytest.param(
        Case(
            patched(node({}, job_template={"metadata": {"$patch": "replace"}})),
            (f"{JOB0}.template.metadata[$patch]",),
            "would replace the node job's labels by the patch's",
        ),
        id="job-metadata-replace",
    ),
    pytest.param(
        Case(
            patched(node({}, metadata={"$retainKeys": ["labels"]})),
            (f"{POD}.metadata[$retainKeys]",),
            '"$retainKeys" is a strategic-merge directive: Trainer\'s merge of runtimePatches '
            "would drop what the node job's pod metadata hold that it does not list",
        ),
        id="metadata-retain-keys-value-not-shown",
    ),
    pytest.param(
        Case(
            patched(node(pod={"$patch": "replace"})),
            (f"{POD}[$patch]",),
            "replace the node job's pod template",
        ),
        id="pod-template",
    ),
    pytest.param(
        Case(
            patched(node(job_spec={"$deleteFromPrimitiveList/x": ["a"]})),
            (f"{JOB0}.template.spec[$deleteFromPrimitiveList/x]",),
            "delete values from the list x of the node job's Job spec",
        ),
        id="job-spec",
    ),
    pytest.param(
        Case(
            patched(node(job_template={"$patch": "merge"})),
            (f"{JOB0}.template[$patch]",),
            "read it as a directive on the node job's Job template",
        ),
        id="job-template-merge",
    ),
    pytest.param(
        Case(
            patched(node(entry={"$patch": "delete"})),
            (f"{JOB0}[$patch]",),
            "would remove the node job,",
        ),
        id="wired-entry-deleted",
    ),
    pytest.param(
        Case(
            patched({"name": "other"}, {"$patch": "replace"}),
            (f"{SPEC}.replicatedJobs[1][$patch]",),
            "replace the replicatedJobs list by the patch's",
        ),
        id="list-replaced-by-a-directive-item",
    ),
    pytest.param(
        Case(
            patched(node({}), **{"$setElementOrder/replicatedJobs": [{"name": "node"}]}),
            (f"{SPEC}[$setElementOrder/replicatedJobs]",),
            "reorder the list replicatedJobs of the JobSet spec, every replicatedJob",
        ),
        id="set-element-order",
    ),
    pytest.param(
        Case(
            patched(node({"$x": "y", "$patch": "delete"})),
            (f"{POD}.metadata.annotations[$x]", f"{POD}.metadata.annotations[$patch]"),
            '"$x: y" is a strategic-merge directive',
        ),
        id="each-directive-reported",
    ),
    pytest.param(
        Case(
            patched(node({"$patch": "delete"})),
            (f"{POD}.metadata.annotations[$patch]",),
            "remove the node job's pod annotations",
            runtime("plain"),
        ),
        id="unbound-unwired-runtime-too",
    ),
    pytest.param(
        Case(
            patched(node({"$patch": "delete"}, name="launcher")),
            (f"{POD}.metadata.annotations[$patch]",),
            "remove the launcher job's pod annotations",
            mpi_runtime("torch-distributed-tcpxo", launcher=wired(), node=wired()),
        ),
        id="launcher-run-as-node",
    ),
    pytest.param(
        Case(
            patched(node({"$patch": "delete"}, name="worker")),
            (f"{POD}.metadata.annotations[$patch]",),
            "remove the worker job's pod annotations",
            runtime(
                jobs=[
                    node_job(wired()),
                    node_job(wired(), name="worker")
                    | {
                        "template": {
                            "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                            "spec": {"template": {"metadata": {"annotations": wired()}}},
                        }
                    },
                ]
            ),
        ),
        id="labelled-trainer-job",
    ),
    pytest.param(
        Case(
            trainjob(overrides=[{"targetJobs": [{"name": "node"}], "metadata": {"$patch": "x"}}]),
            ("spec.podTemplateOverrides[0].metadata[$patch]",),
            "Trainer's merge of podTemplateOverrides would read it as a directive on the node "
            "job's pod metadata",
        ),
        id="override-metadata",
    ),
    pytest.param(
        Case(
            trainjob(overrides=[override({"$patch": "delete"}, "dataset-initializer", "node")]),
            ("spec.podTemplateOverrides[0].metadata.annotations[$patch]",),
            "would remove the node job's pod annotations",
        ),
        id="override-annotations",
    ),
    pytest.param(
        Case(
            patched(
                node(
                    {"team": "x"},
                    job_spec={"template": {"spec": {"containers": [{"env": [{"$patch": "x"}]}]}}},
                    pod={"spec": {"$retainKeys": ["containers"]}},
                )
            ),
            (),
        ),
        id="directives-in-the-pod-spec-are-not-this-rule",
    ),
    pytest.param(
        Case(patched({"name": "dataset-initializer", "$patch": "delete"}, node({})), ()),
        id="other-jobs-are-not-this-rule",
    ),
    pytest.param(
        Case(
            patched(node({"$patch": "delete"}, name="launcher")),
            (),
            runtime=mpi_runtime("torch-distributed-tcpxo", node=wired(), launcher_as_node=False),
        ),
        id="launcher-not-run-as-node",
    ),
    pytest.param(
        Case(trainjob(overrides=[override({"$patch": "delete"}, "dataset-initializer")]), ()),
        id="override-of-another-job",
    ),
    pytest.param(
        Case(
            trainjob(overrides=[{"targetJobs": "node", "metadata": {"$patch": "x"}}]),
            (),
        ),
        id="override-without-target-list",
    ),
    pytest.param(Case(patched("text", None, node({"a": "b"})), ()), id="non-map-items-skipped"),
    pytest.param(
        Case(
            patched(replicatedJobs={"$patch": "delete"}),
            (f"{SPEC}.replicatedJobs[$patch]",),
            "remove the replicatedJobs list",
        ),
        id="replicated-jobs-a-map",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_a_directive_on_the_way_to_a_wired_template_is_refused(case: Case) -> None:
    name = case.runtime["metadata"]["name"]  # type: ignore[index]
    job = {**case.trainjob, "spec": {**case.trainjob["spec"], "runtimeRef": {"name": name}}}  # type: ignore[dict-item]
    verdict = evaluate(review(job), snapshot(case.runtime), Policy())
    directives = [v for v in verdict.violations if v.code == CODE]
    assert tuple(v.field for v in directives) == case.fields
    if case.fields:
        assert case.fragment in directives[0].message
    else:
        assert verdict.allowed


def test_runtime_patches_of_other_shapes_hold_no_directive() -> None:
    job = trainjob()
    job["spec"]["runtimePatches"] = [  # type: ignore[index]
        None,
        {"trainingRuntimeSpec": {"template": {"spec": "text"}}},
        {"trainingRuntimeSpec": {"template": {}}},
    ]
    verdict = evaluate(review(job), snapshot(runtime(annotations=wired())), Policy())
    assert verdict.allowed


@pytest.mark.parametrize(
    ("old_annotations", "new_annotations", "expected", "grandfathered"),
    [
        pytest.param({"$patch": "merge"}, {"$patch": "delete"}, (CODE,), (), id="changed"),
        pytest.param({"$patch": "delete"}, {"$patch": "delete"}, (), (CODE,), id="unchanged"),
    ],
)
def test_an_update_that_changes_a_directive_changes_the_wiring(
    old_annotations: dict[str, object],
    new_annotations: dict[str, object],
    expected: tuple[str, ...],
    grandfathered: tuple[str, ...],
) -> None:
    old = patched(node(old_annotations))
    new = with_metadata(patched(node(new_annotations)), labels={"team": "a"})
    verdict = evaluate(
        review(new, operation=Operation.UPDATE, old=old),
        snapshot(runtime(annotations=wired())),
        Policy(),
    )
    assert codes(verdict) == expected
    assert tuple(v.code.value for v in verdict.grandfathered) == grandfathered
