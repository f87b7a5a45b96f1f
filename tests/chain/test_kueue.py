"""Kueue in the chain: TrainJobs and JobSets queued (suspended by Kueue's webhooks), admitted once
a ClusterQueue exists, and resumed through nicguard's doors by Kueue, Trainer and JobSet.

Each test queues into a LocalQueue of its own, whose ClusterQueue it creates when it means
Kueue to admit; Kueue runs for this module only (``tests/harness/kueue.py``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any, Final

import pytest

from tests.harness import expect
from tests.harness.chain import Chain, Controller
from tests.harness.chain_reads import (
    CHAIN_TIMEOUT,
    JOB_CONTROLLER_SA,
    NUM_NODES,
    allowed_writers,
    bound_runtime,
    get,
    items,
    pods,
    wait_pods,
    wiring,
)
from tests.harness.kueue import QUEUE_LABEL, running_kueue
from tests.harness.objects import conditions, runtime, trainjob, unique
from tests.harness.procs import wait_until
from tests.harness.stack import network_backed_runtime
from tests.harness.state import NETWORKS, checked, set_status

pytestmark = [pytest.mark.e2e, pytest.mark.chain]

KUEUE: Final = "kueue.x-k8s.io/v1beta2"
KUEUE_SA: Final = "system:serviceaccount:chain-system:kueue-controller-manager"
FLAVOR: Final = "chain-flavor"
GPU: Final = "nvidia.com/gpu"
# The Job controller retries a refused Pod with its back-off: allow it a minute.
RETRY_TIMEOUT: Final = 90.0


@pytest.fixture(scope="module")
def kueue(chain: Chain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    with running_kueue(chain, tmp_path_factory.mktemp("kueue")) as started:
        flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}
        checked(
            chain.plane.kubectl("admin", "apply", "-f", "-", input=json.dumps(flavor)), "flavor"
        )
        yield started


def local_queue(chain: Chain, namespace: str) -> str:
    """A LocalQueue in ``namespace`` pointing at a ClusterQueue not created yet; its name and
    the ClusterQueue's are the same."""
    name = unique("queue")
    queue = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": name},
    }
    checked(chain.plane.kubectl("admin", "create", "-f", "-", input=json.dumps(queue)), "queue")
    return name


def open_cluster_queue(chain: Chain, name: str) -> None:
    """The ClusterQueue ``name``: GPUs enough for every test, every namespace."""
    quota = {"name": GPU, "nominalQuota": "1000"}
    queue = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {"coveredResources": [GPU], "flavors": [{"name": FLAVOR, "resources": [quota]}]}
            ],
        },
    }
    checked(chain.plane.kubectl("admin", "create", "-f", "-", input=json.dumps(queue)), "CQ")


def queued(obj: dict[str, Any], queue: str) -> dict[str, Any]:
    labelled = copy.deepcopy(obj)
    labelled["metadata"].setdefault("labels", {})[QUEUE_LABEL] = queue
    return labelled


def wait_workloads(chain: Chain, namespace: str, count: int) -> list[dict[str, Any]]:
    """Kueue's Workloads in ``namespace`` once there are ``count``."""
    return wait_until(
        lambda: (
            found if len(found := items(chain, "workloads", "-n", namespace)) == count else None
        ),
        timeout=CHAIN_TIMEOUT,
        what=f"{count} Workloads in {namespace}",
        diagnose=chain.report,
    )


def reserved(workload: dict[str, Any]) -> bool:
    found = workload.get("status", {}).get("conditions", [])
    return any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in found)


def suspended(chain: Chain, kind: str, namespace: str, name: str) -> bool:
    return bool(get(chain, kind, name, "-n", namespace)["spec"].get("suspend"))


def wired_jobset(name: str, namespace: str) -> dict[str, Any]:
    """A JobSet of ``NUM_NODES`` Pods wired as the shipped runtime (the recipe's wiring)."""
    template = runtime(name)["spec"]["template"]
    (node,) = template["spec"]["replicatedJobs"]
    node["template"]["spec"] |= {"parallelism": NUM_NODES, "completions": NUM_NODES}
    node["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": template["spec"],
    }


def refusals(chain: Chain, namespace: str) -> list[dict[str, Any]]:
    return [
        d
        for d in chain.stack.nicguard.decisions()
        if d["resource_namespace"] == namespace and not d["allowed"]
    ]


