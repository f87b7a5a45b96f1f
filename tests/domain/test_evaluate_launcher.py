"""MPI runtimes that run their launcher as a node: the launcher is a second wired template.

Trainer's deepspeed and mlx runtimes set ``spec.mlPolicy.mpi.runLauncherAsNode: true``; the
launcher pod then hosts training ranks, so every rule applies to its pod template too.
"""

from __future__ import annotations

import pytest

from app.domain.evaluate import evaluate
from app.domain.policy import Policy
from app.domain.review import Operation
from app.domain.slim import slim_runtime
from app.domain.template import PodTemplate, wired_jobs, wired_templates
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    mpi_runtime,
    override,
    review,
    runtime_patch,
    snapshot,
    trainjob,
    wired,
)

LAUNCHER_PATH = "spec.template.spec.replicatedJobs[0].template.spec.template"
NODE_PATH = "spec.template.spec.replicatedJobs[1].template.spec.template"
SWAPPED = (*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:])
BOUND = {RECIPE_BOUND: "true"}


def _evaluate(obj: dict[str, object], *runtimes: object) -> Verdict:
    return evaluate(review(obj), snapshot(*runtimes), Policy())


def _codes(verdict: Verdict) -> list[tuple[str, str]]:
    return [(v.code.value, v.field) for v in verdict.violations]


@pytest.mark.parametrize(
    ("flag", "jobs"),
    [
        pytest.param(True, ("node", "launcher"), id="launcher-as-node"),
        pytest.param(False, ("node",), id="launcher-apart"),
        pytest.param("true", ("node",), id="string-is-not-the-flag"),
        pytest.param(None, ("node",), id="unset"),
    ],
)
def test_the_launcher_is_wired_only_when_it_runs_as_a_node(
    flag: object, jobs: tuple[str, ...]
) -> None:
    assert wired_jobs(mpi_runtime(launcher_as_node=flag)) == jobs


def test_wired_templates_name_their_job_and_path() -> None:
    node, launcher = wired_templates(mpi_runtime(launcher=wired(), node=wired()))
    assert isinstance(node, PodTemplate)
    assert isinstance(launcher, PodTemplate)
    assert (node.job, str(node.path)) == ("node", NODE_PATH)
    assert (launcher.job, str(launcher.path)) == ("launcher", LAUNCHER_PATH)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            mpi_runtime(launcher=wired(), node=wired(), labels=BOUND), [], id="both-wired-bound"
        ),
        pytest.param(
            mpi_runtime(launcher=wired(SWAPPED), node=wired(), labels=BOUND),
            [
                (
                    "MappingDivergesFromRecipe",
                    f"{LAUNCHER_PATH}.metadata.annotations[{INTERFACES}][3]",
                )
            ],
            id="launcher-drifted",
        ),
        pytest.param(
            mpi_runtime(launcher=None, node=wired(), labels=BOUND),
            [
                (
                    "InterfacesAnnotationMissing",
                    f"{LAUNCHER_PATH}.metadata.annotations[{INTERFACES}]",
                )
            ],
            id="launcher-unwired-bound",
        ),
        pytest.param(mpi_runtime(launcher=None, node=wired()), [], id="launcher-unwired-unbound"),
        pytest.param(
            mpi_runtime(launcher=wired([("eth1", "gpu-nic-absent")]), node=wired()),
            [("NetworkNotFound", f"{LAUNCHER_PATH}.metadata.annotations[{INTERFACES}][1].network")],
            id="launcher-missing-network",
        ),
        pytest.param(
            mpi_runtime(launcher=wired(default="eth1"), node=wired(SWAPPED), labels=BOUND),
            [
                ("MappingDivergesFromRecipe", f"{NODE_PATH}.metadata.annotations[{INTERFACES}][3]"),
                (
                    "DefaultInterfaceInvalid",
                    f"{LAUNCHER_PATH}.metadata.annotations[{DEFAULT_INTERFACE}]",
                ),
            ],
            id="each-job-reports",
        ),
        pytest.param(
            mpi_runtime(
                launcher=wired(SWAPPED), node=wired(), labels=BOUND, launcher_as_node=False
            ),
            [],
            id="launcher-apart-is-not-judged",
        ),
    ],
)
def test_every_rule_applies_to_the_launcher_template(
    obj: dict[str, object], expected: list[tuple[str, str]]
) -> None:
    assert _codes(_evaluate(obj)) == expected


def test_findings_name_their_job_when_two_templates_are_wired() -> None:
    obj = mpi_runtime(
        launcher=wired(SWAPPED), node=wired([("eth1", "gpu-nic-absent")]), labels=BOUND
    )
    messages = [v.render() for v in _evaluate(obj).violations]
    assert messages[0].startswith(
        "[MappingDivergesFromRecipe] node job: at position eth1 the object maps "
        "eth1->gpu-nic-absent"
    )
    assert messages[1].startswith(
        "[MappingDivergesFromRecipe] launcher job: at position eth3 the object maps eth4->gpu-nic-3"
    )
    assert messages[2].startswith("[NetworkNotFound] node job: no Network object exists for eth1")


