"""Audit Events (``events.k8s.io/v1``) on runtimes, and on the snapshots and workloads that name
ResourceClaimTemplates: created by the audit's writers, and read back at each takeover so that
what was said is never said again.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Final

from kubernetes.client import ApiClient, CustomObjectsApi, EventsV1Api

from app.domain.claimant_audit import CLAIMANT_KINDS, ClaimantKey
from app.domain.cluster import RuntimeKey, runtime_key
from app.domain.drift import Standing
from app.domain.fields import JsonMap, as_list, as_map, map_at, str_at
from app.domain.kinds import Kind
from app.domain.policy_reports import MANAGED_BY, WIRING_DRIFT, event_note, runtime_reference
from app.kube.errors import TIMEOUT, read_json

FINDINGS_ANNOTATION: Final = "nicguard.dev/findings"
"""The fingerprint of the findings an Event announced (``Standing.fingerprint``)."""
REPORTING_CONTROLLER: Final = "nicguard.dev/auditor"
ACTION: Final = "Audit"
_SELECTOR: Final = "=".join(MANAGED_BY)
_GROUP, _VERSION = "events.k8s.io", "v1"
_CLUSTER_EVENTS: Final = "default"  # where Events on cluster-scoped objects go, as client-go does
_NAME_MAX: Final = 253 - 17  # room for ".<nanoseconds in hex>"


class EventRecorder:
    """Satisfies ``app.audit.writer.EventSink`` over the real API."""

    def __init__(self, api_client: ApiClient, instance: str) -> None:
        self._api, self._instance = EventsV1Api(api_client), instance
        # Created through the generic path with a plain mapping: the typed Event model costs a
        # validation per Event, and a Network flap can make hundreds at once.
        self._objects = CustomObjectsApi(api_client)

    def published(self) -> dict[RuntimeKey, str]:
        found = self._published()
        runtimes = ((_runtime_of(regarding), said) for regarding, said in found.items())
        return {key: said for key, said in runtimes if key is not None}

    def published_on_claimants(self) -> dict[ClaimantKey, str]:
        """The fingerprint of the newest audit Event per snapshot, JobSet, Job or Pod."""
        return {ref: said for ref, said in self._published().items() if ref[1] in CLAIMANT_KINDS}

    def _published(self) -> dict[ClaimantKey, str]:
        """The newest fingerprint per object an audit Event regards (apiVersion, kind,
        namespace, name)."""
        newest: dict[ClaimantKey, tuple[str, str]] = {}
        token: str | None = None
        while True:
            body = read_json(
                self._api.list_event_for_all_namespaces(
                    label_selector=_SELECTOR,
                    limit=500,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=TIMEOUT,
                )
            )
            for raw in as_list(body.get("items")) or ():
                said = _said(as_map(raw))
                if said is not None and said[1] >= newest.get(said[0], ("", ""))[0]:
                    newest[said[0]] = said[1:]
            token = str_at(body, "metadata", "continue")
            if not token:
                return {key: fingerprint for key, (_, fingerprint) in newest.items()}

    def emit(self, key: RuntimeKey, reason: str, standing: Standing) -> None:
        self.emit_on(runtime_reference(key), reason, standing)

    def emit_on(self, regarding: JsonMap, reason: str, standing: Standing) -> None:
        """An audit Event on the object ``regarding`` references."""
        namespace, name = str_at(regarding, "namespace"), str_at(regarding, "name") or ""
        now = time.time_ns()
        body = {
            "apiVersion": f"{_GROUP}/{_VERSION}",
            "kind": "Event",
            "metadata": {
                "name": f"{name[:_NAME_MAX]}.{now:x}",
                "namespace": namespace or _CLUSTER_EVENTS,
                "labels": dict([MANAGED_BY]),
                "annotations": {FINDINGS_ANNOTATION: standing.fingerprint},
            },
            "eventTime": _micro_time(now),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance[:128],
            "action": ACTION,
            "reason": reason,
            "type": "Warning" if reason == WIRING_DRIFT else "Normal",
            "note": event_note(standing),
            "regarding": dict(regarding),
        }
        read_json(
            self._objects.create_namespaced_custom_object(
                _GROUP,
                _VERSION,
                namespace or _CLUSTER_EVENTS,
                "events",
                body,
                _preload_content=False,
                _request_timeout=TIMEOUT,
            )
        )


def _said(event: JsonMap | None) -> tuple[ClaimantKey, str, str] | None:
    """(what it regards, eventTime, fingerprint) of one of our Events, or None for another's."""
    if event is None or str_at(event, "reportingController") != REPORTING_CONTROLLER:
        return None
    regarding = map_at(event, "regarding")
    name = str_at(regarding, "name")
    if not name:
        return None
    ref = (
        str_at(regarding, "apiVersion") or "",
        str_at(regarding, "kind") or "",
        str_at(regarding, "namespace") or "",
        name,
    )
    fingerprint = str_at(event, "metadata", "annotations", FINDINGS_ANNOTATION) or ""
    return ref, str_at(event, "eventTime") or "", fingerprint


def _runtime_of(regarding: ClaimantKey) -> RuntimeKey | None:
    try:
        kind = Kind(regarding[1])
    except ValueError:
        return None
    return runtime_key(kind, regarding[2], regarding[3]) if kind.is_runtime else None


def _micro_time(nanoseconds: int) -> str:
    moment = datetime.fromtimestamp(nanoseconds / 1e9, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
