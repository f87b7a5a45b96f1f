"""Hardware profiles on a real apiserver (docs/rules.md): AICR's GB200 ``torch-distributed-rdma``.

The runtime as AICR ships it (``tests/fixtures/upstream/aicr/``, headed with its source) on a
GB200 cluster's Networks (gvnic-1 NetDevice, rdma-0..3 RDMA, each with its GKENetworkParamSet):
allowed; swapped rdma-1/rdma-2: ``MappingDivergesFromProfile``; rdma-2's param set in NetDevice
mode: ``DeviceModeMismatch``; a TrainJob re-mapping its NICs: denied; a param set turning NotReady
makes the admitted runtime's audit result ``fail``. A control plane of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import pytest
import yaml

from tests.harness import expect
from tests.harness.audit import (
    DRIFT,
    RESTORED,
    Api,
    audit_events,
    count,
    gauge,
    metrics,
    new_events,
)
from tests.harness.objects import Obj, param_set_status, unique
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, ready_network, running
from tests.harness.state import PARAM_SETS, checked, create_namespace, set_status
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e

AICR_RDMA: Final = (
    ROOT / "tests/fixtures/upstream/aicr/torch-distributed-rdma-cluster-training-runtime.yaml"
)
NAME: Final = "torch-distributed-rdma"
SUBJECT: Final = f"ClusterTrainingRuntime/{NAME}"
MODES: Final = {"gvnic-1": "NetDevice", **{f"rdma-{i}": "RDMA" for i in range(4)}}
INTERFACES: Final = "networking.gke.io/interfaces"
REF: Final = ("ClusterTrainingRuntime", "", NAME)
AUDIT_TIMEOUT: Final = 15.0


def aicr_runtime() -> Obj:
    """AICR's runtime as published (its Helm hook annotations dropped: no Helm here)."""
    found: Any = yaml.safe_load(AICR_RDMA.read_text())
    found["metadata"].pop("annotations", None)
    return dict(found)


def node_annotations(obj: Obj) -> dict[str, str]:
    jobs = obj["spec"]["template"]["spec"]["replicatedJobs"]
    node = next(job for job in jobs if job["name"] == "node")
    annotations: dict[str, str] = node["template"]["spec"]["template"]["metadata"]["annotations"]
    return annotations


def swapped(obj: Obj) -> Obj:
    """rdma-1 and rdma-2 trade places (eth3/eth4)."""
    changed: Any = json.loads(json.dumps(obj))
    entries = json.loads(node_annotations(changed)[INTERFACES])
    entries[3]["network"], entries[4]["network"] = entries[4]["network"], entries[3]["network"]
    node_annotations(changed)[INTERFACES] = json.dumps(entries)
    return dict(changed)


@pytest.fixture(scope="module")
def gb200(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A GB200 cluster's GPU-NIC Networks and param sets, as GKE leaves them Ready."""
    with running(tmp_path_factory.mktemp("gb200")) as started:
        for name, mode in MODES.items():
            ready_network(started, name, mode=mode)
        yield started


def test_aicrs_rdma_runtime_is_allowed_on_a_correctly_wired_gb200_cluster(gb200: Stack) -> None:
    run = gb200.judged(aicr_runtime(), "", who="admin")
    expect.allowed(run, "created (server dry run)")


def test_swapping_rdma_1_and_rdma_2_diverges_from_the_profile(gb200: Stack) -> None:
    gb200.judged(aicr_runtime(), "", who="admin")  # the caches hold the Networks
    expect.denied(
        gb200.judged(swapped(aicr_runtime()), "[MappingDivergesFromProfile]", who="admin"),
        SUBJECT,
        "MappingDivergesFromProfile",
        "at position eth3 the object maps eth3->rdma-2 but the profile records eth3->rdma-1 "
        "(profile a4x-gb200-rdma)",
    )


def test_a_param_set_in_netdevice_mode_behind_rdma_2_is_a_device_mode_mismatch(
    gb200: Stack,
) -> None:
    gb200.judged(aicr_runtime(), "", who="admin")
    patch = ["patch", PARAM_SETS, "rdma-2", "--type=merge"]
    checked(
        gb200.kubectl(*patch, "-p", '{"spec":{"deviceMode":"NetDevice"}}', who="admin"),
        "switching rdma-2's param set to NetDevice",
    )
    try:
        expect.denied(
            gb200.judged(aicr_runtime(), "[DeviceModeMismatch]", who="admin"),
            SUBJECT,
            "DeviceModeMismatch",
            "eth4->rdma-2: GKENetworkParamSet rdma-2 has deviceMode NetDevice, "
            "profile a4x-gb200-rdma requires RDMA",
        )
    finally:
        checked(
            gb200.kubectl(*patch, "-p", '{"spec":{"deviceMode":"RDMA"}}', who="admin"),
            "switching rdma-2's param set back to RDMA",
        )
    gb200.judged(aicr_runtime(), "", who="admin")


def test_a_trainjob_remapping_the_runtimes_nics_is_denied_and_the_audit_follows_param_sets(
    gb200: Stack,
) -> None:
    """The runtime is created for real; a TrainJob patching its node wiring is held to the
    runtime's profile; rdma-3's param set turning NotReady makes the runtime's audit result
    fail with a WiringDrift Event, and Ready again restores it."""
    gb200.judged(aicr_runtime(), "", who="admin")
    expect.allowed(
        gb200.apply(aicr_runtime(), who="admin"),
        f"clustertrainingruntime.trainer.kubeflow.org/{NAME} created",
    )
    namespace = unique("gb200-team")
    create_namespace(gb200.plane, namespace)
    entries = json.loads(node_annotations(swapped(aicr_runtime()))[INTERFACES])
    job: Obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": unique("llama-gb200"), "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": NAME},
            "runtimePatches": [
                {
                    "manager": "team.example.com/launcher",
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {
                                                "template": {
                                                    "metadata": {
                                                        "annotations": {
                                                            INTERFACES: json.dumps(entries)
                                                        }
                                                    }
                                                }
                                            }
                                        },
                                    }
                                ]
                            }
                        }
                    },
                }
            ],
        },
    }
    expect.denied(
        gb200.judged(job, "[MappingDivergesFromProfile]", who="admin"),
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "MappingDivergesFromProfile",
        "eth3->rdma-2 but the profile records eth3->rdma-1 (profile a4x-gb200-rdma)",
    )

    api = Api(gb200.plane)
    before = audit_events(api)
    set_status(
        gb200.plane,
        PARAM_SETS,
        "rdma-3",
        param_set_status("rdma-3", ready=False, reason="SubnetNotFound", message="gone"),
    )
    try:
        wait_until(
            lambda: (
                (
                    gauge(
                        metrics(gb200.nicguard), "nicguard_audit_violations", code="NetworkNotReady"
                    )
                    == 1
                    and count(new_events(api, before), DRIFT)[REF] == 1
                )
                or None
            ),
            timeout=AUDIT_TIMEOUT,
            what="the runtime's audit result to fail with a WiringDrift Event",
            diagnose=gb200.nicguard.report,
        )
    finally:
        set_status(gb200.plane, PARAM_SETS, "rdma-3", param_set_status("rdma-3", ready=True))
    wait_until(
        lambda: (
            (
                gauge(metrics(gb200.nicguard), "nicguard_audit_runtimes", result="fail") == 0
                and count(new_events(api, before), RESTORED)[REF] == 1
            )
            or None
        ),
        timeout=AUDIT_TIMEOUT,
        what="the runtime to pass again with a WiringRestored Event",
        diagnose=gb200.nicguard.report,
    )
