"""Adopting nicguard on a cluster that already has drift (docs/rollout.md, docs/rules.md): the
rollout mode ``enforcement=warn``, TrainJobs on a runtime that drifted under break-glass, what
leaving break-glass does, and a team's unbound copy of the runtime in another order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_operations import nicguard_annotations
from tests.harness import expect
from tests.harness.objects import (
    RECIPE_PAIRS,
    WEBHOOK,
    as_list,
    runtime,
    trainjob,
    unique,
    with_pairs,
)
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, populate, running
from tests.harness.state import AS_BREAK_GLASS, checked, eventually

pytestmark = pytest.mark.e2e

SWAPPED = with_pairs(RECIPE_PAIRS, (2, 3))  # eth3/eth4 exchanged
DRIFT = "at position eth3 the object maps eth4->gpu-nic-3 but the recipe records eth3->gpu-nic-2"
AUDIT_TIMEOUT = 10.0
READY_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def warn_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A control plane of its own whose nicguard runs with ``--enforcement=warn``.

    Set up under ``deny`` (the harness waits until the webhook denies its sentinel and the
    caches answer), then nicguard restarts in warn mode on the same ports and certificates."""
    workdir = tmp_path_factory.mktemp("cluster-enforcement-warn")
    with running(workdir) as started:
        populate(started)
        started.nicguard.stop()
        started.nicguard.args.append("--enforcement=warn")
        started.nicguard.start()
        probe = runtime(unique("tcpxo-warn-probe"), pairs=SWAPPED, recipe_bound=True)
        eventually(
            lambda: started.apply(probe, who="admin", dry_run=True),
            lambda run: run.returncode == 0 and "[MappingDivergesFromRecipe]" in run.stderr,
            timeout=READY_TIMEOUT,
        )
        yield started


def audit_event(stack: Stack, name: str, verb: str) -> dict[str, Any]:
    """The apiserver's ResponseComplete audit event of ``verb`` on ``name`` (the log is async)."""

    def find() -> dict[str, Any] | None:
        for event in stack.plane.audit_events():
            ref = event.get("objectRef")
            if (
                isinstance(ref, dict)
                and ref.get("name") == name
                and event.get("verb") == verb
                and event.get("stage") == "ResponseComplete"
            ):
                return event
        return None

    return wait_until(find, timeout=AUDIT_TIMEOUT, what=f"an audit event of {verb} {name}")


