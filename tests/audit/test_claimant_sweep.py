"""The sweep of what names ResourceClaimTemplates, with an in-memory lister and Event sink: a
namespace's snapshots and workloads judged when its templates change, an Event on each only when
what the templates make of it changes (also across a change of writer), nothing while another
replica writes or while the view is partial."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final

import pytest

from app.audit.claimant_sweep import ClaimantSweep
from app.domain.claimant_audit import ClaimantBook, ClaimantKey, claimant_key
from app.domain.claimants import Claimant
from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.drift import EVERYTHING, Change, Standing
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.policy_reports import WIRING_DRIFT, WIRING_RESTORED
from app.domain.verdict import Code
from app.kubeyaml.claimants import claimant_in
from tests.builders import (
    by_template,
    claim_template,
    copy_of,
    dra_runtime,
    exactly,
    pod,
    snapshot,
    wired,
    with_metadata,
)
from tests.kube.test_watch_cache import wait_for

CTR = Kind.CLUSTER_TRAINING_RUNTIME
# TrainJob team/job's copy of a bound runtime, edited to claim my-rdma.
COPY: Final = with_metadata(
    copy_of(dra_runtime(by_template("my-rdma"), name="dranet", kind=CTR)), uid="u-copy"
)
# A Pod of team mapping Device-type Networks and naming my-rdma.
POD: Final = {
    **with_metadata(pod(wired(), name="worker"), namespace="team", uid="u-pod"),
    "spec": {"containers": [], "resourceClaims": [by_template("my-rdma")]},
}
ALL_NICS: Final = claim_template("my-rdma")
ONE_NIC: Final = claim_template("my-rdma", exactly(mode="ExactCount", count=1))
TEMPLATES: Final = Change(claim_templates=frozenset({("team", "my-rdma")}))


def claimants(*objects: JsonMap) -> list[Claimant]:
    found = [claimant_in(obj) for obj in objects]
    assert all(c is not None for c in found)
    return [c for c in found if c is not None]


COPY_KEY: Final = claimant_key(claimants(COPY)[0])
POD_KEY: Final = claimant_key(claimants(POD)[0])


@dataclass
class Events:
    said: list[tuple[ClaimantKey, str, str, dict[str, Any]]] = field(default_factory=list)
    earlier: dict[ClaimantKey, str] = field(default_factory=dict)

    def published_on_claimants(self) -> dict[ClaimantKey, str]:
        return dict(self.earlier)

    def emit_on(self, regarding: JsonMap, reason: str, standing: Standing) -> None:
        key = (
            str(regarding["apiVersion"]),
            str(regarding["kind"]),
            str(regarding["namespace"]),
            str(regarding["name"]),
        )
        self.said.append((key, reason, standing.fingerprint, dict(regarding)))

    def reasons(self, key: ClaimantKey) -> list[str]:
        return [reason for k, reason, _, _ in self.said if k == key]


@dataclass
class World:
    view: list[ClusterSnapshot]
    listed: dict[str | None, list[Claimant]]
    calls: list[str | None]
    events: Events
    leading: list[bool]
    sweep: ClaimantSweep
    failures: list[int] = field(default_factory=lambda: [0])

    def lister(self, namespace: str | None) -> list[Claimant]:
        self.calls.append(namespace)
        if self.failures[0]:
            self.failures[0] -= 1
            raise ConnectionError("apiserver unreachable")
        return list(self.listed.get(namespace, ()))

    def templates(self, *templates: JsonMap) -> None:
        """The namespace's templates are now ``templates``; the sweep hears of it."""
        self.view[0] = snapshot(*templates)
        self.sweep.notify(TEMPLATES)


def build(events: Events | None = None, *, leading: bool = True) -> World:
    holder: list[World] = []
    view = [snapshot(ALL_NICS)]
    everything = claimants(COPY, POD)
    world_events = events or Events()
    lead = [leading]
    sweep = ClaimantSweep(
        lambda ns: holder[0].lister(ns),
        lambda: view[0],
        Policy(),
        world_events,
        lambda: lead[0],
        settle=0.0,
        recheck=0.005,
    )
    world = World(
        view=view,
        listed={None: everything, "team": everything},
        calls=[],
        events=world_events,
        leading=lead,
        sweep=sweep,
    )
    holder.append(world)
    return world


@pytest.fixture
def world() -> Iterator[World]:
    found = build()
    found.sweep.start()
    yield found
    found.sweep.stop()


