"""``nicguard audit``: the standing of every ClusterTrainingRuntime and TrainingRuntime, judged
as the in-server audit judges them (and, on request, of every wired JobSet, Job and Pod), from a
file state or one LIST per resource of a live cluster.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import yaml

from app.commands.workload_audit import (
    WorkloadResult,
    audit_copies,
    audit_workloads,
    state_copies,
    state_workloads,
)
from app.config import REPORTS_AUTO, Settings
from app.domain.cluster import (
    ClusterSnapshot,
    Unverifiable,
)
from app.domain.drift import EVERYTHING, DriftBook, Result, Standing
from app.domain.fields import str_at
from app.domain.kinds import TRAINER_GROUP, TRAINER_VERSION, Kind
from app.domain.policy import Policy
from app.domain.policy_reports import Audited, ReportApi, report, report_namespace
from app.files.state import state_snapshot

OUTPUTS: Final = ("text", "json", "reports")
DEFAULT_REPORT_API: Final = ReportApi.OPENREPORTS


@dataclass(frozen=True, slots=True)
class AuditResult:
    """One runtime's standing, with what the outputs name it by."""

    api_version: str
    audited: Audited

    @property
    def standing(self) -> Standing:
        return self.audited.standing

    @property
    def heading(self) -> str:
        kind, namespace, name = self.audited.key
        return f"{kind.value} {namespace}/{name}" if namespace else f"{kind.value} {name}"

    def to_json(self) -> dict[str, object]:
        kind, namespace, name = self.audited.key
        return {
            "apiVersion": self.api_version,
            "kind": kind.value,
            "namespace": namespace,
            "name": name,
            "result": self.audited.standing.result.value,
            "violations": [v.to_json() for v in self.audited.standing.findings],
        }


def audit_snapshot(
    snapshot: ClusterSnapshot, policy: Policy, namespace: str | None
) -> list[AuditResult]:
    """Every runtime of ``snapshot`` (only ``namespace``'s TrainingRuntimes when given) through a
    fresh ``DriftBook``: the standings the in-server audit keeps, sorted by runtime."""
    runtimes = snapshot.runtime_state
    if namespace is not None and not isinstance(runtimes, Unverifiable):
        runtimes = {
            key: runtime
            for key, runtime in runtimes.items()
            if key[0] is Kind.TRAINING_RUNTIME and key[1] == namespace
        }
        snapshot = replace(snapshot, runtime_state=runtimes)
    book = DriftBook(policy)
    judged = book.apply(EVERYTHING, snapshot)
    if isinstance(judged, Unverifiable) or isinstance(runtimes, Unverifiable):
        # Never for the complete snapshots of a file state or of one LIST per resource.
        raise ValueError("cannot audit a partial view of the cluster")
    return [
        AuditResult(
            api_version=str_at(runtimes[key], "apiVersion") or f"{TRAINER_GROUP}/{TRAINER_VERSION}",
            audited=Audited(key, standing),
        )
        for key, standing in sorted(book.standings.items())
    ]


Judged = AuditResult | WorkloadResult
"""A runtime's or a runtime snapshot's standing, or (``--include-workloads``) a wired JobSet's,
Job's or Pod's."""


def audit_state(
    state: Path,
    settings: Settings,
    namespace: str | None,
    note: Callable[[str], None] = lambda _: None,
    *,
    workloads: bool = False,
) -> list[Judged]:
    """The audit of a file state (its wired JobSets, Jobs and Pods too when ``workloads``);
    raises ``StateFileError`` on unusable files. ``note`` hears what the state leaves
    unchecked."""
    snapshot = state_snapshot(state, settings.recipe_configmap, note)
    results: list[Judged] = [*audit_snapshot(snapshot, settings.policy, namespace)]
    results += audit_copies(state_copies(state), snapshot, settings.policy, namespace)
    if workloads:
        found = state_workloads(state)
        results += audit_workloads(found, snapshot, settings.policy, namespace)
    return results


