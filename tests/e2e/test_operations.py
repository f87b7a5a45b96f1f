"""Operating nicguard: the apiserver's audit log, fail-closed outages, break-glass."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import expect
from tests.harness.objects import RECIPE_PAIRS, WEBHOOK, as_list, runtime, unique, with_pairs
from tests.harness.procs import wait_until
from tests.harness.stack import Stack
from tests.harness.webhook import wait_effective

pytestmark = pytest.mark.e2e

AUDIT_TIMEOUT = 10.0


def audited(stack: Stack, name: str) -> dict[str, Any]:
    """The ResponseComplete audit event of the create of ``name`` (polled: the log is async)."""

    def find() -> dict[str, Any] | None:
        for event in stack.plane.audit_events():
            ref = event.get("objectRef")
            if (
                isinstance(ref, dict)
                and ref.get("name") == name
                and event.get("verb") == "create"
                and event.get("stage") == "ResponseComplete"
            ):
                return event
        return None

    return wait_until(find, timeout=AUDIT_TIMEOUT, what=f"an audit event for {name}")


def nicguard_annotations(event: dict[str, Any]) -> dict[str, str]:
    annotations: dict[str, str] = event.get("annotations") or {}
    return {k: v for k, v in annotations.items() if k.startswith(f"{WEBHOOK}/")}


def test_audit_log_carries_nicguard_audit_annotations(stack: Stack, recipe_ref: str) -> None:
    good, drifted = unique("tcpxo-audit-good"), unique("tcpxo-audit-drift")
    expect.allowed(stack.apply(runtime(good, recipe_bound=True)), "created")
    swapped = with_pairs(RECIPE_PAIRS, (0, 1))
    expect.denied(
        stack.apply(runtime(drifted, pairs=swapped, recipe_bound=True)),
        f"ClusterTrainingRuntime/{drifted}",
        "MappingDivergesFromRecipe",
    )
    allowed, denied = audited(stack, good), audited(stack, drifted)
    assert nicguard_annotations(allowed) == {
        f"{WEBHOOK}/decision": "allowed",
        f"{WEBHOOK}/violations": "",
        f"{WEBHOOK}/recipe": recipe_ref,
    }
    assert nicguard_annotations(denied) == {
        f"{WEBHOOK}/decision": "denied",
        f"{WEBHOOK}/violations": "MappingDivergesFromRecipe",
        f"{WEBHOOK}/recipe": recipe_ref,
    }
    assert denied["user"]["username"] == "alice"
    assert denied["responseStatus"]["code"] == 403


def test_nicguard_down_blocks_writes_because_failure_policy_is_fail(stack: Stack) -> None:
    name = unique("tcpxo-outage")
    obj = runtime(name, recipe_bound=True)
    stack.nicguard.stop()
    try:
        run = stack.apply(obj)
        assert run.returncode == 1, expect.shown(run)
        assert f'failed calling webhook "{WEBHOOK}"' in run.stderr, expect.shown(run)
        assert f"{stack.nicguard.url}" in run.stderr, expect.shown(run)
        assert "connect: connection refused" in run.stderr, expect.shown(run)
        assert stack.kubectl("get", "clustertrainingruntime", name).returncode == 1
    finally:
        stack.nicguard.start()
        wait_effective(stack.plane, stack.nicguard, WEBHOOK)
    expect.allowed(stack.apply(obj), f"clustertrainingruntime.trainer.kubeflow.org/{name} created")


def test_break_glass_needs_label_and_group(stack: Stack) -> None:
    """The shipped matchCondition: the break-glass group skips nicguard on labelled objects."""
    name = unique("tcpxo-glass")
    obj = runtime(name, pairs=with_pairs(RECIPE_PAIRS, (6, 7)), recipe_bound=True)
    obj["metadata"]["labels"]["nicguard.dev/break-glass"] = "true"
    subject, code = f"ClusterTrainingRuntime/{name}", "MappingDivergesFromRecipe"
    expect.denied(stack.apply(obj), subject, code)  # alice: label alone bypasses nothing
    # The editor role ships unbound; manifests/README.md (Break-glass, impersonation) binds it to
    # the impersonated user, not to the group.
    bind = ["create", "clusterrolebinding", "nicguard-break-glass-editor-user"]
    bind += ["--clusterrole=nicguard-break-glass-editor", "--user=nicguard-break-glass"]
    expect.allowed(stack.plane.kubectl("admin", *bind))
    as_glass = ["--as=nicguard-break-glass", "--as-group=nicguard:break-glass"]
    run = stack.plane.kubectl("admin", *as_glass, "create", "-f", "-", input=as_list([obj]))
    expect.allowed(run, f"clustertrainingruntime.trainer.kubeflow.org/{name} created")
    label = stack.kubectl("label", "clustertrainingruntime", name, "team=vision")
    expect.warned(label, f"[{code}] pre-existing, wiring unchanged: ")