def created_under_break_glass(stack: Stack, obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"]["nicguard.dev/break-glass"] = "true"
    run = stack.plane.kubectl("admin", *AS_BREAK_GLASS, "create", "-f", "-", input=as_list([obj]))
    checked(run, "creating under break-glass")


# --- enforcement=warn -----------------------------------------------------------------------


def test_enforcement_warn_creates_what_deny_refuses_with_kubectl_warnings(
    warn_stack: Stack, stack: Stack
) -> None:
    name = unique("tcpxo-rollout")
    drifted = runtime(name, pairs=SWAPPED, recipe_bound=True)
    # The same object on the default (deny) stack: refused.
    expect.denied(
        stack.apply(drifted), f"ClusterTrainingRuntime/{name}", "MappingDivergesFromRecipe"
    )
    run = warn_stack.apply(drifted)
    expect.warned(run, f"[MappingDivergesFromRecipe] {DRIFT[:60]}")
    assert f"clustertrainingruntime.trainer.kubeflow.org/{name} created" in run.stdout
    checked(warn_stack.kubectl("get", "clustertrainingruntime", name), "the object exists")
    # The apiserver's audit log, nicguard's decision line and its metrics say "warned".
    annotations = nicguard_annotations(audit_event(warn_stack, name, "create"))
    assert annotations[f"{WEBHOOK}/decision"] == "warned"
    assert annotations[f"{WEBHOOK}/violations"] == "MappingDivergesFromRecipe"
    assert f"{WEBHOOK}/grandfathered" not in annotations
    (line,) = [
        d
        for d in warn_stack.nicguard.decisions()
        if d["resource_name"] == name and not d["dry_run"]
    ]
    assert (line["allowed"], line["decision"]) == (True, "warned")
    assert line["violation_codes"] == ["MappingDivergesFromRecipe"]
    _, metrics = warn_stack.nicguard.probe("/metrics")
    assert 'nicguard_admission_requests_total{decision="warned"' in metrics
    # The continuous audit still fails it: that is what a rollout reads before deny.
    wait_until(
        lambda: failing(warn_stack, "MappingDivergesFromRecipe") >= 1 or None,
        timeout=AUDIT_TIMEOUT,
        what="the audit to fail the drifted runtime",
    )


def failing(stack: Stack, code: str) -> float:
    """``nicguard_audit_violations{code}``: runtimes the continuous audit fails with ``code``."""
    sample = f'nicguard_audit_violations{{code="{code}"}} '
    _, metrics = stack.nicguard.probe("/metrics")
    values = [
        float(line[len(sample) :]) for line in metrics.splitlines() if line.startswith(sample)
    ]
    return values[0] if values else 0.0


def test_enforcement_warn_still_refuses_nothing_it_would_allow(warn_stack: Stack) -> None:
    name = unique("tcpxo-rollout-good")
    expect.allowed(
        warn_stack.apply(runtime(name, recipe_bound=True)),
        f"clustertrainingruntime.trainer.kubeflow.org/{name} created",
    )


# --- a TrainJob on a runtime drifted under break-glass ------------------------------------------


def test_a_trainjob_on_a_runtime_drifted_under_break_glass_is_denied_naming_the_runtime(
    stack: Stack, namespace: str
) -> None:
    name = unique("tcpxo-glass-drift")
    created_under_break_glass(stack, runtime(name, pairs=SWAPPED, recipe_bound=True))
    job = trainjob(unique("job"), namespace, name)
    expect.denied(
        stack.apply(job),
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "MappingDivergesFromRecipe",
        f"[MappingDivergesFromRecipe] inherited unchanged from ClusterTrainingRuntime/{name}, "
        f"the object to fix: {DRIFT}",
    )


def test_leaving_break_glass_re_checks_nothing_the_update_is_grandfathered(stack: Stack) -> None:
    """docs/rules.md and manifests/README.md: removing the label is an UPDATE that keeps the
    wiring, so the drift is grandfathered (a warning, ``grandfathered`` in the audit log)."""
    name = unique("tcpxo-glass-leave")
    created_under_break_glass(stack, runtime(name, pairs=SWAPPED, recipe_bound=True))
    run = stack.kubectl("label", "clustertrainingruntime", name, "nicguard.dev/break-glass-")
    expect.warned(run, f"[MappingDivergesFromRecipe] pre-existing, wiring unchanged: {DRIFT[:40]}")
    assert f"clustertrainingruntime.trainer.kubeflow.org/{name} unlabeled" in run.stdout
    annotations = nicguard_annotations(audit_event(stack, name, "patch"))
    assert annotations[f"{WEBHOOK}/decision"] == "allowed"
    assert annotations[f"{WEBHOOK}/violations"] == ""
    assert annotations[f"{WEBHOOK}/grandfathered"] == "MappingDivergesFromRecipe"
    # A change of the wiring gets the full verdict.
    rewired = runtime(name, pairs=with_pairs(RECIPE_PAIRS, (0, 1)), recipe_bound=True)
    expect.denied(
        stack.apply(rewired), f"ClusterTrainingRuntime/{name}", "MappingDivergesFromRecipe"
    )


# --- a team's unbound copy in another order ---------------------------------------------------


def test_an_unbound_copy_in_another_order_is_created_and_held_to_the_order_once_labelled(
    stack: Stack, namespace: str
) -> None:
    name = unique("team-tcpxo")
    run = stack.apply(runtime(name, namespace=namespace, pairs=SWAPPED))
    expect.allowed(run, f"trainingruntime.trainer.kubeflow.org/{name} created")
    labelled = runtime(name, namespace=namespace, pairs=SWAPPED, recipe_bound=True)
    expect.denied(
        stack.apply(labelled),
        f"TrainingRuntime/{namespace}/{name}",
        "MappingDivergesFromRecipe",
        DRIFT,
    )
