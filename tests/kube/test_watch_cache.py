"""WatchCache driven by a scripted list/watch source: no API server, no mocks of our modules."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import pytest
from immutables import Map
from kubernetes.client import ApiException

from app.domain.fields import JsonMap, str_at
from app.kube.client import Listing, WatchEvent
from app.kube.watch_cache import CacheState, Pacing, WatchCache, backoff_delay

T = TypeVar("T")
Stream = Sequence[WatchEvent | Exception]

FAST = Pacing(backoff_base=0.001, backoff_cap=0.004, grace=60.0, recheck=0.001)


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll ``predicate`` until it holds; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        time.sleep(0.001)  # poll interval only: the deadline is what the test waits on


@dataclass
class Held(Generic[T]):
    """A scripted answer given only once ``release`` is set, to observe the cache meanwhile."""

    step: T
    release: threading.Event = field(default_factory=threading.Event)


class ScriptedSource:
    """A ``ListWatch`` that plays LIST answers and watch streams in order, then idles."""

    def __init__(
        self,
        lists: Sequence[Listing | Exception | Held[Listing | Exception]] = (),
        watches: Sequence[Stream | Exception | Held[Stream | Exception]] = (),
    ) -> None:
        self._lists = deque(lists)
        self._watches = deque(watches)
        self._lock = threading.Lock()
        self.list_calls = 0
        self.watch_versions: list[str] = []
        self.closed = threading.Event()

    def close(self) -> None:
        """Release every held answer and idle call (the cache is stopping)."""
        self.closed.set()
        for step in (*self._lists, *self._watches):
            if isinstance(step, Held):
                step.release.set()

    def list(self) -> Listing:
        with self._lock:
            self.list_calls += 1
            step = self._lists.popleft() if self._lists else None
        if step is None:
            self.closed.wait()
            raise ConnectionError("source closed")
        if isinstance(step, Held):
            step.release.wait()
            step = step.step
        if isinstance(step, Exception):
            raise step
        return step

    def watch(self, resource_version: str) -> Iterator[WatchEvent]:
        with self._lock:
            self.watch_versions.append(resource_version)
            step = self._watches.popleft() if self._watches else None
        if step is None:
            return self._idle()
        if isinstance(step, Held):
            step.release.wait()
            step = step.step
        if isinstance(step, Exception):
            raise step
        return self._play(step)

    def _idle(self) -> Iterator[WatchEvent]:
        self.closed.wait()
        yield from ()

    @staticmethod
    def _play(stream: Stream) -> Iterator[WatchEvent]:
        for step in stream:
            if isinstance(step, Exception):
                raise step
            yield step


def thing(name: str, version: str, value: str | None = None) -> JsonMap:
    spec = {} if value is None else {"value": value}
    return {"metadata": {"name": name, "resourceVersion": version}, "spec": spec}


def event(event_type: str, name: str, version: str, value: str | None = None) -> WatchEvent:
    return WatchEvent(event_type, thing(name, version, value))


def bookmark(version: str) -> WatchEvent:
    return WatchEvent("BOOKMARK", {"kind": "Thing", "metadata": {"resourceVersion": version}})


def error_event(code: int) -> WatchEvent:
    status = {"kind": "Status", "code": code, "reason": "Expired", "message": "too old"}
    return WatchEvent("ERROR", status)


def listing(version: str, *items: JsonMap) -> Listing:
    return Listing(items, version)


def _value(obj: JsonMap) -> str | None:
    value = str_at(obj, "spec", "value")
    if value == "boom":
        raise ValueError("converter bug")
    return value


Start = Callable[..., WatchCache[str, str]]


def things(source: ScriptedSource, pacing: Pacing = FAST) -> WatchCache[str, str]:
    """A cache of "things" keyed by name, valued by ``spec.value`` (not started)."""
    return WatchCache[str, str](
        name="things",
        resource="things.example.com",
        source=source,
        key=lambda obj: str_at(obj, "metadata", "name"),
        convert=_value,
        pacing=pacing,
    )


@pytest.fixture
def start() -> Iterator[Start]:
    running: list[tuple[ScriptedSource, WatchCache[str, str]]] = []

    def run(source: ScriptedSource, pacing: Pacing = FAST) -> WatchCache[str, str]:
        cache = things(source, pacing)
        cache.start()
        running.append((source, cache))
        return cache

    yield run
    for source, cache in running:
        # Closes the source, which releases its held and idle calls; the wait bounds a hang.
        cache.stop(timeout=30.0)
        assert source.closed.is_set()
        assert not cache.alive()


def test_list_then_watch_applies_added_modified_deleted(start: Start) -> None:
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[
            [
                event("ADDED", "b", "11", "two"),
                event("MODIFIED", "a", "12", "uno"),
                event("DELETED", "b", "13"),
            ]
        ],
    )
    cache = start(source)
    wait_for(lambda: len(source.watch_versions) == 2)
    assert dict(cache.state.items) == {"a": "uno"}
    assert cache.synced
    assert cache.first_sync.is_set()
    assert source.watch_versions == ["10", "13"]


def test_unsynced_until_the_first_list_completes(start: Start) -> None:
    held: Held[Listing | Exception] = Held(listing("10", thing("a", "5", "one")))
    source = ScriptedSource(lists=[held])
    cache = start(source)
    wait_for(lambda: source.list_calls == 1)
    before = cache.state
    assert not before.synced
    assert not cache.first_sync.is_set()
    assert cache.last_event_age() is None
    held.release.set()
    assert cache.first_sync.wait(5)
    after = cache.state
    assert after.synced
    assert dict(after.items) == {"a": "one"}
    age = cache.last_event_age()
    assert age is not None
    assert age >= 0


def test_watch_resumes_from_bookmarks_and_the_last_event_version(start: Start) -> None:
    source = ScriptedSource(
        lists=[listing("10")],
        watches=[[bookmark("20")], [event("ADDED", "c", "21", "three")], []],
    )
    cache = start(source)
    wait_for(lambda: len(source.watch_versions) == 4)
    assert source.watch_versions == ["10", "20", "21", "21"]
    assert source.list_calls == 1
    assert dict(cache.state.items) == {"c": "three"}


@pytest.mark.parametrize(
    "expiry",
    [
        pytest.param([error_event(410)], id="ERROR event 410"),
        pytest.param(ApiException(status=410, reason="Gone"), id="ApiException 410"),
    ],
)
def test_gone_relists_and_stays_unsynced_until_the_relist_is_done(
    start: Start, expiry: Stream | Exception
) -> None:
    relist: Held[Listing | Exception] = Held(listing("30", thing("b", "29", "two")))
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one")), relist],
        watches=[[event("ADDED", "x", "11", "ex")], expiry],
    )
    cache = start(source)
    wait_for(lambda: source.list_calls == 2)
    pending = cache.state
    assert not pending.synced
    assert pending.error == "watch expired (410 Gone); relisting"
    relist.release.set()
    wait_for(lambda: source.watch_versions[-1:] == ["30"])
    assert cache.state == CacheState(Map({"b": "two"}), synced=True)


def test_connection_errors_back_off_and_resume_from_the_last_version(start: Start) -> None:
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[
            ConnectionRefusedError("refused"),
            [event("ADDED", "b", "11", "two"), ConnectionResetError("reset")],
            [event("ADDED", "c", "12", "three")],
        ],
    )
    cache = start(source)
    wait_for(lambda: len(source.watch_versions) == 4)
    assert source.watch_versions == ["10", "10", "11", "12"]
    assert source.list_calls == 1
    assert dict(cache.state.items) == {"a": "one", "b": "two", "c": "three"}
    assert cache.synced
    assert cache.error is None


def test_failure_outlasting_the_grace_marks_unsynced_until_the_watch_reopens(
    start: Start,
) -> None:
    reopen: Held[Stream | Exception] = Held([event("ADDED", "b", "11", "two")])
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[ConnectionRefusedError("apiserver down"), reopen],
    )
    cache = start(source, Pacing(backoff_base=0.001, backoff_cap=0.004, grace=0.0))
    wait_for(lambda: len(source.watch_versions) == 2)
    assert not cache.synced
    assert cache.error == (
        "watch things.example.com failed: ConnectionRefusedError: apiserver down"
    )
    assert dict(cache.state.items) == {"a": "one"}
    reopen.release.set()
    wait_for(lambda: cache.synced and "b" in cache.state.items)
    assert cache.error is None


def test_failed_list_is_unsynced_and_retried(start: Start) -> None:
    retry: Held[Listing | Exception] = Held(listing("10", thing("a", "5", "one")))
    source = ScriptedSource(lists=[ConnectionRefusedError("down"), retry])
    cache = start(source)
    wait_for(lambda: source.list_calls == 2)
    assert not cache.synced
    assert cache.error == "list things.example.com failed: ConnectionRefusedError: down"
    retry.release.set()
    assert cache.first_sync.wait(5)
    assert cache.synced


def test_forbidden_list_names_the_missing_permission_and_recovers(start: Start) -> None:
    granted: Held[Listing | Exception] = Held(listing("10", thing("a", "5", "one")))
    source = ScriptedSource(lists=[ApiException(status=403, reason="Forbidden"), granted])
    cache = start(source)
    wait_for(lambda: source.list_calls == 2)
    assert not cache.synced
    assert cache.error == "forbidden: cannot list things.example.com (RBAC)"
    granted.release.set()
    wait_for(lambda: cache.synced)
    assert cache.error is None


def test_forbidden_watch_unsyncs_at_once_despite_the_grace(start: Start) -> None:
    granted: Held[Stream | Exception] = Held([])
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[ApiException(status=403, reason="Forbidden"), granted],
    )
    cache = start(source)
    wait_for(lambda: len(source.watch_versions) == 2)
    assert not cache.synced
    assert cache.error == "forbidden: cannot watch things.example.com (RBAC)"
    granted.release.set()
    wait_for(lambda: cache.synced)


def test_not_found_list_marks_not_served_until_the_api_appears(start: Start) -> None:
    appears: Held[Listing | Exception] = Held(listing("10", thing("a", "5", "one")))
    source = ScriptedSource(
        lists=[ApiException(status=404, reason="Not Found"), ApiException(status=404), appears]
    )
    cache = start(source)
    wait_for(lambda: source.list_calls == 3)
    assert cache.first_sync.is_set()
    assert cache.synced
    assert not cache.state.served
    assert dict(cache.state.items) == {}
    appears.release.set()
    wait_for(lambda: cache.state.served)
    assert dict(cache.state.items) == {"a": "one"}


def test_not_found_while_watching_relists(start: Start) -> None:
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one")), ApiException(status=404)],
        watches=[ApiException(status=404)],
    )
    cache = start(source)
    wait_for(lambda: not cache.state.served)
    assert cache.synced
    assert dict(cache.state.items) == {}


def test_unconvertible_objects_are_dropped_and_nameless_ones_skipped(start: Start) -> None:
    nameless = WatchEvent("ADDED", {"metadata": {"resourceVersion": "12"}, "spec": {"value": "x"}})
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[[event("MODIFIED", "a", "11"), nameless]],
    )
    cache = start(source)
    wait_for(lambda: len(source.watch_versions) == 2)
    assert dict(cache.state.items) == {}
    assert source.watch_versions == ["10", "12"]


def test_a_converter_error_is_retried_without_killing_the_thread(start: Start) -> None:
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[[event("ADDED", "b", "11", "boom")], [event("ADDED", "b", "11", "fixed")]],
    )
    cache = start(source)
    wait_for(lambda: len(source.watch_versions) == 3)
    assert source.watch_versions == ["10", "10", "11"]
    assert dict(cache.state.items) == {"a": "one", "b": "fixed"}
    assert cache.alive()


def test_backoff_doubles_up_to_the_cap_scaled_by_jitter() -> None:
    steady = Pacing(backoff_base=0.5, backoff_cap=30.0, jitter=lambda: 1.0)
    assert [backoff_delay(steady, n) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff_delay(steady, 10_000) == 30
    halved = Pacing(backoff_base=0.5, backoff_cap=30.0, jitter=lambda: 0.5)
    assert backoff_delay(halved, 2) == 1.0


def test_a_hanging_retry_cannot_stretch_the_grace(start: Start) -> None:
    """The last state is served for the grace after a watch failure, not for as long as the next
    attempt takes: a reconnect can hang in connect (a partition) or back off past the grace."""
    hung: Held[Stream | Exception] = Held([event("ADDED", "b", "11", "two")])
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one"))],
        watches=[ConnectionResetError("reset"), hung],
    )
    grace = 1.0
    started = time.monotonic()  # the failure, and so the grace, begins after this
    cache = start(source, Pacing(backoff_base=0.001, backoff_cap=0.004, grace=grace))
    try:
        wait_for(lambda: len(source.watch_versions) == 2)  # the retry now hangs
        synced = cache.synced
        # Within the grace, the last state: unsynced only once the grace can be over (a busy
        # machine may get here after it, which proves nothing either way).
        assert synced or time.monotonic() - started >= grace
        assert cache.error == "watch things.example.com failed: ConnectionResetError: reset"
        wait_for(lambda: not cache.synced)  # the grace is over although nothing new failed
        assert dict(cache.state.items) == {"a": "one"}
        assert cache.error == "watch things.example.com failed: ConnectionResetError: reset"
    finally:
        hung.release.set()  # already taken from the source: its close() would not release it
    wait_for(lambda: cache.synced and "b" in cache.state.items)
    assert cache.error is None


def listened(
    source: ScriptedSource, pacing: Pacing = FAST
) -> tuple[WatchCache[str, str], list[frozenset[str] | None]]:
    """A started cache whose every change notice is recorded (subscribed before it starts)."""
    cache = things(source, pacing)
    heard: list[frozenset[str] | None] = []
    cache.subscribe(heard.append)
    cache.start()
    return cache, heard


def test_listeners_hear_each_changed_key_and_every_list_as_everything() -> None:
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one")), listing("30")],
        watches=[
            [event("ADDED", "b", "11", "two"), bookmark("12"), event("DELETED", "a", "13")],
            [error_event(410)],
        ],
    )
    cache, heard = listened(source)
    try:
        wait_for(lambda: source.list_calls == 2 and len(source.watch_versions) == 3)
        assert heard == [None, frozenset({"b"}), frozenset({"a"}), None]
    finally:
        cache.stop()


def test_a_listener_that_fails_does_not_stop_the_cache() -> None:
    source = ScriptedSource(lists=[listing("10")], watches=[[event("ADDED", "b", "11", "two")]])
    cache = things(source)

    def broken(_: frozenset[str] | None) -> None:
        raise RuntimeError("listener bug")

    cache.subscribe(broken)
    cache.start()
    try:
        wait_for(lambda: dict(cache.state.items) == {"b": "two"})
        assert cache.alive()
    finally:
        cache.stop()


def test_listeners_hear_everything_when_the_watch_returns_after_the_grace() -> None:
    failing = [ConnectionError("reset")] * 3
    source = ScriptedSource(
        lists=[listing("10")], watches=[*failing, [event("ADDED", "b", "11", "x")]]
    )
    lapsing = Pacing(backoff_base=0.001, backoff_cap=0.004, grace=0.0, recheck=0.001)
    cache, heard = listened(source, lapsing)
    try:
        wait_for(lambda: dict(cache.state.items) == {"b": "x"})
        assert heard[0] is None  # the first list
        assert heard[-2:] == [None, frozenset({"b"})]  # back after the grace: all, then the event
    finally:
        cache.stop()


def test_listeners_hear_everything_when_the_api_stops_being_served() -> None:
    source = ScriptedSource(
        lists=[listing("10", thing("a", "5", "one")), ApiException(status=404)],
        watches=[[error_event(410)]],
    )
    cache, heard = listened(source)
    try:
        wait_for(lambda: not cache.state.served)
        assert heard == [None, None]
    finally:
        cache.stop()
