"""The one budget of request bodies held at once, and whose body gives way to a new one.

A body still arriving is cheap for a client to hold and to lose: one that does not fit evicts
them, oldest first; then whole bodies still waiting for a thread's turn, unjudged, largest
first. Only when what is held is bodies being judged or answered is the new one refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

MIB: Final = 1024 * 1024
# The ASGI scope's extension through which the app answering a request tells the budget that
# its body waits for a thread: ``scope["extensions"][BODY_HOLD]["hold"]``, a BodyHold.
BODY_HOLD: Final = "nicguard.body_hold"


class Holder(Protocol):
    """A connection holding a body, which the budget can make give way to make room."""

    def give_way(self) -> None:
        """Give way at once (a body arriving is closed, one waiting refused): the budget has
        already released what it held."""


class BodyHold(Protocol):
    """What the app answering a request tells the budget of its whole body."""

    def wait(self, evicted: Callable[[], None]) -> None:
        """It waits for a thread's turn, unjudged: the budget may take its room, and then
        calls ``evicted`` (on the event loop) for the app to refuse it."""

    def proceed(self) -> None:
        """Its turn has come: it is judged now, and no longer evicted."""


class BodyBudget:
    """At most ``limit`` bytes of request bodies reserved at once, whole or arriving.

    A holder reserves as it learns how much it will hold (a Content-Length, or each chunk) and
    releases everything once answered or closed; a whole body is no longer evicted.
    """

    __slots__ = ("_arriving", "_claims", "_held", "_limit", "_waiting")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a body budget holds at least one byte, not {limit}")
        self._limit = limit
        self._held = 0
        self._claims: dict[Holder, int] = {}
        # dicts keep insertion order: the first key is the body arriving the longest.
        self._arriving: dict[Holder, None] = {}
        self._waiting: dict[Holder, None] = {}

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def held(self) -> int:
        return self._held

    @property
    def bodies_waiting(self) -> int:
        """Whole bodies waiting for a thread's turn."""
        return len(self._waiting)

    def take(self, holder: Holder, size: int) -> bool:
        """Reserve ``size`` more bytes for ``holder``'s body, still arriving; evicts others
        still arriving (oldest first) to make room. False, evicting none, when it cannot fit."""
        if self._held + size > self._limit and not self._make_room(holder, size):
            return False
        self._held += size
        self._claims[holder] = self._claims.get(holder, 0) + size
        self._arriving[holder] = None
        return True

    def arrived(self, holder: Holder) -> None:
        """``holder``'s body is whole: it is being answered and is not evicted."""
        self._arriving.pop(holder, None)
        self._waiting.pop(holder, None)

    def waiting(self, holder: Holder) -> None:
        """``holder``'s whole body waits for a thread's turn, unjudged: it may be evicted, after
        the bodies arriving (``arrived`` once its turn comes)."""
        if holder in self._claims:
            self._waiting[holder] = None

    def release(self, holder: Holder) -> None:
        """Answered or closed: everything ``holder`` reserved (a no-op when it holds none)."""
        self._arriving.pop(holder, None)
        self._waiting.pop(holder, None)
        self._held -= self._claims.pop(holder, 0)

    def _make_room(self, holder: Holder, size: int) -> bool:
        short = self._held + size - self._limit
        victims = []
        # The largest waiting first; of equal ones, the last to begin waiting (the most ahead).
        began = {waiter: n for n, waiter in enumerate(self._waiting)}
        waiting = sorted(began, key=lambda w: (self._claims[w], began[w]), reverse=True)
        for victim in (*self._arriving, *waiting):
            if short <= 0:
                break
            if victim is not holder:
                victims.append(victim)
                short -= self._claims[victim]
        if short > 0:
            return False
        for victim in victims:
            self.release(victim)
            victim.give_way()
        return True
