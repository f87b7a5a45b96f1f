"""TrainJobs: the effective wiring of their runtime plus patches, judged against live state.

Every test runs on two control planes: Trainer v2.3.0 CRDs (``spec.runtimePatches``) and v2.1.0
CRDs (``spec.podTemplateOverrides``); a real cluster serves exactly one of the two fields.
"""

from __future__ import annotations

import pytest

from tests.harness import expect
from tests.harness.objects import example, for_trainer, trainjob, unique
from tests.harness.stack import Stack, network_backed_runtime
from tests.harness.state import NETWORKS, delete_past_nicguard, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack(each_trainer: Stack) -> Stack:
    """Overrides the session ``stack`` (and so ``namespace``): once per Trainer release."""
    return each_trainer


def test_good_trainjob_is_created(stack: Stack, namespace: str) -> None:
    job = example("objects/good-trainjob.yaml")
    job["metadata"]["namespace"] = namespace
    run = stack.apply(job)
    expect.allowed(run, "trainjob.trainer.kubeflow.org/llama-pretrain created")


def test_patched_drift_is_denied(stack: Stack, namespace: str, recipe_ref: str) -> None:
    """``examples/objects/trainjob-patch-drift.yaml``, as ``podTemplateOverrides`` on v2.1."""
    job = for_trainer(example("objects/trainjob-patch-drift.yaml"), stack.trainer)
    job["metadata"]["namespace"] = namespace
    expect.denied(
        stack.apply(job),
        f"TrainJob/{namespace}/llama-finetune",
        "MappingDivergesFromRecipe",
        "at position eth1 the object maps eth8->gpu-nic-7 but the recipe records eth1->gpu-nic-0",
        "the same pairs appear in a different order",
        f"(recipe {recipe_ref})",
    )
    assert stack.kubectl("get", "trainjob", "llama-finetune", "-n", namespace).returncode == 1


def test_network_deleted_after_runtime_admitted_denies_new_trainjobs(
    stack: Stack, namespace: str
) -> None:
    net, runtime_name = network_backed_runtime(stack, namespace)
    first = trainjob(unique("job"), namespace, runtime_name, kind="TrainingRuntime")
    allowed = eventually(lambda: stack.apply(first, dry_run=True), lambda run: not run.stderr)
    expect.allowed(allowed, "created (server dry run)")

    delete_past_nicguard(stack.plane, NETWORKS, net)  # in use: only the break-glass deletes it
    job = trainjob(unique("job"), namespace, runtime_name, kind="TrainingRuntime")
    eventually(lambda: stack.apply(job, dry_run=True), lambda run: run.returncode != 0)
    expect.denied(
        stack.apply(job),
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "NetworkNotFound",
        # The wiring is the runtime's: the runtime is named as the object to fix.
        f"[NetworkNotFound] inherited unchanged from TrainingRuntime/{namespace}/{runtime_name}, "
        f"the object to fix: no Network object exists for eth8->{net} (cluster has: gpu-nic-0,",
    )
