"""The one API read a request can cost: a TrainJob's runtime the synced cache lacks, read through
``RuntimeReads`` under the bounds of docs/operations.md ("The runtime GET").
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Final

from app.domain.cluster import RuntimeFetch, RuntimeKey, Unverifiable
from app.domain.fields import JsonMap

LIMIT: Final = 4
NOT_FOUND_SECONDS: Final = 2.0
# The names are the sender's (any length the body allows): the oldest NotFound is forgotten
# first beyond this many, which costs a GET again, never memory.
NOT_FOUND_KEPT: Final = 1024
Fetched = JsonMap | Unverifiable | None


class Outcome(enum.StrEnum):
    """How a read ended (the ``outcome`` of nicguard_runtime_reads_total, docs/monitoring.md).

    Once per GET, when its thread returns: FOUND, NOT_FOUND, FAILED. Once per request that did
    not get its answer from a GET it started itself: REMEMBERED, JOINED, REFUSED, TIMED_OUT.
    """

    FOUND = "found"  # the API answered with the runtime
    NOT_FOUND = "not_found"  # the API answered NotFound
    FAILED = "failed"  # any other answer: an API error, a transport failure, a bug's exception
    REMEMBERED = "remembered"  # a NotFound remembered: no GET
    JOINED = "joined"  # answered by a GET in flight that another request started
    REFUSED = "refused"  # ``limit`` GETs in flight: Unverifiable at once
    TIMED_OUT = "timed_out"  # no answer within its deadline (the GET goes on)


class RuntimeReads:
    """Runtimes read through ``fetch`` (blocking, on threads of its own), bounded because anyone
    who reaches ``/validate`` can ask for them:

    - one GET in flight per runtime: a request for a runtime being read waits for that GET;
    - at most ``limit`` GETs in flight in all; a request that would start one more gets
      ``Unverifiable`` at once (a queue would hold requests, and the amplifier, as long);
    - a GET keeps its place until its thread returns, even when every request waiting for it
      has given up at its deadline: a bound that forgot hanging GETs would bound nothing;
    - a NotFound is remembered ``not_found_seconds`` by ``clock`` (monotonic), the latest
      ``not_found_kept`` of them; a failure never.

    ``count`` hears each GET's outcome when its thread returns, and that of each request not
    answered by a GET it started itself (``Outcome``). ``read`` runs on the event loop only.
    """

    def __init__(
        self,
        fetch: RuntimeFetch,
        *,
        clock: Callable[[], float] = time.monotonic,
        limit: int = LIMIT,
        not_found_seconds: float = NOT_FOUND_SECONDS,
        not_found_kept: int = NOT_FOUND_KEPT,
        count: Callable[[Outcome], None] = lambda _: None,
    ) -> None:
        self._fetch, self._clock, self._count = fetch, clock, count
        self._limit, self._not_found_seconds = limit, not_found_seconds
        self._not_found_kept = not_found_kept
        self._flights: dict[RuntimeKey, asyncio.Future[Fetched]] = {}
        # When each NotFound is forgotten, oldest first (one lifetime for all keeps the order).
        self._absent: OrderedDict[RuntimeKey, float] = OrderedDict()
        # Its own threads, not the loop's default executor: a read still hanging after its
        # deadline must not hold up whoever closes the loop (asyncio.run waits for those).
        self._threads = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="runtime-get")

    def read(self, key: RuntimeKey, within: float) -> Awaitable[Fetched]:
        """What to await for runtime ``key``, decided now: a remembered NotFound (None), the
        GET in flight for it, a new GET, or ``Unverifiable`` when ``limit`` GETs are in flight.
        Awaiting gives the GET's answer, or ``Unverifiable`` after ``within`` seconds without
        one; it raises what ``fetch`` raised (a bug, which the caller logs)."""
        if self._remembered_absent(key):
            self._count(Outcome.REMEMBERED)
            return _at_once(None)
        flight = self._flights.get(key)
        if flight is not None:
            return self._answer(flight, within, joined=True)
        if len(self._flights) >= self._limit:
            self._count(Outcome.REFUSED)
            return _at_once(
                Unverifiable(
                    f"it is not cached yet and {self._limit} GETs of uncached runtimes "
                    "are in flight already"
                )
            )
        flight = asyncio.get_running_loop().run_in_executor(self._threads, self._fetch, *key)
        self._flights[key] = flight
        flight.add_done_callback(partial(self._landed, key))
        return self._answer(flight, within, joined=False)

    async def _answer(
        self, flight: asyncio.Future[Fetched], within: float, *, joined: bool
    ) -> Fetched:
        # wait, not wait_for: a request giving up must not cancel the GET others wait for.
        done, _ = await asyncio.wait((flight,), timeout=within)
        if not done:
            self._count(Outcome.TIMED_OUT)
            return Unverifiable(
                f"it is not cached yet and a GET of it gave no answer in {within:g} s"
            )
        if joined:
            self._count(Outcome.JOINED)
        return flight.result()

    def _landed(self, key: RuntimeKey, flight: asyncio.Future[Fetched]) -> None:
        """The GET's thread has returned: its place is free, its outcome counted, and a
        NotFound remembered."""
        del self._flights[key]
        # exception() also marks a bug's exception as seen when no request waits any more.
        if flight.cancelled() or flight.exception() is not None:
            self._count(Outcome.FAILED)
            return
        found = flight.result()
        if isinstance(found, Unverifiable):
            self._count(Outcome.FAILED)
        elif found is not None:
            self._count(Outcome.FOUND)
        else:
            self._count(Outcome.NOT_FOUND)
            self._absent.pop(key, None)
            self._absent[key] = self._clock() + self._not_found_seconds
            if len(self._absent) > self._not_found_kept:
                self._absent.popitem(last=False)

    def _remembered_absent(self, key: RuntimeKey) -> bool:
        now = self._clock()
        while self._absent and next(iter(self._absent.values())) <= now:
            self._absent.popitem(last=False)
        return key in self._absent


async def _at_once(found: Fetched) -> Fetched:
    return found
