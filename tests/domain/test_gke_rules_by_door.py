"""Bound templates are held to AICR's conventions, unbound ones to what GKE enforces, at every
door: runtime, TrainJob, runtime snapshot, JobSet, Job and Pod (docs/rules.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import pytest

from app.domain.evaluate import evaluate
from app.domain.policy import Policy
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    PAIRS,
    bare,
    batch_job,
    codes,
    copy_of,
    entries,
    job_set,
    network,
    node_job,
    pod,
    review,
    runtime,
    snapshot,
    snapshot_review,
    trainjob,
    wired,
)

Annotations = Mapping[str, object]

REPLICA_SET = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "gateway-7d9f8",
    "uid": "0d5e7f4a-3c2b-4a19-8e6d-5b4c3a2f1e0d",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _judge(obj: Mapping[str, object], *objects: object) -> Verdict:
    return evaluate(review(obj), snapshot(*objects), Policy())


def runtime_with(annotations: Annotations, bound: bool) -> dict[str, object]:
    # torch-distributed-tcpxo is bound to the recipe by name; "plain" to nothing.
    return runtime(annotations=annotations) if bound else runtime("plain", annotations=annotations)


def _runtime_door(annotations: Annotations, *, bound: bool) -> Verdict:
    return _judge(runtime_with(annotations, bound))


def _trainjob(annotations: Annotations, *, bound: bool) -> Verdict:
    name = "torch-distributed-tcpxo" if bound else "plain"
    return _judge(trainjob(name), runtime_with(annotations, bound))


def _runtime_snapshot(annotations: Annotations, *, bound: bool) -> Verdict:
    request = snapshot_review(copy_of(bare(runtime_with(annotations, bound))))
    return evaluate(request, snapshot(), Policy())


def _job_set(annotations: Annotations, *, bound: bool) -> Verdict:
    assert not bound
    return _judge(job_set(node_job(annotations)))


def _job(annotations: Annotations, *, bound: bool) -> Verdict:
    assert not bound
    return _judge(batch_job(annotations))


def _pod(annotations: Annotations, *, bound: bool) -> Verdict:
    assert not bound
    return _judge(pod(annotations, owners=[REPLICA_SET]))


Door = Callable[..., Verdict]
BINDABLE: dict[str, Door] = {
    "runtime": _runtime_door,
    "trainjob": _trainjob,
    "runtime-snapshot": _runtime_snapshot,
}
UNBOUND_ONLY: dict[str, Door] = {"jobset": _job_set, "job": _job, "pod": _pod}

# Each wiring: what an unbound template gets (GKE's rules), and what a bound one gets (AICR's).
WIRINGS: dict[str, tuple[Annotations, tuple[str, ...], tuple[str, ...]]] = {
    "default-route-on-eth1": (wired(PAIRS, default="eth1"), (), ("DefaultInterfaceInvalid",)),
    "no-default-interface-key": (wired(PAIRS, default=None), (), ("DefaultInterfaceInvalid",)),
    "key-names-no-listed-interface": (
        wired(PAIRS, default="eth9"),
        ("DefaultInterfaceInvalid",),
        ("DefaultInterfaceInvalid",),
    ),
    "eth0-listed-last": (
        {
            INTERFACES: json.dumps(entries([*PAIRS, ("eth0", "default")])),
            DEFAULT_INTERFACE: "eth0",
        },
        (),
        ("PrimaryInterfaceInvalid",),
    ),
    "pod-network-on-a-second-interface": (
        wired([*PAIRS, ("eth9", "pod-network")]),
        (),
        ("NetworkReserved", "MappingDivergesFromRecipe"),
    ),
    "an-invalid-linux-name": (
        wired([*PAIRS[:7], ("eth:8", PAIRS[7][1])]),
        ("InterfaceNameInvalid", "NetworkMisplaced"),
        ("InterfaceNameInvalid", "MappingDivergesFromRecipe"),
    ),
    "a-network-twice": (
        wired([*PAIRS, ("eth9", PAIRS[0][1])]),
        ("NetworkDuplicated", "NetworkMisplaced"),
        ("NetworkDuplicated", "MappingDivergesFromRecipe"),
    ),
}


@pytest.mark.parametrize("wiring", WIRINGS)
@pytest.mark.parametrize("door", [*BINDABLE, *UNBOUND_ONLY])
def test_an_unbound_template_is_held_to_gke(door: str, wiring: str) -> None:
    annotations, unbound, _ = WIRINGS[wiring]
    judge = {**BINDABLE, **UNBOUND_ONLY}[door]
    assert codes(judge(annotations, bound=False)) == unbound


@pytest.mark.parametrize("wiring", WIRINGS)
@pytest.mark.parametrize("door", BINDABLE)
def test_a_bound_template_keeps_aicrs_conventions(door: str, wiring: str) -> None:
    annotations, _, bound = WIRINGS[wiring]
    assert codes(BINDABLE[door](annotations, bound=True)) == bound


def test_a_trainjob_on_a_bound_runtime_is_refused_for_its_runtimes_default() -> None:
    verdict = _trainjob(wired(PAIRS, default=None), bound=True)
    (violation,) = verdict.violations
    assert violation.field == "spec.runtimeRef"
    assert "networking.gke.io/default-interface is missing" in violation.message


def test_the_gateway_pod_of_a_replica_set_is_admitted_with_its_default_route_on_eth1() -> None:
    # Google's "multiple host NICs" pattern (tests/fixtures/upstream/gke-multi-host-nic-pod.yaml
    # holds the upstream snippet): eth0 on the pod network, the default route on eth1.
    gateway = {
        DEFAULT_INTERFACE: "eth1",
        INTERFACES: json.dumps(entries([("eth0", "default"), ("eth1", "secondary-network")])),
    }
    verdict = _judge(
        pod(gateway, owners=[REPLICA_SET]), network("secondary-network", network_type="L3")
    )
    assert (verdict.allowed, verdict.violations, verdict.warnings) == (True, (), ())


def test_a_pod_whose_key_names_no_listed_interface_says_which_it_lists() -> None:
    verdict = _pod(wired(PAIRS[:1], default="eth3"), bound=False)
    (violation,) = verdict.violations
    assert violation.field == f"metadata.annotations[{DEFAULT_INTERFACE}]"
    assert violation.message == (
        "Pod team-a/llama-node-0-0-x2k (of ReplicaSet team-a/gateway-7d9f8): "
        'networking.gke.io/default-interface is "eth3", which names no interface of '
        "networking.gke.io/interfaces (it lists eth0, eth1); the pod's default route needs one "
        "of them"
    )
