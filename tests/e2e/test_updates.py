"""Updates of an object that became non-compliant after admission (its Network was deleted).

The object is a TrainJob: every test runs on the Trainer v2.3.0 and the v2.1.0 control plane.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness import expect
from tests.harness.objects import (
    INTERFACES,
    RECIPE_PAIRS,
    interfaces,
    node_override,
    trainjob,
    unique,
)
from tests.harness.stack import Stack, network_backed_runtime
from tests.harness.state import NETWORKS, delete_past_nicguard, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack(each_trainer: Stack) -> Stack:
    """Overrides the session ``stack`` (and so ``namespace``): once per Trainer release."""
    return each_trainer


def real_decisions(stack: Stack, name: str) -> list[dict[str, Any]]:
    """nicguard's logged decisions about ``name``, dry runs left out."""
    return [
        d for d in stack.nicguard.decisions() if d["resource_name"] == name and not d["dry_run"]
    ]


@pytest.fixture
def stale_job(stack: Stack, namespace: str) -> tuple[str, str]:
    """A TrainJob admitted while its runtime's eth8 Network existed; then the Network goes."""
    net, runtime_name = network_backed_runtime(stack, namespace)
    job = trainjob(unique("job"), namespace, runtime_name, kind="TrainingRuntime")
    name = job["metadata"]["name"]
    eventually(lambda: stack.apply(job, dry_run=True), lambda run: not run.stderr)
    expect.allowed(stack.apply(job), f"trainjob.trainer.kubeflow.org/{name} created")
    delete_past_nicguard(stack.plane, NETWORKS, net)  # in use: only the break-glass deletes it
    probe = trainjob(unique("probe"), namespace, runtime_name, kind="TrainingRuntime")
    eventually(lambda: stack.apply(probe, dry_run=True), lambda run: run.returncode != 0)
    return name, net


def test_unrelated_label_change_is_allowed_with_a_warning(
    stack: Stack, namespace: str, stale_job: tuple[str, str]
) -> None:
    name, _ = stale_job
    run = stack.kubectl("label", "trainjob", name, "-n", namespace, "team=vision")
    expect.warned(
        run,
        "[NetworkNotFound] pre-existing, wiring unchanged: inherited unchanged from "
        f"TrainingRuntime/{namespace}/",
    )
    assert f"trainjob.trainer.kubeflow.org/{name} labeled" in run.stdout


def test_status_update_is_allowed_and_never_sent_to_nicguard(
    stack: Stack, namespace: str, stale_job: tuple[str, str]
) -> None:
    name, _ = stale_job
    assert [d["operation"] for d in real_decisions(stack, name)] == ["CREATE"]
    created = {"type": "Created", "status": "True", "reason": "JobsCreated", "message": ""}
    status = {"conditions": [created | {"lastTransitionTime": "2026-11-02T09:20:00Z"}]}
    patch = ["patch", "trainjob", name, "-n", namespace, "--subresource=status", "--type=merge"]
    run = stack.kubectl(*patch, "-p", json.dumps({"status": status}), who="admin")
    expect.allowed(run, f"trainjob.trainer.kubeflow.org/{name} patched")
    # A later request of the same object is logged; the status write before it was not.
    expect.warned(stack.kubectl("label", "trainjob", name, "-n", namespace, "stage=2"))
    decisions = real_decisions(stack, name)
    assert [(d["operation"], d["allowed"]) for d in decisions] == [
        ("CREATE", True),
        ("UPDATE", True),
    ]
    assert decisions[-1]["warnings"][0].startswith(
        "[NetworkNotFound] pre-existing, wiring unchanged: "
    )
    assert (decisions[-1]["decision"], decisions[-1]["grandfathered_codes"]) == (
        "allowed",
        ["NetworkNotFound"],
    )


def test_update_that_changes_the_wiring_gets_the_full_verdict(
    stack: Stack, namespace: str, stale_job: tuple[str, str]
) -> None:
    name, _ = stale_job
    rewired = interfaces([*RECIPE_PAIRS[:7], ("eth8", "gpu-nic-gone")])
    patch = {"spec": node_override(stack.trainer, {INTERFACES: rewired})}
    run = stack.kubectl(
        "patch", "trainjob", name, "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    expect.denied(
        run,
        f"TrainJob/{namespace}/{name}",
        "NetworkNotFound",
        "no Network object exists for eth8->gpu-nic-gone (cluster has: gpu-nic-0,",
    )
