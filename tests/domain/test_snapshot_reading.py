"""A runtime snapshot's ``data.runtime`` read as Trainer reads it (app.kubeyaml, then
app.domain.runtime_decoding): each way the reviewed bypass swapped the wiring Trainer decodes is
refused or judged on Trainer's reading, never allowed on another."""

from __future__ import annotations

import json

import pytest
import yaml

from app.domain.evaluate import evaluate
from app.domain.kinds import Copy
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.domain.runtime_decoding import typed_reading_problem
from app.domain.runtime_snapshot import MAX_RUNTIME_BYTES, read_snapshot
from app.domain.verdict import Verdict
from app.kubeyaml import load_snapshot_yaml
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    bare,
    codes,
    copy_of,
    mpi_runtime,
    runtime,
    snapshot,
    wired,
)

SWAPPED = [*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]
GOOD, BAD = json.dumps(annotation()), json.dumps(annotation(SWAPPED))
JOBS = "spec.template.spec.replicatedJobs"


def judged(text: str) -> Verdict:
    configmap = copy_of(text)
    request = Review(
        operation=Operation.CREATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace="team",
        obj=configmap,
        snapshot=read_snapshot(configmap, "job", load_snapshot_yaml),
    )
    return evaluate(request, snapshot(), Policy())


def problem(text: str) -> str:
    found = read_snapshot(copy_of(text), "job", load_snapshot_yaml)
    assert found.runtime is None
    return found.problem or ""


def _dumped(obj: object) -> str:
    return yaml.safe_dump(obj, sort_keys=True)


def _job(annotations: str) -> str:
    return (
        "      - name: node\n"
        "        template:\n"
        "          spec:\n"
        "            template:\n"
        "              metadata:\n"
        "                annotations:\n"
        f"                  {DEFAULT_INTERFACE}: eth0\n"
        f"{annotations}"
    )


def _copy(jobs: str) -> str:
    return (
        "metadata:\n  name: torch-distributed-tcpxo\n"
        f"spec:\n  template:\n    spec:\n      replicatedJobs:\n{jobs}"
    )


def test_a_good_copy_is_allowed() -> None:
    assert codes(judged(_dumped(bare(runtime(annotations=wired()))))) == ()
    assert judged(_copy(_job(f"                  {INTERFACES}: {GOOD}\n"))).allowed


def test_a_case_folded_replicated_jobs_beside_the_good_one_is_refused() -> None:
    copied = bare(runtime(annotations=wired()))
    spec = copied["spec"]
    assert isinstance(spec, dict)
    spec["template"]["spec"]["replicatedjobs"] = runtime(annotations=wired(SWAPPED))["spec"][  # type: ignore[index]
        "template"
    ]["spec"]["replicatedJobs"]
    verdict = judged(_dumped(copied))
    assert codes(verdict) == ("RuntimeSnapshotInvalid",)
    assert (
        f"`{JOBS[:-14]}replicatedjobs` may be read by Trainer as `{JOBS}` "
        "(Go matches field names ignoring case)"
    ) in verdict.violations[0].message


def test_annotations_spelled_with_a_long_s_holding_other_wiring_are_refused() -> None:
    text = _copy(
        _job(f"                  {INTERFACES}: {GOOD}\n")
        + f"                annotation\u017f:\n                  {INTERFACES}: {BAD}\n"
    )
    assert problem(text) == (
        "the copy in data.runtime cannot be read as Trainer reads it: "
        f"`{JOBS}[0].template.spec.template.metadata.annotation\u017f` may be read by Trainer as "
        f"`{JOBS}[0].template.spec.template.metadata.annotations` "
        "(Go matches field names ignoring case)"
    )


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param(
            f"                  {INTERFACES}: {GOOD}\n"
            f"                  <<: {{{INTERFACES}: {BAD}}}\n",
            id="merge-after-the-explicit-key",
        ),
        pytest.param(
            f"                  <<: [{{{INTERFACES}: {BAD}}}, {{{INTERFACES}: {GOOD}}}]\n",
            id="merge-sequence-earlier-wins",
        ),
        pytest.param(
            f"                  {INTERFACES}: {GOOD}\n                  {INTERFACES}: {BAD}\n",
            id="duplicate-key-later-wins",
        ),
    ],
)
def test_merge_keys_and_duplicates_are_judged_as_goyaml_v2_reads_them(annotations: str) -> None:
    found = read_snapshot(copy_of(_copy(_job(annotations))), "job", load_snapshot_yaml)
    assert found.problem is None
    assert found.runtime is not None
    jobs = found.runtime["spec"]["template"]["spec"]["replicatedJobs"]  # type: ignore[index]
    assert jobs[0]["template"]["spec"]["template"]["metadata"]["annotations"] == {
        DEFAULT_INTERFACE: "eth0",
        INTERFACES: json.loads(BAD),
    }
    assert codes(judged(_copy(_job(annotations)))) == ("MappingDivergesFromRecipe",)


