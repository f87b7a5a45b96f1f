"""Tests for app.certificates.lease: one writer at a time, takeover by our own clock, release.

The API is an in-memory stand-in for ``CoordinationV1Api`` with the apiserver's optimistic
concurrency (replace at a stale resourceVersion: 409; create of an existing Lease: 409).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes.client import ApiException, V1Lease

from app.domain.cluster import ObjectName
from app.kube.lease import LeaseLock

NAME = ObjectName("nicguard-system", "nicguard-cert-writer")


def as_json(body: object) -> dict[str, Any]:
    """What the client would send: the V1Lease the code built, as JSON."""
    assert isinstance(body, V1Lease)
    return body.model_dump(mode="json", by_alias=True, exclude_none=True)


class FakeLeases:
    """One namespace's Leases, as raw JSON responses (``_preload_content=False``)."""

    def __init__(self) -> None:
        self.stored: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.fail: ApiException | None = None

    def _answer(self, obj: dict[str, Any]) -> urllib3.HTTPResponse:
        return urllib3.HTTPResponse(body=json.dumps(obj).encode(), status=200)

    def _store(self, body: object) -> urllib3.HTTPResponse:
        obj = as_json(body)
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.stored[obj["metadata"]["name"]] = obj
        return self._answer(obj)

    def read_namespaced_lease(self, name: str, namespace: str, **_: object) -> object:
        if self.fail is not None:
            raise self.fail
        if name not in self.stored:
            raise ApiException(status=404, reason="Not Found")
        return self._answer(self.stored[name])

    def create_namespaced_lease(self, namespace: str, body: object, **_: object) -> object:
        name = as_json(body)["metadata"]["name"]
        if name in self.stored:
            raise ApiException(status=409, reason="AlreadyExists")
        return self._store(body)

    def replace_namespaced_lease(
        self, name: str, namespace: str, body: object, **_: object
    ) -> object:
        sent = as_json(body)["metadata"].get("resourceVersion")
        if sent != self.stored[name]["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        return self._store(body)

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.stored[NAME.name]["spec"]
        return spec


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def api() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def lock(api: FakeLeases, clock: Clock, identity: str) -> LeaseLock:
    return LeaseLock(api, NAME, identity, duration_seconds=30, clock=clock)  # type: ignore[arg-type]


def test_the_first_candidate_creates_the_lease_and_renews_it(api: FakeLeases, clock: Clock) -> None:
    a = lock(api, clock, "a")
    assert a.try_acquire_or_renew()
    assert a.holding
    first = dict(api.spec())
    assert first["holderIdentity"] == "a"
    assert first["leaseDurationSeconds"] == 30
    assert first["leaseTransitions"] == 0
    assert a.try_acquire_or_renew()
    assert api.spec()["acquireTime"] == first["acquireTime"]
    assert api.spec()["renewTime"] >= first["renewTime"]


def test_a_held_lease_is_taken_over_only_after_it_went_unrenewed_for_its_duration(
    api: FakeLeases, clock: Clock
) -> None:
    a, b = lock(api, clock, "a"), lock(api, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # first sight: the duration starts now, by b's clock
    clock.now += 20
    assert a.try_acquire_or_renew()  # a renews: b sees a new record and waits again
    clock.now += 20
    assert not b.try_acquire_or_renew()
    clock.now += 29
    assert not b.try_acquire_or_renew()
    clock.now += 2  # 31 s without a change: a is gone
    assert b.try_acquire_or_renew()
    assert api.spec()["holderIdentity"] == "b"
    assert api.spec()["leaseTransitions"] == 1
    assert not a.try_acquire_or_renew()  # a came back: b's lease is fresh
    assert not a.holding


def test_a_released_lease_is_taken_at_once(api: FakeLeases, clock: Clock) -> None:
    a, b = lock(api, clock, "a"), lock(api, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert api.spec()["holderIdentity"] == ""
    assert api.spec()["leaseDurationSeconds"] == 1
    assert not a.holding
    assert b.try_acquire_or_renew()
    assert api.spec()["leaseTransitions"] == 1


def test_release_leaves_someone_elses_lease_alone(api: FakeLeases, clock: Clock) -> None:
    a, b = lock(api, clock, "a"), lock(api, clock, "b")
    assert a.try_acquire_or_renew()
    clock.now += 100
    b.try_acquire_or_renew()  # first sight of a's record
    clock.now += 31
    assert b.try_acquire_or_renew()
    a.holding = True  # a believes it still holds (e.g. a long pause)
    a.release()
    assert api.spec()["holderIdentity"] == "b"


def test_a_concurrent_write_loses_with_a_conflict(api: FakeLeases, clock: Clock) -> None:
    a, b = lock(api, clock, "a"), lock(api, clock, "b")
    assert a.try_acquire_or_renew()
    a.release()
    real_read = api.read_namespaced_lease

    def read_then_b_wins(name: str, namespace: str, **options: object) -> object:
        answer = real_read(name, namespace, **options)
        api.read_namespaced_lease = real_read  # type: ignore[method-assign]
        assert b.try_acquire_or_renew()  # b writes between a's read and a's replace
        return answer

    api.read_namespaced_lease = read_then_b_wins  # type: ignore[method-assign]
    assert not a.try_acquire_or_renew()
    assert api.spec()["holderIdentity"] == "b"


def test_api_failures_raise_and_leave_us_not_holding(api: FakeLeases, clock: Clock) -> None:
    a = lock(api, clock, "a")
    assert a.try_acquire_or_renew()
    api.fail = ApiException(status=403, reason="Forbidden")
    with pytest.raises(ApiException):
        a.try_acquire_or_renew()
    assert not a.holding
