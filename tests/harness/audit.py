"""The continuous audit seen from outside (docs/audit.md): nicguard's Events, its policy reports,
its audit metrics and the auditor Lease, and ``nicguard audit`` run as an operator runs it.

Reads go straight to the API as ``admin`` (a few milliseconds each, where a ``kubectl`` process
costs ~0.1 s), so a test can time a Network flip to its Events to a tenth of a second. The wall
clock is used on purpose: an Event's ``eventTime`` is nicguard's wall clock on the same host.
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from tests.harness.controlplane import KUBECTL_TIMEOUT, ControlPlane
from tests.harness.objects import (
    INTERFACES,
    RECIPE_BOUND,
    TRAINER,
    Obj,
    conditions,
    load,
    runtime,
)
from tests.harness.procs import run_nicguard, wait_until
from tests.harness.stack import Stack, ready_network
from tests.harness.state import NETWORKS, Run, checked, create_namespace, set_status
from tests.harness.webhook import Nicguard

NUMBERS: Final = logging.getLogger("tests.harness.audit")
NUMBERS.setLevel(logging.INFO)

AUDITOR_LEASE: Final = ("nicguard-system", "nicguard-auditor")
MANAGED_BY: Final = "app.kubernetes.io/managed-by=nicguard"
REPORTING_CONTROLLER: Final = "nicguard.dev/auditor"
FINDINGS: Final = "nicguard.dev/findings"
DRIFT: Final = "WiringDrift"
RESTORED: Final = "WiringRestored"
REPORT_NAME: Final = "nicguard"
CLUSTER_EVENTS: Final = "default"  # where Events on cluster-scoped runtimes go
POLL: Final = 0.05
RETRY_TIMEOUT: Final = 10.0
REPORT_INTERVAL: Final = 2.0  # docs/audit.md: at most one write per report per 2 s
SETTLE_TIMEOUT: Final = 15.0
# The shipped recipe-bound CTR (setting recipe-runtimes' default) and the example CTRs.
TCPXO_CTR: Final = ("ClusterTrainingRuntime", "", "torch-distributed-tcpxo")

# A runtime as the audit names it: (kind, namespace ("" for a ClusterTrainingRuntime), name).
Ref = tuple[str, str, str]
# A runtime's standing as reports and ``nicguard audit`` show it: result, codes in order.
Verdict = tuple[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ReportKinds:
    """One policy report API: where its reports live and what they are called."""

    api: str  # the name in state.REPORT_APIS and the setting ``reports``
    group_version: str
    namespaced: str
    cluster: str

    def path(self, kind: str, namespace: str = "", name: str = "") -> str:
        where = f"/namespaces/{namespace}" if namespace else ""
        tail = f"/{name}" if name else ""
        return f"/apis/{self.group_version}{where}/{kind.lower()}s{tail}"


OPENREPORTS: Final = ReportKinds(
    "openreports", "openreports.io/v1alpha1", "Report", "ClusterReport"
)
WGPOLICYK8S: Final = ReportKinds(
    "wgpolicyk8s", "wgpolicyk8s.io/v1alpha2", "PolicyReport", "ClusterPolicyReport"
)


class Api:
    """GETs as ``admin`` over the apiserver's own TLS, without a ``kubectl`` process."""

    def __init__(self, plane: ControlPlane) -> None:
        self.server = plane.server
        self._token = plane.users["admin"].token
        self._context = ssl.create_default_context(cafile=str(plane.ca_file))

    def get(self, path: str, **query: str) -> Obj | None:
        """The decoded body, or None for a 404. A 429 (a new CRD's storage still initialising)
        is retried after the ``Retry-After`` the apiserver asks for, as client-go does."""
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        request = urllib.request.Request(url)  # noqa: S310 - our own apiserver, on loopback
        request.add_header("Authorization", f"Bearer {self._token}")
        deadline = time.monotonic() + RETRY_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(request, timeout=10, context=self._context) as reply:  # noqa: S310
                    body: Obj = json.loads(reply.read())
            except urllib.error.HTTPError as error:
                if error.code == 404:
                    return None
                if error.code != 429 or time.monotonic() >= deadline:
                    raise
                pause = min(float(error.headers.get("Retry-After") or 1), 1.0)
                time.sleep(pause)  # the apiserver's own back-off, not a synchronisation
                continue
            return body

    def items(self, path: str, **query: str) -> list[Obj]:
        body = self.get(path, **query)
        return list(body["items"]) if body is not None else []

    def served(self, group_version: str) -> bool:
        return self.get(f"/apis/{group_version}") is not None


