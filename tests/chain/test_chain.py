"""TrainJob to Pods through the real controllers, each write judged at nicguard's doors.

Users act with ``kubectl``; Trainer writes the runtime snapshot (v2.3+; v2.2 reads the runtime
itself) and the JobSet, JobSet the Jobs, the Job controller the Pods. Every assertion is on what
those controllers wrote or were told.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pytest
import yaml

from tests.harness import expect
from tests.harness.audit import DRIFT, Api, audit_events, new_events, nicguard_audit
from tests.harness.chain import Chain
from tests.harness.chain_reads import (
    CHAIN_TIMEOUT,
    JOB_CONTROLLER_SA,
    JOBSET_LABEL,
    JOBSET_SA,
    NUM_NODES,
    TRAINER_SA,
    allowed_writers,
    bound_runtime,
    get,
    items,
    pods,
    wait_pods,
    wiring,
)
from tests.harness.controlplane import Served
from tests.harness.dra import NETDEV, NOT_SERVED, RDMA, claim_template, device_class
from tests.harness.objects import (
    INTERFACES,
    RECIPE_PAIRS,
    as_list,
    interfaces,
    node_annotations,
    node_override,
    runtime,
    trainjob,
    unique,
    with_pairs,
)
from tests.harness.procs import wait_until
from tests.harness.state import AS_BREAK_GLASS, Run, checked

pytestmark = [pytest.mark.e2e, pytest.mark.chain]

FAILED_EVENT: Final = "TrainJobResourcesCreationFailed"
# The recipe's networks with gpu-nic-0 and gpu-nic-1 exchanged: each on the other's interface.
MISPLACED: Final = (("eth1", "gpu-nic-1"), ("eth2", "gpu-nic-0"), *RECIPE_PAIRS[2:])
# The recipe's pairs, eth1 and eth2 in another order: breaks only the recipe's binding.
REORDERED: Final = tuple(with_pairs(RECIPE_PAIRS, (0, 1)))


def failure_events(chain: Chain, namespace: str, job: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.kind=TrainJob,involvedObject.name={job},reason={FAILED_EVENT}"
    return items(chain, "events", "-n", namespace, "--field-selector", selector)


def wait_failure_event(chain: Chain, namespace: str, job: str) -> str:
    """The message of Trainer's ``TrainJobResourcesCreationFailed`` Event on the TrainJob."""
    events = wait_until(
        lambda: failure_events(chain, namespace, job) or None,
        timeout=CHAIN_TIMEOUT,
        what=f"a {FAILED_EVENT} Event on TrainJob {namespace}/{job}",
        diagnose=chain.report,
    )
    return str(events[0]["message"])


def refused_jobset(chain: Chain, namespace: str, job: str, code: str) -> str:
    """Trainer's ``TrainJobResourcesCreationFailed`` message once nicguard refused the TrainJob's
    JobSet with ``code``. v2.3 puts nicguard's message in it; v2.2.1 only ``unknown (patch
    jobsets.jobset.x-k8s.io <name>)``, so the refusal is read from nicguard's decision log."""
    message = wait_failure_event(chain, namespace, job)
    if chain.trainer.snapshots:
        assert 'admission webhook "workloads.nicguard.dev" denied the request' in message, message
        assert f"JobSet/{namespace}/{job}: [{code}]" in message, message
        return message
    assert f"unknown (patch jobsets.jobset.x-k8s.io {job})" in message, message
    refusals = [
        (d["request_username"], d["violation_codes"])
        for d in chain.stack.nicguard.decisions()
        if (d["resource_kind"], d["resource_namespace"], d["resource_name"])
        == ("JobSet", namespace, job)
        and not d["allowed"]
    ]
    assert refusals, f"nicguard refused no JobSet {namespace}/{job}"
    assert all(who == TRAINER_SA and code in codes for who, codes in refusals), refusals
    return message


def snapshot_name(job: str) -> str:
    return f"{job}-runtime-snapshot"


def snapshots(chain: Chain, namespace: str, job: str) -> list[dict[str, Any]]:
    """Trainer's snapshot of ``job``: one from v2.3 on, none before (SPEC §14)."""
    selector = f"metadata.name={snapshot_name(job)}"
    return items(chain, "configmaps", "-n", namespace, "--field-selector", selector)


