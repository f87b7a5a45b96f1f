"""NICs by DRA claim on a real apiserver (SPEC §16): ``resource.k8s.io/v1`` is served without CRDs.

The DeviceClasses GKE installs, ResourceClaimTemplates in two namespaces as cluster-toolkit's
``default-rdma`` (every RDMA NIC in one, one NIC in the other), and TrainingRuntimes bound to
``a4-dranet`` by label: each code through ``kubectl apply``, one runtime admitted, the
continuous audit following a template that goes away, and a runtime snapshot whose claims Trainer
would read by case folding refused. A control plane of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import pytest

from app.domain.kinds import Kind
from tests.builders import runtime
from tests.harness import expect
from tests.harness.audit import (
    DRIFT,
    Api,
    AuditEvent,
    audit_events,
    count,
    gauge,
    metrics,
    new_events,
    nicguard_audit,
    ref_of,
)
from tests.harness.dra import NETDEV, RDMA, claim_template, device_class
from tests.harness.objects import Obj, as_list, interfaces, unique
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, ready_network, running
from tests.harness.state import AS_BREAK_GLASS, checked, create_namespace, eventually
from tests.support.claimed_snapshots import FOLDED, TAMPERED, claimed_copy

pytestmark = pytest.mark.e2e

PROFILE: Final = "a4-dranet"
NETWORK: Final = "rdma-annotated"
GVNIC: Final = "gvnic-l3"
"""The second gVNIC as an L3 Network, which a pod may attach beside its RDMA claim."""
AUDIT_TIMEOUT: Final = 15.0
TEMPLATE_DOOR: Final = "claimtemplates.nicguard.dev"


def dra_runtime(
    namespace: str,
    *templates: str,
    profile: str | None = PROFILE,
    annotations: dict[str, str] | None = None,
    kind: Kind = Kind.TRAINING_RUNTIME,
) -> Obj:
    """A TrainingRuntime (or ``kind``) whose node pods claim ``templates`` (bound to ``profile``
    by label)."""
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    pod: dict[str, Any] = {
        "containers": [
            {
                "name": "node",
                "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                "resources": {"claims": [{"name": c["name"]} for c in claims]},
            }
        ]
    }
    if claims:
        pod["resourceClaims"] = claims
    node = {"metadata": {"annotations": annotations or {}}, "spec": pod}
    return runtime(
        unique("dranet"),
        kind=kind,
        namespace=namespace,
        labels=None if profile is None else {"nicguard.dev/profile": profile},
        jobs=[{"name": "node", "template": {"spec": {"template": node}}}],
    )


def subject(obj: Obj) -> str:
    return f"TrainingRuntime/{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def described(obj: Obj) -> str:
    """A runtime as nicguard's messages name it."""
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/" if "namespace" in metadata else ""
    return f"{obj['kind']} {where}{metadata['name']}"


@pytest.fixture(scope="module")
def dra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, str, str]]:
    """The DeviceClasses, a namespace with a template of every RDMA NIC and one with a template
    of one NIC, both named ``default-rdma``; a ready Network for annotation wiring."""
    with running(tmp_path_factory.mktemp("dra")) as stack:
        everything, single = unique("all-nics"), unique("one-nic")
        for namespace in (everything, single):
            create_namespace(stack.plane, namespace)
        objects = [
            device_class(RDMA),
            device_class(NETDEV),
            claim_template(everything, "default-rdma", allocationMode="All"),
            claim_template(single, "default-rdma"),  # ExactCount, count 1: the defaults
        ]
        applied = stack.plane.kubectl("admin", "apply", "-f", "-", input=as_list(objects))
        checked(applied, "creating the DeviceClasses and ResourceClaimTemplates")
        ready_network(stack, NETWORK, mode="RDMA")
        ready_network(stack, GVNIC, mode=None, network_type="L3")
        yield stack, everything, single


def test_a_runtime_claiming_every_rdma_nic_is_admitted(dra: tuple[Stack, str, str]) -> None:
    stack, everything, _ = dra
    obj = dra_runtime(everything, "default-rdma")
    stack.judged(obj, "", who="admin")
    expect.allowed(stack.apply(obj, who="admin"), "created")


