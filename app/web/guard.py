"""Both listeners' connections under nicguard's limits: a place under the cap first, TLS started
only then, and each request's headers and body within a deadline (docs/operations.md, "Hostile
clients")."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from socket import SocketType
from typing import Any, ClassVar, Final

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.web.capacity import Capacity
from app.web.peer import with_tls_extension

# Memory, not file descriptors, is what runs out first: asyncio gives every TLS connection a
# 256 KiB read buffer from accept on (~300 KiB of RSS each, measured), so 256 connections cost
# ~75 MiB, inside the Deployment's 256 MiB limit beside the caches. The apiserver holds a few.
MAX_CONNECTIONS: Final = 128
# The apiserver writes a review at once and waits 3 s for the answer (timeoutSeconds in the
# webhook configurations); the body read allowed 10 s before this deadline existed.
REQUEST_SECONDS: Final = 10.0
# h11's own default, now explicit: the apiserver's headers are a few hundred bytes.
MAX_HEADER_BYTES: Final = 16 * 1024


class Closed(enum.StrEnum):
    """Why nicguard closed a connection (the ``reason`` of nicguard_connections_closed_total)."""

    DEADLINE = "deadline"  # handshake, headers and body not in within REQUEST_SECONDS
    EVICTED = "evicted"  # at the cap, to make room for a new connection
    REFUSED = "refused"  # at the cap with every connection being answered
    HEADER_SIZE = "header_size"  # headers over MAX_HEADER_BYTES: 431, then closed


@dataclass(frozen=True, slots=True)
class Limits:
    connections: int = MAX_CONNECTIONS
    request_seconds: float = REQUEST_SECONDS
    header_bytes: int = MAX_HEADER_BYTES


OnClosed = Callable[[Closed], None]


@dataclass(frozen=True, slots=True)
class Listener:
    """What the connections of one listener share."""

    capacity: Capacity
    tls: ssl.SSLContext | None
    limits: Limits
    on_closed: OnClosed


class _Phase(enum.Enum):
    WAITING = enum.auto()  # for a request: from accept, or from a later request's first byte
    ANSWERING = enum.auto()
    IDLE = enum.auto()
    CLOSED = enum.auto()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, created at accept: the TLS handshake and the first request must
    complete within the deadline of accept, a later request within the deadline of its first
    byte; a connection past its deadline, evicted or refused is aborted, never answered."""

    listener: ClassVar[Listener]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _Phase.WAITING
        self._since = 0.0
        self._deadline: asyncio.TimerHandle | None = None
        self._carrier: asyncio.Transport | None = None  # the TCP or, once started, TLS one
        # What TLS decrypted before the handshake's task told us it is up (the first request
        # often arrives with the client's Finished): delivered once uvicorn has the transport.
        self._early: list[bytes] | None = None
        self._handed = False  # uvicorn's connection_made has run
        self._handshake: asyncio.Task[asyncio.Transport | None] | None = None

    # --- accept, TLS, close ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accepted (plain TCP): take a place, then start TLS, all within the deadline."""
        self._carrier = transport
        if not self.listener.capacity.admit(self):
            self._phase = _Phase.CLOSED
            self.listener.on_closed(Closed.REFUSED)
            transport.abort()
            return
        self._since = self.loop.time()
        self._arm()
        if self.listener.tls is None:
            self._handed = True
            super().connection_made(transport)
            return
        transport.pause_reading()  # nothing is read until the TLS protocol takes over
        self._early = []
        self._handshake = self.loop.create_task(self._start_tls(transport, self.listener.tls))
        self._handshake.add_done_callback(self._secured)

    async def _start_tls(
        self, transport: asyncio.Transport, tls: ssl.SSLContext
    ) -> asyncio.Transport | None:
        if transport.is_closing():  # evicted before this task ran: asyncio would wait forever
            return None
        return await self.loop.start_tls(
            transport,
            self,
            tls,
            server_side=True,
            # Backstops: our own timer closes first; a close_notify never answered neither holds
            # the connection for asyncio's 30 s.
            ssl_handshake_timeout=self.listener.limits.request_seconds + 1,
            ssl_shutdown_timeout=self.listener.limits.request_seconds,
        )

    def _secured(self, handshake: asyncio.Task[asyncio.Transport | None]) -> None:
        secured = None
        if not handshake.cancelled():
            if (error := handshake.exception()) is None:
                secured = handshake.result()
            else:
                # Its traceback holds start_tls's frame, whose waiter holds the error: a cycle
                # keeping the 256 KiB TLS buffer until a full collection (measured: 4,000
                # evictions grew RSS by 600 MiB; python/cpython#109534 is the same cycle).
                error.__traceback__ = None
        if secured is None or self._phase is _Phase.CLOSED:
            # A failed handshake (asyncio closed the socket) or our abort during it.
            self._forget()
            return
        self._carrier, early, self._early = secured, self._early or [], None
        self._handed = True
        super().connection_made(secured)
        self.app = with_tls_extension(self.app, secured)  # the client certificate, per request
        for data in early:
            self.data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handed:
            super().connection_lost(exc)
        self._forget()

    def evict(self) -> None:
        """The cap needs this connection's place (``Capacity`` has let it go already)."""
        self._close(Closed.EVICTED)

    def _close(self, reason: Closed) -> None:
        if self._phase is _Phase.CLOSED:
            return
        self._forget()
        self.listener.on_closed(reason)
        if self._handshake is not None and not self._handshake.done():
            self._handshake.cancel()
        if self._carrier is not None:
            self._carrier.abort()

    def _forget(self) -> None:
        self._phase = _Phase.CLOSED
        self._handshake = None
        self._disarm()
        self.listener.capacity.leave(self)

    # --- the deadline ----------------------------------------------------------------------

    def _arm(self) -> None:
        self._disarm()
        deadline = self._since + self.listener.limits.request_seconds
        self._deadline = self.loop.call_at(deadline, self._close, Closed.DEADLINE)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def data_received(self, data: bytes) -> None:
        if self._early is not None:
            self._early.append(data)
            return
        if self._phase is _Phase.CLOSED:
            return
        if self._phase is _Phase.IDLE:  # a new request's first byte
            self._phase, self._since = _Phase.WAITING, self.loop.time()
            self.listener.capacity.waiting(self)
        super().data_received(data)
        if self._phase is _Phase.WAITING and self.conn.their_state in _COMPLETE:
            self._answering()
        elif self._phase is _Phase.WAITING and self._deadline is None:
            self._arm()  # the request did not arrive whole: from now on it runs against time

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._phase is not _Phase.ANSWERING or self.transport.is_closing():
            return
        their = self.conn.their_state
        if their in _COMPLETE:  # a pipelined request, already whole, is being answered
            return
        if their is h11.IDLE and not self.conn.trailing_data[0]:
            self._phase = _Phase.IDLE
            self.listener.capacity.idle(self)
            return
        self._phase, self._since = _Phase.WAITING, self.loop.time()  # part of the next one
        self.listener.capacity.waiting(self)
        self._arm()

    def _answering(self) -> None:
        self._phase = _Phase.ANSWERING
        self._disarm()
        self.listener.capacity.answering(self)

    # --- headers over the cap ---------------------------------------------------------------

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to what h11 cannot parse; 431 when it is the headers' size."""
        if len(self.conn.trailing_data[0]) <= self.listener.limits.header_bytes:
            super().send_400_response(msg)
            return
        self.listener.on_closed(Closed.HEADER_SIZE)
        self._phase = _Phase.CLOSED  # counted; it leaves the cap once closed (connection_lost)
        self._disarm()  # the TLS close_notify is bounded by ssl_shutdown_timeout
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
        body = b"request headers exceed %d bytes" % self.listener.limits.header_bytes
        with contextlib.suppress(h11.LocalProtocolError):
            reply = h11.Response(status_code=431, headers=headers, reason=_TOO_LARGE)
            self.transport.write(self.conn.send(reply) or b"")
            self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        self.transport.close()


_COMPLETE: Final = frozenset({h11.DONE, h11.MUST_CLOSE})
_TOO_LARGE: Final = b"Request Header Fields Too Large"


class GuardedServer(uvicorn.Server):
    """Says ``https`` for a listener whose TLS ``GuardedH11Protocol`` starts (uvicorn's config
    has no ``ssl`` then, so that it accepts plain TCP)."""

    def _log_started_message(self, listeners: Sequence[SocketType]) -> None:
        listener: Listener | None = getattr(self.config.http_protocol_class, "listener", None)
        if listener is not None and (tls := listener.tls) is not None:
            self.config.ssl = tls  # read for this line only: the listener is already open
        super()._log_started_message(listeners)


def guarded_config(
    app: Callable[..., Any],
    *,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    on_closed: OnClosed,
    limits: Limits = Limits(),
    **kwargs: Any,
) -> uvicorn.Config:
    """A listener of ``app`` under ``limits``: HTTPS with exactly ``tls`` (kept by identity, so
    certificates reloaded into it serve new handshakes), plain HTTP without."""
    listener = Listener(Capacity(limits.connections), tls, limits, on_closed)
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {"listener": listener})
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        h11_max_incomplete_event_size=limits.header_bytes,
        **kwargs,
    )