def trainer_writes(chain: Chain) -> dict[str, set[str]]:
    """What Trainer writes in a TrainJob's namespace beside its JobSet: the snapshot (v2.3+)."""
    return {"ConfigMap": {TRAINER_SA}} if chain.trainer.snapshots else {}


def apply_breaking_glass(chain: Chain, obj: dict[str, Any]) -> Run:
    """``kubectl apply`` of ``obj`` by a member of the group ``nicguard:break-glass``."""
    return chain.plane.kubectl("admin", "apply", "-f", "-", *AS_BREAK_GLASS, input=json.dumps(obj))


def test_recipe_wired_trainjob_reaches_pods_with_the_admitted_wiring(
    chain: Chain, namespace: str
) -> None:
    """(a) Runtime, TrainJob, snapshot, JobSet, Job, Pods: each admitted by nicguard, written by
    its own controller, and every Pod carries the runtime's annotation byte for byte."""
    name, wired = bound_runtime(chain)
    job = unique("job")
    expect.allowed(chain.stack.apply(trainjob(job, namespace, name)), "created")

    found = wait_pods(chain, namespace, job)
    assert [wiring(pod) for pod in found] == [wired] * NUM_NODES
    copies = snapshots(chain, namespace, job)
    assert len(copies) == (1 if chain.trainer.snapshots else 0)
    for snapshot in copies:
        snapshot_runtime = yaml.safe_load(snapshot["data"]["runtime"])
        assert node_annotations(snapshot_runtime)[INTERFACES] == wired
    (jobset_node,) = get(chain, "jobset", job, "-n", namespace)["spec"]["replicatedJobs"]
    assert (
        jobset_node["template"]["spec"]["template"]["metadata"]["annotations"][INTERFACES] == wired
    )
    assert allowed_writers(chain, namespace) == {
        "TrainJob": {"alice"},
        **trainer_writes(chain),
        "JobSet": {TRAINER_SA},
        "Job": {JOBSET_SA},
        "Pod": {JOB_CONTROLLER_SA},
    }


def test_legal_runtime_patches_reach_pods_and_a_misplaced_patch_is_refused(
    chain: Chain, namespace: str
) -> None:
    """(b) A patch that keeps the recipe's wiring and adds an annotation runs, both reaching the
    Pods; one that exchanges two Networks' interfaces is refused at the TrainJob."""
    name, wired = bound_runtime(chain)
    legal = trainjob(unique("job"), namespace, name)
    team = {"example.com/team": "llm-pretrain"}
    legal["spec"] |= node_override(chain.trainer, {INTERFACES: wired, **team})
    expect.allowed(chain.stack.apply(legal), "created")
    for pod in wait_pods(chain, namespace, legal["metadata"]["name"]):
        assert wiring(pod) == wired
        assert pod["metadata"]["annotations"]["example.com/team"] == "llm-pretrain"

    misplaced = trainjob(unique("job"), namespace, name)
    misplaced["spec"] |= node_override(chain.trainer, {INTERFACES: interfaces(MISPLACED)})
    run = chain.stack.apply(misplaced)
    subject = f"TrainJob/{namespace}/{misplaced['metadata']['name']}"
    expect.denied(run, subject, "MappingDivergesFromRecipe", "eth1->gpu-nic-1")
    assert (
        chain.stack.kubectl(
            "get", "trainjob", misplaced["metadata"]["name"], "-n", namespace
        ).returncode
        == 1
    )


