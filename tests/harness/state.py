"""Cluster state for the e2e tier: CRDs, test RBAC, the example Networks and recipe, polling.

Everything is written as ``admin``; the conditions of Networks and of their GKENetworkParamSets go
through the ``status`` subresource, as GKE writes them.
The CRDs are upstream's, unmodified (``tests/e2e/crds/*/``, each file names its source): the
GKE networking API, one Kubeflow Trainer release per control plane, on request JobSet v0.12.0 (the
workload door's JobSets) and the policy report APIs (OpenReports ``openreports.io``, the
Policy WG's ``wgpolicyk8s.io``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.objects import (
    NETWORK_KIND,
    PARAM_SET_KIND,
    TRAINER_V2_3,
    Obj,
    Trainer,
    as_list,
    load,
)
from tests.harness.procs import wait_until

CRDS: Final = ROOT / "tests" / "e2e" / "crds"
NETWORK_API_CRDS: Final = CRDS / "gke-networking"
JOBSET_CRDS: Final = CRDS / "jobset-v0.12.0"
NETWORKS: Final = "networks.networking.gke.io"
PARAM_SETS: Final = "gkenetworkparamsets.networking.gke.io"
# The resource of each kind of examples/cluster/networks.yaml, for ``set_status``.
NETWORK_RESOURCES: Final = {NETWORK_KIND: NETWORKS, PARAM_SET_KIND: PARAM_SETS}
# Report CRD sets, each a directory of ``CRDS``: OpenReports (Report, ClusterReport) and the
# Policy WG's (PolicyReport, ClusterPolicyReport; one file serves v1alpha1, v1alpha2, v1beta1).
REPORT_APIS: Final = ("openreports", "wgpolicyk8s")
RECIPE: Final = ("nicguard-system", "nicguard-recipe")
ESTABLISH_TIMEOUT: Final = "60s"
ESTABLISH_SECONDS: Final = 60.0
# What the watch caches show a write within: bounds a hang only (it takes well under a second,
# a kubectl call or two, on a loaded machine).
STATE_TIMEOUT: Final = 30.0

Run = subprocess.CompletedProcess[str]

# The non-admin user "alice" (group developers) may author Trainer objects, nothing else.
DEVELOPER_RBAC: Final = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "e2e-trainer-author"},
        "rules": [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "resources": ["clustertrainingruntimes", "trainingruntimes", "trainjobs"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-trainer-author"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "e2e-trainer-author",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}
        ],
    },
]


def checked(run: Run, what: str) -> Run:
    if run.returncode != 0:
        raise RuntimeError(f"{what} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    return run


def crd_files(*, network_api: bool, trainer: Trainer, jobset: bool = False) -> list[Path]:
    """``trainer``'s three CRDs, then (if ``network_api``) Network and GKENetworkParamSet, then
    (if ``jobset``) JobSet's."""
    files = sorted((CRDS / f"trainer-{trainer.version}").glob("*.yaml"))
    files += sorted(NETWORK_API_CRDS.glob("*.yaml")) if network_api else []
    files += sorted(JOBSET_CRDS.glob("*.yaml")) if jobset else []
    if len(files) != 3 + (2 if network_api else 0) + (1 if jobset else 0):
        raise RuntimeError(f"unexpected CRD files for Trainer {trainer.version}: {files}")
    return files


def install_crds(
    plane: ControlPlane,
    *,
    network_api: bool = True,
    trainer: Trainer = TRAINER_V2_3,
    jobset: bool = False,
) -> None:
    """Create the CRDs and wait until they are Established (served). JobSet's (~2 s more to
    establish) only with ``jobset``: the session stacks serve it, other planes need it not.

    ``create``, never client-side ``apply``: the Trainer and JobSet CRDs are far larger than the
    256 KiB a ``last-applied-configuration`` annotation may hold.
    """
    create_crds(plane, crd_files(network_api=network_api, trainer=trainer, jobset=jobset))


def create_crds(plane: ControlPlane, files: list[Path]) -> None:
    """``kubectl create`` the CRDs of ``files``; wait until each is Established."""
    args = [arg for f in files for arg in ("-f", str(f))]
    created = checked(plane.kubectl("admin", "create", "-o", "name", *args), "creating the CRDs")
    wait_established(plane, created.stdout.split())


def wait_established(plane: ControlPlane, names: list[str]) -> None:
    """Poll until every CRD of ``names`` (``customresourcedefinition.../NAME``) is Established.

    Not ``kubectl wait``: on a CRD created a moment ago, before the apiserver has written any
    condition, it fails (``.status.conditions accessor error``) instead of waiting."""

    def established() -> bool | None:
        run = plane.kubectl("admin", "get", *names, "-o", "json")
        if run.returncode != 0:
            return None
        found = json.loads(run.stdout)
        crds = found.get("items", [found])
        return (
            all(
                any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in crd.get("status", {}).get("conditions") or []
                )
                for crd in crds
            )
            or None
        )

    wait_until(established, timeout=ESTABLISH_SECONDS, what=f"CRDs {names} Established")


