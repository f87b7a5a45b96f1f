"""ClusterTrainingRuntimes and TrainingRuntimes through a real apiserver, applied by a non-admin."""

from __future__ import annotations

import pytest

from tests.harness import expect
from tests.harness.objects import (
    RECIPE_PAIRS,
    conditions,
    example,
    load,
    runtime,
    unique,
    with_pairs,
)
from tests.harness.stack import Stack, ready_network
from tests.harness.state import NETWORKS, eventually, set_status

pytestmark = pytest.mark.e2e


def test_good_recipe_bound_runtime_is_created(stack: Stack) -> None:
    name = unique("tcpxo-good")
    run = stack.apply(runtime(name, recipe_bound=True))
    expect.allowed(run, f"clustertrainingruntime.trainer.kubeflow.org/{name} created")
    assert stack.kubectl("get", "clustertrainingruntime", name).returncode == 0


def test_drifted_runtime_is_denied(stack: Stack, recipe_ref: str) -> None:
    name = unique("tcpxo-drifted")
    # eth7 and eth8 trade Networks: the pairs themselves differ from the recipe's.
    drifted = [*RECIPE_PAIRS[:6], ("eth7", "gpu-nic-7"), ("eth8", "gpu-nic-6")]
    run = stack.apply(runtime(name, pairs=drifted, recipe_bound=True))
    message = expect.denied(
        run,
        f"ClusterTrainingRuntime/{name}",
        "MappingDivergesFromRecipe",
        "at position eth7 the object maps eth7->gpu-nic-7 but the recipe records eth7->gpu-nic-6",
        f"(recipe {recipe_ref})",
    )
    assert "different order" not in message
    assert stack.kubectl("get", "clustertrainingruntime", name).returncode == 1


def test_swapped_order_is_denied_and_named_as_such(stack: Stack, recipe_ref: str) -> None:
    """``examples/objects/drifted-runtime.yaml``: eth3 and eth4 entries in swapped order."""
    drifted = example("objects/drifted-runtime.yaml")
    drifted["metadata"]["name"] = name = unique("tcpxo-swapped")
    drifted["metadata"]["labels"] = {"nicguard.dev/recipe-bound": "true"}
    expect.denied(
        stack.apply(drifted),
        f"ClusterTrainingRuntime/{name}",
        "MappingDivergesFromRecipe",
        "at position eth3 the object maps eth4->gpu-nic-3 but the recipe records eth3->gpu-nic-2",
        "the same pairs appear in a different order (order is part of the contract)",
        f"(recipe {recipe_ref})",
    )


def test_runtime_naming_a_missing_network_is_denied(stack: Stack, namespace: str) -> None:
    missing = example("objects/missing-network-runtime.yaml")
    missing["metadata"]["namespace"] = namespace
    expect.denied(
        stack.apply(missing),
        f"TrainingRuntime/{namespace}/torch-tcpxo",
        "NetworkNotFound",
        "no Network object exists for eth8->gpu-nic-8 (cluster has: gpu-nic-0, gpu-nic-1,",
    )


def test_runtime_on_a_network_that_is_not_ready_is_denied(stack: Stack, namespace: str) -> None:
    """A fresh Network (its param set Ready) whose own conditions turn False, written through
    the status subresource."""
    net = unique("gpu-nic-unready")
    ready_network(stack, net)
    status = conditions(ready=False, reason="GNPParamsNotReady", message="subnet gone")
    set_status(stack.plane, NETWORKS, net, status)
    name = unique("torch-tcpxo")
    obj = runtime(name, namespace=namespace, pairs=[*RECIPE_PAIRS[:7], ("eth8", net)])
    # nicguard's Network cache follows a watch: wait until it holds the written status.
    eventually(
        lambda: stack.apply(obj, dry_run=True),
        lambda run: "GNPParamsNotReady: subnet gone" in run.stderr,
    )
    expect.denied(
        stack.apply(obj),
        f"TrainingRuntime/{namespace}/{name}",
        "NetworkNotReady",
        f"Networks exist but are not Ready/bound: eth8->{net} ",
        "(Ready=GNPParamsNotReady: subnet gone; ParamsReady=GNPParamsNotReady: subnet gone)",
    )


def test_hand_typed_wiring_reports_every_violation(stack: Stack, namespace: str) -> None:
    (hand_typed,) = (
        o for o in load("objects/malformed-runtimes.yaml") if o["metadata"]["name"] == "hand-typed"
    )
    hand_typed["metadata"]["namespace"] = namespace
    message = expect.denied(
        stack.apply(hand_typed),
        f"TrainingRuntime/{namespace}/hand-typed",
        "DefaultInterfaceInvalid",
    )
    for code in ("InterfaceNameInvalid", "NetworkReserved", "InterfaceDuplicated"):
        assert f"\n[{code}] " in message
    assert "[NetworkDuplicated] network gpu-nic-2 is mapped to both eth3:0 and eth4" in message


def test_unwired_runtime_is_allowed_untouched(stack: Stack) -> None:
    name = unique("torch-plain")
    plain = example("cluster/torch-distributed.yaml")
    plain["metadata"]["name"] = name
    expect.allowed(
        stack.apply(plain), f"clustertrainingruntime.trainer.kubeflow.org/{name} created"
    )
    # Wired, not recipe-bound: the recipe's pairs in another order are placed right.
    swapped = runtime(unique("tcpxo-unbound"), pairs=with_pairs(RECIPE_PAIRS, (2, 3)))
    expect.allowed(stack.apply(swapped), "created")


def test_a_teams_runtime_misplacing_a_recipe_network_is_refused(
    stack: Stack, namespace: str
) -> None:
    name = unique("team-two-nics")
    # Any subset of the recipe's Networks, but gpu-nic-5 belongs on eth6.
    misplaced = runtime(
        name, namespace=namespace, pairs=[("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-5")]
    )
    expect.denied(
        stack.apply(misplaced),
        f"TrainingRuntime/{namespace}/{name}",
        "NetworkMisplaced",
        "Networks on another interface than the recipe gives them: eth2->gpu-nic-5 (the recipe "
        "places gpu-nic-5 on eth6) (recipe ",
    )
    placed = runtime(
        name, namespace=namespace, pairs=[("eth1", "gpu-nic-0"), ("eth6", "gpu-nic-5")]
    )
    expect.allowed(stack.apply(placed), "created")
