"""Shapes real clusters have that let drift through before (issue 11), on the real apiserver.

A Snapshot where the recipe should be; an MPI runtime whose launcher runs ranks. (A runtime and
its TrainJob in one ``kubectl apply`` while nicguard's watch lags: test_faults.py.)
"""

from __future__ import annotations

import json

import pytest

from tests.harness import expect
from tests.harness.objects import (
    RECIPE_PAIRS,
    Obj,
    example,
    interfaces,
    runtime,
    unique,
    with_pairs,
)
from tests.harness.stack import Stack, recipe_edited
from tests.harness.state import AS_BREAK_GLASS, BREAK_GLASS_LABEL, RECIPE, checked, eventually

pytestmark = pytest.mark.e2e

SWAPPED = with_pairs(RECIPE_PAIRS, (2, 3))  # eth3/eth4 exchanged: the same pairs, another order
# What `aicr snapshot` writes under the same key as a RecipeResult (AICR docs/agent-deployment).
SNAPSHOT = "apiVersion: aicr.run/v1alpha1\nkind: Snapshot\nmeasurements: []\n"


def test_a_snapshot_in_the_recipe_configmap_never_switches_the_recipe_check_off(
    stack: Stack,
) -> None:
    """Writing a Snapshot over the recipe is refused (RecipeInvalid); forced in anyway with the
    break-glass, it does not switch the check off: recipe-bound objects are RecipeInvalid."""
    namespace, configmap = RECIPE
    patch = json.dumps([{"op": "replace", "path": "/data", "value": {"snapshot.yaml": SNAPSHOT}}])
    target = ("configmap", configmap, "-n", namespace)
    expect.denied(
        stack.kubectl("patch", *target, "--type=json", "-p", patch, who="admin"),
        f"ConfigMap/{namespace}/{configmap}",
        "RecipeInvalid",
        'data key snapshot.yaml is not a RecipeResult (kind "Snapshot")',
    )
    name = unique("tcpxo-snapshot")
    drifted = runtime(name, pairs=SWAPPED, recipe_bound=True)
    checked(stack.kubectl("label", *target, BREAK_GLASS_LABEL, who="admin"), "labelling")
    with recipe_edited(stack, {"snapshot.yaml": SNAPSHOT}, *AS_BREAK_GLASS) as snapshot_ref:
        run = eventually(
            lambda: stack.apply(drifted, dry_run=True),
            lambda run: "[RecipeInvalid]" in run.stderr,
        )
        expect.denied(
            run,
            f"ClusterTrainingRuntime/{name}",
            "RecipeInvalid",
            f"the recipe ConfigMap {snapshot_ref} is invalid: "
            'data key snapshot.yaml is not a RecipeResult (kind "Snapshot")',
        )
    checked(stack.kubectl("label", *target, "nicguard.dev/break-glass-", who="admin"), "unlabel")
    assert stack.kubectl("get", "clustertrainingruntime", name).returncode == 1


def _mpi_runtime(name: str, launcher_pairs: list[tuple[str, str]]) -> Obj:
    obj = example("objects/mpi-launcher-runtime.yaml")
    obj["metadata"]["name"] = name
    (launcher,) = (
        j for j in obj["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "launcher"
    )
    annotations = launcher["template"]["spec"]["template"]["metadata"]["annotations"]
    annotations["networking.gke.io/interfaces"] = interfaces(launcher_pairs)
    return obj


def test_the_launcher_of_an_mpi_runtime_that_runs_ranks_is_judged(stack: Stack) -> None:
    name = unique("deepspeed-tcpxo")
    expect.denied(
        stack.apply(_mpi_runtime(name, SWAPPED)),
        f"ClusterTrainingRuntime/{name}",
        "MappingDivergesFromRecipe",
        "launcher job: at position eth3 the object maps eth4->gpu-nic-3 "
        "but the recipe records eth3->gpu-nic-2",
    )
    expect.allowed(stack.apply(_mpi_runtime(name, list(RECIPE_PAIRS))), "created")
