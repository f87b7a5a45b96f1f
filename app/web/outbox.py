"""A listener's answers written together once the event loop's pass has run every task it had,
not one by one as each is made (docs/request-cost.md, "Answers written once per pass")."""

from __future__ import annotations

import asyncio


class Outbox:
    """What a listener's connections write, held until the end of the loop's pass.

    Each answer written at once put a TLS record and a loopback send (the kernel's TCP path,
    the client's wake-up) between two reviews' judging, and took the caches their code and data
    were in. Held, the pass judges every review that arrived together, then writes every answer.

    An answer made while no other connection is being answered and nothing is held is written
    at once: alone, it has nothing to wait for (one request at a time, as the apiserver's latency
    is measured). A connection's writes keep their order; one closing meanwhile gets nothing
    more (as a write to a closed transport would); one being closed or aborted by nicguard is
    flushed first.
    """

    __slots__ = ("_pending", "_scheduled")

    def __init__(self) -> None:
        self._pending: list[tuple[asyncio.Transport, bytes | bytearray | memoryview]] = []
        self._scheduled = False

    def write(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.Transport,
        data: bytes | bytearray | memoryview,
    ) -> None:
        """``transport.write(data)`` once the pass of ``loop`` (the caller's) has run."""
        self._pending.append((transport, data))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush_scheduled, loop)

    def flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Write everything held now."""
        pending, self._pending = self._pending, []
        for transport, data in pending:
            if transport.is_closing():
                continue
            try:
                transport.write(data)
            except Exception as error:  # one connection's failure is not the others'
                loop.call_exception_handler(
                    {"message": "writing an answer failed", "exception": error}
                )

    def _flush_scheduled(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = False
        self.flush(loop)

    @property
    def holding(self) -> bool:
        """Whether anything is held now (a write must then queue behind it)."""
        return bool(self._pending)