def ref_of(obj: Mapping[str, Any]) -> Ref:
    metadata = obj["metadata"]
    return (str(obj["kind"]), str(metadata.get("namespace", "")), str(metadata["name"]))


def shown(ref: Ref) -> str:
    kind, namespace, name = ref
    return f"{kind}/{namespace + '/' if namespace else ''}{name}"


def runtimes(api: Api) -> dict[Ref, Obj]:
    """Every ClusterTrainingRuntime and TrainingRuntime of the cluster, by ref."""
    found: dict[Ref, Obj] = {}
    for plural, kind in (
        ("clustertrainingruntimes", "ClusterTrainingRuntime"),
        ("trainingruntimes", "TrainingRuntime"),
    ):
        for item in api.items(f"/apis/{TRAINER}/{plural}"):
            found[ref_of(item | {"kind": kind})] = item
    return found


def names_network(obj: Mapping[str, Any], network: str) -> bool:
    """Whether a node or launcher pod template's interfaces annotation names ``network``."""
    for job in obj["spec"]["template"]["spec"].get("replicatedJobs", []):
        pod = job.get("template", {}).get("spec", {}).get("template", {})
        value = pod.get("metadata", {}).get("annotations", {}).get(INTERFACES)
        if value and any(entry.get("network") == network for entry in json.loads(value)):
            return True
    return False


def recipe_bound(ref: Ref, obj: Mapping[str, Any]) -> bool:
    """Bound by the default ``recipe-runtimes`` name or by the label (the recipe delivers)."""
    labels = obj["metadata"].get("labels", {})
    return ref == TCPXO_CTR or labels.get(RECIPE_BOUND) == "true"


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One of nicguard's audit Events, as ``events.k8s.io/v1`` stores it."""

    name: str
    namespace: str
    reason: str
    type: str
    regarding: Ref
    note: str
    findings: str
    instance: str
    controller: str
    at: float  # eventTime, Unix seconds

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> AuditEvent:
        regarding = event["regarding"]
        metadata = event["metadata"]
        return cls(
            name=metadata["name"],
            namespace=metadata["namespace"],
            reason=event["reason"],
            type=event["type"],
            regarding=ref_of({"kind": regarding["kind"], "metadata": regarding}),
            note=event.get("note", ""),
            findings=metadata.get("annotations", {}).get(FINDINGS, ""),
            instance=event.get("reportingInstance", ""),
            controller=event.get("reportingController", ""),
            at=datetime.fromisoformat(event["eventTime"]).timestamp(),
        )


def audit_events(api: Api) -> list[AuditEvent]:
    """Every Event labelled as nicguard's, all namespaces, oldest first."""
    items = api.items("/apis/events.k8s.io/v1/events", labelSelector=MANAGED_BY)
    return sorted((AuditEvent.of(item) for item in items), key=lambda e: e.at)


def new_events(api: Api, before: Iterable[AuditEvent]) -> list[AuditEvent]:
    """nicguard's Events that are not in ``before``."""
    seen = {(e.namespace, e.name) for e in before}
    return [e for e in audit_events(api) if (e.namespace, e.name) not in seen]


def count(events: Iterable[AuditEvent], reason: str) -> Counter[Ref]:
    return Counter(e.regarding for e in events if e.reason == reason)


def reports(api: Api, kinds: ReportKinds) -> list[Obj]:
    """nicguard's reports of ``kinds``: every namespace's and the cluster report."""
    label = {"labelSelector": MANAGED_BY}
    found = api.items(kinds.path(kinds.namespaced), **label)
    found += api.items(kinds.path(kinds.cluster), **label)
    return [r for r in found if r["metadata"]["name"] == REPORT_NAME]


