"""The recipe ConfigMap is live state: an edit governs the next apply within seconds."""

from __future__ import annotations

import pytest
import yaml

from tests.harness import expect
from tests.harness.objects import RECIPE_PAIRS, runtime, unique
from tests.harness.stack import Stack, recipe_edited
from tests.harness.state import eventually

pytestmark = pytest.mark.e2e

RECIPE_EDIT_TIMEOUT = 10.0
# The recipe re-recorded with the Networks of eth3 and eth4 exchanged.
EDITED = [*RECIPE_PAIRS[:2], ("eth3", "gpu-nic-3"), ("eth4", "gpu-nic-2"), *RECIPE_PAIRS[4:]]


def test_recipe_edit_governs_the_next_apply(stack: Stack) -> None:
    name = unique("tcpxo-recipe")
    obj = runtime(name, recipe_bound=True)
    expect.allowed(stack.apply(obj, dry_run=True), "created (server dry run)")
    mapping = [{"interfaceName": i, "network": n} for i, n in EDITED]
    with recipe_edited(stack, {"tcpxoInterfaces": yaml.safe_dump(mapping)}) as edited_ref:
        eventually(
            lambda: stack.apply(obj, dry_run=True),
            lambda run: run.returncode != 0,
            timeout=RECIPE_EDIT_TIMEOUT,
        )
        expect.denied(
            stack.apply(obj),
            f"ClusterTrainingRuntime/{name}",
            "MappingDivergesFromRecipe",
            "at position eth3 the object maps eth3->gpu-nic-2 "
            "but the recipe records eth3->gpu-nic-3",
            f"(recipe {edited_ref})",
        )
        # ... and an object matching the new recipe is now the one admitted.
        matching = runtime(unique("tcpxo-recipe-new"), pairs=EDITED, recipe_bound=True)
        expect.allowed(stack.apply(matching), "created")


def test_server_dry_run_is_judged_like_a_real_apply(stack: Stack, namespace: str) -> None:
    name = unique("tcpxo-dry")
    drifted = runtime(name, namespace=namespace, pairs=EDITED, recipe_bound=True)
    subject, code = f"TrainingRuntime/{namespace}/{name}", "MappingDivergesFromRecipe"
    dry = expect.denied(stack.apply(drifted, dry_run=True), subject, code)
    real = expect.denied(stack.apply(drifted), subject, code)
    assert dry == real
    good = runtime(name, namespace=namespace, recipe_bound=True)
    run = stack.apply(good, dry_run=True)
    expect.allowed(run, f"trainingruntime.trainer.kubeflow.org/{name} created (server dry run)")
    assert stack.kubectl("get", "trainingruntime", name, "-n", namespace).returncode == 1
    judged = [d for d in stack.nicguard.decisions() if d["resource_name"] == name]
    assert [(d["dry_run"], d["allowed"]) for d in judged] == [
        (True, False),
        (False, False),
        (True, True),
    ]
