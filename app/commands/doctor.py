"""``nicguard doctor``: read-only checks of a live cluster and of nicguard installed on it, one
line each (docs/doctor.md); the dry-run creates are its only writes, and they write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Final

from app.commands.audit import AuditResult, audit_snapshot
from app.commands.doctor_tls import bundles
from app.commands.workload_audit import WorkloadResult, audit_workloads
from app.config import Settings
from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.doctor import (
    APIS,
    Line,
    Mark,
    api_lines,
    deployment_line,
    minor_line,
    render_text,
)
from app.domain.doctor_cluster import (
    Audited,
    audit_line,
    break_glass_holders,
    break_glass_line,
    recipe_lines,
)
from app.domain.doctor_webhooks import doors_line, entry_lines
from app.domain.drift import Result
from app.domain.fields import JsonMap, as_list, as_map, str_at
from app.domain.kinds import TRAINER_GROUP, TRAINER_VERSION, Workload
from app.domain.policy import Policy

CONFIGURATION: Final = "nicguard"
DEPLOYMENT: Final = "nicguard"
# Where nicguard runs when its webhook points at a URL rather than a Service.
INSTALL_NAMESPACE: Final = "nicguard-system"
POD_DOOR: Final = "pods.nicguard.dev"
ABSENT_NETWORK: Final = "nicguard-doctor-absent"
# The recipe's name as the shipped matchConditions spell it (the setting recipe-configmap moves it).
SHIPPED_RECIPE: Final = "nicguard-recipe"
_INTERFACES: Final = "networking.gke.io/interfaces"
NOT_AUDITED: Final = "not checked: Trainer's runtimes are not served"
TRAINER_FIX: Final = "install Kubeflow Trainer, then run the doctor again"


def shipped_entries() -> list[JsonMap]:
    """The shipped webhook entries: name, failurePolicy, rules and matchConditions of each, as
    manifests/base/webhook.yaml has them (tests/test_manifests.py holds the two equal)."""
    text = resources.files("app.commands").joinpath("shipped_webhooks.json").read_text("utf-8")
    return [entry for raw in json.loads(text) if (entry := as_map(raw)) is not None]


def doctor(
    settings: Settings,
    namespace: str,
    environ: Mapping[str, str],
    *,
    configuration: str = CONFIGURATION,
) -> list[Line]:
    """Every check against the cluster of kubeconfig (or in-cluster); ``namespace`` is where the
    dry-run Pods are created, ``configuration`` the ValidatingWebhookConfiguration compared.
    Raises ``ClientConfigError`` and ``ClusterReadError``."""
    # Imported here: only a live command pays for the Kubernetes API client (~0.5 s).
    from app.kube.client import load_api_client
    from app.kube.doctor_reads import (
        deployment_replicas,
        dry_run_create,
        rbac,
        served_resources,
        server_version,
        webhook_configuration,
    )
    from app.kube.listing import list_snapshot, list_workloads

    api_client = load_api_client(environ)
    try:
        version, minor = server_version(api_client)
        lines = [minor_line(version, minor)]
        served = {
            api.group_version: served_resources(api_client, api.group_version) for api in APIS
        }
        lines += api_lines(served)
        live = webhook_configuration(api_client, configuration)
        installed = _install_namespace(live)
        replicas = deployment_replicas(api_client, installed, DEPLOYMENT)
        lines.append(deployment_line(f"{installed}/{DEPLOYMENT}", replicas))
        renamed = {f"'{SHIPPED_RECIPE}'": f"'{settings.recipe_configmap.name}'"}
        found = bundles(live, datetime.now(tz=UTC)) if live is not None else {}
        lines += entry_lines(live, shipped_entries(), found, renamed)
        pods = f"/api/v1/namespaces/{namespace}/pods"
        drifted = dry_run_create(api_client, pods, probe_pod(namespace, drifted=True))
        good = dry_run_create(api_client, pods, probe_pod(namespace, drifted=False))
        lines.append(doors_line(POD_DOOR, drifted, good))
        lines.append(break_glass_line(break_glass_holders(*rbac(api_client))))
        if not _runtimes_served(served):
            # The audit lists runtimes: its lines would only repeat the API line's failure.
            return [*lines, Line(Mark.WARN, "recipe and audit", NOT_AUDITED, TRAINER_FIX)]
        snapshot = list_snapshot(api_client, settings.recipe_configmap, None)
        workloads = list_workloads(api_client, None)
    finally:
        api_client.rest_client.close()
    return lines + _recipe_lines(snapshot) + _audit_lines(snapshot, workloads, settings.policy)


def _runtimes_served(served: Mapping[str, frozenset[str] | None]) -> bool:
    from app.kube.cluster_view import CLUSTER_RUNTIME_PLURAL, RUNTIME_PLURAL

    resources = served.get(f"{TRAINER_GROUP}/{TRAINER_VERSION}") or frozenset()
    return {CLUSTER_RUNTIME_PLURAL, RUNTIME_PLURAL} <= resources


def _recipe_lines(snapshot: ClusterSnapshot) -> list[Line]:
    recipe, networks = snapshot.recipe(), snapshot.networks()
    if isinstance(recipe, Unverifiable) or isinstance(networks, Unverifiable):
        # Never for the complete snapshot of one LIST per resource.
        raise TypeError("cannot check the recipe against a partial view of the cluster")
    return recipe_lines(recipe, networks)


def _audit_lines(
    snapshot: ClusterSnapshot, workloads: list[tuple[Workload, JsonMap]], policy: Policy
) -> list[Line]:
    """What ``nicguard audit --include-workloads`` reports, counted: runtimes, wired workloads."""
    runtimes = audit_snapshot(snapshot, policy, None)
    judged = audit_workloads(workloads, snapshot, policy, None)
    return [
        audit_line(Audited("runtimes", len(runtimes), _failing(runtimes))),
        audit_line(Audited("wired workloads", len(judged), _failing(judged))),
    ]


def _failing(results: Sequence[AuditResult] | Sequence[WorkloadResult]) -> tuple[str, ...]:
    return tuple(r.heading for r in results if r.standing.result is Result.FAIL)


def _install_namespace(configuration: JsonMap | None) -> str:
    """The namespace of the Service the first entry calls, else ``INSTALL_NAMESPACE``."""
    for raw in as_list((configuration or {}).get("webhooks")) or ():
        namespace = str_at(as_map(raw) or {}, "clientConfig", "service", "namespace")
        if namespace:
            return namespace
    return INSTALL_NAMESPACE


def probe_pod(namespace: str, *, drifted: bool) -> JsonMap:
    """A Pod the Pod door judges: wired to a Network no cluster has (refused with one of
    ``DRIFT_CODES``), or to the default network only (admitted). Only ever dry-run; it satisfies
    Pod Security's restricted profile, so that nothing but nicguard refuses it."""
    entries = [{"interfaceName": "eth0", "network": "default"}]
    if drifted:
        entries.append({"interfaceName": "eth1", "network": ABSENT_NETWORK})
    name = "nicguard-doctor-drifted" if drifted else "nicguard-doctor-good"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {_INTERFACES: json.dumps(entries, separators=(",", ":"))},
        },
        "spec": {
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.k8s.io/pause:3.10",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                }
            ]
        },
    }


def render(output: str, lines: list[Line]) -> str:
    if output == "json":
        checks = [line.to_json() for line in lines]
        return json.dumps({"checks": checks}, indent=2, ensure_ascii=False)
    return render_text(lines)
