"""The workload doors through a real apiserver serving JobSet's CRD (v0.12.0): JobSets, Jobs and
Pods written with ``kubectl``, judged by ``workloads.nicguard.dev`` and ``pods.nicguard.dev``;
``nicguard audit --include-workloads`` against the same cluster.

No JobSet or Job controller runs: the objects are written as those controllers (and Kueue, and
anyone with the RBAC) would write them, as admin.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

import pytest

from tests.harness import expect
from tests.harness.audit import nicguard_audit
from tests.harness.objects import (
    INTERFACES,
    RECIPE_PAIRS,
    Obj,
    example,
    interfaces,
    trainjob,
    unique,
)
from tests.harness.stack import Stack
from tests.harness.state import AS_BREAK_GLASS, BREAK_GLASS_LABEL, Run, checked

pytestmark = pytest.mark.e2e

WORKLOADS: Final = "workloads.nicguard.dev"
PODS: Final = "pods.nicguard.dev"
JOB_SET_API: Final = "jobset.x-k8s.io/v1alpha2"
TCPXO: Final = "torch-distributed-tcpxo"
# eth1 and eth2 trade the recipe's gpu-nic-0 and gpu-nic-1: every pair misplaced but those two
# Networks still the recipe's.
SWAPPED: Final = [("eth1", "gpu-nic-1"), ("eth2", "gpu-nic-0"), *RECIPE_PAIRS[2:]]
LOST: Final = [*RECIPE_PAIRS[:7], ("eth8", "gpu-nic-missing")]
DEFAULT_INTERFACE: Final = "networking.gke.io/default-interface"
CONTAINERS: Final = [{"name": "trainer", "image": "registry.example/trainer:1"}]


def owner(kind: str, name: str, api_version: str = "batch/v1", uid: str = "") -> dict[str, Any]:
    """The ``ownerReferences`` entry of the controller ``kind`` ``name``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid or "4f0c2b6e-1d3a-4c5b-8e7f-9a0b1c2d3e4f",
        "controller": True,
    }


def job_set(name: str, namespace: str, *, owners: list[dict[str, Any]] | None = None) -> Obj:
    """The JobSet Trainer builds from the shipped TCPXO runtime: its replicatedJobs as the
    runtime holds them (the recipe's wiring on the node job), suspended as Kueue queues it."""
    runtime = example(f"cluster/{TCPXO}.yaml")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owners:
        metadata["ownerReferences"] = owners
    spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
    return {"apiVersion": JOB_SET_API, "kind": "JobSet", "metadata": metadata, "spec": spec}


def node_template(obj: Obj) -> dict[str, Any]:
    (node,) = (j for j in obj["spec"]["replicatedJobs"] if j["name"] == "node")
    template: dict[str, Any] = node["template"]["spec"]["template"]
    return template