def wait_reports_quiet(api: Api, kinds: ReportKinds, diagnose: Callable[[], str]) -> None:
    """Until no report of nicguard's has changed for ``REPORT_INTERVAL`` (and a poll more): a
    change now is written at once, not held back by the coalescing of an earlier write."""
    last: dict[str, Any] = {"versions": None, "since": 0.0}

    def probe() -> bool | None:
        found = reports(api, kinds)
        versions = sorted(
            (r["kind"], r["metadata"].get("namespace", ""), r["metadata"]["resourceVersion"])
            for r in found
        )
        now = time.monotonic()
        if versions != last["versions"]:
            last["versions"], last["since"] = versions, now
        return now - last["since"] >= REPORT_INTERVAL + POLL or None

    wait_until(
        probe,
        timeout=SETTLE_TIMEOUT,
        what="nicguard's reports to be quiet for one coalescing interval",
        interval=POLL,
        diagnose=diagnose,
    )


def verdicts_of_reports(found: Iterable[Obj]) -> dict[Ref, Verdict]:
    """Per runtime: its result and its codes (the rules other than ``wiring``), in order."""
    rows: dict[Ref, list[tuple[str, str]]] = {}
    for report in found:
        for result in report.get("results", []):
            (resource,) = result["resources"]
            rows.setdefault(ref_of({"kind": resource["kind"], "metadata": resource}), []).append(
                (str(result["rule"]), str(result["result"]))
            )
    verdicts: dict[Ref, Verdict] = {}
    for ref, entries in rows.items():
        results = {outcome for _, outcome in entries}
        if len(results) != 1:
            raise AssertionError(f"{shown(ref)} has mixed results in its report: {entries}")
        codes = tuple(rule for rule, _ in entries if rule != "wiring")
        verdicts[ref] = (results.pop(), codes)
    return verdicts


def report_verdicts(api: Api, kinds: ReportKinds) -> dict[Ref, Verdict]:
    return verdicts_of_reports(reports(api, kinds))


def verdicts_of_audit(output: str) -> dict[Ref, Verdict]:
    """``nicguard audit --output json``'s results in the form of ``verdicts_of_reports``."""
    results = json.loads(output)["results"]
    return {
        (r["kind"], r["namespace"], r["name"]): (
            r["result"],
            tuple(v["code"] for v in r["violations"]),
        )
        for r in results
    }


_SAMPLE: Final = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def metrics(nicguard: Nicguard) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of nicguard's ``/metrics``, keyed by name and labels."""
    status, text = nicguard.probe("/metrics")
    assert status == 200, f"/metrics answered {status}"
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = re.findall(r'(\w+)="([^"]*)"', match["labels"] or "")
        samples[(match["name"], frozenset(labels))] = float(match["value"])
    return samples


