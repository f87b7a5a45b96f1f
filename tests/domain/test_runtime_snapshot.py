"""Reading Trainer's runtime snapshot ConfigMaps (app.domain.runtime_snapshot): which ConfigMaps
are snapshots and of which TrainJob, the runtime a copy holds and its kind, and why a copy holds
none. Judging a copy: tests/domain/test_snapshot.py."""

from __future__ import annotations

from typing import Final

import pytest
import yaml

from app.documents import DocumentError, load_all_yaml, load_yaml
from app.domain.kinds import Kind
from app.domain.runtime_snapshot import RuntimeSnapshot, read_snapshot, snapshot_owner
from tests.builders import TCPXO_RUNTIME, TRAINJOB_OWNER, bare, copy_of, runtime, wired
from tests.support.paths import UPSTREAM

TCPXO = runtime(annotations=wired())
TEAM_TR = runtime("team-tcpxo", kind=Kind.TRAINING_RUNTIME, annotations=wired())
LEAD = "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job"


def upstream(variant: str) -> dict[str, object]:
    """tests/fixtures/upstream's snapshot of TrainJob team-a/tj as Trainer writes it."""
    path = UPSTREAM / f"trainer-v2.3.0/snapshots/tj-runtime-snapshot-{variant}.yaml"
    (configmap,) = load_all_yaml(path.read_text(encoding="utf-8"))
    assert isinstance(configmap, dict)
    return configmap


UPSTREAM_V230: Final = upstream("v2.3.0")
UPSTREAM_FIXED: Final = upstream("fixed")


def without_runtime(configmap: dict[str, object]) -> dict[str, object]:
    return {**configmap, "data": {"dashboard.json": "{}"}}


GRAFANA: Final = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "grafana-runtime-snapshot",
        "namespace": "monitoring",
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "grafana",
                "uid": "5c3f9a2e-1b7d-4e8a-9f60-2d4c8b1a7e35",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "data": {"runtime-snapshot.json": "{}"},
}
"""A dashboard's ConfigMap that happens to end in ``-runtime-snapshot``: never judged."""


@pytest.mark.parametrize(
    ("configmap", "trainjob"),
    [
        pytest.param(UPSTREAM_V230, "tj", id="upstream-v2.3.0"),
        pytest.param(UPSTREAM_FIXED, "tj", id="upstream-fixed-release"),
        pytest.param(copy_of(TCPXO), "job", id="built"),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "name": "other", "controller": False}]),
            None,
            id="trainjob-owner-not-controller",
        ),
        pytest.param(
            copy_of(
                TCPXO,
                owners=[
                    {**TRAINJOB_OWNER, "name": "other", "controller": False},
                    "not-an-object",
                    TRAINJOB_OWNER,
                ],
            ),
            "job",
            id="the-controller-among-owners",
        ),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "apiVersion": "trainer.kubeflow.org/v2"}]),
            "job",
            id="any-version-of-the-group",
        ),
        pytest.param(copy_of(TCPXO, name="job-snapshot"), None, id="name-without-suffix"),
        pytest.param(copy_of(TCPXO, owners=[]), None, id="no-owner"),
        pytest.param(copy_of(TCPXO, owners="job"), None, id="owners-not-a-list"),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "controller": "true"}]),
            None,
            id="controller-not-a-boolean",
        ),
        # Trainer checks only the controller's UID (metav1.GetControllerOf): any spelling of
        # the rest is used, so judged, whenever the ConfigMap holds a runtime key.
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "kind": "trainjob"}]),
            "job",
            id="kind-spelled-in-lower-case",
        ),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "kind": "JobSet"}]),
            "job",
            id="another-kind",
        ),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "apiVersion": "example.com/v1"}]),
            "job",
            id="another-group",
        ),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "apiVersion": "trainer.kubeflow.org"}]),
            "job",
            id="group-without-version",
        ),
        pytest.param(
            copy_of(
                TCPXO,
                owners=[
                    {**TRAINJOB_OWNER, "kind": "Deployment", "controller": False},
                    {**TRAINJOB_OWNER, "kind": "Deployment", "name": "first"},
                    {**TRAINJOB_OWNER, "name": "second"},
                ],
            ),
            "first",
            id="the-first-controller-counts",
        ),
        # Without a runtime key, only Trainer's own spelling is a snapshot (judged and refused:
        # RuntimeSnapshotInvalid); any other owner's ConfigMap of that name is not.
        pytest.param(without_runtime(copy_of(TCPXO)), "job", id="trainers-spelling-no-runtime"),
        pytest.param(
            without_runtime(copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "kind": "trainjob"}])),
            None,
            id="other-kind-no-runtime",
        ),
        pytest.param(
            without_runtime(copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "apiVersion": "v1"}])),
            None,
            id="other-group-no-runtime",
        ),
        pytest.param(
            without_runtime(
                copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "apiVersion": "trainer.kubeflow.org"}])
            ),
            None,
            id="group-without-version-no-runtime",
        ),
        pytest.param(
            {**copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "kind": "Deployment"}]), "data": "x"},
            None,
            id="other-kind-data-not-a-map",
        ),
        pytest.param(GRAFANA, None, id="a-dashboards-configmap"),
        pytest.param(
            copy_of(TCPXO, owners=[{**TRAINJOB_OWNER, "name": ""}]), None, id="unnamed-owner"
        ),
        pytest.param(copy_of(TCPXO, owners=["x"]), None, id="owner-not-an-object"),
        pytest.param({"kind": "ConfigMap"}, None, id="no-metadata"),
        pytest.param(["job-runtime-snapshot"], None, id="not-an-object"),
    ],
)
def test_snapshot_owner_names_the_trainjob_that_controls_a_snapshot(
    configmap: object, trainjob: str | None
) -> None:
    assert snapshot_owner(configmap) == trainjob