def install_report_crds(plane: ControlPlane, *apis: str) -> None:
    """Create the report CRDs of ``apis`` (each one of ``REPORT_APIS``; default: all) and wait
    until those CRDs, and only those, are Established."""
    chosen = tuple(dict.fromkeys(apis or REPORT_APIS))
    unknown = [api for api in chosen if api not in REPORT_APIS]
    if unknown:
        raise ValueError(f"unknown report APIs {unknown}; known: {REPORT_APIS}")
    files = [f for api in chosen for f in sorted((CRDS / api).glob("*.yaml"))]
    if len(files) != 2 * len(chosen):  # each API: its namespaced and its cluster-scoped kind
        raise RuntimeError(f"unexpected report CRD files for {chosen}: {files}")
    create_crds(plane, files)


def grant_developers(plane: ControlPlane) -> None:
    checked(plane.kubectl("admin", "apply", "-f", "-", input=as_list(DEVELOPER_RBAC)), "RBAC")


def create_namespace(plane: ControlPlane, name: str) -> None:
    checked(plane.kubectl("admin", "create", "namespace", name), f"creating namespace {name}")


def set_status(
    plane: ControlPlane, kind: str, name: str, status: Obj, namespace: str | None = None
) -> None:
    """Write ``status`` through the subresource (as admin, like the owning controller)."""
    patch = json.dumps({"status": status})
    args = ["patch", kind, name, "--subresource=status", "--type=merge", "-p", patch]
    args += ["-n", namespace] if namespace else []
    checked(plane.kubectl("admin", *args), f"setting the status of {kind}/{name}")


def apply_networks(plane: ControlPlane) -> None:
    """``examples/cluster/networks.yaml``: specs by apply, then each status (GKENetworkParamSets
    and Networks, in file order: each param set before its Network) by the subresource."""
    raw = load("cluster/networks.yaml")
    checked(plane.kubectl("admin", "apply", "-f", "-", input=as_list(raw)), "applying Networks")
    for doc in load("cluster/networks.yaml", raw=True):
        if "status" in doc:
            resource = NETWORK_RESOURCES[doc["kind"]]
            set_status(plane, resource, doc["metadata"]["name"], doc["status"])


def apply_recipe(plane: ControlPlane) -> str:
    """Apply the example recipe ConfigMap; returns ``ns/name@resourceVersion``."""
    recipe = as_list(load("cluster/recipe-configmap.yaml"))
    checked(plane.kubectl("admin", "apply", "-f", "-", input=recipe), "applying the recipe")
    return recipe_ref(plane)


def recipe_ref(plane: ControlPlane) -> str:
    namespace, name = RECIPE
    get = ["get", "configmap", name, "-n", namespace, "-o", "jsonpath={.metadata.resourceVersion}"]
    version = checked(plane.kubectl("admin", *get), "reading the recipe").stdout.strip()
    return f"{namespace}/{name}@{version}"


def eventually(
    attempt: Callable[[], Run], until: Callable[[Run], bool], *, timeout: float = STATE_TIMEOUT
) -> Run:
    """Repeat a side-effect-free ``kubectl`` call until ``until`` holds (watch caches lag a bit)."""
    last: list[Run] = []

    def probe() -> Run | None:
        run = attempt()
        last[:] = [run]
        return run if until(run) else None

    def diagnose() -> str:
        return f"last attempt: exit {last[0].returncode}\n{last[0].stdout}\n{last[0].stderr}"

    return wait_until(
        probe, timeout=timeout, what="kubectl to agree", interval=0.2, diagnose=diagnose
    )


# The break-glass of the shipped webhooks: the object labelled, the requester in the group.
BREAK_GLASS_LABEL: Final = "nicguard.dev/break-glass=true"
AS_BREAK_GLASS: Final = (
    "--as=admin",
    "--as-group=system:masters",
    "--as-group=nicguard:break-glass",
)


def delete_past_nicguard(plane: ControlPlane, *target: str) -> Run:
    """Delete ``target`` (``kind name [-n ns]``) with the break-glass: what nicguard protects
    (an in-use Network, the recipe) goes, as when an operator overrides it."""
    checked(plane.kubectl("admin", "label", *target, BREAK_GLASS_LABEL), "break-glass label")
    return checked(plane.kubectl("admin", "delete", *target, *AS_BREAK_GLASS), "deleting")
