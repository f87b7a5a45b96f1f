"""Reviews whose client has gone: noticed while they wait, dropped before they are decoded or
judged, and counted by the queue they left (docs/operations.md, "Abandoned reviews")."""

from __future__ import annotations

import asyncio
import enum

from starlette.types import Message, Receive


class Queue(enum.StrEnum):
    """Where a review waited when its client went (the ``queue`` of
    nicguard_reviews_dropped_total)."""

    EVENT_LOOP = "event_loop"  # for its body, or for the loop to take it up
    JUDGING = "judging"  # a costly review, for the judging thread
    YAML = "yaml"  # a ConfigMap's review, for the YAML thread


class ClientGoneError(Exception):
    """The client went before its review was answered: there is no one to answer, so the review
    is dropped where it waited (``queue``), undecoded or unjudged."""

    def __init__(self, queue: Queue = Queue.EVENT_LOOP) -> None:
        super().__init__(queue.value)
        self.queue = queue


class ClientWatch:
    """Whether a review waiting for a thread should still wait: its client is still connected
    (ASGI's ``receive``, once the body is whole, returns ``http.disconnect`` when the connection
    is lost), and the body budget has not taken its room (``evict``). One task per watch, so
    only reviews that wait are watched; ``gone`` is a plain flag, read by the threads too;
    ``interrupted`` is done once either happens."""

    __slots__ = ("_task", "evicted", "gone", "interrupted")

    def __init__(self, receive: Receive) -> None:
        self.gone = self.evicted = False
        self.interrupted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(receive())
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Future[Message]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        if task.result().get("type") == "http.disconnect":
            self.gone = True
            self._interrupt()

    def evict(self) -> None:
        """The body budget has taken the room of the review's body: it is refused unjudged."""
        self.evicted = True
        self._interrupt()

    def _interrupt(self) -> None:
        if not self.interrupted.done():
            self.interrupted.set_result(None)

    def check(self, queue: Queue) -> None:
        """Raises ClientGoneError when the client has gone (any thread may ask)."""
        if self.gone:
            raise ClientGoneError(queue)

    def stop(self) -> None:
        """Answered or dropped: nothing more to watch (before the answer is sent, which would
        end ``receive`` as well)."""
        self._task.cancel()