def test_trainers_own_snapshots_read_as_the_cluster_training_runtime_they_copy() -> None:
    for configmap in (UPSTREAM_V230, UPSTREAM_FIXED):
        found = read_snapshot(configmap, "tj", load_yaml)
        data = configmap["data"]
        assert isinstance(data, dict)
        assert found == RuntimeSnapshot(
            namespace="team-a",
            name="tj-runtime-snapshot",
            trainjob="tj",
            runtime=load_yaml(data["runtime"]),  # type: ignore[arg-type]
            kind=Kind.CLUSTER_TRAINING_RUNTIME,
        )
        assert found.runtime_name == "torch-distributed-tcpxo"
        assert found.describe() == (
            "ConfigMap team-a/tj-runtime-snapshot (runtime snapshot of TrainJob team-a/tj: "
            "ClusterTrainingRuntime torch-distributed-tcpxo)"
        )


@pytest.mark.parametrize(
    ("copied", "kind", "name"),
    [
        pytest.param(bare(TCPXO), Kind.CLUSTER_TRAINING_RUNTIME, TCPXO_RUNTIME, id="bare-cluster"),
        pytest.param(bare(TEAM_TR), Kind.TRAINING_RUNTIME, "team-tcpxo", id="bare-namespaced"),
        pytest.param(TCPXO, Kind.CLUSTER_TRAINING_RUNTIME, TCPXO_RUNTIME, id="with-kind"),
        pytest.param(TEAM_TR, Kind.TRAINING_RUNTIME, "team-tcpxo", id="with-kind-namespaced"),
        pytest.param(
            {**TCPXO, "apiVersion": "trainer.kubeflow.org"},
            Kind.CLUSTER_TRAINING_RUNTIME,
            TCPXO_RUNTIME,
            id="group-without-version",
        ),
    ],
)
def test_a_copy_is_read_as_its_kind_or_by_its_namespace_without_one(
    copied: dict[str, object], kind: Kind, name: str
) -> None:
    found = read_snapshot(copy_of(copied), "job", load_yaml)
    assert (found.kind, found.runtime_name, found.problem) == (kind, name, None)
    assert found.runtime == copied
    assert found.describe() == f"{LEAD}: {kind} {name})"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        pytest.param(None, "data has no runtime key", id="no-data"),
        pytest.param({"other": "x"}, "data has no runtime key", id="no-runtime-key"),
        pytest.param({"runtime": 7}, "data.runtime is not a string", id="not-a-string"),
        pytest.param(
            {"runtime": "- a\n- b\n"}, "data.runtime is a list, not one runtime", id="a-list"
        ),
        pytest.param(
            {"runtime": "42"}, "data.runtime is not an object, not one runtime", id="a-scalar"
        ),
        pytest.param({"runtime": ""}, "data.runtime is not an object, not one runtime", id="empty"),
        pytest.param(
            {"runtime": "kind: ConfigMap\nmetadata: {name: x}\n"},
            'the copy in data.runtime is of kind "ConfigMap", not ClusterTrainingRuntime or '
            "TrainingRuntime",
            id="another-kind",
        ),
        pytest.param(
            {"runtime": "kind: 7\nmetadata: {name: x}\n"},
            "the copy in data.runtime is of kind that is not a string, not "
            "ClusterTrainingRuntime or TrainingRuntime",
            id="kind-not-a-string",
        ),
        pytest.param(
            {"runtime": "apiVersion: v1\nkind: ClusterTrainingRuntime\nmetadata: {name: x}\n"},
            'the copy in data.runtime has apiVersion "v1", not trainer.kubeflow.org',
            id="another-group",
        ),
        pytest.param(
            {"runtime": "apiVersion: 7\nmetadata: {name: x}\n"},
            "the copy in data.runtime has apiVersion that is not a string, not "
            "trainer.kubeflow.org",
            id="apiVersion-not-a-string",
        ),
        pytest.param(
            {"runtime": "spec: {}\n"}, "the copy in data.runtime has no metadata.name", id="no-name"
        ),
        pytest.param(
            {"runtime": "metadata: {name: ''}\n"},
            "the copy in data.runtime has no metadata.name",
            id="empty-name",
        ),
    ],
)
def test_a_copy_that_is_not_one_runtime_holds_none_and_says_why(
    data: dict[str, object] | None, problem: str
) -> None:
    configmap = copy_of("")
    del configmap["data"]
    if data is not None:
        configmap["data"] = data
    found = read_snapshot(configmap, "job", load_yaml)
    assert found == RuntimeSnapshot(
        namespace="team", name="job-runtime-snapshot", trainjob="job", problem=problem
    )
    assert found.runtime_name == ""
    assert found.describe() == f"{LEAD})"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: [b", id="unclosed-flow"),
        pytest.param("a: 1\n---\nb: 2\n", id="two-documents"),
        pytest.param("{a: &x 1, b: *y}", id="undefined-alias"),
        pytest.param("[" * 2000, id="too-deep"),
    ],
)
def test_a_copy_that_is_not_yaml_names_the_decoders_reason(text: str) -> None:
    with pytest.raises(DocumentError) as raised:
        load_yaml(text)
    found = read_snapshot(copy_of(text), "job", load_yaml)
    assert found.problem == f"data.runtime is not YAML of one runtime: {raised.value}"
    assert found.runtime is None


