"""The one budget of request bodies held at once, and whose body gives way to a new one.

A body still arriving is cheap for a client to hold and to lose: one that does not fit evicts
them, oldest first. Only when what is held is bodies being answered is the new one refused.
"""

from __future__ import annotations

from typing import Final, Protocol

MIB: Final = 1024 * 1024


class Holder(Protocol):
    """A connection receiving a body, which the budget can close to make room."""

    def give_way(self) -> None:
        """Close at once: the budget has already released what it held."""


class BodyBudget:
    """At most ``limit`` bytes of request bodies reserved at once, whole or arriving.

    A holder reserves as it learns how much it will hold (a Content-Length, or each chunk) and
    releases everything once answered or closed; a whole body is no longer evicted.
    """

    __slots__ = ("_arriving", "_claims", "_held", "_limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a body budget holds at least one byte, not {limit}")
        self._limit = limit
        self._held = 0
        self._claims: dict[Holder, int] = {}
        # dicts keep insertion order: the first key is the body arriving the longest.
        self._arriving: dict[Holder, None] = {}

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def held(self) -> int:
        return self._held

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

    def release(self, holder: Holder) -> None:
        """Answered or closed: everything ``holder`` reserved (a no-op when it holds none)."""
        self._arriving.pop(holder, None)
        self._held -= self._claims.pop(holder, 0)

    def _make_room(self, holder: Holder, size: int) -> bool:
        short = self._held + size - self._limit
        victims = []
        for victim in self._arriving:
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
