"""What the audit publishes (docs/audit.md): policy report objects of either API, and which Event a
runtime's new standing calls for, with its note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from app.domain.cluster import RuntimeKey
from app.domain.drift import Result, Standing
from app.domain.kinds import TRAINER_GROUP, TRAINER_VERSION

REPORT_NAME: Final = "nicguard"
SOURCE: Final = "nicguard"
POLICY: Final = "nicguard-wiring"
PASS_RULE: Final = "wiring"  # noqa: S105 - a rule name
MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "nicguard")
WIRING_DRIFT: Final = "WiringDrift"
WIRING_RESTORED: Final = "WiringRestored"
NOTE_MAX_BYTES: Final = 1024  # events.k8s.io/v1 refuses a longer note


class ReportApi(StrEnum):
    """A policy report API nicguard can write; the value is the setting's."""

    OPENREPORTS = "openreports"
    WGPOLICYK8S = "wgpolicyk8s"

    @property
    def group(self) -> str:
        return "openreports.io" if self is ReportApi.OPENREPORTS else "wgpolicyk8s.io"

    @property
    def version(self) -> str:
        return "v1alpha1" if self is ReportApi.OPENREPORTS else "v1alpha2"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def kind(self, namespace: str) -> str:
        """The namespaced kind for a namespace, the cluster-scoped one for ``""``."""
        if self is ReportApi.OPENREPORTS:
            return "Report" if namespace else "ClusterReport"
        return "PolicyReport" if namespace else "ClusterPolicyReport"

    def plural(self, namespace: str) -> str:
        return self.kind(namespace).lower() + "s"


@dataclass(frozen=True, slots=True)
class Audited:
    """One runtime as reports show it: its key and its standing."""

    key: RuntimeKey
    standing: Standing


def report_namespace(key: RuntimeKey) -> str:
    """The report a runtime belongs in: its namespace, ``""`` for the cluster report."""
    return key[1]


def report(
    api: ReportApi, namespace: str, audited: Iterable[Audited], now: int
) -> dict[str, object]:
    """The report of one namespace (``""``: the cluster report), results sorted by runtime."""
    results = [
        result for entry in sorted(audited, key=lambda a: a.key) for result in _results(entry, now)
    ]
    summary = Counter(str(r["result"]) for r in results)
    metadata: dict[str, object] = {"name": REPORT_NAME, "labels": dict([MANAGED_BY])}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": api.api_version,
        "kind": api.kind(namespace),
        "metadata": metadata,
        "summary": {k: summary.get(k, 0) for k in ("pass", "fail", "warn", "error", "skip")},
        "results": results,
    }


def runtime_reference(key: RuntimeKey) -> dict[str, object]:
    """An object reference to a runtime, as reports' ``resources`` and Events' ``regarding``.

    No uid: the cached copies leave it out (8,000 runtimes: ~0.7 MB), and kind, namespace and
    name are what ``kubectl events --for`` and report viewers match on."""
    kind, namespace, name = key
    reference: dict[str, object] = {
        "apiVersion": f"{TRAINER_GROUP}/{TRAINER_VERSION}",
        "kind": kind.value,
        "name": name,
    }
    if namespace:
        reference["namespace"] = namespace
    return reference


def _results(entry: Audited, now: int) -> list[dict[str, object]]:
    common: dict[str, object] = {
        "source": SOURCE,
        "policy": POLICY,
        "resources": [runtime_reference(entry.key)],
        "timestamp": {"seconds": now, "nanos": 0},
    }
    standing = entry.standing
    if standing.result is Result.PASS:
        return [{**common, "rule": PASS_RULE, "result": "pass", "message": "wiring as expected"}]
    return [
        {
            **common,
            "rule": violation.code.value,
            "result": standing.result.value,
            "message": violation.message,
            "properties": {"field": violation.field},
        }
        for violation in standing.findings
    ]


def event_reason(published: str, standing: Standing) -> str | None:
    """The Event a standing calls for, given the fingerprint last published for the runtime
    (``""``: passing, or nothing published): None when there is nothing new to say."""
    if standing.findings:
        return WIRING_DRIFT if standing.fingerprint != published else None
    return WIRING_RESTORED if published else None


def event_note(standing: Standing) -> str:
    """The violation lines, cut to what an Event may hold."""
    if not standing.findings:
        return "wiring as expected again"
    note = "\n".join(standing.lines())
    encoded = note.encode()
    if len(encoded) <= NOTE_MAX_BYTES:
        return note
    return encoded[: NOTE_MAX_BYTES - 3].decode(errors="ignore") + "…"