def test_a_decoder_that_recurses_too_deeply_is_a_problem_not_a_crash() -> None:
    # PyYAML's pure-Python loader recurses per nesting level: 600 levels pass Python's default
    # limit of 1000 frames (libyaml's parser stops at 1000 levels with an error of its own).
    found = read_snapshot(copy_of("[" * 600 + "]" * 600), "job", yaml.safe_load)
    assert found.runtime is None
    assert (found.problem or "").startswith(
        "data.runtime is not YAML of one runtime: maximum recursion depth exceeded"
    )


@pytest.mark.parametrize(
    ("trainjob", "runtime_name", "described"),
    [
        pytest.param("job", "x", f"{LEAD}: ClusterTrainingRuntime x)", id="plain"),
        pytest.param(
            "job\n",
            "x\x1b[31m",
            "ConfigMap team/job-runtime-snapshot (runtime snapshot of TrainJob team/job\\n: "
            "ClusterTrainingRuntime x\\x1b[31m)",
            id="control-characters-escaped",
        ),
        pytest.param(
            "job", "r" * 70, f"{LEAD}: ClusterTrainingRuntime {'r' * 63}…)", id="long-name-cut"
        ),
    ],
)
def test_describe_names_the_configmap_its_trainjob_and_the_copy_as_shown(
    trainjob: str, runtime_name: str, described: str
) -> None:
    found = read_snapshot(copy_of(bare(runtime(runtime_name))), trainjob, load_yaml)
    assert found.runtime_name == runtime_name
    assert found.describe() == described