def gauge(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    """A sample's value; 0 when absent (the audit's gauges of a code nobody fails)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def lease_holder(plane: ControlPlane) -> str:
    namespace, name = AUDITOR_LEASE
    path = "jsonpath={.spec.holderIdentity}"
    run = plane.kubectl("admin", "get", "lease", name, "-n", namespace, "-o", path)
    return checked(run, "reading the auditor Lease").stdout.strip()


def network_status(name: str, *, ready: bool) -> Obj:
    """The status of ``examples/cluster/networks.yaml``'s Network ``name``, its Ready condition
    set to ``ready`` (ParamsReady and the rest as the example has them)."""
    (network,) = (
        doc
        for doc in load("cluster/networks.yaml", raw=True)
        if doc["kind"] == "Network" and doc["metadata"]["name"] == name
    )
    status: Obj = network["status"]
    for condition in status["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "True" if ready else "False"
            condition["reason"] = "NetworkReady" if ready else "DataplaneUnreachable"
            condition["message"] = "" if ready else "e2e: the dataplane of this Network is down"
    return status


def nicguard_audit(plane: ControlPlane, *args: str) -> Run:
    """``nicguard audit ARGS`` against the cluster as ``admin``, with no NICGUARD_* setting."""
    return run_nicguard(plane.kubeconfig("admin"), "audit", *args, timeout=KUBECTL_TIMEOUT)


@dataclass(slots=True)
class Timed:
    """When each named condition was first seen to hold, in seconds after ``start``."""

    start: float
    seen: dict[str, float] = field(default_factory=dict)


def timed(
    start: float,
    checks: Mapping[str, Callable[[], bool]],
    *,
    timeout: float,
    diagnose: Callable[[], str],
) -> Timed:
    """Poll every check until each has held once (each is timed on its own), or fail."""
    result = Timed(start)

    def probe() -> Timed | None:
        for name, check in checks.items():
            if name not in result.seen and check():
                result.seen[name] = time.time() - start
        return result if len(result.seen) == len(checks) else None

    def why() -> str:
        missing = sorted(set(checks) - set(result.seen))
        return f"never held: {missing}; held: {result.seen}\n{diagnose()}"

    return wait_until(
        probe, timeout=timeout, what="the audit to show the change", interval=POLL, diagnose=why
    )


class Barrier:
    """A TrainingRuntime of its own wired to a Network of its own, in a namespace of its own.

    Its Network's round trip (NotReady, then Ready) makes the writer say two things about this
    runtime only; once both Events are stored, everything said before them is stored too (one
    writer thread, in order). What a test counts after ``cross()`` is final: no sleep needed.
    """

    def __init__(self, stack: Stack, namespace: str = "e2e-audit-barrier") -> None:
        self.stack, self.api = stack, Api(stack.plane)
        self.namespace = namespace
        self.network = f"gpu-nic-barrier-{os.urandom(3).hex()}"
        self.ref: Ref = ("TrainingRuntime", namespace, "barrier")

    def create(self) -> Barrier:
        plane = self.stack.plane
        create_namespace(plane, self.namespace)
        ready_network(self.stack, self.network)
        obj = runtime(self.ref[2], namespace=self.namespace, pairs=[("eth1", self.network)])
        # A denial has no side effect: apply until nicguard's cache holds the new Network.
        wait_until(
            lambda: self.stack.apply(obj, who="admin").returncode == 0 or None,
            timeout=SETTLE_TIMEOUT,
            what="the barrier runtime to be admitted",
            diagnose=self.stack.report,
        )
        return self

    def set_ready(self, ready: bool) -> None:
        set_status(self.stack.plane, NETWORKS, self.network, conditions(ready=ready))

    def cross(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """NotReady, then Ready: wait for the WiringDrift, then for the WiringRestored."""
        for ready, reason in ((False, DRIFT), (True, RESTORED)):
            self._said_after_flip(ready, reason, timeout)

    def _said_after_flip(self, ready: bool, reason: str, timeout: float) -> None:
        before = audit_events(self.api)
        self.set_ready(ready)
        wait_until(
            lambda: count(new_events(self.api, before), reason)[self.ref] >= 1 or None,
            timeout=timeout,
            what=f"the barrier's {reason}",
            diagnose=self.stack.report,
        )


# The loggers of the audit and of what its writer calls (docs/architecture.md).
AUDIT_LOGGERS: Final = (
    "app.audit",
    "app.kube.events",
    "app.kube.reports",
    "app.kube.discovery",
    "app.kube.lease",
)


def level(entry: Mapping[str, Any]) -> str:
    return str(entry.get("severity", "")).lower()


def audit_complaints(nicguard: Nicguard) -> list[dict[str, Any]]:
    """Warnings and errors nicguard logged about the audit, its Events, reports and Lease."""
    return [
        entry
        for entry in nicguard.log_lines()
        if level(entry) in ("warning", "error", "critical")
        and str(entry.get("logger", "")).startswith(AUDIT_LOGGERS)
    ]


def takeovers(nicguard: Nicguard) -> list[dict[str, Any]]:
    """The log lines in which this replica became the audit writer (all its runs)."""
    return [
        entry
        for entry in nicguard.log_lines()
        if str(entry.get("message", "")) == "audit writer: this replica writes"
    ]