@pytest.mark.parametrize(
    ("namespace", "templates", "code", "fragment"),
    [
        pytest.param(
            "single",
            ("default-rdma",),
            "RdmaClaimMismatch",
            "1 mrdma.google.com device",
            id="one-nic-of-eight",
        ),
        pytest.param("everything", (), "RdmaClaimMissing", PROFILE, id="no-claim"),
        pytest.param(
            "everything",
            ("nccl-channel", "rdma-missing"),
            "ResourceClaimTemplateNotFound",
            "rdma-missing",
            id="missing-template",
        ),
    ],
)
def test_each_dra_code_through_kubectl_apply(
    dra: tuple[Stack, str, str],
    namespace: str,
    templates: tuple[str, ...],
    code: str,
    fragment: str,
) -> None:
    stack, everything, single = dra
    obj = dra_runtime(everything if namespace == "everything" else single, *templates)
    expect.denied(stack.judged(obj, f"[{code}]", who="admin"), subject(obj), code, fragment)


@pytest.mark.parametrize("profile", [PROFILE, None], ids=["bound", "unbound"])
def test_annotation_and_dra_wiring_together_are_a_wiring_mode_conflict(
    dra: tuple[Stack, str, str], profile: str | None
) -> None:
    stack, everything, _ = dra
    wiring = {
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": interfaces([("eth1", NETWORK)]),
    }
    obj = dra_runtime(everything, "default-rdma", profile=profile, annotations=wiring)
    expect.denied(
        stack.judged(obj, "[WiringModeConflict]", who="admin"),
        subject(obj),
        "WiringModeConflict",
        "must not manage the same NICs",
    )


def dra_pod(namespace: str, network: str) -> Obj:
    """A Pod of a ReplicaSet that claims every RDMA NIC by ``default-rdma`` and attaches
    ``network`` at eth1 by the annotation (unbound: the Pod door has no binding)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": unique("dranet-pod"),
            "namespace": namespace,
            "annotations": {"networking.gke.io/interfaces": interfaces([("eth1", network)])},
        },
        "spec": {
            "resourceClaims": [{"name": "rdma", "resourceClaimTemplateName": "default-rdma"}],
            "containers": [
                {
                    "name": "node",
                    "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                    "resources": {"claims": [{"name": "rdma"}]},
                }
            ],
        },
    }


def test_a_dra_pod_with_an_l3_gvnic_is_admitted(dra: tuple[Stack, str, str]) -> None:
    """Google's DRANET guide lets a pod attach the second gVNIC beside its claim: the driver
    does not manage a gVNIC with secondary ranges (SPEC §16)."""
    stack, everything, _ = dra
    obj = dra_pod(everything, GVNIC)
    stack.judged(obj, "", who="admin")
    expect.allowed(stack.apply(obj, who="admin"), f"pod/{obj['metadata']['name']} created")


def test_a_dra_pod_with_a_device_network_is_a_wiring_mode_conflict(
    dra: tuple[Stack, str, str],
) -> None:
    stack, everything, _ = dra
    obj = dra_pod(everything, NETWORK)
    name = obj["metadata"]["name"]
    expect.denied(
        stack.judged(obj, "[WiringModeConflict]", who="admin"),
        f"Pod/{everything}/{name}",
        "WiringModeConflict",
        f"eth1->{NETWORK}, a Device-type Network, and the pod claims mrdma.google.com devices",
        webhook="pods.nicguard.dev",
    )


def test_the_audit_follows_a_template_that_goes_away(dra: tuple[Stack, str, str]) -> None:
    """An admitted runtime's template deleted: its audit result fails, naming the template."""
    stack, everything, _ = dra
    own = unique("rdma")
    checked(
        stack.plane.kubectl(
            "admin",
            "apply",
            "-f",
            "-",
            input=as_list([claim_template(everything, own, allocationMode="All")]),
        ),
        "creating a template of its own",
    )
    obj = dra_runtime(everything, own)
    stack.judged(obj, "", who="admin")
    expect.allowed(stack.apply(obj, who="admin"), "created")
    api = Api(stack.plane)
    before = audit_events(api)
    checked(
        stack.plane.kubectl("admin", "delete", "resourceclaimtemplate", own, "-n", everything),
        "deleting the template",
    )
    ref = ("TrainingRuntime", everything, obj["metadata"]["name"])
    wait_until(
        lambda: (
            (
                gauge(
                    metrics(stack.nicguard),
                    "nicguard_audit_violations",
                    code="ResourceClaimTemplateNotFound",
                )
                >= 1
                and count(new_events(api, before), DRIFT)[ref] == 1
            )
            or None
        ),
        timeout=AUDIT_TIMEOUT,
        what="the runtime's audit result to fail with a WiringDrift Event",
        diagnose=stack.nicguard.report,
    )


