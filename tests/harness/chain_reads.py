"""What the chain's controllers wrote, read back as admin, and who nicguard admitted: the reads
the chain tier's scenarios assert on."""

from __future__ import annotations

import json
from typing import Any, Final

from tests.harness import expect
from tests.harness.chain import Chain
from tests.harness.objects import INTERFACES, node_annotations, runtime, unique
from tests.harness.procs import wait_until
from tests.harness.state import checked

CHAIN_TIMEOUT: Final = 60.0
NUM_NODES: Final = 2  # the TCPXO runtime's mlPolicy.numNodes: one Pod per node
JOBSET_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
# Who writes what (the controllers' ServiceAccounts; the Job controller's own, from the manager).
TRAINER_SA: Final = "system:serviceaccount:chain-system:kubeflow-trainer-controller-manager"
JOBSET_SA: Final = "system:serviceaccount:chain-system:jobset-controller-manager"
JOB_CONTROLLER_SA: Final = "system:serviceaccount:kube-system:job-controller"


def get(chain: Chain, *args: str) -> Any:
    return json.loads(
        checked(chain.plane.kubectl("admin", "get", *args, "-o", "json"), "get").stdout
    )


def items(chain: Chain, *args: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = get(chain, *args)["items"]
    return found


def pods(chain: Chain, namespace: str, job: str) -> list[dict[str, Any]]:
    return items(chain, "pods", "-n", namespace, "-l", f"{JOBSET_LABEL}={job}")


def wait_pods(chain: Chain, namespace: str, job: str) -> list[dict[str, Any]]:
    """The TrainJob's Pods, once the Job controller has created all ``NUM_NODES``."""
    return wait_until(
        lambda: found if len(found := pods(chain, namespace, job)) == NUM_NODES else None,
        timeout=CHAIN_TIMEOUT,
        what=f"{NUM_NODES} Pods of TrainJob {namespace}/{job}",
        diagnose=chain.report,
    )


def wiring(obj: dict[str, Any]) -> str:
    """The interfaces annotation of a Pod, as the apiserver stored it."""
    return str(obj["metadata"]["annotations"][INTERFACES])


def allowed_writers(chain: Chain, namespace: str) -> dict[str, set[str]]:
    """For each kind nicguard admitted in ``namespace`` (not a dry run): who wrote it."""
    writers: dict[str, set[str]] = {}
    for decision in chain.stack.nicguard.decisions():
        ours = decision["resource_namespace"] == namespace and not decision["dry_run"]
        if ours and decision["allowed"]:
            kind = decision["resource_kind"]
            writers.setdefault(kind, set()).add(decision["request_username"])
    return writers


def bound_runtime(chain: Chain) -> tuple[str, str]:
    """A recipe-bound ClusterTrainingRuntime wired as the recipe records; (name, its wiring)."""
    name = unique("chain-tcpxo")
    obj = runtime(name, recipe_bound=True)
    expect.allowed(chain.stack.apply(obj, who="admin"), "created")
    return name, node_annotations(obj)[INTERFACES]
