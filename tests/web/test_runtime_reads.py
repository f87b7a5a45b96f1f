"""The runtime GET's bounds (app.web.runtime_reads): one GET in flight per runtime, at most four
in all (beyond: Unverifiable at once), a NotFound remembered 2 s, a hanging GET counted until its
thread returns; each outcome counted once. Every GET blocks until the test releases it; no test
waits on a clock."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Final

import pytest

from app.domain.cluster import RuntimeKey, Unverifiable
from app.domain.kinds import Kind
from app.web.runtime_reads import Fetched, Outcome, RuntimeReads
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


@pytest.fixture
def counted() -> list[Outcome]:
    """The outcomes a ``RuntimeReads`` counted, in order."""
    return []


def tally(counted: list[Outcome]) -> dict[Outcome, int]:
    return dict(Counter(counted))


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def test_requests_for_one_runtime_share_one_get(fetch: HeldFetch, counted: list[Outcome]) -> None:
    reads = RuntimeReads(fetch, count=counted.append)

    async def scenario() -> None:
        waiting = [reads.read(key("a"), 60) for _ in range(3)]
        fetch.release("a")
        assert await asyncio.gather(*waiting) == [RUNTIME] * 3

    run(scenario)
    assert fetch.calls == [key("a")]
    # The GET counts for the request that started it; the two others joined it.
    assert tally(counted) == {Outcome.FOUND: 1, Outcome.JOINED: 2}


def test_a_fifth_runtime_is_unverifiable_at_once_while_four_gets_are_in_flight(
    fetch: HeldFetch, counted: list[Outcome]
) -> None:
    reads = RuntimeReads(fetch, count=counted.append)
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
    assert tally(counted) == {Outcome.FOUND: 5, Outcome.REFUSED: 1, Outcome.JOINED: 1}


def test_a_get_that_outlives_its_deadline_keeps_its_place_until_its_thread_returns(
    fetch: HeldFetch, counted: list[Outcome]
) -> None:
    reads = RuntimeReads(fetch, count=counted.append)
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
    # Only a's GET returned while the loop ran: b, c, d and e are counted when theirs return.
    assert tally(counted) == {
        Outcome.TIMED_OUT: 6,
        Outcome.REFUSED: 2,
        Outcome.JOINED: 1,
        Outcome.FOUND: 1,
    }


def test_a_not_found_is_remembered_for_two_seconds_of_the_clock(
    fetch: HeldFetch, counted: list[Outcome]
) -> None:
    now = [1000.0]
    reads = RuntimeReads(fetch, clock=lambda: now[0], count=counted.append)
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
    assert counted == [
        Outcome.NOT_FOUND,
        Outcome.REMEMBERED,
        Outcome.NOT_FOUND,
        Outcome.NOT_FOUND,
    ]


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        pytest.param(FAILED, Outcome.FAILED, id="api-error"),
        pytest.param(RuntimeError("boom"), Outcome.FAILED, id="bug"),
        pytest.param(RUNTIME, Outcome.FOUND, id="found"),
    ],
)
def test_only_a_not_found_is_remembered(
    fetch: HeldFetch, counted: list[Outcome], answer: Fetched | Exception, outcome: Outcome
) -> None:
    reads = RuntimeReads(fetch, clock=lambda: 0.0, count=counted.append)
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
    assert counted == [outcome, outcome]


def test_a_failing_get_fails_every_request_waiting_for_it(
    fetch: HeldFetch, counted: list[Outcome]
) -> None:
    reads = RuntimeReads(fetch, count=counted.append)
    fetch.answers["a"] = FAILED

    async def scenario() -> None:
        waiting = [reads.read(key("a"), 60) for _ in range(2)]
        fetch.release("a")
        assert await asyncio.gather(*waiting) == [FAILED, FAILED]

    run(scenario)
    assert fetch.calls == [key("a")]
    assert tally(counted) == {Outcome.FAILED: 1, Outcome.JOINED: 1}


def test_a_request_that_joined_and_gave_up_is_timed_out_not_joined(
    fetch: HeldFetch, counted: list[Outcome]
) -> None:
    reads = RuntimeReads(fetch, count=counted.append)
    fetch.answers["a"] = None

    async def scenario() -> None:
        started = reads.read(key("a"), 60)
        assert await reads.read(key("a"), 0) == LATE
        fetch.release("a")
        assert await started is None

    run(scenario)
    assert counted == [Outcome.TIMED_OUT, Outcome.NOT_FOUND]


def test_a_get_every_request_gave_up_on_counts_its_outcome_when_it_returns(
    fetch: HeldFetch, counted: list[Outcome]
) -> None:
    """The starter timed out; its GET still reached the apiserver, and is counted once."""
    reads = RuntimeReads(fetch, count=counted.append)

    async def scenario() -> None:
        assert await reads.read(key("a"), 0) == LATE
        joined = reads.read(key("a"), 60)
        fetch.release("a")
        assert await joined == RUNTIME

    run(scenario)
    assert counted == [Outcome.TIMED_OUT, Outcome.FOUND, Outcome.JOINED]


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
