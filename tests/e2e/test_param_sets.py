"""GKENetworkParamSets on a real apiserver (docs/rules.md, NetworkNotReady).

A Network is usable only while the GKENetworkParamSet it references exists and has condition
``Ready=True``: nicguard list+watches the param sets like the Networks, so a param set GKE reports
on, turns NotReady, or that is deleted changes admission and the continuous audit without any
Network being touched. A control plane of its own: the param sets here are broken on purpose.
Each test leaves its param set Ready again, so the audit's gauges start from all passing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest

from tests.harness import expect
from tests.harness.audit import (
    DRIFT,
    RESTORED,
    Api,
    AuditEvent,
    Ref,
    audit_events,
    count,
    gauge,
    metrics,
    new_events,
)
from tests.harness.objects import (
    Obj,
    conditions,
    network,
    param_set,
    param_set_status,
    runtime,
    unique,
)
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, populate, ready_network, running
from tests.harness.state import (
    NETWORKS,
    PARAM_SETS,
    checked,
    delete_past_nicguard,
    set_status,
)

pytestmark = pytest.mark.e2e

NOT_READY: Final = "NetworkNotReady"
REASON: Final = "SubnetNotFound"
RUNTIMES_GAUGE: Final = "nicguard_audit_runtimes"
VIOLATIONS_GAUGE: Final = "nicguard_audit_violations"
AUDIT_TIMEOUT: Final = 15.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Overrides the session ``stack`` (and so ``namespace``): a control plane of its own."""
    with running(tmp_path_factory.mktemp("param-sets")) as started:
        populate(started)
        yield started


def broken(net: str) -> Obj:
    """The status GKE writes on a param set whose subnet is gone (Ready False)."""
    return param_set_status(net, ready=False, reason=REASON, message=f"subnet-{net} not found")


def wired(namespace: str, net: str) -> Obj:
    """A new TrainingRuntime (not recipe-bound) wiring eth1 to ``net``."""
    return runtime(unique("torch-gnp"), namespace=namespace, pairs=[("eth1", net)])


def subject(obj: Obj) -> str:
    return f"TrainingRuntime/{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def admit(stack: Stack, obj: Obj) -> Obj:
    """``obj`` created for real once a dry run is allowed (its Networks and param sets in use)."""
    stack.judged(obj, "")
    expect.allowed(
        stack.apply(obj), f"trainingruntime.trainer.kubeflow.org/{obj['metadata']['name']} created"
    )
    return obj


def admitted(stack: Stack, namespace: str, net: str) -> Obj:
    """A new TrainingRuntime on ``net`` (``wired``), created for real."""
    return admit(stack, wired(namespace, net))


def test_a_runtime_is_allowed_once_its_networks_param_set_is_ready(
    stack: Stack, namespace: str
) -> None:
    """Network Ready and ParamsReady is not enough while GKE has not reported on the param set
    (no status yet); once the param set is Ready=True the runtime is admitted."""
    net = unique("gpu-nic-gnp")
    both = [param_set(net), network(net)]
    checked(stack.apply(*both, who="admin"), f"creating Network {net} and its param set")
    set_status(stack.plane, NETWORKS, net, conditions(ready=True))
    obj = wired(namespace, net)
    expect.denied(
        stack.judged(obj, f"GKENetworkParamSet {net}: "),
        subject(obj),
        NOT_READY,
        f"Networks exist but are not Ready/bound: eth1->{net} "
        f"(GKENetworkParamSet {net}: no Ready condition reported) (usable on cluster: gpu-nic-0,",
    )

    set_status(stack.plane, PARAM_SETS, net, param_set_status(net, ready=True))
    admit(stack, obj)


def test_a_param_set_turning_not_ready_makes_its_network_unusable(
    stack: Stack, namespace: str
) -> None:
    net = unique("gpu-nic-gnp")
    ready_network(stack, net)
    admitted(stack, namespace, net)
    again = wired(namespace, net)  # a new name: a create gets the full verdict
    set_status(stack.plane, PARAM_SETS, net, broken(net))
    try:
        message = expect.denied(
            stack.judged(again, f"[{NOT_READY}]"),
            subject(again),
            NOT_READY,
            f"Networks exist but are not Ready/bound: eth1->{net} "
            f"(GKENetworkParamSet {net}: Ready={REASON}: subnet-{net} not found) (usable on",
        )
        assert net not in message.partition("(usable on cluster: ")[2], message
    finally:
        set_status(stack.plane, PARAM_SETS, net, param_set_status(net, ready=True))
    stack.judged(again, "")  # Ready again: usable again