def wiring(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The annotations of a wired pod: ``pairs`` after eth0, eth0 the default interface."""
    return {INTERFACES: interfaces(pairs), DEFAULT_INTERFACE: "eth0"}


def job(name: str, namespace: str, pairs: list[tuple[str, str]]) -> Obj:
    annotations = wiring(pairs)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": CONTAINERS},
            },
        },
    }


def pod(
    name: str,
    namespace: str,
    pairs: list[tuple[str, str]] | None,
    owners: list[dict[str, Any]] | None = None,
) -> Obj:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if pairs is not None:
        metadata["annotations"] = wiring(pairs)
    if owners:
        metadata["ownerReferences"] = owners
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": CONTAINERS},
    }


def patched(stack: Stack, kind: str, name: str, namespace: str, kind_of: str, body: Any) -> Run:
    """``kubectl patch`` of ``kind`` ``name`` as admin, a ``kind_of`` (merge, json) patch."""
    args = ("patch", kind, name, "-n", namespace, "--type", kind_of, "-p", json.dumps(body))
    return stack.kubectl(*args, who="admin")


def test_a_queued_jobsets_swapped_interfaces_are_refused(stack: Stack, namespace: str) -> None:
    """JobSet v0.12.0 lets a suspended JobSet's pod-template annotations change (for Kueue):
    a merge patch that swaps two Networks' interfaces is refused; the JobSet keeps its own."""
    name = unique("llama")
    queued = job_set(name, namespace)
    queued["spec"]["suspend"] = True
    expect.allowed(stack.apply(queued, who="admin"), f"jobset.jobset.x-k8s.io/{name} created")
    swapped = copy.deepcopy(queued["spec"]["replicatedJobs"])
    node_template({"spec": {"replicatedJobs": swapped}})["metadata"]["annotations"][INTERFACES] = (
        interfaces(SWAPPED)
    )
    run = patched(stack, "jobset", name, namespace, "merge", {"spec": {"replicatedJobs": swapped}})
    expect.denied(
        run,
        f"JobSet/{namespace}/{name}",
        "NetworkMisplaced",
        f"JobSet {namespace}/{name}: node job: Networks on another interface than the recipe",
        "eth1->gpu-nic-1 (the recipe places gpu-nic-1 on eth2)",
        webhook=WORKLOADS,
    )
    kept = stack.kubectl("get", "jobset", name, "-n", namespace, "-o", "json", who="admin")
    held = node_template(json.loads(checked(kept, "reading the JobSet").stdout))
    original = node_template(queued)["metadata"]["annotations"][INTERFACES]
    assert held["metadata"]["annotations"][INTERFACES] == original


def test_a_jobset_with_an_admitted_trainjobs_wiring_is_admitted(
    stack: Stack, namespace: str
) -> None:
    """A TrainJob on the shipped runtime is admitted; the JobSet Trainer then creates for it
    (the runtime's replicatedJobs, owned by the TrainJob) is admitted too."""
    name = unique("llama")
    expect.allowed(stack.apply(trainjob(name, namespace, TCPXO)), "created")
    got = stack.kubectl("get", "trainjob", name, "-n", namespace, "-o", "jsonpath={.metadata.uid}")
    uid = checked(got, "reading the TrainJob's uid").stdout.strip()
    produced = job_set(
        name, namespace, owners=[owner("TrainJob", name, "trainer.kubeflow.org/v1alpha1", uid)]
    )
    expect.allowed(stack.apply(produced, who="admin"), f"jobset.jobset.x-k8s.io/{name} created")


@pytest.mark.parametrize(
    ("pairs", "code", "fragment"),
    [
        (SWAPPED, "NetworkMisplaced", "eth2->gpu-nic-0"),
        (LOST, "NetworkNotFound", "gpu-nic-missing"),
    ],
    ids=["misplaced", "missing"],
)
def test_a_job_and_a_bare_pod_with_wrong_networks_are_refused(
    stack: Stack, namespace: str, pairs: list[tuple[str, str]], code: str, fragment: str
) -> None:
    job_name, pod_name = unique("llama-node-0"), unique("llama-node-0-0")
    run = stack.apply(job(job_name, namespace, pairs), who="admin")
    subject = f"Job {namespace}/{job_name}"
    expect.denied(run, f"Job/{namespace}/{job_name}", code, subject, fragment, webhook=WORKLOADS)
    # As the Job controller would create it: the message names the Job it belongs to.
    owned = pod(pod_name, namespace, pairs, owners=[owner("Job", job_name)])
    run = stack.apply(owned, who="admin")
    subject = f"Pod {namespace}/{pod_name} (of Job {namespace}/{job_name}): "
    expect.denied(run, f"Pod/{namespace}/{pod_name}", code, subject, fragment, webhook=PODS)
    bare_name = unique("bare")
    run = stack.apply(pod(bare_name, namespace, pairs), who="admin")
    subject = f"Pod {namespace}/{bare_name}: "
    expect.denied(run, f"Pod/{namespace}/{bare_name}", code, subject, fragment, webhook=PODS)
    listed = stack.kubectl("get", "pods,jobs", "-n", namespace, "-o", "name", who="admin")
    assert checked(listed, "listing").stdout == ""


def test_a_pod_without_the_annotation_never_reaches_nicguard(stack: Stack, namespace: str) -> None:
    before = stack.nicguard.judged_requests()
    plain = [pod(unique("web"), namespace, None), job(unique("batch"), namespace, [])]
    del plain[1]["spec"]["template"]["metadata"]["annotations"]
    unwired = job_set(unique("plain"), namespace)
    del node_template(unwired)["metadata"]["annotations"][INTERFACES]
    expect.allowed(stack.apply(*plain, unwired, who="admin"), "created")
    assert stack.nicguard.judged_requests() == before
    wired = pod(unique("wired"), namespace, list(RECIPE_PAIRS))
    expect.allowed(stack.apply(wired, who="admin"), "created")
    assert stack.nicguard.judged_requests() == before + 1


def gated(pod_: Obj) -> Obj:
    """``pod_`` held by a scheduling gate, as Kueue holds the Pods it queues."""
    pod_["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return pod_


def annotations_of(stack: Stack, kind: str, name: str, namespace: str, path: str) -> Any:
    """The annotations at jsonpath ``path`` of the stored ``kind`` ``name``."""
    got = stack.kubectl("get", kind, name, "-n", namespace, "-o", "json", who="admin")
    found: Any = json.loads(checked(got, f"reading {kind} {name}").stdout)
    for step in path.split("."):
        found = found[int(step)] if step.isdigit() else found[step]
    return found


def test_a_gated_pods_wiring_changed_by_annotate_is_judged_as_at_create(
    stack: Stack, namespace: str
) -> None:
    """A gated Pod has no sandbox: its NICs will be what its annotation says when it gets one.
    Swapping an admitted Pod's wiring, or wiring an unwired one with a missing Network, is
    refused; removing the wiring is allowed."""
    name = unique("llama-node-0-0")
    expect.allowed(stack.apply(gated(pod(name, namespace, list(RECIPE_PAIRS))), who="admin"))
    annotate = ("annotate", "--overwrite", "pod", name, "-n", namespace)
    run = stack.kubectl(*annotate, f"{INTERFACES}={interfaces(SWAPPED)}", who="admin")
    subject = f"Pod {namespace}/{name}: "
    fragment = "eth1->gpu-nic-1 (the recipe places gpu-nic-1 on eth2)"
    expect.denied(
        run, f"Pod/{namespace}/{name}", "NetworkMisplaced", subject, fragment, webhook=PODS
    )
    held = annotations_of(stack, "pod", name, namespace, "metadata.annotations")
    assert held[INTERFACES] == interfaces(RECIPE_PAIRS)
    unwired = unique("plain")
    expect.allowed(stack.apply(gated(pod(unwired, namespace, None)), who="admin"))
    wiring_of_lost = [f"{key}={value}" for key, value in wiring(LOST).items()]
    run = stack.kubectl("annotate", "pod", unwired, "-n", namespace, *wiring_of_lost, who="admin")
    subject = f"Pod {namespace}/{unwired}: "
    expect.denied(
        run,
        f"Pod/{namespace}/{unwired}",
        "NetworkNotFound",
        subject,
        "gpu-nic-missing",
        webhook=PODS,
    )
    removed = stack.kubectl(*annotate, f"{INTERFACES}-", f"{DEFAULT_INTERFACE}-", who="admin")
    expect.allowed(removed, f"pod/{name} annotated")


def test_pod_writes_that_leave_the_wiring_alone_never_reach_nicguard(
    stack: Stack, namespace: str
) -> None:
    """A status write, another annotation and a label on a wired Pod are never sent; the
    change of its default interface is."""
    name = unique("llama-node-0-0")
    expect.allowed(stack.apply(gated(pod(name, namespace, list(RECIPE_PAIRS))), who="admin"))
    before = stack.nicguard.judged_requests()
    condition = {"type": "example.com/probe", "status": "True"}
    status = json.dumps({"status": {"conditions": [condition]}})
    writes = [
        ("patch", "pod", name, "--subresource=status", "--type=merge", "-p", status),
        ("annotate", "pod", name, "kueue.x-k8s.io/workload=llama"),
        ("label", "pod", name, "team=a"),
        ("annotate", "--overwrite", "pod", name, f"{INTERFACES}={interfaces(RECIPE_PAIRS)}"),
    ]
    for write in writes:
        run = stack.kubectl(*write, "-n", namespace, who="admin")
        assert run.returncode == 0, expect.shown(run)
    assert stack.nicguard.judged_requests() == before
    conditions = annotations_of(stack, "pod", name, namespace, "status.conditions")
    assert condition in [{k: c[k] for k in ("type", "status")} for c in conditions]
    run = stack.kubectl(
        "annotate",
        "--overwrite",
        "pod",
        name,
        "-n",
        namespace,
        f"{DEFAULT_INTERFACE}=eth9",
        who="admin",
    )
    expect.denied(run, f"Pod/{namespace}/{name}", "DefaultInterfaceInvalid", webhook=PODS)
    assert stack.nicguard.judged_requests() == before + 1


def test_the_wiring_removed_from_a_suspended_jobset_or_job_is_refused(
    stack: Stack, namespace: str
) -> None:
    """The Jobs a resumed JobSet creates (and the Pods a resumed Job creates) would get only
    eth0: a patch that drops the interfaces annotation is refused, the object keeps it."""
    name = unique("llama")
    queued = job_set(name, namespace)
    queued["spec"]["suspend"] = True
    expect.allowed(stack.apply(queued, who="admin"), f"jobset.jobset.x-k8s.io/{name} created")
    (position,) = [i for i, j in enumerate(queued["spec"]["replicatedJobs"]) if j["name"] == "node"]
    key = INTERFACES.replace("/", "~1")
    path = f"/spec/replicatedJobs/{position}/template/spec/template/metadata/annotations/{key}"
    run = patched(stack, "jobset", name, namespace, "json", [{"op": "remove", "path": path}])
    expect.denied(
        run,
        f"JobSet/{namespace}/{name}",
        "InterfacesAnnotationMissing",
        f"JobSet {namespace}/{name}: node job: the update removes the {INTERFACES} annotation "
        "from the node pod template",
        "would get no GPU NICs",
        webhook=WORKLOADS,
    )
    stored = f"spec.replicatedJobs.{position}.template.spec.template.metadata.annotations"
    assert INTERFACES in annotations_of(stack, "jobset", name, namespace, stored)
    job_name = unique("llama-node-0")
    expect.allowed(stack.apply(job(job_name, namespace, list(RECIPE_PAIRS)), who="admin"))
    removal = [{"op": "remove", "path": f"/spec/template/metadata/annotations/{key}"}]
    run = patched(stack, "job", job_name, namespace, "json", removal)
    subject = f"Job {namespace}/{job_name}: the update removes"
    expect.denied(
        run,
        f"Job/{namespace}/{job_name}",
        "InterfacesAnnotationMissing",
        subject,
        webhook=WORKLOADS,
    )


def gateway(name: str, namespace: str, default: str | None) -> Obj:
    """A Pod of a gateway Deployment's ReplicaSet on Google's "multiple host NICs" pattern
    (tests/fixtures/upstream/gke-docs/compute-gpu-multi-host-nic-pod.yaml): eth0 on the pod
    network, a second interface, the default route where ``default`` says (None: no key)."""
    obj = pod(
        name, namespace, [("eth1", "gpu-nic-0")], owners=[owner("ReplicaSet", "gw", "apps/v1")]
    )
    annotations = obj["metadata"]["annotations"]
    del annotations[DEFAULT_INTERFACE]
    if default is not None:
        annotations[DEFAULT_INTERFACE] = default
    return obj


@pytest.mark.parametrize("default", ["eth1", None], ids=["default-route-on-eth1", "no-key"])
def test_a_multi_network_pod_gke_runs_is_admitted(
    stack: Stack, namespace: str, default: str | None
) -> None:
    """Unbound, a Pod is held to GKE, not to AICR's eth0: admitted at the Pod door."""
    before = stack.nicguard.judged_requests()
    name = unique("gw")
    expect.allowed(
        stack.apply(gateway(name, namespace, default), who="admin"), f"pod/{name} created"
    )
    assert stack.nicguard.judged_requests() == before + 1


def test_a_pod_whose_default_interface_is_not_in_its_list_is_refused(
    stack: Stack, namespace: str
) -> None:
    name = unique("gw")
    expect.denied(
        stack.apply(gateway(name, namespace, "eth2"), who="admin"),
        f"Pod/{namespace}/{name}",
        "DefaultInterfaceInvalid",
        f"Pod {namespace}/{name} (of ReplicaSet {namespace}/gw): ",
        'networking.gke.io/default-interface is "eth2", which names no interface of '
        "networking.gke.io/interfaces (it lists eth0, eth1)",
        webhook=PODS,
    )


def test_audit_include_workloads_names_what_runs_wired_wrong(stack: Stack, namespace: str) -> None:
    """A Pod nicguard would refuse, created with the break-glass (as before nicguard was
    installed), fails the audit with its owner named; the admitted JobSet passes."""
    good = unique("llama")
    expect.allowed(stack.apply(job_set(good, namespace), who="admin"), "created")
    lost, job_name = unique("lost"), unique("llama-node-0")
    broken = pod(lost, namespace, LOST, owners=[owner("Job", job_name)])
    broken["metadata"]["labels"] = dict([BREAK_GLASS_LABEL.split("=")])
    created = stack.plane.kubectl(
        "admin", "create", "-f", "-", *AS_BREAK_GLASS, input=json.dumps(broken)
    )
    expect.allowed(created, "created")
    run = nicguard_audit(stack.plane, "--include-workloads", "--namespace", namespace)
    assert run.returncode == 1, expect.shown(run)
    blocks = run.stdout.rstrip("\n").split("\n\n")
    assert [b.splitlines()[0] for b in blocks[:-1]] == [
        f"PASS JobSet {namespace}/{good}",
        f"FAIL Pod {namespace}/{lost} (of Job {namespace}/{job_name})",
    ]
    assert "[NetworkNotFound]" in blocks[1]
    assert "gpu-nic-missing" in blocks[1]
    assert blocks[-1] == "2 audited, 1 pass, 0 warn, 1 fail"


def binding(name: str, namespace: str, annotations: dict[str, str]) -> Obj:
    """A Binding of Pod ``name`` to a node, carrying ``annotations`` (the apiserver copies them
    onto the Pod)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    target = {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-1"}
    return {"apiVersion": "v1", "kind": "Binding", "metadata": metadata, "target": target}


def bind(stack: Stack, through: str, obj: Obj) -> Run:
    """``obj`` (a Binding) created as admin through ``pods/binding`` or the older ``bindings``
    resource (what ``kubectl create`` of a Binding uses)."""
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    if through == "bindings":
        return stack.plane.kubectl("admin", "create", "-f", "-", input=json.dumps(obj))
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
    return stack.plane.kubectl("admin", "create", "--raw", path, "-f", "-", input=json.dumps(obj))


def test_a_status_write_that_rewires_a_pod_is_refused(stack: Stack, namespace: str) -> None:
    """kube-apiserver's status strategy keeps the request's annotations: a status write is a
    way to rewire a Pod, judged as its update; the Pod keeps its admitted wiring."""
    name = unique("llama-node-0-0")
    expect.allowed(stack.apply(pod(name, namespace, list(RECIPE_PAIRS)), who="admin"))
    rewired = json.dumps({"metadata": {"annotations": {INTERFACES: interfaces(LOST)}}})
    run = stack.kubectl(
        "patch", "pod", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", rewired, who="admin",
    )  # fmt: skip
    expect.denied(
        run,
        f"Pod/{namespace}/{name}",
        "NetworkNotFound",
        f"Pod {namespace}/{name}: ",
        "gpu-nic-missing",
        webhook=PODS,
    )
    held = annotations_of(stack, "pod", name, namespace, "metadata.annotations")
    assert held[INTERFACES] == interfaces(RECIPE_PAIRS)


@pytest.mark.parametrize("through", ["pods/binding", "bindings"])
def test_a_binding_that_rewires_a_pod_is_refused_and_a_schedulers_never_reaches_nicguard(
    stack: Stack, namespace: str, through: str
) -> None:
    """The apiserver copies a Binding's annotations onto the Pod it binds: a Binding carrying
    wiring is judged as the Pod's new wiring, refused, and the Pod stays unbound and as it was.
    A Binding without wiring (what a scheduler writes) is never sent to nicguard."""
    name = unique("llama-node-0-0")
    expect.allowed(stack.apply(pod(name, namespace, list(RECIPE_PAIRS)), who="admin"))
    run = bind(stack, through, binding(name, namespace, {INTERFACES: interfaces(LOST)}))
    expect.denied(
        run,
        f"Binding/{namespace}/{name}",
        "NetworkNotFound",
        f"Pod {namespace}/{name}: ",
        "gpu-nic-missing",
        webhook=PODS,
    )
    stored = annotations_of(stack, "pod", name, namespace, "metadata")
    assert stored["annotations"][INTERFACES] == interfaces(RECIPE_PAIRS)
    before = stack.nicguard.judged_requests()
    scheduled = bind(stack, through, binding(name, namespace, {}))
    assert scheduled.returncode == 0, expect.shown(scheduled)
    assert annotations_of(stack, "pod", name, namespace, "spec.nodeName") == "gpu-node-1"
    assert stack.nicguard.judged_requests() == before