def test_an_unwired_bound_launcher_says_which_template_lacks_the_annotation() -> None:
    verdict = _evaluate(mpi_runtime(launcher=None, node=wired(), labels=BOUND))
    assert verdict.violations[0].message == (
        "launcher job: recipe-bound, but the launcher pod template has no "
        "networking.gke.io/interfaces annotation; its pods would get only eth0"
    )


def test_a_cluster_wide_problem_is_said_once_for_both_templates() -> None:
    obj = mpi_runtime(launcher=wired(), node=wired(), labels=BOUND)
    verdict = evaluate(review(obj), snapshot(no_recipe=True), Policy())
    assert [v.code.value for v in verdict.violations] == ["RecipeUnavailable"]


RUNTIME = mpi_runtime("deepspeed-tcpxo", launcher=wired(), node=wired(), labels=BOUND)


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param(trainjob("deepspeed-tcpxo"), [], id="no-patches"),
        pytest.param(
            trainjob("deepspeed-tcpxo", patches=[{INTERFACES: annotation(SWAPPED)}]),
            ["MappingDivergesFromRecipe"],
            id="node-patch-drifts",
        ),
        pytest.param(
            {
                **trainjob("deepspeed-tcpxo"),
                "spec": {
                    "runtimeRef": {"name": "deepspeed-tcpxo"},
                    "runtimePatches": [
                        runtime_patch({INTERFACES: annotation(SWAPPED)}, job="launcher")
                    ],
                },
            },
            ["MappingDivergesFromRecipe"],
            id="launcher-patch-drifts",
        ),
        pytest.param(
            trainjob(
                "deepspeed-tcpxo", overrides=[override({DEFAULT_INTERFACE: "eth2"}, "launcher")]
            ),
            ["DefaultInterfaceInvalid"],
            id="launcher-override-breaks-default",
        ),
        pytest.param(
            trainjob("deepspeed-tcpxo", overrides=[override({INTERFACES: None}, "launcher")]),
            [],
            id="launcher-null-changes-nothing",
        ),
    ],
)
def test_trainjob_patches_to_a_wired_launcher_count(
    job: dict[str, object], expected: list[str]
) -> None:
    verdict = _evaluate(job, RUNTIME)
    assert [v.code.value for v in verdict.violations] == expected
    assert all(v.message.startswith(("node job: ", "launcher job: ")) for v in verdict.violations)


def test_a_launcher_patch_is_ignored_when_the_launcher_runs_no_ranks() -> None:
    apart = mpi_runtime("deepspeed-tcpxo", launcher=wired(), node=wired(), launcher_as_node=False)
    patch = runtime_patch({INTERFACES: annotation(SWAPPED)}, job="launcher")
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"} | {
        "metadata": {"name": "job", "namespace": "team"},
        "spec": {"runtimeRef": {"name": "deepspeed-tcpxo"}, "runtimePatches": [patch]},
    }
    assert _evaluate(job, apart).allowed


def test_an_update_that_changes_only_the_launcher_wiring_gets_the_full_verdict() -> None:
    old = mpi_runtime(launcher=wired(SWAPPED), node=wired(SWAPPED), labels=BOUND)
    new = mpi_runtime(launcher=wired(SWAPPED[::-1]), node=wired(SWAPPED), labels=BOUND)
    verdict = evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), Policy())
    assert [v.code.value for v in verdict.violations] == ["MappingDivergesFromRecipe"] * 2
    unchanged = evaluate(review(old, operation=Operation.UPDATE, old=old), snapshot(), Policy())
    assert unchanged.allowed
    assert [v.code.value for v in unchanged.waived] == ["MappingDivergesFromRecipe"] * 2


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            mpi_runtime(launcher=wired(SWAPPED), node=wired(), labels=BOUND),
            ["MappingDivergesFromRecipe"],
            id="launcher-as-node",
        ),
        pytest.param(
            mpi_runtime(
                launcher=wired(SWAPPED), node=wired(), labels=BOUND, launcher_as_node=False
            ),
            [],
            id="launcher-apart",
        ),
        pytest.param(
            mpi_runtime(launcher=None, node=None, labels=BOUND),
            ["InterfacesAnnotationMissing", "InterfacesAnnotationMissing"],
            id="unwired",
        ),
    ],
)
def test_the_slim_copy_keeps_the_launcher_wiring_and_flag(
    obj: dict[str, object], expected: list[str]
) -> None:
    slim = slim_runtime(obj)
    assert wired_templates(slim) == wired_templates(obj)
    job = trainjob("deepspeed-tcpxo")
    verdict = _evaluate(job, obj)
    assert [v.code.value for v in verdict.violations] == expected
    assert _evaluate(job, slim) == verdict


def test_the_slim_copy_keeps_the_flag_of_a_runtime_without_jobs() -> None:
    obj = mpi_runtime(labels=BOUND)
    obj["spec"] = {"mlPolicy": {"mpi": {"runLauncherAsNode": True}}}
    verdict = _evaluate(trainjob("deepspeed-tcpxo"), obj)
    assert [v.code.value for v in verdict.violations] == ["NodeJobMissing", "NodeJobMissing"]
    assert _evaluate(trainjob("deepspeed-tcpxo"), slim_runtime(obj)) == verdict