def test_a_deleted_param_set_leaves_its_network_unusable_until_recreated(
    stack: Stack, namespace: str
) -> None:
    net = unique("gpu-nic-gnp")
    ready_network(stack, net)
    user = admitted(stack, namespace, net)
    expect.denied(
        stack.kubectl("delete", PARAM_SETS, net, who="admin"),
        f"GKENetworkParamSet/{net}",
        "ParamSetInUse",
        f"GKENetworkParamSet {net} backs Network {net}, used by TrainingRuntime "
        f"{namespace}/{user['metadata']['name']}",
    )
    again = wired(namespace, net)
    delete_past_nicguard(stack.plane, PARAM_SETS, net)  # in use: only the break-glass deletes it
    try:
        expect.denied(
            stack.judged(again, f"[{NOT_READY}]"),
            subject(again),
            NOT_READY,
            f"Networks exist but are not Ready/bound: eth1->{net} "
            f"(GKENetworkParamSet {net} does not exist) (usable on cluster: gpu-nic-0,",
        )
    finally:
        checked(stack.apply(param_set(net), who="admin"), "recreating the param set")
        set_status(stack.plane, PARAM_SETS, net, param_set_status(net, ready=True))
    stack.judged(again, "")  # recreated and Ready: usable again


def audit_shows(stack: Stack, failing: int) -> bool:
    """nicguard's /metrics: ``failing`` runtimes fail, all of them for NetworkNotReady."""
    samples = metrics(stack.nicguard)
    return (
        gauge(samples, RUNTIMES_GAUGE, result="fail") == failing
        and gauge(samples, VIOLATIONS_GAUGE, code=NOT_READY) == failing
    )


def flip(stack: Stack, net: str, ref: Ref, *, ready: bool) -> list[AuditEvent]:
    """Write the param set's Ready condition; wait until the audit's gauges show ``ref``
    failing (or passing again) and its Event is stored; returns the new Events."""
    api, reason = Api(stack.plane), RESTORED if ready else DRIFT
    before = audit_events(api)
    status = param_set_status(net, ready=True) if ready else broken(net)
    set_status(stack.plane, PARAM_SETS, net, status)
    wait_until(
        lambda: (
            (
                audit_shows(stack, 0 if ready else 1)
                and count(new_events(api, before), reason)[ref] >= 1
            )
            or None
        ),
        timeout=AUDIT_TIMEOUT,
        what=f"the audit to show {reason} for {ref}",
        diagnose=stack.report,
    )
    return new_events(api, before)


def test_the_audit_follows_the_param_set_of_an_admitted_runtimes_network(
    stack: Stack, namespace: str
) -> None:
    net = unique("gpu-nic-gnp")
    ready_network(stack, net)
    obj = admitted(stack, namespace, net)
    ref: Ref = ("TrainingRuntime", namespace, obj["metadata"]["name"])
    wait_until(
        lambda: audit_shows(stack, 0) or None,
        timeout=AUDIT_TIMEOUT,
        what="every runtime to pass in the audit",
        diagnose=stack.report,
    )

    drift = flip(stack, net, ref, ready=False)
    try:
        assert set(count(drift, DRIFT)) == {ref}, drift  # nothing else names this Network
        (event,) = (e for e in drift if e.reason == DRIFT)
        assert (event.type, event.namespace) == ("Warning", namespace), event
        assert event.note.startswith(f"[{NOT_READY}] "), event
        assert f"eth1->{net} (GKENetworkParamSet {net}: Ready={REASON}: " in event.note, event
    finally:
        restore = flip(stack, net, ref, ready=True)
    assert set(count(restore, RESTORED)) == {ref}, restore
    (event,) = (e for e in restore if e.reason == RESTORED)
    assert (event.type, event.namespace) == ("Normal", namespace), event
