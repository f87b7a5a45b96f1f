"""A list+watch cache of one API resource, kept current by a daemon thread.

Readers get an immutable ``CacheState`` swapped in whole: no waiting, no I/O on the request path.
Its items are a persistent map (a HAMT): a watch event makes the next state in O(log n), sharing
all but a few nodes with the one readers may still hold.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Final, Generic, Protocol, TypeVar

from immutables import Map

from app.domain.fields import JsonMap, str_at
from app.kube.client import Listing, WatchEvent
from app.kube.errors import (
    FORBIDDEN,
    GONE,
    NOT_FOUND,
    UNAUTHORIZED,
    status_of,
    summary,
    watch_error,
)

K = TypeVar("K")
V = TypeVar("V")

logger = logging.getLogger(__name__)

_EXPIRED: Final = "watch expired (410 Gone); relisting"


class ListWatch(Protocol):
    """Where a cache reads from (``app.kube.client.ApiListWatch`` for a real API server)."""

    def list(self) -> Listing:
        """The whole collection; raises on failure (``ApiException`` for HTTP errors)."""
        ...

    def watch(self, resource_version: str) -> Iterator[WatchEvent]:
        """Open a watch after ``resource_version``, raising if it cannot; the stream may raise."""
        ...

    def close(self) -> None:
        """Unblock a pending call from another thread (the cache is stopping)."""
        ...


def _jitter() -> float:
    return random.uniform(0.5, 1.0)  # noqa: S311 - spreads retries, not a secret


@dataclass(frozen=True, slots=True)
class Pacing:
    """Timings of a cache, in seconds; tests shrink them."""

    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    grace: float = 10.0  # watch failures tolerated (serving the last state) before unsynced
    recheck: float = 30.0  # how often an API that is not served is listed again
    jitter: Callable[[], float] = _jitter


DEFAULT_PACING: Final = Pacing()


def backoff_delay(pacing: Pacing, attempt: int) -> float:
    """``base * 2**attempt``, capped, scaled by ``jitter()`` (0.5-1 by default)."""
    return min(pacing.backoff_cap, pacing.backoff_base * 2.0 ** min(attempt, 32)) * pacing.jitter()


@dataclass(frozen=True, slots=True)
class CacheState(Generic[K, V]):
    """What readers see; ``served`` is False when the API answered NotFound to a LIST."""

    items: Map[K, V]
    synced: bool
    served: bool = True
    error: str | None = None


class WatchCache(Generic[K, V]):
    """LIST then WATCH one resource; ``key``/``convert`` turn raw objects into entries.

    ``convert`` returning None drops the object. Threads rather than ``kubernetes.aio``: the
    sync client is mature, the request path only reads ``state`` (one reference, swapped
    atomically under the GIL) and so never blocks on the API server.
    """

    def __init__(
        self,
        *,
        name: str,
        resource: str,
        source: ListWatch,
        key: Callable[[JsonMap], K | None],
        convert: Callable[[JsonMap], V | None],
        pacing: Pacing = DEFAULT_PACING,
    ) -> None:
        self.name = name
        self.resource = resource  # for messages, e.g. "networks.networking.gke.io"
        self.first_sync = threading.Event()
        self.last_event_monotonic: float | None = None
        self._source, self._key, self._convert, self._pacing = source, key, convert, pacing
        # Replaced, never mutated: one reference assignment, so readers see old or new state.
        self._state: CacheState[K, V] = CacheState(Map(), synced=False)
        self._version = ""
        self._attempts = 0  # failures since the last success, for the backoff
        self._failing_since: float | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{name}", daemon=True)
        self._listeners: list[Callable[[frozenset[K] | None], None]] = []

    def subscribe(self, listener: Callable[[frozenset[K] | None], None]) -> None:
        """Call ``listener`` on the cache thread after each change: with the changed keys, or
        None when the whole state may have changed (a LIST, or the watch back after failures).
        Listeners must be quick (the audit queues and returns)."""
        self._listeners.append(listener)

    def _changed(self, keys: frozenset[K] | None) -> None:
        for listener in self._listeners:
            try:
                listener(keys)
            except Exception:  # a listener's bug must not stop the cache
                logger.exception("cache listener failed", extra={"cache": self.name})

    @property
    def state(self) -> CacheState[K, V]:
        """The current state; unsynced once watch failures have outlasted the grace, even while
        the next attempt is still hanging (a connect into a partition) or backing off."""
        state, failing_since = self._state, self._failing_since
        if (
            state.synced
            and failing_since is not None
            and time.monotonic() - failing_since >= self._pacing.grace
        ):
            return replace(state, synced=False)
        return state

    @property
    def synced(self) -> bool:
        return self.state.synced

    @property
    def error(self) -> str | None:
        return self._state.error

    def last_event_age(self) -> float | None:
        """Seconds since the last list, watch event or bookmark; None before the first."""
        last = self.last_event_monotonic
        return None if last is None else time.monotonic() - last

    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """End the thread: the source is closed so that a watch blocked in a read returns."""
        if not self._stopping.is_set():
            self._stopping.set()
            self._source.close()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        must_list = True
        while not self._stopping.is_set():
            try:
                if must_list:
                    self._relist()
                    must_list = False
                self._watch_once()
            except Exception as error:  # every failure is retried: the thread must live on
                if self._stopping.is_set():
                    return  # the closed source failed the call; nothing to report
                must_list = self._recover_from(error, listing=must_list)

    def _recover_from(self, error: Exception, *, listing: bool) -> bool:
        """Handle a failed LIST (``listing``) or watch and wait; True when a LIST must follow."""
        status = status_of(error)
        if status == GONE and not listing:
            # The resourceVersion left etcd's window: events were lost, so the state is stale
            # until a fresh LIST replaces it.
            logger.warning("watch expired, relisting", extra={"cache": self.name})
            self._state = replace(self._state, synced=False, error=_EXPIRED)
            return True
        if status == NOT_FOUND and listing:
            self._not_served()
            self._stopping.wait(self._pacing.recheck)
            return True
        if status != NOT_FOUND:  # a 404 while watching: the resource went away; a LIST says how
            # A failed LIST or a denied request leaves nothing trustworthy to serve.
            definitive = listing or status in (UNAUTHORIZED, FORBIDDEN)
            self._failed(
                self._describe(error, "list" if listing else "watch"), definitive=definitive
            )
        self._pause()
        return listing or status == NOT_FOUND

    def _relist(self) -> None:
        listing = self._source.list()
        with Map[K, V]().mutate() as building:
            for obj in listing.items:
                key = self._key(obj)
                value = None if key is None else self._convert(obj)
                if key is not None and value is not None:
                    building[key] = value
            items = building.finish()
        self._version = listing.resource_version
        self._state = CacheState(items, synced=True)
        self._recovered()
        self.first_sync.set()
        logger.info("watch cache listed", extra={"cache": self.name, "items": len(items)})
        self._changed(None)

    def _watch_once(self) -> None:
        """Follow one watch stream until it ends; the next one resumes from the last version."""
        stream = self._source.watch(self._version)
        lapsed = not self.state.synced  # failures outlasted the grace: readers saw it lost
        self._recovered()
        if not self._state.synced or self._state.error is not None:
            self._state = replace(self._state, synced=True, error=None)
        if lapsed:
            self._changed(None)
        delivered = False
        for event in stream:
            if self._stopping.is_set():
                return
            self._apply(event)
            delivered = True
        if not delivered:
            # A stream that ends at once with nothing (e.g. a proxy cutting it) must not spin.
            self._stopping.wait(self._pacing.backoff_base)

    def _apply(self, event: WatchEvent) -> None:
        if event.event_type == "ERROR":
            raise watch_error(event.obj)
        if event.event_type in ("ADDED", "MODIFIED", "DELETED"):
            # A copied dict per event costs time in proportion to the whole cache; a persistent
            # map's next version costs microseconds whatever its size.
            key = self._key(event.obj)
            if key is not None:
                items = self._state.items
                value = None if event.event_type == "DELETED" else self._convert(event.obj)
                if value is not None:
                    items = items.set(key, value)
                elif key in items:  # deleted, or no longer an entry (convert drops it)
                    items = items.delete(key)
                self._state = replace(self._state, items=items)
                self._changed(frozenset((key,)))
        elif event.event_type != "BOOKMARK":
            logger.debug("unknown watch event ignored", extra={"cache": self.name})
        if version := str_at(event.obj, "metadata", "resourceVersion"):
            self._version = version
        self.last_event_monotonic = time.monotonic()

    def _pause(self) -> None:
        self._attempts += 1
        self._stopping.wait(backoff_delay(self._pacing, self._attempts - 1))

    def _recovered(self) -> None:
        self._failing_since = None
        self._attempts = 0
        self.last_event_monotonic = time.monotonic()

    def _not_served(self) -> None:
        if self._state.served or not self._state.synced:
            logger.warning("API not served", extra={"cache": self.name, "resource": self.resource})
        was_served = self._state.served
        self._state = CacheState(Map(), synced=True, served=False)
        self._recovered()
        self.first_sync.set()
        if was_served:
            self._changed(None)

    def _failed(self, message: str, *, definitive: bool) -> None:
        """Record a failure; a failed LIST or one outlasting the grace makes the cache unsynced."""
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        lapsed = now - self._failing_since >= self._pacing.grace
        synced = self._state.synced and not (definitive or lapsed)
        logger.warning("watch cache failure", extra={"cache": self.name, "error": message})
        self._state = replace(self._state, synced=synced, error=message)

    def _describe(self, error: Exception, verb: str) -> str:
        status = status_of(error)
        if status == FORBIDDEN:
            return f"forbidden: cannot {verb} {self.resource} (RBAC)"
        if status == UNAUTHORIZED:
            return f"unauthorized: the API server rejected our credentials ({verb} {self.resource})"
        return f"{verb} {self.resource} failed: {summary(error)}"[:300]
