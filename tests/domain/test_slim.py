"""What a cluster view keeps of a runtime (app.domain.slim.slim_runtime)."""

from __future__ import annotations

import pytest

from app.domain.claims import PodClaims, pod_claims
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.slim import slim_runtime
from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.wiring import template_wiring
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    NODE_PATH,
    RECIPE_BOUND,
    TRAINER_API,
    by_template,
    claimed_job,
    node_job,
    runtime,
    wired,
)

WIRED = wired()
NODE_ONLY_WIRING = {
    "name": "node",
    "template": {"spec": {"template": {"metadata": {"annotations": WIRED}}}},
}


def _jobs(obj: JsonMap) -> object:
    spec = obj.get("spec")
    assert isinstance(spec, dict)
    return spec["template"]["spec"]["replicatedJobs"]


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param([node_job(WIRED)], [NODE_ONLY_WIRING], id="node-job-only"),
        pytest.param(
            [{"name": "launcher", "template": {"x": 1}}, "not-a-map", {"name": 3}, node_job(WIRED)],
            [{"name": "launcher"}, None, None, NODE_ONLY_WIRING],
            id="other-jobs-by-name-unnamed-ones-become-placeholders",
        ),
        pytest.param(
            [node_job(WIRED), node_job({INTERFACES: "second", "x": "y"}), {"name": "tail"}],
            [
                NODE_ONLY_WIRING,
                {
                    "name": "node",
                    "template": {
                        "spec": {"template": {"metadata": {"annotations": {INTERFACES: "second"}}}}
                    },
                },
                {"name": "tail"},
            ],
            id="every-named-job-with-its-wiring-only",
        ),
        pytest.param([{"name": "node"}], [{"name": "node"}], id="node-job-without-template"),
        pytest.param(
            [{"name": "node", "template": {"spec": {"template": "text"}}}],
            [{"name": "node"}],
            id="pod-template-not-a-map",
        ),
        pytest.param(
            [node_job(None)],
            [
                {
                    "name": "node",
                    "template": {"spec": {"template": {"metadata": {"annotations": {}}}}},
                }
            ],
            id="no-annotations",
        ),
        pytest.param([{"name": "launcher"}], [{"name": "launcher"}], id="no-node-job"),
        pytest.param([], [], id="no-jobs"),
    ],
)
def test_each_named_jobs_wiring_is_kept(jobs: list[object], expected: object) -> None:
    slim = slim_runtime(runtime(jobs=jobs))
    assert _jobs(slim) == expected
    assert slim_runtime(slim) == slim  # caches may slim what a trimming source already slimmed


def test_other_annotations_of_the_node_pod_and_the_rest_of_the_object_are_dropped() -> None:
    annotations = {**WIRED, "other.io/key": "v", DEFAULT_INTERFACE: "eth0"}
    full = runtime(
        "torch",
        kind=Kind.TRAINING_RUNTIME,
        namespace="team-a",
        labels={RECIPE_BOUND: "true", "app": "x"},
        annotations=annotations,
    )
    metadata, spec = full["metadata"], full["spec"]
    assert isinstance(metadata, dict)
    assert isinstance(spec, dict)
    metadata |= {"resourceVersion": "42", "uid": "u", "managedFields": [{"m": 1}]}
    spec["mlPolicy"] = {"numNodes": 2}
    assert slim_runtime(full) == {
        "apiVersion": TRAINER_API,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": "torch",
            "namespace": "team-a",
            "resourceVersion": "42",
            "labels": {RECIPE_BOUND: "true"},
        },
        "spec": {"template": {"spec": {"replicatedJobs": [NODE_ONLY_WIRING]}}},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param({"kind": "X"}, {"kind": "X", "metadata": {}}, id="no-metadata-no-spec"),
        pytest.param(
            {"metadata": {"labels": {"app": "x"}}, "spec": {"template": []}},
            {"metadata": {}},
            id="unbound-labels-and-no-jobs-list",
        ),
        pytest.param(
            {"metadata": "text", "spec": {"template": {"spec": {"replicatedJobs": "x"}}}},
            {"metadata": {}},
            id="malformed",
        ),
    ],
)
def test_missing_or_malformed_parts_stay_missing(obj: JsonMap, expected: JsonMap) -> None:
    assert slim_runtime(obj) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="bool"),
        pytest.param(1, id="int"),
        pytest.param(1.0, id="float"),
        pytest.param(["eth1"], id="list"),
        pytest.param({"a": 1}, id="map"),
        pytest.param(None, id="null"),
    ],
)
def test_malformed_annotation_values_are_kept_exactly(value: object) -> None:
    # True == 1 == 1.0 as cache keys: a shared spec must never turn one into another.
    slim = [slim_runtime(runtime(annotations={INTERFACES: v})) for v in ("x", value, 1, True)]
    kept = [_jobs(s)[0]["template"]["spec"]["template"]["metadata"]["annotations"] for s in slim]  # type: ignore[index]
    assert kept == [{INTERFACES: "x"}, {INTERFACES: value}, {INTERFACES: 1}, {INTERFACES: True}]
    assert type(kept[1][INTERFACES]) is type(value)