@pytest.mark.parametrize("tampering", list(TAMPERED))
def test_a_snapshot_whose_claims_trainer_reads_by_folding_is_refused(
    dra: tuple[Stack, str, str], tampering: str
) -> None:
    """examples/dranet's runtime as Trainer copies it for a TrainJob of the namespace whose
    default-rdma claims every NIC, server-side applied by field manager trainer: admitted. The
    same copy edited so that Trainer's case-folding decoder reads rdma-one-nic where the exact
    keys say default-rdma: refused, naming the folded key."""
    stack, everything, _ = dra
    copy = claimed_copy()
    name = f"{unique('tj')}-runtime-snapshot"
    copy["metadata"] |= {"name": name, "namespace": everything}
    applied = stack.judged(copy, "", who="admin")
    assert applied.returncode == 0, applied.stderr
    trainer = ["--server-side", "--field-manager=trainer", "--force-conflicts"]
    expect.allowed(
        stack.plane.kubectl("admin", "apply", *trainer, "-f", "-", input=as_list([copy])),
        f"configmap/{name} serverside-applied",
    )
    text = claimed_copy(TAMPERED[tampering])["data"]["runtime"]
    patch = json.dumps({"data": {"runtime": text}})
    edit = stack.kubectl(
        "patch", "configmap", name, "-n", everything, "--type=merge", "-p", patch, who="admin"
    )
    message = expect.denied(
        edit,
        f"ConfigMap/{everything}/{name}",
        "RuntimeSnapshotInvalid",
        f"{FOLDED[tampering]}` may be read by Trainer as",
        webhook="snapshot.nicguard.dev",
    )
    assert "(Go matches field names ignoring case)" in message


@pytest.mark.parametrize("kind", [Kind.TRAINING_RUNTIME, Kind.CLUSTER_TRAINING_RUNTIME])
def test_a_template_recreated_with_one_nic_is_refused_and_past_break_glass_audited(
    dra: tuple[Stack, str, str], kind: Kind
) -> None:
    """An admitted runtime's template deleted and created again with ``count: 1``: refused at
    the template door, naming the runtime; created under break-glass, the audit (Event, metric,
    ``nicguard audit``) fails the runtime, naming the namespace."""
    stack, _, _ = dra
    namespace = unique("recreated")
    create_namespace(stack.plane, namespace)
    # A ClusterTrainingRuntime reserves its names in every namespace: one naming default-rdma
    # would fail from the start on the fixture's one-NIC default-rdma.
    name = "default-rdma" if kind is Kind.TRAINING_RUNTIME else unique("rdma")
    every_nic = claim_template(namespace, name, allocationMode="All")
    checked(stack.apply(every_nic, who="admin"), "creating the template")
    obj = dra_runtime(namespace, name, kind=kind)
    stack.judged(obj, "", who="admin")
    expect.allowed(stack.apply(obj, who="admin"), "created")
    holder = described(obj)
    checked(
        stack.kubectl("delete", "resourceclaimtemplate", name, "-n", namespace, who="admin"),
        "deleting the template",
    )
    one_nic = claim_template(namespace, name)  # ExactCount, count 1: the defaults
    # The door reads the runtime from its cache, which follows the create by watch.
    eventually(
        lambda: stack.apply(one_nic, who="admin", dry_run=True),
        lambda run: "[RdmaClaimMismatch]" in run.stderr,
    )
    expect.denied(
        stack.apply(one_nic, who="admin"),
        f"ResourceClaimTemplate/{namespace}/{name}",
        "RdmaClaimMismatch",
        f"ResourceClaimTemplate {namespace}/{name} requests 1 {RDMA} device, but {holder}, "
        f"bound to profile {PROFILE} (8 RDMA NICs per node), names it",
        webhook=TEMPLATE_DOOR,
    )
    api = Api(stack.plane)
    before = audit_events(api)
    one_nic["metadata"]["labels"] = {"nicguard.dev/break-glass": "true"}
    glass = stack.plane.kubectl(
        "admin", *AS_BREAK_GLASS, "create", "-f", "-", input=as_list([one_nic])
    )
    checked(glass, "creating the template under break-glass")
    ref = ref_of(obj)

    def drift() -> str | None:
        for event in new_events(api, before):
            if event.reason == DRIFT and event.regarding == ref and namespace in event.note:
                return event.note
        return None

    note = wait_until(
        drift,
        timeout=AUDIT_TIMEOUT,
        what="a WiringDrift Event on the runtime naming the namespace",
        diagnose=stack.nicguard.report,
    )
    assert "[RdmaClaimMismatch]" in note
    assert (
        gauge(metrics(stack.nicguard), "nicguard_audit_violations", code="RdmaClaimMismatch") >= 1
    )
    where = [] if kind is Kind.CLUSTER_TRAINING_RUNTIME else ["--namespace", namespace]
    audited = nicguard_audit(stack.plane, *where)
    assert audited.returncode == 1, audited.stdout + audited.stderr
    block = next(
        b
        for b in audited.stdout.split("\n\n")
        if b.startswith(f"FAIL {ref[0]} ")
        and b.splitlines()[0].endswith(f"{ref[1] + '/' if ref[1] else ''}{ref[2]}")
    )
    assert "[RdmaClaimMismatch]" in block
    assert namespace in block


