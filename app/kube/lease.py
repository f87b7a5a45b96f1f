"""One writer at a time: a coordination.k8s.io/v1 Lease, acquired and renewed like client-go's.

A Lease held by someone else counts as expired when its record has not changed for its
``leaseDurationSeconds`` by *our* monotonic clock (no trust in other nodes' wall clocks). Every
write is a replace at the resourceVersion just read, so two candidates never both win.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client import ApiException, CoordinationV1Api, V1Lease

from app.domain.cluster import ObjectName
from app.domain.fields import JsonMap, map_at, str_at
from app.kube.errors import CONFLICT, NOT_FOUND, TIMEOUT, read_json, status_of


def _micro_time(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseLock:
    """Call ``try_acquire_or_renew`` each period; ``release`` lets another take over at once."""

    def __init__(
        self,
        api: CoordinationV1Api,
        name: ObjectName,
        identity: str,
        *,
        duration_seconds: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.identity = name, identity
        self._api, self._duration, self._clock = api, duration_seconds, clock
        self._observed: tuple[object, ...] = ()
        self._observed_at = 0.0
        self.holding = False

    def try_acquire_or_renew(self) -> bool:
        """Whether we hold the Lease now; API failures raise (the caller counts them as no)."""
        self.holding = False
        now = _micro_time(datetime.now(UTC))
        try:
            lease = self._read()
        except ApiException as error:
            if status_of(error) != NOT_FOUND:
                raise
            return self._write(self._body({}, self._spec(now, now, 0)), create=True)
        spec = map_at(lease, "spec") or {}
        holder = str_at(spec, "holderIdentity") or ""
        duration = spec.get("leaseDurationSeconds")
        record = (holder, str_at(spec, "renewTime"), duration, spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()
        seconds = duration if isinstance(duration, int) and duration > 0 else self._duration
        if holder and holder != self.identity and self._clock() < self._observed_at + seconds:
            return False
        transitions = spec.get("leaseTransitions")
        count = transitions if isinstance(transitions, int) else 0
        if holder == self.identity:
            acquired = str_at(spec, "acquireTime") or now
        else:
            acquired, count = now, count + 1
        return self._write(self._body(lease, self._spec(acquired, now, count)), create=False)

    def release(self) -> None:
        """Give the Lease up (holder cleared, 1 s duration) if we still hold it."""
        if not self.holding:
            return
        self.holding = False
        lease = self._read()
        spec = map_at(lease, "spec") or {}
        if str_at(spec, "holderIdentity") != self.identity:
            return
        now = _micro_time(datetime.now(UTC))
        transitions = spec.get("leaseTransitions")
        released = {
            **self._spec(now, now, transitions if isinstance(transitions, int) else 0),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
        }
        read_json(self._send(self._body(lease, released), create=False))

    def _read(self) -> JsonMap:
        return read_json(
            self._api.read_namespaced_lease(
                self.name.name,
                self.name.namespace,
                _preload_content=False,
                _request_timeout=TIMEOUT,
            )
        )

    def _send(self, body: JsonMap, *, create: bool) -> object:
        name, namespace, lease = self.name.name, self.name.namespace, V1Lease.model_validate(body)
        if create:
            return self._api.create_namespaced_lease(
                namespace, lease, _preload_content=False, _request_timeout=TIMEOUT
            )
        return self._api.replace_namespaced_lease(
            name, namespace, lease, _preload_content=False, _request_timeout=TIMEOUT
        )

    def _write(self, body: JsonMap, *, create: bool) -> bool:
        try:
            written = read_json(self._send(body, create=create))
        except ApiException as error:
            if status_of(error) == CONFLICT:  # someone else wrote first; look again next period
                return False
            raise
        spec = map_at(written, "spec") or {}
        self._observed = (
            self.identity,
            str_at(spec, "renewTime"),
            spec.get("leaseDurationSeconds"),
            spec.get("leaseTransitions"),
        )
        self._observed_at = self._clock()
        self.holding = True
        return True

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict[str, object]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self._duration,
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def _body(self, lease: JsonMap, spec: dict[str, object]) -> JsonMap:
        metadata: dict[str, object] = {"name": self.name.name, "namespace": self.name.namespace}
        current = map_at(lease, "metadata") or {}
        for key in ("resourceVersion", "labels", "annotations"):
            if key in current:
                metadata[key] = current[key]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }
