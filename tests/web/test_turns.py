"""A thread's turn (app.web.turns): one holder, the others in order of arrival, each waiting a
bounded time, and one whose client has gone leaving the queue."""

from __future__ import annotations

import asyncio

import pytest

from app.web.turns import Turn, WaitedTooLongError


def _never() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_turns_come_in_order_of_arrival() -> None:
    async def scenario() -> list[int]:
        turn, order = Turn(), []
        assert await turn.take(60, _never())

        async def waiter(n: int) -> None:
            assert await turn.take(60, _never())
            order.append(n)
            turn.give_back()

        waiters = []
        for n in range(3):
            waiters.append(asyncio.create_task(waiter(n)))
            await _settle()
        turn.give_back()
        await asyncio.gather(*waiters)
        assert await turn.take(0, _never())  # free again: taken without waiting
        return order

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_a_waiter_whose_client_goes_leaves_and_the_next_has_the_turn() -> None:
    async def scenario() -> tuple[bool, bool]:
        turn = Turn()
        await turn.take(60, _never())
        left = _never()
        gone = asyncio.create_task(turn.take(60, left))
        kept = asyncio.create_task(turn.take(60, _never()))
        await _settle()
        left.set_result(None)
        first = await gone
        turn.give_back()
        return first, await kept

    assert asyncio.run(scenario()) == (False, True)


def test_a_wait_beyond_its_bound_is_refused_and_leaves_the_queue() -> None:
    async def scenario() -> bool:
        turn = Turn()
        await turn.take(60, _never())
        with pytest.raises(WaitedTooLongError):
            await turn.take(0.001, _never())
        turn.give_back()  # nobody is waiting: free
        return await turn.take(0, _never())

    assert asyncio.run(scenario()) is True


def test_a_waiter_cancelled_once_granted_gives_the_turn_on() -> None:
    async def scenario() -> bool:
        turn = Turn()
        await turn.take(60, _never())
        cancelled = asyncio.create_task(turn.take(60, _never()))
        await _settle()
        turn.give_back()  # granted to the waiter, which is cancelled before it runs
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        return await turn.take(0, _never())

    assert asyncio.run(scenario()) is True
