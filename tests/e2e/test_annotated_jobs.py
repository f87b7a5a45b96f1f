"""Annotated replicatedJobs through a real apiserver: JobSet runs every job's pods, so a job that
is not wired but carries the interfaces annotation is judged by the structural and Network
rules, in the runtime and through a TrainJob's patches (docs/rules.md, What nicguard judges)."""

from __future__ import annotations

import copy

import pytest

from tests.harness import expect
from tests.harness.objects import (
    INTERFACES,
    PATCH_MANAGER,
    RECIPE_PAIRS,
    RUNTIME_PATCHES,
    Obj,
    example,
    interfaces,
    trainjob,
    unique,
)
from tests.harness.stack import Stack

pytestmark = pytest.mark.e2e

MISSING = "eth1->does-not-exist"


def _evaluator_runtime(namespace: str, *, evaluator: dict[str, str] | None) -> Obj:
    """``examples/objects/annotated-evaluator-runtime.yaml`` in ``namespace``, renamed, its
    evaluator's pod annotations replaced by ``evaluator`` (none when None)."""
    obj = example("objects/annotated-evaluator-runtime.yaml")
    obj["metadata"] = {"name": unique("torch-tcpxo-eval"), "namespace": namespace}
    job = obj["spec"]["template"]["spec"]["replicatedJobs"][1]
    metadata = job["template"]["spec"]["template"]["metadata"]
    if evaluator is None:
        metadata.pop("annotations")
    else:
        metadata["annotations"] = evaluator
    return obj


def test_a_runtime_whose_evaluator_names_a_missing_network_is_denied(
    stack: Stack, namespace: str
) -> None:
    obj = example("objects/annotated-evaluator-runtime.yaml")
    obj["metadata"]["namespace"] = namespace
    name = obj["metadata"]["name"]
    expect.denied(
        stack.apply(obj),
        f"TrainingRuntime/{namespace}/{name}",
        "NetworkNotFound",
        f"evaluator job: no Network object exists for {MISSING} (cluster has: gpu-nic-0,",
    )
    assert stack.kubectl("get", "trainingruntime", name, "-n", namespace).returncode == 1


def test_a_trainjob_patch_that_breaks_an_evaluator_is_denied(stack: Stack, namespace: str) -> None:
    """The runtime's evaluator carries no wiring; the TrainJob's runtimePatches give it one that
    names a missing Network: the TrainJob's own violation, at its patch."""
    runtime = _evaluator_runtime(namespace, evaluator=None)
    expect.allowed(stack.apply(runtime), "created")
    broken = {
        INTERFACES: interfaces([("eth1", "does-not-exist")]),
        "networking.gke.io/default-interface": "eth0",
    }
    job = trainjob(unique("eval-job"), namespace, runtime["metadata"]["name"], "TrainingRuntime")
    job["spec"][RUNTIME_PATCHES] = [_evaluator_patch(broken)]
    message = expect.denied(
        stack.apply(job),
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "NetworkNotFound",
        f"evaluator job: no Network object exists for {MISSING}",
    )
    assert "inherited unchanged" not in message
    repaired = copy.deepcopy(job)
    repaired["spec"][RUNTIME_PATCHES] = [
        _evaluator_patch({**broken, INTERFACES: interfaces(RECIPE_PAIRS[:2])})
    ]
    expect.allowed(stack.apply(repaired, dry_run=True), "created (server dry run)")


def _evaluator_patch(annotations: dict[str, str]) -> Obj:
    """A runtimePatches entry setting the evaluator job's pod annotations."""
    metadata = {"annotations": annotations}
    job = {"name": "evaluator", "template": {"spec": {"template": {"metadata": metadata}}}}
    spec = {"replicatedJobs": [job]}
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": spec}}}