def test_a_template_recreated_short_is_said_on_what_names_it_then_restored(world: World) -> None:
    wait_for(lambda: len(world.events.said) == 1)  # a new writer judges everything once
    assert world.calls == [None]
    # The Pod maps Device-type Networks beside a claim of RDMA NICs; the copy claims them all.
    assert world.events.reasons(POD_KEY) == [WIRING_DRIFT]
    world.templates(ONE_NIC)
    wait_for(lambda: bool(world.events.reasons(COPY_KEY)))
    assert world.events.reasons(COPY_KEY) == [WIRING_DRIFT]
    (copy_event,) = [said for said in world.events.said if said[0] == COPY_KEY]
    assert copy_event[3]["uid"] == "u-copy"
    assert copy_event[3]["kind"] == "ConfigMap"
    assert world.sweep.book.failing_codes == {
        Code.RDMA_CLAIM_MISMATCH: 1,
        Code.WIRING_MODE_CONFLICT: 1,
    }
    world.templates(claim_template("my-rdma", exactly("netdev.google.com")))
    wait_for(lambda: world.events.reasons(POD_KEY) == [WIRING_DRIFT, WIRING_RESTORED])
    # The copy's finding changed (no RDMA request at all): said again, as what it is now.
    wait_for(lambda: len(world.events.reasons(COPY_KEY)) == 2)
    assert world.events.reasons(COPY_KEY) == [WIRING_DRIFT, WIRING_DRIFT]
    assert world.calls == [None, "team", "team"]  # one sweep of the namespace per change


def test_an_unchanged_standing_is_said_once_even_by_a_new_writer() -> None:
    first = build()
    first.view[0] = snapshot(ONE_NIC)
    first.sweep.start()
    wait_for(lambda: len(first.events.said) == 2)
    first.sweep.stop()
    earlier = {key: fingerprint for key, _, fingerprint, _ in first.events.said}
    second = build(Events(earlier=earlier))
    second.view[0] = snapshot(ONE_NIC)
    second.sweep.start()
    try:
        wait_for(lambda: second.calls == [None])
        second.templates(ONE_NIC)
        wait_for(lambda: second.calls == [None, "team"])
        # Nothing new to say; a change after this one is still heard.
        second.templates(ALL_NICS)
        wait_for(lambda: len(second.events.said) == 1)
        assert [(key, reason) for key, reason, _, _ in second.events.said] == [
            (COPY_KEY, WIRING_RESTORED)
        ]
    finally:
        second.sweep.stop()


def test_only_the_writer_sweeps() -> None:
    world = build(leading=False)
    world.sweep.start()
    try:
        world.templates(ONE_NIC)
        world.leading[0] = True  # takes over: everything once, whatever was heard before
        wait_for(lambda: len(world.events.said) == 2)
        assert world.calls == [None]
    finally:
        world.sweep.stop()


def test_a_partial_view_is_not_swept_and_a_failed_list_is_retried() -> None:
    world = build()
    world.view[0] = replace(snapshot(ONE_NIC), claim_template_state=Unverifiable("syncing"))
    world.failures[0] = 1
    world.sweep.start()
    try:
        world.sweep.notify(EVERYTHING)
        assert world.calls == []  # no sweep of a partial view
        world.view[0] = snapshot(ONE_NIC)
        wait_for(lambda: len(world.events.said) == 2)
        assert world.calls == [None, None]  # failed once, then swept
    finally:
        world.sweep.stop()
    assert not world.sweep.alive()


def test_the_book_forgets_what_is_no_longer_listed_in_the_swept_namespace() -> None:
    book = ClaimantBook()
    view = snapshot(ONE_NIC)
    other = claimants(with_metadata(POD, namespace="other"))
    book.sweep(None, [*claimants(COPY, POD), *other], view, Policy())
    assert len(book.standings) == 3
    book.sweep("team", claimants(COPY), view, Policy())
    assert set(book.standings) == {COPY_KEY, claimant_key(other[0])}
    book.sweep(None, [], view, Policy())
    assert book.standings == {}


def test_only_template_changes_call_for_a_sweep(world: World) -> None:
    wait_for(lambda: world.calls == [None])
    world.sweep.notify(Change(networks=frozenset({"gpu-nic-0"})))
    world.templates(ONE_NIC)
    wait_for(lambda: world.calls == [None, "team"])
    assert world.sweep.alive()