def audit_cluster(
    settings: Settings,
    namespace: str | None,
    environ: Mapping[str, str],
    *,
    discover: bool,
    workloads: bool = False,
) -> tuple[list[Judged], ReportApi]:
    """The audit of the live cluster (its wired JobSets, Jobs and Pods too when ``workloads``),
    and the report API to print in (discovered only when ``discover``); raises
    ``ClientConfigError`` and ``app.kube.listing.ClusterReadError``."""
    # Imported here: only a live audit pays for the Kubernetes API client (~0.5 s).
    from app.kube.client import load_api_client
    from app.kube.discovery import served_report_api
    from app.kube.listing import (
        list_runtime_snapshots,
        list_snapshot,
        list_workloads,
        read_failures,
    )

    api = report_api(settings.reports)
    api_client = load_api_client(environ)
    try:
        snapshot = list_snapshot(api_client, settings.recipe_configmap, namespace)
        copies = list_runtime_snapshots(api_client, namespace)
        found = list_workloads(api_client, namespace) if workloads else []
        if discover and not isinstance(settings.reports, ReportApi):
            with read_failures("read the discovery documents of the policy report APIs"):
                api = served_report_api(api_client, REPORTS_AUTO) or DEFAULT_REPORT_API
    finally:
        api_client.rest_client.close()
    results: list[Judged] = [*audit_snapshot(snapshot, settings.policy, namespace)]
    results += audit_copies(copies, snapshot, settings.policy, namespace)
    return results + audit_workloads(found, snapshot, settings.policy, namespace), api


def report_api(setting: ReportApi | str) -> ReportApi:
    """The API the setting names; ``auto`` and ``off`` print openreports without a cluster to ask
    (``off`` stops the server writing reports, not this command printing them)."""
    return setting if isinstance(setting, ReportApi) else DEFAULT_REPORT_API


def failed(results: list[Judged]) -> bool:
    return any(r.standing.result is Result.FAIL for r in results)


def render(
    output: str, results: list[Judged], api: ReportApi, namespace: str | None, now: int
) -> str:
    """``results`` as ``output`` says; the reports hold the runtimes (the CLI refuses
    ``--include-workloads`` with them)."""
    if output == "json":
        return json.dumps({"results": [r.to_json() for r in results]}, indent=2)
    if output == "reports":
        runtimes = [r for r in results if isinstance(r, AuditResult)]
        return render_reports(runtimes, api, namespace, now)
    return render_text(results, namespace)


def render_text(results: list[Judged], namespace: str | None) -> str:
    """One block per object, result first, then each finding with its code and field."""
    if not results:
        where = "" if namespace is None else f" in namespace {namespace}"
        judged = (
            "ClusterTrainingRuntime or TrainingRuntime" if namespace is None else "TrainingRuntime"
        )
        return f"no {judged} found{where}"
    blocks = []
    for result in results:
        standing = result.standing
        lines = [f"{standing.result.value.upper()} {result.heading}"]
        for finding in standing.findings:
            lines.append(f"  {finding.render()}")
            lines.append(f"      at {finding.field}")
        blocks.append("\n".join(lines))
    counts = Counter(r.standing.result for r in results)
    summary = ", ".join(f"{counts[result]} {result.value}" for result in Result)
    return "\n\n".join([*blocks, f"{len(results)} audited, {summary}"])


def render_reports(
    results: list[AuditResult], api: ReportApi, namespace: str | None, now: int
) -> str:
    """The reports (docs/audit.md) as one YAML stream for ``kubectl apply -f -``: one per namespace
    audited (``namespace`` even without runtimes, so applying clears what it held), and the
    cluster report, also when empty, unless the audit was of one namespace."""
    by_namespace: dict[str, list[Audited]] = {namespace or "": []}
    for result in results:
        by_namespace.setdefault(report_namespace(result.audited.key), []).append(result.audited)
    documents = [report(api, ns, audited, now) for ns, audited in sorted(by_namespace.items())]
    return yaml.safe_dump_all(documents, sort_keys=False).rstrip("\n")
