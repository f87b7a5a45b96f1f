"""The connection cap of a listener (app.web.capacity): who gives way to a new connection at
the cap, in which order, and when a new one is refused."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.web.capacity import Capacity


@dataclass(frozen=True)
class Conn:
    name: str
    evicted: list[str] = field(compare=False, hash=False)

    def evict(self) -> None:
        self.evicted.append(self.name)


def test_capacity_evicts_waiting_then_idle_and_refuses_when_all_are_answered() -> None:
    evicted: list[str] = []
    capacity = Capacity(2)
    a, b, c, d = (Conn(name, evicted) for name in "abcd")
    assert capacity.admit(a)
    assert capacity.admit(b)
    capacity.idle(a)
    assert capacity.admit(c)  # b waits longest: it goes, not the idle a
    assert evicted == ["b"]
    capacity.answering(c)
    assert capacity.admit(d)  # nothing waits: the idle a goes
    assert evicted == ["b", "a"]
    capacity.answering(d)
    assert not capacity.admit(Conn("e", evicted))  # both are being answered
    capacity.leave(c)
    assert len(capacity) == 1


@pytest.mark.parametrize(
    ("limit", "steps", "evicted", "held"),
    [
        pytest.param(
            3, "admit:a admit:b admit:c admit:d", "a", 3, id="the one waiting longest goes first"
        ),
        pytest.param(
            2,
            "admit:a admit:b idle:b idle:a admit:c answering:c admit:d",
            "b a",
            2,
            id="idle ones by how long they idled, not by arrival",
        ),
        pytest.param(
            2,
            "admit:a idle:a waiting:a admit:b idle:b admit:c",
            "a",
            2,
            id="a new request on an idle connection makes it waiting again",
        ),
        pytest.param(
            1,
            "admit:a answering:a refuse:b idle:a admit:b",
            "a",
            1,
            id="answered, a connection can give way again",
        ),
        pytest.param(
            2,
            "admit:a admit:b leave:a leave:a admit:c",
            "",
            2,
            id="a closed one frees its place; leaving twice is a no-op",
        ),
        pytest.param(
            1,
            "admit:a admit:b leave:a answering:b refuse:c",
            "a",
            1,
            id="an evicted one is already forgotten",
        ),
    ],
)
def test_who_gives_way_at_the_cap(limit: int, steps: str, evicted: str, held: int) -> None:
    """``steps``: ``operation:connection`` each; ``admit`` expects it taken, ``refuse`` not."""
    gone: list[str] = []
    conns: dict[str, Conn] = {}
    capacity = Capacity(limit)
    for step in steps.split():
        operation, name = step.split(":")
        conn = conns.setdefault(name, Conn(name, gone))
        if operation in ("admit", "refuse"):
            assert capacity.admit(conn) is (operation == "admit"), step
        else:
            getattr(capacity, operation)(conn)
    assert gone == evicted.split()
    assert len(capacity) == held


@pytest.mark.parametrize("limit", [0, -1])
def test_a_listener_holds_at_least_one_connection(limit: int) -> None:
    with pytest.raises(ValueError, match=f"at least one connection, not {limit}"):
        Capacity(limit)


def test_answering_besides_counts_only_the_other_connections_being_answered() -> None:
    evicted: list[str] = []
    capacity = Capacity(4)
    a, b, c = (Conn(name, evicted) for name in "abc")
    for conn in (a, b, c):
        assert capacity.admit(conn)
    assert not capacity.answering_besides(a)  # only waiting
    capacity.answering(a)
    assert not capacity.answering_besides(a)  # alone
    assert capacity.answering_besides(b)  # a is, and b is not answering itself
    capacity.answering(b)
    assert capacity.answering_besides(a)
    capacity.idle(b)
    capacity.waiting(c)
    assert not capacity.answering_besides(a)
