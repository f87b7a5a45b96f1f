"""The runtime GET's bounds (app.web.runtime_reads): one GET in flight per runtime, at most four
in all (beyond: Unverifiable at once), a NotFound remembered 2 s, a hanging GET counted until its
thread returns. Every GET blocks until the test releases it; no test waits on a clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Final

import pytest

from app.domain.cluster import RuntimeKey, Unverifiable
from app.domain.kinds import Kind
from app.web.runtime_reads import Fetched, RuntimeReads
from tests.support.held_fetch import RUNTIME, HeldFetch

FAILED: Final = Unverifiable("GET ClusterTrainingRuntime x: HTTP 403 Forbidden")
BUSY: Final = Unverifiable(
    "it is not cached yet and 4 GETs of uncached runtimes are in flight already"
)
LATE: Final = Unverifiable("it is not cached yet and a GET of it gave no answer in 0 s")


def key(name: str) -> RuntimeKey:
    return (Kind.CLUSTER_TRAINING_RUNTIME, "", name)


@pytest.fixture
def fetch() -> Iterator[HeldFetch]:
    held = HeldFetch()
    yield held
    held.release_all()  # no GET thread outlives its test


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def test_requests_for_one_runtime_share_one_get(fetch: HeldFetch) -> None:
    reads = RuntimeReads(fetch)

    async def scenario() -> None:
        waiting = [reads.read(key("a"), 60) for _ in range(3)]
        fetch.release("a")
        assert await asyncio.gather(*waiting) == [RUNTIME] * 3

    run(scenario)
    assert fetch.calls == [key("a")]


def test_a_fifth_runtime_is_unverifiable_at_once_while_four_gets_are_in_flight(
    fetch: HeldFetch,
) -> None:
    reads = RuntimeReads(fetch)
    names = ["a", "b", "c", "d"]

    async def scenario() -> None:
        waiting = [reads.read(key(name), 60) for name in names]
        # Nothing is released: the answer cannot have waited for any GET.
        assert await reads.read(key("e"), 60) == BUSY
        # A request for a runtime being read joins its GET: no place needed.
        waiting.append(reads.read(key("a"), 60))
        fetch.release(*names)
        assert await asyncio.gather(*waiting) == [RUNTIME] * 5
        # Every GET has returned: a new one has a place.
        fetch.release("e")
        assert await reads.read(key("e"), 60) == RUNTIME

    run(scenario)
    assert sorted(fetch.calls) == [key(name) for name in "abcde"]


def test_a_get_that_outlives_its_deadline_keeps_its_place_until_its_thread_returns(
    fetch: HeldFetch,
) -> None:
    reads = RuntimeReads(fetch)
    names = ["a", "b", "c", "d"]

    async def scenario() -> None:
        for name in names:
            assert await reads.read(key(name), 0) == LATE
        # Every request gave up, but the four GETs still hang: no fifth is started.
        assert await reads.read(key("e"), 60) == BUSY
        # Nor a second one for a runtime whose GET hangs: it is waited for again.
        assert await reads.read(key("a"), 0) == LATE
        joined = reads.read(key("a"), 60)
        fetch.release("a")
        assert await joined == RUNTIME
        # a's thread has returned, and its place with it: e takes it, and the four are full.
        assert await reads.read(key("e"), 0) == LATE
        assert await reads.read(key("f"), 60) == BUSY

    run(scenario)
    fetch.wait_entered(5)  # the GETs given up on may not have begun yet: they have now
    assert sorted(fetch.calls) == [key(name) for name in "abcde"]


def test_a_not_found_is_remembered_for_two_seconds_of_the_clock(fetch: HeldFetch) -> None:
    now = [1000.0]
    reads = RuntimeReads(fetch, clock=lambda: now[0])
    fetch.answers.update(gone=None, other=None)
    fetch.release("gone", "other")

    async def scenario() -> None:
        assert await reads.read(key("gone"), 60) is None
        now[0] += 1.999
        assert await reads.read(key("gone"), 60) is None  # remembered: no GET
        assert await reads.read(key("other"), 60) is None  # another runtime is read
        now[0] += 0.001  # two seconds after the first NotFound: forgotten
        assert await reads.read(key("gone"), 60) is None

    run(scenario)
    assert fetch.calls == [key("gone"), key("other"), key("gone")]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(FAILED, id="api-error"),
        pytest.param(RuntimeError("boom"), id="bug"),
        pytest.param(RUNTIME, id="found"),
    ],
)
def test_only_a_not_found_is_remembered(fetch: HeldFetch, answer: Fetched | Exception) -> None:
    reads = RuntimeReads(fetch, clock=lambda: 0.0)
    fetch.answers["a"] = answer
    fetch.release("a")

    async def scenario() -> None:
        for _ in range(2):
            if isinstance(answer, Exception):
                with pytest.raises(RuntimeError, match="boom"):
                    await reads.read(key("a"), 60)
            else:
                assert await reads.read(key("a"), 60) == answer

    run(scenario)
    assert fetch.calls == [key("a"), key("a")]


def test_a_failing_get_fails_every_request_waiting_for_it(fetch: HeldFetch) -> None:
    reads = RuntimeReads(fetch)
    fetch.answers["a"] = FAILED

    async def scenario() -> None:
        waiting = [reads.read(key("a"), 60) for _ in range(2)]
        fetch.release("a")
        assert await asyncio.gather(*waiting) == [FAILED, FAILED]

    run(scenario)
    assert fetch.calls == [key("a")]


def test_beyond_the_names_it_keeps_the_oldest_not_found_is_forgotten_first(
    fetch: HeldFetch,
) -> None:
    reads = RuntimeReads(fetch, clock=lambda: 0.0, not_found_kept=2)
    fetch.answers.update(a=None, b=None, c=None)
    fetch.release("a", "b", "c")

    async def scenario() -> None:
        for name in "abcbc":  # a is forgotten when c is remembered; b and c are kept
            assert await reads.read(key(name), 60) is None
        assert await reads.read(key("a"), 60) is None

    run(scenario)
    assert fetch.calls == [key("a"), key("b"), key("c"), key("a")]
