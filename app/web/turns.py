"""A thread's turn: one review at a time, the others waiting in order of arrival, each for a
bounded time, and none still waiting once its client has gone."""

from __future__ import annotations

import asyncio
from collections import deque


class WaitedTooLongError(Exception):
    """The turn did not come within the wait: the review is refused unjudged (503)."""


class Turn:
    """Who may use one thread now. ``take`` returns once it is the caller's turn; ``give_back``
    hands it to the next still waiting. Not thread-safe: the event loop's alone."""

    __slots__ = ("_held", "_waiting")

    def __init__(self) -> None:
        self._held = False
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def take(self, wait: float, left: asyncio.Future[None]) -> bool:
        """True once it is the caller's turn; False, having left the queue, when ``left`` (the
        client has gone) is done first. Raises WaitedTooLongError after ``wait`` seconds."""
        if not self._held:
            self._held = True
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await asyncio.wait((turn, left), timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled: never keep a turn nobody will give back
            self._leave(turn)
            raise
        if turn.done():
            return True
        self._leave(turn)
        if left.done():
            return False
        raise WaitedTooLongError

    def _leave(self, turn: asyncio.Future[None]) -> None:
        if turn.done():  # granted: given on at once
            self.give_back()
        else:
            turn.cancel()
            self._waiting.remove(turn)

    def give_back(self) -> None:
        """The caller is done with the thread: the first still waiting has it now."""
        if self._waiting:  # only the waiting are queued: _leave removes the others
            self._waiting.popleft().set_result(None)
        else:
            self._held = False