@pytest.mark.parametrize("runtime_first", [True, False], ids=["runtime-first", "template-first"])
def test_a_device_network_runtime_and_the_template_it_names_conflict_in_either_order(
    dra: tuple[Stack, str, str], runtime_first: bool
) -> None:
    """An unbound runtime mapping a Device-type Network and naming a template that requests RDMA
    NICs is WiringModeConflict whichever is written first: at the runtime's door when the
    template exists, at the template's when the runtime was admitted before it (SPEC §16)."""
    stack, everything, _ = dra
    name = unique("my-rdma")
    wiring = {"networking.gke.io/interfaces": interfaces([("eth1", NETWORK)])}
    obj = dra_runtime(everything, name, profile=None, annotations=wiring)
    template = claim_template(everything, name, allocationMode="All")
    template_name = f"ResourceClaimTemplate/{everything}/{name}"
    if runtime_first:
        expect.allowed(stack.apply(obj, who="admin"))  # nothing it names requests RDMA NICs yet
        stack.judged(template, "[WiringModeConflict]", who="admin")  # the runtime is cached
        expect.denied(
            stack.apply(template, who="admin"),
            template_name,
            "WiringModeConflict",
            f"{described(obj)}, which names it, would then be wired both ways: ",
            f"eth1->{NETWORK}, a Device-type Network",
            webhook=TEMPLATE_DOOR,
        )
    else:
        expect.allowed(stack.apply(template, who="admin"))
        expect.denied(
            stack.judged(obj, "[WiringModeConflict]", who="admin"),
            subject(obj),
            "WiringModeConflict",
            f"eth1->{NETWORK}, a Device-type Network, and the pod claims mrdma.google.com",
        )


def _drift_on(stack: Stack, ref: tuple[str, str, str], before: list[AuditEvent], code: str) -> str:
    """The note of the WiringDrift Event with ``code`` the audit puts on ``ref`` after
    ``before`` (a template deleted, then created: the sweep may see it gone in between)."""
    api = Api(stack.plane)

    def drift() -> str | None:
        for event in new_events(api, before):
            if event.reason == DRIFT and event.regarding == ref and f"[{code}]" in event.note:
                return event.note
        return None

    note = wait_until(
        drift,
        timeout=AUDIT_TIMEOUT,
        what=f"a WiringDrift Event on {'/'.join(ref)}",
        diagnose=stack.nicguard.report,
    )
    assert note is not None
    return note


def _audited_block(stack: Stack, header: str, *args: str) -> str:
    """``nicguard audit ARGS`` fails, and the block it prints under ``header``."""
    audited = nicguard_audit(stack.plane, *args)
    assert audited.returncode == 1, audited.stdout + audited.stderr
    blocks = audited.stdout.split("\n\n")
    found = [b for b in blocks if b.startswith(header)]
    assert found, audited.stdout
    return found[0]


