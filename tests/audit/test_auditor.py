"""The audit loop on its own thread against changing snapshots: what it re-judges, when, and
that a failing pass or a partial view never ends or misleads it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.audit.auditor import Auditor
from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.drift import EVERYTHING, Change, Result, Transition
from app.domain.kinds import Kind
from app.domain.policy import Policy
from tests.builders import GPU_NICS, network, runtime, snapshot, wired

PAIRS_A = [("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-1")]
PAIRS_B = [("eth3", "gpu-nic-2"), ("eth4", "gpu-nic-3")]


def cluster(*, not_ready: tuple[str, ...] = ()) -> ClusterSnapshot:
    """Two TrainingRuntimes: ``a`` names gpu-nic-0/1, ``b`` gpu-nic-2/3; no recipe binding."""
    runtimes = [
        runtime("a", kind=Kind.TRAINING_RUNTIME, annotations=wired(PAIRS_A)),
        runtime("b", kind=Kind.TRAINING_RUNTIME, annotations=wired(PAIRS_B)),
    ]
    ready = [n for n in GPU_NICS if n not in not_ready]
    return snapshot(*runtimes, *(network(n, ready=False) for n in not_ready), networks=ready)


class Cluster:
    """What the caches hold now; ``snapshot`` is what the auditor reads on each pass."""

    def __init__(self) -> None:
        self.current: ClusterSnapshot | Exception = cluster()
        self.reads = 0

    def snapshot(self) -> ClusterSnapshot:
        self.reads += 1
        current = self.current
        if isinstance(current, Exception):
            self.current = cluster()  # fails once
            raise current
        return current


@pytest.fixture
def world() -> Iterator[tuple[Cluster, Auditor, list[list[Transition]]]]:
    state = Cluster()
    auditor = Auditor(state.snapshot, Policy(), settle=0.01, max_wait=0.05)
    heard: list[list[Transition]] = []
    auditor.subscribe(heard.append)
    auditor.start()
    try:
        yield state, auditor, heard
    finally:
        auditor.stop()


def keys(transitions: list[Transition]) -> set[str]:
    return {t.key[2] for t in transitions}


def test_a_network_change_rejudges_only_the_runtimes_naming_it(
    world: tuple[Cluster, Auditor, list[list[Transition]]],
) -> None:
    state, auditor, heard = world
    auditor.notify(EVERYTHING)
    assert auditor.idle(5)
    assert keys(heard[-1]) == {"a", "b"}  # first seen
    assert dict(auditor.book.results) == {Result.PASS: 2}
    assert auditor.last_change is not None
    state.current = cluster(not_ready=("gpu-nic-2",))
    auditor.notify(Change(networks=frozenset({"gpu-nic-2"})))
    assert auditor.idle(5)
    assert keys(heard[-1]) == {"b"}
    assert auditor.book.standings[(Kind.TRAINING_RUNTIME, "team", "b")].result is Result.FAIL
    assert auditor.book.results[Result.FAIL] == 1


def test_a_change_that_names_nobody_judges_nothing(
    world: tuple[Cluster, Auditor, list[list[Transition]]],
) -> None:
    state, auditor, heard = world
    auditor.notify(EVERYTHING)
    assert auditor.idle(5)
    passes = len(heard)
    state.current = cluster(not_ready=("gpu-nic-7",))  # named by no runtime
    auditor.notify(Change(networks=frozenset({"gpu-nic-7"})))
    assert auditor.idle(5)
    assert len(heard) == passes  # nothing changed, nobody was told


def test_a_burst_of_changes_is_one_pass() -> None:
    state = Cluster()
    auditor = Auditor(state.snapshot, Policy(), settle=0.2, max_wait=5.0)
    auditor.start()
    try:
        for name in GPU_NICS:
            auditor.notify(Change(networks=frozenset({name})))
        auditor.notify(EVERYTHING)
        assert auditor.idle(10)
        assert state.reads == 1
        assert len(auditor.book.standings) == 2
    finally:
        auditor.stop()


def test_a_partial_view_judges_nothing_and_keeps_the_standings() -> None:
    whole = cluster()
    partial = ClusterSnapshot(Unverifiable("networks cache not synced"), whole.recipe_state, {})
    views = [whole, partial]
    auditor = Auditor(lambda: views[0], Policy())
    auditor.notify(EVERYTHING)
    assert auditor.run_pass() == 2  # both first seen
    views[0] = partial
    auditor.notify(EVERYTHING)
    assert auditor.run_pass() == Unverifiable("networks cache not synced")
    assert len(auditor.book.standings) == 2


@pytest.mark.parametrize(
    ("told_while_partial", "told_on_return", "changed"),
    [
        pytest.param(EVERYTHING, Change(recipe=True), 2, id="the recipe's cache synced last"),
        pytest.param(
            Change(networks=frozenset({"gpu-nic-2"})),
            Change(recipe=True),
            1,
            id="a Network changed while the recipe's cache was lost",
        ),
        pytest.param(
            EVERYTHING,
            Change(networks=frozenset({"gpu-nic-7"})),
            2,
            id="a Network event came last",
        ),
    ],
)
def test_what_a_partial_view_was_told_is_judged_once_the_view_is_whole(
    told_while_partial: Change, told_on_return: Change, changed: int
) -> None:
    whole = cluster(not_ready=("gpu-nic-2",))
    partial = ClusterSnapshot(whole.network_state, Unverifiable("recipe cache not synced"), {})
    views = [partial]
    auditor = Auditor(lambda: views[0], Policy())
    if told_while_partial is not EVERYTHING:  # the standings before the outage
        views[0] = cluster()
        auditor.notify(EVERYTHING)
        assert auditor.run_pass() == 2
        views[0] = partial
    auditor.notify(told_while_partial)
    assert auditor.run_pass() == Unverifiable("recipe cache not synced")
    views[0] = whole
    auditor.notify(told_on_return)
    assert auditor.run_pass() == changed
    standings = auditor.book.standings
    assert standings[(Kind.TRAINING_RUNTIME, "team", "b")].result is Result.FAIL
    assert standings[(Kind.TRAINING_RUNTIME, "team", "a")].result is Result.PASS
    assert auditor.run_pass() == 0  # told once: nothing is carried further


def test_a_failing_pass_does_not_end_the_audit(
    world: tuple[Cluster, Auditor, list[list[Transition]]],
) -> None:
    state, auditor, heard = world
    state.current = RuntimeError("a bug in one pass")
    auditor.notify(EVERYTHING)
    assert auditor.idle(5)
    assert auditor.alive()
    auditor.notify(EVERYTHING)
    assert auditor.idle(5)
    assert keys(heard[-1]) == {"a", "b"}


def test_stop_ends_the_thread_while_it_waits() -> None:
    auditor = Auditor(cluster, Policy())
    auditor.start()
    assert auditor.alive()
    auditor.stop(timeout=5)
    assert not auditor.alive()
