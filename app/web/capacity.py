"""The cap on a listener's open connections, and which connection gives way to a new one.

At the cap a new connection evicts the one waiting longest for its request, else the one idle
longest between requests; only when every connection is being answered is the new one refused.
"""

from __future__ import annotations

from typing import Protocol


class Member(Protocol):
    """A connection the table can close to make room."""

    def evict(self) -> None:
        """Close at once: the table has already forgotten it."""


class Capacity:
    """At most ``limit`` connections, each waiting for a request, being answered or idle.

    A connection still waiting for its request (TLS handshake included) or idle between two is
    cheap for a client to hold and cheap for it to lose, so a flood of them can never lock the
    apiserver out: it evicts them, oldest first. One being answered is never evicted.
    """

    __slots__ = ("_answering", "_idle", "_limit", "_waiting")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a listener holds at least one connection, not {limit}")
        self._limit = limit
        # dicts keep insertion order: the first key is the one in its state the longest.
        self._waiting: dict[Member, None] = {}
        self._idle: dict[Member, None] = {}
        self._answering: set[Member] = set()

    def __len__(self) -> int:
        return len(self._waiting) + len(self._idle) + len(self._answering)

    def admit(self, member: Member) -> bool:
        """Take ``member`` as waiting for its request, evicting another at the cap; False (not
        taken) when every connection held is being answered."""
        if len(self) >= self._limit:
            victims = self._waiting or self._idle
            if not victims:
                return False
            victim = next(iter(victims))
            del victims[victim]
            victim.evict()
        self._waiting[member] = None
        return True

    def waiting(self, member: Member) -> None:
        """The first byte of a request arrived on an idle connection."""
        self._idle.pop(member, None)
        self._answering.discard(member)
        self._waiting[member] = None

    def answering(self, member: Member) -> None:
        """Its request arrived whole; the application is answering it."""
        self._waiting.pop(member, None)
        self._idle.pop(member, None)
        self._answering.add(member)

    def idle(self, member: Member) -> None:
        """Answered; the connection is kept for the next request."""
        self._answering.discard(member)
        self._waiting.pop(member, None)
        self._idle[member] = None

    def answering_besides(self, member: Member) -> bool:
        """Whether a connection other than ``member`` is being answered."""
        return len(self._answering) > (member in self._answering)

    def leave(self, member: Member) -> None:
        """Closed (a no-op for one already evicted)."""
        self._waiting.pop(member, None)
        self._idle.pop(member, None)
        self._answering.discard(member)