def test_queued_trainjob_and_jobset_resume_through_nicguard(
    chain: Chain, kueue: Controller, namespace: str
) -> None:
    """(e) Both suspended by Kueue and held (Workloads pending, no Pod) until their
    ClusterQueue exists; then resumed by Kueue, each write admitted, and every Pod wired as
    admitted. nicguard refused nothing."""
    queue = local_queue(chain, namespace)
    name, wired = bound_runtime(chain)
    job, jobset = unique("job"), unique("jobset")
    expect.allowed(chain.stack.apply(queued(trainjob(job, namespace, name), queue)), "created")
    created = chain.plane.kubectl(
        "admin",
        "create",
        "-f",
        "-",
        input=json.dumps(queued(wired_jobset(jobset, namespace), queue)),
    )
    checked(created, "the queued JobSet")
    workloads = wait_workloads(chain, namespace, 2)
    assert not any(reserved(w) for w in workloads)
    assert suspended(chain, "trainjob", namespace, job)
    assert suspended(chain, "jobset", namespace, jobset)
    assert pods(chain, namespace, job) == pods(chain, namespace, jobset) == []

    open_cluster_queue(chain, queue)
    for owner in (job, jobset):
        assert [wiring(pod) for pod in wait_pods(chain, namespace, owner)] == [wired] * NUM_NODES
    assert refusals(chain, namespace) == []
    writers = allowed_writers(chain, namespace)
    assert KUEUE_SA in writers["TrainJob"]  # the resume, judged
    assert writers["Pod"] == {JOB_CONTROLLER_SA}


def test_network_not_ready_while_queued_is_refused_at_the_pod_door_until_ready(
    chain: Chain, kueue: Controller, namespace: str
) -> None:
    """(f) A Network goes NotReady while its TrainJob is queued: once admitted, the Pod door
    refuses the Pods (the Job's ``FailedCreate`` Event carries nicguard's message); once the
    Network is Ready again, the Pods are created."""
    queue = local_queue(chain, namespace)
    net, runtime_name = network_backed_runtime(chain.stack, namespace)
    job = unique("job")
    obj = queued(trainjob(job, namespace, runtime_name, kind="TrainingRuntime"), queue)
    expect.allowed(chain.stack.apply(obj), "created")
    wait_workloads(chain, namespace, 1)

    set_status(chain.plane, NETWORKS, net, conditions(ready=False, message="link down"))
    # Until nicguard's cache has it: a new TrainJob on the runtime is refused for it.
    probe = trainjob(unique("probe"), namespace, runtime_name, kind="TrainingRuntime")
    wait_until(
        lambda: "[NetworkNotReady]" in chain.stack.apply(probe, dry_run=True).stderr or None,
        timeout=CHAIN_TIMEOUT,
        what="nicguard to see the Network NotReady",
        diagnose=chain.report,
    )
    open_cluster_queue(chain, queue)

    def refused() -> str | None:
        selector = "reason=FailedCreate,involvedObject.kind=Job"
        for event in items(chain, "events", "-n", namespace, "--field-selector", selector):
            if "pods.nicguard.dev" in event["message"]:
                return str(event["message"])
        return None

    message = wait_until(refused, timeout=CHAIN_TIMEOUT, what="FailedCreate", diagnose=chain.report)
    assert 'admission webhook "pods.nicguard.dev" denied the request' in message, message
    assert "[NetworkNotReady]" in message, message
    assert f"->{net}" in message, message
    assert pods(chain, namespace, job) == []

    set_status(chain.plane, NETWORKS, net, conditions(ready=True))
    found = wait_until(
        lambda: p if len(p := pods(chain, namespace, job)) == NUM_NODES else None,
        timeout=RETRY_TIMEOUT,
        what=f"the Pods of {job} once the Network is Ready",
        diagnose=chain.report,
    )
    assert all(f'eth8","network":"{net}"' in wiring(pod).replace(" ", "") for pod in found)


def test_pods_appear_once_nicguard_serves_again_after_an_outage_during_admission(
    chain: Chain, kueue: Controller, namespace: str
) -> None:
    """(g) nicguard stopped while Kueue admits a queued TrainJob: the resume is refused
    (``failurePolicy: Fail``) and no Pod is created; once nicguard serves again, the Pods
    appear."""
    queue = local_queue(chain, namespace)
    name, wired = bound_runtime(chain)
    job = unique("job")
    expect.allowed(chain.stack.apply(queued(trainjob(job, namespace, name), queue)), "created")
    wait_workloads(chain, namespace, 1)

    nicguard = chain.stack.nicguard
    nicguard.stop()
    try:
        open_cluster_queue(chain, queue)
        wait_until(
            lambda: all(reserved(w) for w in wait_workloads(chain, namespace, 1)) or None,
            timeout=CHAIN_TIMEOUT,
            what="Kueue to reserve quota for the Workload",
            diagnose=chain.report,
        )
        assert suspended(chain, "trainjob", namespace, job)
        assert pods(chain, namespace, job) == []
    finally:
        nicguard.start()
    found = wait_until(
        lambda: p if len(p := pods(chain, namespace, job)) == NUM_NODES else None,
        timeout=RETRY_TIMEOUT,
        what=f"the Pods of {job} once nicguard serves",
        diagnose=chain.report,
    )
    assert [wiring(pod) for pod in found] == [wired] * NUM_NODES
