"""``BodyBudget``: reservations, refusal, eviction of bodies still arriving, release."""

from __future__ import annotations

import pytest

from app.web.body_budget import BodyBudget


class Conn:
    """A holder that records being made to give way."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gave_way = False

    def give_way(self) -> None:
        self.gave_way = True

    def __repr__(self) -> str:
        return self.name


def test_reservations_up_to_the_limit_fit_and_release_frees_them() -> None:
    budget = BodyBudget(100)
    a, b = Conn("a"), Conn("b")
    assert budget.take(a, 60)
    assert budget.take(b, 40)
    assert budget.held == 100
    budget.release(a)
    assert budget.held == 40
    budget.release(b)
    budget.release(b)  # a second release, or one of a holder holding nothing, is a no-op
    assert budget.held == 0
    assert not a.gave_way
    assert not b.gave_way


def test_a_holder_taking_chunk_by_chunk_holds_their_sum() -> None:
    budget = BodyBudget(100)
    a = Conn("a")
    for _ in range(5):
        assert budget.take(a, 20)
    assert budget.held == 100
    assert not budget.take(a, 1)  # never evicts itself
    assert budget.held == 100
    assert not a.gave_way
    budget.release(a)
    assert budget.held == 0


@pytest.mark.parametrize(
    ("arriving", "whole", "size", "fits", "evicted"),
    [
        # oldest first, only as many as needed
        (("a", "b", "c"), (), 30, True, {"a"}),
        (("a", "b", "c"), (), 60, True, {"a", "b"}),
        # whole bodies are being answered: never evicted
        (("a", "b", "c"), ("a",), 30, True, {"b"}),
        (("a", "b", "c"), ("a", "b", "c"), 30, False, set()),
        # when evicting all that may be evicted would not make room, none is
        (("a", "b", "c"), ("a", "b"), 60, False, set()),
        # a body larger than the whole budget never fits
        ((), (), 101, False, set()),
    ],
)
def test_a_body_that_does_not_fit_evicts_bodies_still_arriving_oldest_first(
    arriving: tuple[str, ...],
    whole: tuple[str, ...],
    size: int,
    fits: bool,
    evicted: set[str],
) -> None:
    budget = BodyBudget(100)
    holders = {name: Conn(name) for name in ("a", "b", "c")}
    for holder in holders.values():
        assert budget.take(holder, 25)
    for name in whole:
        budget.arrived(holders[name])
    for name in set(holders) - set(arriving):
        if name not in whole:
            budget.release(holders[name])
    held = budget.held
    new = Conn("new")
    assert budget.take(new, size) is fits
    assert {n for n, h in holders.items() if h.gave_way} == evicted
    freed = 25 * len(evicted)
    assert budget.held == (held - freed + size if fits else held)
    assert budget.held <= budget.limit


def test_a_holder_that_took_more_keeps_its_place_in_the_eviction_order() -> None:
    budget = BodyBudget(100)
    a, b, new = Conn("a"), Conn("b"), Conn("new")
    assert budget.take(a, 10)
    assert budget.take(b, 10)
    assert budget.take(a, 70)  # a's next chunk: still the oldest
    assert budget.take(new, 30)
    assert a.gave_way
    assert not b.gave_way
    assert budget.held == 40


def test_an_evicted_holder_releasing_afterwards_frees_nothing_twice() -> None:
    budget = BodyBudget(100)
    a, new = Conn("a"), Conn("new")
    assert budget.take(a, 80)
    assert budget.take(new, 80)
    budget.release(a)  # its connection closes after giving way
    assert budget.held == 80


def _whole(budget: BodyBudget, sizes: dict[str, int], waiting: tuple[str, ...]) -> dict[str, Conn]:
    """Whole bodies of ``sizes``, taken in order; those named in ``waiting`` wait for a thread,
    in that order, the others are being judged."""
    holders = {name: Conn(name) for name in sizes}
    for name, holder in holders.items():
        assert budget.take(holder, sizes[name])
        budget.arrived(holder)
    for name in waiting:
        budget.waiting(holders[name])
    return holders


@pytest.mark.parametrize(
    ("sizes", "waiting", "size", "fits", "evicted"),
    [
        # the largest waiting first
        ({"a": 20, "b": 40, "c": 30}, ("a", "b", "c"), 20, True, {"b"}),
        ({"a": 20, "b": 40, "c": 30}, ("a", "b", "c"), 60, True, {"b", "c"}),
        # of equal ones, the last to begin waiting
        ({"a": 30, "b": 30, "c": 30}, ("a", "b", "c"), 20, True, {"c"}),
        ({"a": 30, "b": 30, "c": 30}, ("c", "b", "a"), 20, True, {"a"}),
        # one being judged is never evicted, however large
        ({"a": 20, "b": 40, "c": 30}, ("a", "c"), 20, True, {"c"}),
        ({"a": 20, "b": 40, "c": 30}, ("a",), 20, True, {"a"}),
        ({"a": 20, "b": 40, "c": 30}, ("a",), 40, False, set()),
    ],
)
def test_whole_bodies_waiting_for_a_thread_give_way_largest_first(
    sizes: dict[str, int], waiting: tuple[str, ...], size: int, fits: bool, evicted: set[str]
) -> None:
    budget = BodyBudget(100)
    holders = _whole(budget, sizes, waiting)
    assert budget.take(Conn("new"), size) is fits
    assert {name for name, holder in holders.items() if holder.gave_way} == evicted
    assert budget.held <= budget.limit


def test_bodies_arriving_give_way_before_bodies_waiting() -> None:
    budget = BodyBudget(100)
    holders = _whole(budget, {"waits": 50}, ("waits",))
    arriving = Conn("arriving")
    assert budget.take(arriving, 40)
    assert budget.take(Conn("new"), 30)
    assert arriving.gave_way
    assert not holders["waits"].gave_way


def test_a_body_whose_turn_came_is_no_longer_evicted() -> None:
    budget = BodyBudget(100)
    holders = _whole(budget, {"a": 60}, ("a",))
    budget.arrived(holders["a"])  # its turn came
    assert not budget.take(Conn("new"), 50)
    assert not holders["a"].gave_way
    budget.waiting(Conn("never-took"))  # holding nothing: not listed
    assert not budget.take(Conn("new"), 50)


def test_a_budget_holds_at_least_one_byte() -> None:
    with pytest.raises(ValueError, match="at least one byte"):
        BodyBudget(0)