def test_runtimes_stamped_from_one_template_share_their_spec_and_namespace() -> None:
    first = slim_runtime(
        runtime("a", kind=Kind.TRAINING_RUNTIME, namespace="".join(["te", "am"]), annotations=WIRED)
    )
    second = slim_runtime(
        runtime(
            "b",
            kind=Kind.TRAINING_RUNTIME,
            namespace="".join(["tea", "m"]),
            annotations=dict(WIRED),
        )
    )
    assert first["spec"] is second["spec"]
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]  # type: ignore[index]


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(runtime(annotations=WIRED), id="wired"),
        pytest.param(
            runtime(jobs=[{"name": "a"}, 3, node_job({**WIRED, "x": "y"})]), id="third-job"
        ),
        pytest.param(runtime(jobs=[{"name": "node", "template": {}}]), id="no-pod-template"),
        pytest.param(runtime(jobs=[{"name": "launcher"}]), id="no-node-job"),
    ],
)
def test_the_node_template_reads_the_same_from_the_slim_copy(obj: JsonMap) -> None:
    full, slim = job_template(obj, NODE_JOB), job_template(slim_runtime(obj), NODE_JOB)
    if isinstance(full, PodTemplate):
        assert isinstance(slim, PodTemplate)
        assert slim.path == full.path
        assert template_wiring(slim) == template_wiring(full)
    else:
        assert slim == full


@pytest.mark.parametrize(
    ("obj", "keys"),
    [
        pytest.param(
            runtime(jobs=[node_job(WIRED)]), ["apiVersion", "kind", "metadata", "spec"], id="whole"
        ),
        pytest.param({"kind": "X"}, ["kind", "metadata"], id="no-api-version-no-spec"),
        pytest.param({"apiVersion": "v"}, ["apiVersion", "metadata"], id="no-kind"),
        pytest.param(
            {"spec": {"mlPolicy": {"mpi": {"runLauncherAsNode": True}}}},
            ["metadata", "spec"],
            id="launcher-flag-without-jobs",
        ),
    ],
)
def test_the_slim_copy_reads_as_the_object_it_stands_for(obj: JsonMap, keys: list[str]) -> None:
    slim = slim_runtime(obj)
    assert list(slim) == keys
    assert len(slim) == len(keys)
    assert dict(slim) == {key: slim[key] for key in keys}
    assert repr(slim) == f"SlimRuntime({dict(slim)!r})"
    for absent in {"apiVersion", "kind", "spec", "status"} - set(keys):
        assert absent not in slim
        with pytest.raises(KeyError):
            slim[absent]


def test_runtimes_stamped_from_one_template_share_their_wiring() -> None:
    first, second = (
        slim_runtime(runtime(name, jobs=[node_job(dict(WIRED))])) for name in ("a", "b")
    )
    assert first["metadata"] != second["metadata"]
    assert first["spec"] is second["spec"]


def _claims_of(obj: JsonMap, job: str = NODE_JOB) -> PodClaims:
    found = job_template(obj, job)
    assert isinstance(found, PodTemplate)
    return pod_claims(found.resource_claims, found.claims_path)


@pytest.mark.parametrize(
    ("claims", "kept"),
    [
        pytest.param(
            [by_template()],
            [{"name": "rdma", "resourceClaimTemplateName": "default-rdma"}],
            id="template-claim",
        ),
        pytest.param(
            [{"name": "s", "resourceClaimName": "shared", "extra": "x"}, "text", {"name": 3}],
            [{"name": "s", "resourceClaimName": "shared"}, None, {}],
            id="only-the-fields-that-name-a-claim-non-maps-keep-their-place",
        ),
        pytest.param([], [], id="empty"),
    ],
)
def test_each_jobs_resource_claims_are_kept_as_the_rules_read_them(
    claims: list[object], kept: list[object]
) -> None:
    job = claimed_job(annotations=WIRED)
    job["template"]["spec"]["template"]["spec"]["resourceClaims"] = claims  # type: ignore[index]
    full = runtime(jobs=[job, claimed_job(by_template("other"), name="worker")])
    slim = slim_runtime(full)
    jobs = _jobs(slim)
    assert isinstance(jobs, list)
    assert jobs[0]["template"]["spec"]["template"]["spec"] == {"resourceClaims": kept}
    assert _claims_of(slim) == _claims_of(full)
    assert _claims_of(slim, "worker") == _claims_of(full, "worker")


def test_a_job_without_resource_claims_keeps_no_pod_spec() -> None:
    slim = slim_runtime(runtime(jobs=[node_job(WIRED)]))
    assert _jobs(slim) == [NODE_ONLY_WIRING]
    assert _claims_of(slim) == PodClaims((), f"{NODE_PATH}.spec.resourceClaims")