@pytest.mark.parametrize("copy_first", [True, False], ids=["snapshot-first", "template-first"])
def test_a_template_a_snapshot_claims_is_held_to_its_profile_in_either_order(
    dra: tuple[Stack, str, str], copy_first: bool
) -> None:
    """A TrainJob's snapshot, edited to claim my-rdma while it requested every NIC, then my-rdma
    deleted and created again with one NIC: the template door cannot know the copy without an
    API call (no ConfigMap is cached), so ``nicguard audit`` fails the copy. The other order:
    the copy's edit is refused at the snapshot door (SPEC §16)."""
    stack, everything, _ = dra
    name = unique("my-rdma")
    copy = claimed_copy(
        ("resourceClaimTemplateName: default-rdma", f"resourceClaimTemplateName: {name}")
    )
    trainjob = unique("tj")
    copy["metadata"] |= {"name": f"{trainjob}-runtime-snapshot", "namespace": everything}
    copy["metadata"]["ownerReferences"][0]["name"] = trainjob
    configmap = f"ConfigMap/{everything}/{trainjob}-runtime-snapshot"
    lead = (
        f"ConfigMap {everything}/{trainjob}-runtime-snapshot (runtime snapshot of TrainJob "
        f"{everything}/{trainjob}: ClusterTrainingRuntime torch-distributed-dranet)"
    )
    one_nic = claim_template(everything, name)  # ExactCount, count 1: the defaults
    if not copy_first:
        checked(stack.apply(one_nic, who="admin"), "creating the one-NIC template")
        expect.denied(
            stack.judged(copy, "[RdmaClaimMismatch]", who="admin"),
            configmap,
            "RdmaClaimMismatch",
            f"{lead}: bound to profile {PROFILE} (8 RDMA NICs per node), but "
            f"ResourceClaimTemplate {everything}/{name} requests 1 {RDMA} device",
            webhook="snapshot.nicguard.dev",
        )
        return
    every_nic = claim_template(everything, name, allocationMode="All")
    checked(stack.apply(every_nic, who="admin"), "creating the template of every NIC")
    stack.judged(copy, "", who="admin")
    trainer = ["--server-side", "--field-manager=trainer", "--force-conflicts"]
    expect.allowed(
        stack.plane.kubectl("admin", "apply", *trainer, "-f", "-", input=as_list([copy])),
        "serverside-applied",
    )
    before = audit_events(Api(stack.plane))
    checked(
        stack.kubectl("delete", "resourceclaimtemplate", name, "-n", everything, who="admin"),
        "deleting the template",
    )
    expect.allowed(stack.apply(one_nic, who="admin"), "created")
    # The writer lists the namespace's ConfigMaps when its templates change: an Event on the copy.
    copied = ("ConfigMap", everything, f"{trainjob}-runtime-snapshot")
    note = _drift_on(stack, copied, before, "RdmaClaimMismatch")
    assert note.startswith(f"[RdmaClaimMismatch] {lead}: bound to profile {PROFILE}")
    assert (
        gauge(
            metrics(stack.nicguard), "nicguard_audit_claimant_violations", code="RdmaClaimMismatch"
        )
        >= 1
    )
    block = _audited_block(stack, f"FAIL {lead}", "--namespace", everything)
    assert block.splitlines()[1] == (
        f"  [RdmaClaimMismatch] {lead}: bound to profile {PROFILE} (8 RDMA NICs per node), but "
        f"ResourceClaimTemplate {everything}/{name} requests 1 {RDMA} device: request exactly "
        f"one {RDMA}, allocationMode All or ExactCount count 8"
    )


@pytest.mark.parametrize("pod_first", [True, False], ids=["pod-first", "template-first"])
def test_a_device_network_pod_and_the_template_it_names_are_found_in_either_order(
    dra: tuple[Stack, str, str], pod_first: bool
) -> None:
    """A Pod mapping a Device-type Network and naming a template that does not exist yet is
    admitted; the template, created after it, cannot be judged with the Pod without an API
    call (no Pod is cached): ``nicguard audit --include-workloads`` reports the conflict. The
    other order is refused at the Pod door (SPEC §16)."""
    stack, everything, _ = dra
    name = unique("my-rdma")
    pod = dra_pod(everything, NETWORK)
    pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = name
    pod_name = pod["metadata"]["name"]
    template = claim_template(everything, name, allocationMode="All")
    conflict = f"eth1->{NETWORK}, a Device-type Network, and the pod claims {RDMA} devices"
    if not pod_first:
        checked(stack.apply(template, who="admin"), "creating the template")
        expect.denied(
            stack.judged(pod, "[WiringModeConflict]", who="admin"),
            f"Pod/{everything}/{pod_name}",
            "WiringModeConflict",
            conflict,
            webhook="pods.nicguard.dev",
        )
        return
    expect.allowed(stack.apply(pod, who="admin"), f"pod/{pod_name} created")
    before = audit_events(Api(stack.plane))
    expect.allowed(stack.apply(template, who="admin"), "created")
    note = _drift_on(stack, ("Pod", everything, pod_name), before, "WiringModeConflict")
    assert note.startswith("[WiringModeConflict] ")
    assert conflict in note
    block = _audited_block(
        stack, f"FAIL Pod {everything}/{pod_name}", "--include-workloads", "--namespace", everything
    )
    assert "[WiringModeConflict]" in block.splitlines()[1]
    assert conflict in block