def test_run_launcher_as_node_y_is_true_and_the_launcher_is_judged() -> None:
    copied = mpi_runtime(launcher=wired(SWAPPED), node=wired(), labels={RECIPE_BOUND: "true"})
    text = _dumped(bare(copied))
    assert "runLauncherAsNode: true" in text
    launcher = text.replace("runLauncherAsNode: true", "runLauncherAsNode: y")
    found = read_snapshot(copy_of(launcher), "job", load_snapshot_yaml)
    assert found.runtime is not None
    assert found.runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] is True  # type: ignore[index]
    verdict = judged(launcher)
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert verdict.violations[0].field.startswith(f"data.runtime: {JOBS}[0]")
    assert judged(text) == verdict


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(
            "metadata: {name: x}\nSpec: {}\n",
            "`Spec` may be read by Trainer as `spec`",
            id="folded-root-field",
        ),
        pytest.param(
            "metadata: {name: x}\n\u212aind: ClusterTrainingRuntime\n",
            "`\u212aind` may be read by Trainer as `kind`",
            id="kelvin-sign",
        ),
        pytest.param(
            "metadata: {name: x, annotat\u0130ons: {a: b}}\n",
            "`metadata.annotat\u0130ons` may be read by Trainer as `metadata.annotations`",
            id="capital-i-with-dot",
        ),
        pytest.param(
            "metadata: {name: x, NAME: y}\n",
            "`metadata.NAME` may be read by Trainer as `metadata.name`",
            id="folded-name",
        ),
        pytest.param(
            "metadata: {name: x}\nspec: {mlPolicy: {mpi: {runLauncherAsNode: 'y'}}}\n",
            "`spec.mlPolicy.mpi.runLauncherAsNode` is not a boolean",
            id="launcher-flag-a-string",
        ),
        pytest.param(
            "metadata: {name: x, annotations: {a: 1}}\n",
            "`metadata.annotations[a]` is not a string",
            id="annotation-a-number",
        ),
        pytest.param(
            "metadata: {name: x, labels: [a]}\n",
            "`metadata.labels` is not a map of strings",
            id="labels-a-list",
        ),
        pytest.param(
            "metadata: {name: 7}\n", "`metadata.name` is not a string", id="name-a-number"
        ),
        pytest.param(
            "metadata: {name: x}\nspec: [{}]\n", "`spec` is not an object", id="spec-a-list"
        ),
        pytest.param(
            "metadata: {name: x}\nspec: {template: {spec: {replicatedJobs: {}}}}\n",
            f"`{JOBS}` is not a list",
            id="jobs-an-object",
        ),
        pytest.param(
            "metadata: {name: x}\nspec: {template: {spec: {replicatedJobs: [a]}}}\n",
            f"`{JOBS}[0]` is not an object",
            id="job-not-an-object",
        ),
        pytest.param(
            "metadata: {name: x}\nspec: {template: {spec: {replicatedJobs: [{Name: a}]}}}\n",
            f"`{JOBS}[0].Name` may be read by Trainer as `{JOBS}[0].name`",
            id="folded-job-name",
        ),
    ],
)
def test_what_go_could_read_otherwise_is_refused_naming_the_field(text: str, reason: str) -> None:
    assert problem(text).startswith(
        f"the copy in data.runtime cannot be read as Trainer reads it: {reason}"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("a: !!str x\n", "the tag `!!str` at line 1, column 4", id="tag"),
        pytest.param("a: [b?c]\n", "a plain scalar with `?`", id="flow-question-mark"),
        pytest.param("a: 1\n---\nb: 2\n", "a second YAML document at line 2", id="two-documents"),
        pytest.param(
            "spec: [" + ",".join(["{}"] * 20_000) + "]\n",
            "more than 5000 YAML nodes at line 1",
            id="too-many-nodes",
        ),
    ],
)
def test_what_the_reader_cannot_be_sure_of_is_refused_naming_the_construct(
    text: str, reason: str
) -> None:
    assert problem(text).startswith(f"data.runtime is not YAML of one runtime: {reason}")


@pytest.mark.parametrize(
    ("size", "refused"),
    [
        pytest.param(MAX_RUNTIME_BYTES, False, id="at-the-cap"),
        pytest.param(MAX_RUNTIME_BYTES + 1, True, id="one-byte-over"),
        pytest.param(MAX_RUNTIME_BYTES * 4, True, id="1-MiB"),
    ],
)
def test_a_copy_over_256_kib_is_refused_unparsed(size: int, refused: bool) -> None:
    head = "metadata: {name: x}\nx: "
    text = head + "a" * (size - len(head))
    found = read_snapshot(copy_of(text), "job", _never if refused else load_snapshot_yaml)
    assert (found.problem == "data.runtime is over 256 KiB, more than nicguard reads") is refused


def test_the_cap_counts_utf8_bytes_as_go_does() -> None:
    head = "metadata: {name: x}\nx: "
    text = head + "\u00e9" * ((MAX_RUNTIME_BYTES - len(head)) // 2 + 1)
    assert len(text) < MAX_RUNTIME_BYTES
    found = read_snapshot(copy_of(text), "job", _never)
    assert found.problem == "data.runtime is over 256 KiB, more than nicguard reads"


def _never(text: str) -> object:
    raise AssertionError("a copy over the cap must not be parsed")


@pytest.mark.parametrize(
    "runtime_obj",
    [
        pytest.param({"metadata": None, "spec": {"mlPolicy": None}}, id="nulls-read-as-absent"),
        pytest.param({"other": {"Spec": 1}, "metadata": {"generateName": 1}}, id="unread-fields"),
        pytest.param(
            {"metadata": {"annotations": {"A": "x", "a": "y", "annotation\u017f": "z"}}},
            id="map-keys-exact",
        ),
        pytest.param({"\u00fcber": 1, "spe\u00e7": 1}, id="non-ascii-not-a-field"),
    ],
)
def test_what_go_reads_as_nicguard_does_passes(runtime_obj: dict[str, object]) -> None:
    assert typed_reading_problem(runtime_obj) is None
