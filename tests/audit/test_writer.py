"""The audit writer with in-memory sinks: Events only on change and never twice (also across a
change of writer), rate limited per runtime; reports of the current state, coalesced."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from app.audit.auditor import Auditor
from app.audit.writer import EventBudget, Writer
from app.domain.cluster import ClusterSnapshot, RuntimeKey
from app.domain.drift import EVERYTHING, Change, Standing
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.policy_reports import WIRING_DRIFT, WIRING_RESTORED, ReportApi
from tests.builders import GPU_NICS, network, runtime, snapshot, wired
from tests.kube.test_watch_cache import wait_for

A: RuntimeKey = (Kind.TRAINING_RUNTIME, "team", "a")
B: RuntimeKey = (Kind.TRAINING_RUNTIME, "team", "b")


def cluster(
    *, broken: tuple[str, ...] = (), runtimes: tuple[str, ...] = ("a", "b")
) -> ClusterSnapshot:
    """TrainingRuntime ``a`` names gpu-nic-0, ``b`` gpu-nic-1; ``broken`` Networks not Ready."""
    nics = {"a": ("eth1", "gpu-nic-0"), "b": ("eth2", "gpu-nic-1")}
    objects = [
        runtime(name, kind=Kind.TRAINING_RUNTIME, annotations=wired([nics[name]]))
        for name in runtimes
    ]
    ready = [n for n in GPU_NICS if n not in broken]
    return snapshot(*objects, *(network(n, ready=False) for n in broken), networks=ready)


@dataclass
class Lock:
    holding: bool = True
    released: bool = False

    def try_acquire_or_renew(self) -> bool:
        return self.holding

    def release(self) -> None:
        self.released = True


@dataclass
class Events:
    said: list[tuple[RuntimeKey, str, str]] = field(default_factory=list)
    earlier: dict[RuntimeKey, str] = field(default_factory=dict)
    fail_next: int = 0

    def published(self) -> dict[RuntimeKey, str]:
        found = dict(self.earlier)
        for key, _, fingerprint in self.said:
            found[key] = fingerprint
        return found

    def emit(self, key: RuntimeKey, reason: str, standing: Standing) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("apiserver unreachable")
        self.said.append((key, reason, standing.fingerprint))

    def reasons(self, key: RuntimeKey) -> list[str]:
        return [reason for k, reason, _ in self.said if k == key]


@dataclass
class Reports:
    api: ReportApi | None = ReportApi.OPENREPORTS
    stored: dict[str, JsonMap] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)  # the namespace of each write

    def resolve(self) -> ReportApi | None:
        return self.api

    def namespaces(self, api: ReportApi) -> set[str]:
        return set(self.stored)

    def write(self, api: ReportApi, body: JsonMap) -> None:
        metadata = body["metadata"]
        assert isinstance(metadata, dict)
        namespace = str(metadata.get("namespace", ""))
        self.stored[namespace] = body
        self.writes.append(namespace)

    def remove(self, api: ReportApi, namespace: str) -> None:
        self.stored.pop(namespace, None)

    def results(self, namespace: str) -> list[tuple[str, str]]:
        results = self.stored[namespace]["results"]
        assert isinstance(results, list)
        return [(r["resources"][0]["name"], r["result"]) for r in results]


@dataclass
class World:
    view: list[ClusterSnapshot]
    auditor: Auditor
    writer: Writer
    lock: Lock
    events: Events
    reports: Reports

    def change(self, view: ClusterSnapshot, change: Change) -> None:
        self.view[0] = view
        self.auditor.notify(change)
        assert self.auditor.idle(5)


def build(
    events: Events | None = None,
    *,
    lock: Lock | None = None,
    budget: EventBudget | None = None,
    reports: Reports | None = None,
    report_interval: float = 0.01,
    resolve_every: float = 30.0,
) -> World:
    view = [cluster()]
    auditor = Auditor(lambda: view[0], Policy(), settle=0.005, max_wait=0.02)
    events, lock, reports = events or Events(), lock or Lock(), reports or Reports()
    writer = Writer(
        auditor.book,
        lambda: auditor.judged_all,
        lock,
        events,
        reports,
        budget=budget,
        renew=0.02,
        report_interval=report_interval,
        resolve_every=resolve_every,
    )
    auditor.subscribe(writer.changed)
    return World(view, auditor, writer, lock, events, reports)


@pytest.fixture
def world() -> Iterator[World]:
    built = build()
    built.auditor.start()
    built.writer.start()
    try:
        yield built
    finally:
        built.auditor.stop()
        built.writer.stop()


def test_drift_and_restore_are_said_once_each(world: World) -> None:
    world.change(cluster(), EVERYTHING)
    wait_for(lambda: "team" in world.reports.stored)
    assert world.events.said == []  # passing from the start: nothing to say
    assert world.reports.results("team") == [("a", "pass"), ("b", "pass")]
    world.change(cluster(broken=("gpu-nic-0",)), Change(networks=frozenset({"gpu-nic-0"})))
    wait_for(lambda: world.events.reasons(A) == [WIRING_DRIFT])
    wait_for(lambda: ("a", "fail") in world.reports.results("team"))
    world.change(cluster(broken=("gpu-nic-0",)), EVERYTHING)  # the same findings again
    world.change(cluster(), Change(networks=frozenset({"gpu-nic-0"})))
    wait_for(lambda: world.events.reasons(A) == [WIRING_DRIFT, WIRING_RESTORED])
    wait_for(lambda: world.reports.results("team") == [("a", "pass"), ("b", "pass")])
    assert world.events.reasons(B) == []
    assert "" in world.reports.stored  # the cluster report, empty, always written


def test_a_new_writer_repeats_nothing_already_said() -> None:
    first = build()
    first.view[0] = cluster(broken=("gpu-nic-0",))
    first.auditor.notify(EVERYTHING)
    first.auditor.run_pass()
    said = Events(earlier={A: first.auditor.book.standings[A].fingerprint})
    second = build(said)
    second.view[0] = cluster(broken=("gpu-nic-0",))
    second.auditor.notify(EVERYTHING)
    second.auditor.run_pass()
    second.writer.start()
    try:
        wait_for(lambda: "team" in second.reports.stored)
        assert said.said == []  # the failure was announced by the writer before
    finally:
        second.writer.stop()


def test_a_restore_missed_by_the_last_writer_is_said_by_the_next() -> None:
    said = Events(earlier={A: "0123456789abcdef"})  # a drift announced, then the writer died
    world = build(said)
    world.auditor.notify(EVERYTHING)
    world.auditor.run_pass()
    world.writer.start()
    try:
        wait_for(lambda: said.reasons(A) == [WIRING_RESTORED])
        assert said.reasons(B) == []
    finally:
        world.writer.stop()


def test_only_the_lease_holder_writes_and_stop_hands_the_lease_over() -> None:
    lock = Lock(holding=False)
    world = build(lock=lock)
    world.view[0] = cluster(broken=("gpu-nic-0",))
    world.auditor.notify(EVERYTHING)
    world.auditor.run_pass()
    world.writer.start()
    try:
        wait_for(lambda: world.writer.alive())
        assert not world.writer.leading
        assert world.events.said == []
        assert world.reports.writes == []
        lock.holding = True
        wait_for(lambda: world.events.reasons(A) == [WIRING_DRIFT])
        wait_for(lambda: world.writer.leading)
    finally:
        world.writer.stop()
    assert lock.released


def test_events_per_runtime_are_rate_limited_and_the_last_state_still_said() -> None:
    burst, refill = 2, 0.3
    world = build(budget=EventBudget(burst=burst, refill=refill))
    world.auditor.start()
    started = time.monotonic()  # every Event is taken from the budget after this
    world.writer.start()
    try:
        world.change(cluster(), EVERYTHING)
        for _ in range(3):
            world.change(cluster(broken=("gpu-nic-0",)), Change(networks=frozenset({"gpu-nic-0"})))
            world.change(cluster(), Change(networks=frozenset({"gpu-nic-0"})))
        world.change(cluster(broken=("gpu-nic-0",)), Change(networks=frozenset({"gpu-nic-0"})))
        wait_for(lambda: len(world.events.reasons(A)) >= 2)
        said = len(world.events.reasons(A))
        # The burst at once, then one per refill: at most that many in the time that passed,
        # however long a busy machine made it (7 changes would be 7 Events unlimited).
        assert said <= burst + int((time.monotonic() - started) / refill)
        wait_for(lambda: world.events.reasons(A)[-1] == WIRING_DRIFT)  # the final state
        reasons = world.events.reasons(A)
        assert all(x != y for x, y in itertools.pairwise(reasons))
    finally:
        world.auditor.stop()
        world.writer.stop()


def test_a_failed_event_is_retried(world: World) -> None:
    world.change(cluster(), EVERYTHING)
    world.events.fail_next = 1
    world.change(cluster(broken=("gpu-nic-1",)), Change(networks=frozenset({"gpu-nic-1"})))
    wait_for(lambda: world.events.reasons(B) == [WIRING_DRIFT], timeout=10)


def test_reports_are_coalesced_and_follow_the_runtimes() -> None:
    interval = 0.5
    world = build(report_interval=interval)
    world.auditor.start()
    started = time.monotonic()  # every report is written after this
    world.writer.start()
    try:
        world.change(cluster(), EVERYTHING)
        wait_for(lambda: "team" in world.reports.stored)
        for i in range(10):
            broken = ("gpu-nic-0",) if i % 2 == 0 else ()
            world.change(cluster(broken=broken), Change(networks=frozenset({"gpu-nic-0"})))
        world.change(cluster(runtimes=()), EVERYTHING)  # every TrainingRuntime deleted
        wait_for(lambda: "team" not in world.reports.stored)
        window = time.monotonic() - started
        written = [ns for ns in world.reports.writes if ns == "team"]
        # One write, then at most one per interval, in the time that passed however long a busy
        # machine made it: 12 changes, coalesced.
        assert 0 < len(written) <= 1 + int(window / interval), (len(written), window)
    finally:
        world.auditor.stop()
        world.writer.stop()


def test_no_report_api_means_events_only() -> None:
    world = build(reports=Reports(api=None))
    world.view[0] = cluster(broken=("gpu-nic-0",))
    world.auditor.notify(EVERYTHING)
    world.auditor.run_pass()
    world.writer.start()
    try:
        wait_for(lambda: world.events.reasons(A) == [WIRING_DRIFT])
        assert world.reports.writes == []
    finally:
        world.writer.stop()


def test_a_full_bucket_is_forgotten() -> None:
    budget = EventBudget(burst=2, refill=10.0)
    assert budget.take(A, 0.0) == 0.0
    assert budget.take(A, 0.0) == 0.0
    assert budget.take(A, 0.0) == pytest.approx(10.0)
    budget.forget_full(5.0)
    assert budget.take(A, 10.0) == 0.0  # one token back after 10 s
    budget.forget_full(100.0)
    assert budget.take(A, 100.0) == 0.0
    assert budget.take(B, 100.0) == 0.0


def test_a_report_api_installed_later_is_found_and_written() -> None:
    reports = Reports(api=None)
    world = build(reports=reports, resolve_every=0.05)
    world.auditor.notify(EVERYTHING)
    world.auditor.run_pass()
    world.writer.start()
    try:
        wait_for(lambda: world.writer.leading)
        assert reports.writes == []
        reports.api = ReportApi.WGPOLICYK8S  # the CRDs were installed
        wait_for(lambda: "team" in reports.stored and "" in reports.stored)
        assert reports.results("team") == [("a", "pass"), ("b", "pass")]
    finally:
        world.writer.stop()


def test_nothing_is_said_before_every_runtime_has_been_judged() -> None:
    said = Events(earlier={A: "0123456789abcdef"})  # a drift announced by an earlier writer
    world = build(said)
    world.writer.start()
    try:
        wait_for(lambda: world.writer.leading)
        # The book is still empty: A is not gone, only not judged yet; nothing may be concluded.
        assert said.said == []
        world.auditor.notify(EVERYTHING)
        world.auditor.run_pass()
        wait_for(lambda: said.reasons(A) == [WIRING_RESTORED])
    finally:
        world.writer.stop()


def test_runtimes_first_seen_passing_cost_the_writer_nothing() -> None:
    world = build()
    world.auditor.notify(EVERYTHING)
    world.auditor.run_pass()
    assert world.writer._dirty == set()  # no Event can be due: only their report is
    assert world.writer._dirty_reports == {"team"}