def tampered(snapshot: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> str:
    """The snapshot's ``runtime`` with the node pods' wiring replaced by ``pairs``."""
    copy = yaml.safe_load(snapshot["data"]["runtime"])
    node_annotations(copy)[INTERFACES] = interfaces(pairs)
    return str(yaml.safe_dump(copy, sort_keys=False))


def test_drift_is_stopped_at_the_runtime_the_snapshot_and_the_jobset(
    chain: Chain, namespace: str
) -> None:
    """(c) A runtime edit is refused; a snapshot edit is refused; a snapshot edited with the
    break-glass is stopped at the JobSet door when the TrainJob resumes, and no Pod is made.
    Trainer v2.2 writes no snapshot and reads the runtime when it resumes: there the runtime
    edited with the break-glass is what the JobSet door stops."""
    name, _ = bound_runtime(chain)
    edit = runtime(name, pairs=REORDERED, recipe_bound=True)
    expect.denied(
        chain.stack.apply(edit, who="admin"),
        f"ClusterTrainingRuntime/{name}",
        "MappingDivergesFromRecipe",
    )

    job = unique("job")
    suspended = trainjob(job, namespace, name)
    suspended["spec"]["suspend"] = True
    expect.allowed(chain.stack.apply(suspended), "created")
    wait_until(
        lambda: items(chain, "jobs", "-n", namespace, "-l", f"{JOBSET_LABEL}={job}") or None,
        timeout=CHAIN_TIMEOUT,
        what=f"the suspended Jobs of {job}",
        diagnose=chain.report,
    )
    if chain.trainer.snapshots:
        (snapshot,) = wait_until(
            lambda: snapshots(chain, namespace, job) or None,
            timeout=CHAIN_TIMEOUT,
            what=f"Trainer's snapshot of {job}",
            diagnose=chain.report,
        )
        break_snapshot(chain, namespace, job, snapshot)
    else:
        assert snapshots(chain, namespace, job) == []
        misplaced = runtime(name, pairs=MISPLACED, recipe_bound=True)
        misplaced["metadata"]["labels"]["nicguard.dev/break-glass"] = "true"
        checked(apply_breaking_glass(chain, misplaced), "the break-glass runtime edit")

    resume = json.dumps({"spec": {"suspend": False}})
    checked(
        chain.stack.kubectl(
            "patch", "trainjob", job, "-n", namespace, "--type=merge", "-p", resume
        ),
        "resuming",
    )
    refused_jobset(chain, namespace, job, "NetworkMisplaced")
    assert get(chain, "jobset", job, "-n", namespace)["spec"]["suspend"] is True
    assert pods(chain, namespace, job) == []


def break_snapshot(chain: Chain, namespace: str, job: str, snapshot: dict[str, Any]) -> None:
    """The snapshot edited to misplace two Networks: refused, then made with the break-glass."""
    patch = json.dumps({"data": {"runtime": tampered(snapshot, MISPLACED)}})
    target = ["configmap", snapshot_name(job), "-n", namespace]
    refused = chain.plane.kubectl("admin", "patch", *target, "--type=merge", "-p", patch)
    expect.denied(
        refused,
        f"ConfigMap/{namespace}/{snapshot_name(job)}",
        "MappingDivergesFromRecipe",
        webhook="snapshot.nicguard.dev",
    )
    glass = {"metadata": {"labels": {"nicguard.dev/break-glass": "true"}}}
    glass_patch = json.dumps(json.loads(patch) | glass)
    broken = chain.plane.kubectl(
        "admin", "patch", *target, "--type=merge", "-p", glass_patch, *AS_BREAK_GLASS
    )
    checked(broken, "the break-glass snapshot edit")


def test_break_glass_trainjob_runs_what_the_later_doors_admit(chain: Chain, namespace: str) -> None:
    """(d) Break-glass TrainJobs: the recipe's pairs in another order reach the Pods as written;
    a misplaced Network is refused at the JobSet, Trainer's Event carries nicguard's message,
    and no Pod is created."""
    name, _ = bound_runtime(chain)
    reordered = trainjob(unique("job"), namespace, name)
    reordered["metadata"]["labels"] = {"nicguard.dev/break-glass": "true"}
    reordered["spec"] |= node_override(chain.trainer, {INTERFACES: interfaces(REORDERED)})
    checked(apply_breaking_glass(chain, reordered), "the break-glass TrainJob")
    for pod in wait_pods(chain, namespace, reordered["metadata"]["name"]):
        assert wiring(pod) == interfaces(REORDERED)

    misplaced = trainjob(unique("job"), namespace, name)
    misplaced["metadata"]["labels"] = {"nicguard.dev/break-glass": "true"}
    misplaced["spec"] |= node_override(chain.trainer, {INTERFACES: interfaces(MISPLACED)})
    checked(apply_breaking_glass(chain, misplaced), "the misplaced break-glass TrainJob")
    job = misplaced["metadata"]["name"]
    message = refused_jobset(chain, namespace, job, "NetworkMisplaced")
    if chain.trainer.snapshots:
        assert "eth1->gpu-nic-1 (the recipe places gpu-nic-1 on eth2)" in message, message
    assert pods(chain, namespace, job) == []
    assert chain.plane.kubectl("admin", "get", "jobset", job, "-n", namespace).returncode == 1


def dra_bound_runtime(namespace: str) -> dict[str, Any]:
    """The shipped runtime as a TrainingRuntime bound to the DRA profile ``a4-dranet``: no
    interfaces annotation, its node pods claiming every RDMA NIC by ``default-rdma``."""
    obj = runtime(unique("chain-dranet"), namespace=namespace)
    obj["metadata"]["labels"]["nicguard.dev/profile"] = "a4-dranet"
    annotations = node_annotations(obj)
    for key in (INTERFACES, "networking.gke.io/default-interface"):
        del annotations[key]
    (node,) = obj["spec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "rdma", "resourceClaimTemplateName": "default-rdma"}]
    (container,) = (c for c in pod["containers"] if c["name"] == "node")
    container["resources"]["claims"] = [{"name": "rdma"}]
    return obj


def test_dra_bound_trainjob_reaches_pods_with_its_claims(
    chain: Chain, served: Served, namespace: str
) -> None:
    """(h) A runtime wired by DRA claim on ``resource.k8s.io/v1``: its claim template, runtime,
    TrainJob and snapshot admitted, the unwired JobSet, Job and Pods never sent, and the claims
    reach every Pod. Where the cluster does not serve v1 (before 1.34), the runtime and a
    TrainJob on it are refused, saying so."""
    if not served.dra_v1:
        refused_without_dra_v1(chain, namespace)
        return
    claiming_every_nic(chain, namespace, "default-rdma")
    obj = dra_bound_runtime(namespace)
    pod = obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    chain.stack.judged(obj, "", who="admin")  # nicguard's cache holds the template
    expect.allowed(chain.stack.apply(obj, who="admin"), "created")
    job = unique("job")
    expect.allowed(
        chain.stack.apply(trainjob(job, namespace, obj["metadata"]["name"], "TrainingRuntime")),
        "created",
    )

    for found in wait_pods(chain, namespace, job):
        assert found["spec"]["resourceClaims"] == pod["spec"]["resourceClaims"]
        (node,) = (c for c in found["spec"]["containers"] if c["name"] == "node")
        assert node["resources"]["claims"] == [{"name": "rdma"}]
        assert INTERFACES not in found["metadata"].get("annotations", {})
    assert allowed_writers(chain, namespace) == {
        "ResourceClaimTemplate": {"admin"},
        "TrainingRuntime": {"admin"},
        "TrainJob": {"alice"},
        **trainer_writes(chain),
    }


def claiming_every_nic(chain: Chain, namespace: str, *templates: str) -> None:
    """GKE's DeviceClasses, and ``templates`` in ``namespace`` each claiming every RDMA NIC."""
    objects = [device_class(RDMA), device_class(NETDEV)]
    objects += [claim_template(namespace, name, allocationMode="All") for name in templates]
    applied = chain.plane.kubectl("admin", "apply", "-f", "-", input=as_list(objects))
    checked(applied, "the DeviceClasses and the ResourceClaimTemplates")


def refused_without_dra_v1(chain: Chain, namespace: str) -> None:
    """The DRA-bound runtime refused ``ResourceClaimTemplateNotFound``, saying the cluster does
    not serve v1; made with the break-glass, a TrainJob on it is refused the same way and
    nothing reaches Trainer."""
    obj = dra_bound_runtime(namespace)
    subject = f"TrainingRuntime/{namespace}/{obj['metadata']['name']}"
    code = "ResourceClaimTemplateNotFound"
    expect.denied(chain.stack.apply(obj, who="admin"), subject, code, NOT_SERVED)
    obj["metadata"]["labels"]["nicguard.dev/break-glass"] = "true"
    checked(apply_breaking_glass(chain, obj), "the break-glass DRA-bound runtime")
    job = unique("job")
    run = chain.stack.apply(trainjob(job, namespace, obj["metadata"]["name"], "TrainingRuntime"))
    expect.denied(run, f"TrainJob/{namespace}/{job}", code, NOT_SERVED)
    assert items(chain, "jobsets", "-n", namespace) == []


def test_a_snapshot_left_short_by_a_recreated_template_is_reported_as_trainer_runs_it(
    chain: Chain, served: Served, namespace: str
) -> None:
    """(i) Trainer's snapshot of a DRA-bound TrainJob, edited to claim my-rdma while it requested
    every NIC: admitted. my-rdma deleted and created again with one NIC: the template door
    cannot know the copy without an API call, so the audit says it, on the ConfigMap (Event) and
    in ``nicguard audit``; its JobSet built again, Trainer builds the Pods from the copy,
    claiming my-rdma. Trainer v2.2 writes no copy (its Pods come from the runtime, judged at its
    door); without ``resource.k8s.io/v1`` the runtime is refused, saying so."""
    if not served.dra_v1:
        refused_without_dra_v1(chain, namespace)
        return
    claiming_every_nic(chain, namespace, "default-rdma", "my-rdma")
    obj = dra_bound_runtime(namespace)
    chain.stack.judged(obj, "", who="admin")  # nicguard's cache holds the templates
    expect.allowed(chain.stack.apply(obj, who="admin"), "created")
    job = unique("job")
    suspended = trainjob(job, namespace, obj["metadata"]["name"], "TrainingRuntime")
    if not chain.trainer.snapshots:
        expect.allowed(chain.stack.apply(suspended), "created")
        for found in wait_pods(chain, namespace, job):
            assert found["spec"]["resourceClaims"] == [
                {"name": "rdma", "resourceClaimTemplateName": "default-rdma"}
            ]
        assert snapshots(chain, namespace, job) == []
        return
    suspended["spec"]["suspend"] = True
    expect.allowed(chain.stack.apply(suspended), "created")
    snapshot = wait_until(
        lambda: snapshots(chain, namespace, job) or None,
        timeout=CHAIN_TIMEOUT,
        what=f"Trainer's snapshot of {job}",
        diagnose=chain.report,
    )[0]
    text = snapshot["data"]["runtime"]
    claimed = "resourceClaimTemplateName: default-rdma"
    assert text.count(claimed) == 1, text
    patch = json.dumps(
        {"data": {"runtime": text.replace(claimed, "resourceClaimTemplateName: my-rdma")}}
    )
    target = ["configmap", snapshot_name(job), "-n", namespace]
    checked(
        chain.plane.kubectl("admin", "patch", *target, "--type=merge", "-p", patch),
        "the snapshot edit claiming my-rdma (every NIC then)",
    )

    api = Api(chain.plane)
    before = audit_events(api)
    checked(
        chain.plane.kubectl("admin", "delete", "resourceclaimtemplate", "my-rdma", "-n", namespace),
        "deleting my-rdma",
    )
    one_nic = claim_template(namespace, "my-rdma")  # ExactCount, count 1: the defaults
    expect.allowed(chain.stack.apply(one_nic, who="admin"), "created")
    ref = ("ConfigMap", namespace, snapshot_name(job))

    def drift() -> str | None:
        # The sweep may see my-rdma gone (ResourceClaimTemplateNotFound) before it is back.
        events = new_events(api, before)
        found = [
            e.note
            for e in events
            if e.reason == DRIFT and e.regarding == ref and "[RdmaClaimMismatch]" in e.note
        ]
        return found[0] if found else None

    note = wait_until(
        drift,
        timeout=CHAIN_TIMEOUT,
        what=f"a WiringDrift Event on ConfigMap {namespace}/{snapshot_name(job)}",
        diagnose=chain.report,
    )
    assert note.startswith(f"[RdmaClaimMismatch] ConfigMap {namespace}/{snapshot_name(job)} ")
    assert f"ResourceClaimTemplate {namespace}/my-rdma requests 1 {RDMA} device" in note
    audited = nicguard_audit(chain.plane, "--namespace", namespace)
    assert audited.returncode == 1, audited.stdout + audited.stderr
    assert f"FAIL ConfigMap {namespace}/{snapshot_name(job)} " in audited.stdout

    # What the audit reported is what runs: the JobSet's pod spec is immutable (JobSet's webhook
    # refuses Trainer's update on resume), but a JobSet built again is built from the copy.
    checked(
        chain.plane.kubectl("admin", "delete", "jobset", job, "-n", namespace),
        "deleting the JobSet built before the edit",
    )
    resume = json.dumps({"spec": {"suspend": False}})
    checked(
        chain.stack.kubectl(
            "patch", "trainjob", job, "-n", namespace, "--type=merge", "-p", resume
        ),
        "resuming",
    )
    for found in wait_pods(chain, namespace, job):
        assert found["spec"]["resourceClaims"] == [
            {"name": "rdma", "resourceClaimTemplateName": "my-rdma"}
        ]
