"""Both listeners' connections under nicguard's limits: a place under the cap first, TLS started
only then, and each request's headers and body within a deadline (docs/operations.md, "Hostile
clients")."""

from __future__ import annotations

import asyncio
import enum
import ssl
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from socket import SocketType
from typing import Any, ClassVar, Final, cast

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.heap import ClosedConnections
from app.web.body import MAX_BODY_BYTES
from app.web.body_budget import BODY_HOLD, BodyBudget
from app.web.capacity import Capacity
from app.web.decoded_cost import DECODED_FROM_BYTES, DecodedCost
from app.web.outbox import Outbox
from app.web.peer import with_tls_extension

# Memory, not file descriptors, is what runs out first: the loop gives every TLS connection a
# 256 KiB read buffer once TLS starts (~300 KiB of RSS each, measured), so 256 connections cost
# ~75 MiB, inside the Deployment's 256 MiB limit beside the caches. The apiserver holds a few.
MAX_CONNECTIONS: Final = 128
# The apiserver writes a review at once and waits 3 s for the answer (timeoutSeconds in the
# webhook configurations); the body read allowed 10 s before this deadline existed.
REQUEST_SECONDS: Final = 10.0
# The apiserver's headers are a few hundred bytes (16 KiB is h11's default; httptools has none).
MAX_HEADER_BYTES: Final = 16 * 1024


class Closed(enum.StrEnum):
    """Why nicguard closed a connection (the ``reason`` of nicguard_connections_closed_total)."""

    DEADLINE = "deadline"  # handshake, headers and body not in within REQUEST_SECONDS
    EVICTED = "evicted"  # at the cap, to make room for a new connection
    REFUSED = "refused"  # at the cap with every connection being answered
    HEADER_SIZE = "header_size"  # headers over MAX_HEADER_BYTES: 431, then closed
    BODY_BUDGET = "body_budget"  # its body still arriving, to make room under the body budget


@dataclass(frozen=True, slots=True)
class Limits:
    connections: int = MAX_CONNECTIONS
    request_seconds: float = REQUEST_SECONDS
    header_bytes: int = MAX_HEADER_BYTES


OnClosed = Callable[[Closed], None]


@dataclass(frozen=True, slots=True)
class Bodies:
    """The budget of the request bodies a listener holds at once (app/web/body_budget.py), and
    the app that answers a request whose body does not fit (503, without reading it)."""

    budget: BodyBudget
    over_budget: ASGIApp


@dataclass(frozen=True, slots=True)
class Listener:
    """What the connections of one listener share."""

    capacity: Capacity
    tls: ssl.SSLContext | None
    limits: Limits
    on_closed: OnClosed
    bodies: Bodies | None = None
    closed: ClosedConnections = field(default_factory=ClosedConnections)
    outbox: Outbox = field(default_factory=Outbox)


class _Phase(enum.Enum):
    WAITING = enum.auto()  # for a request: from accept, or from a later request's first byte
    ANSWERING = enum.auto()
    IDLE = enum.auto()
    CLOSED = enum.auto()


# Read several times per request, so by module names: Python 3.11 looks an enum's member up
# through EnumType.__getattr__'s hook, several times the cost of a global (3.12 dropped it).
_WAITING: Final = _Phase.WAITING
_ANSWERING: Final = _Phase.ANSWERING
_IDLE: Final = _Phase.IDLE
_CLOSED: Final = _Phase.CLOSED


class _HeadersTooLargeError(Exception):
    """Raised in httptools' callback: the parser stops, uvicorn answers via send_400_response."""


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, created at accept: the TLS handshake and the first request
    must complete within the deadline of accept, a later request within the deadline of its
    first byte; a connection past its deadline, evicted or refused is aborted, never answered.

    Every uvicorn method overridden here is pinned by
    tests/web/test_connection_limits_uvicorn.py."""

    listener: ClassVar[Listener]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = _WAITING
        self._since = 0.0
        self._deadline: asyncio.TimerHandle | None = None
        self._carrier: asyncio.Transport | None = None  # the TCP or, once started, TLS one
        # What TLS decrypted before the handshake's task told us it is up (the first request
        # often arrives with the client's Finished): delivered once uvicorn has the transport.
        self._early: list[bytes] | None = None
        # What the client sent before TLS started (its ClientHello): uvloop reads from the moment
        # connection_made returns, pause or not; handed to the TLS protocol as it takes over.
        self._hello: list[bytes] | None = None
        self._handed = False  # uvicorn's connection_made has run
        self._handshake: asyncio.Task[asyncio.Transport | None] | None = None
        # Bytes received while a request's headers are incomplete (None once they are): httptools
        # buffers a header line without bound, so its size is counted here, as h11 counted it.
        self._head: int | None = 0
        self._partial = False  # a request has begun and is not whole yet
        self._oversized = False
        # The current request's body: bytes reserved in the listener's body budget; received,
        # counting what decoding a large one will hold (app/web/decoded_cost.py).
        self._bodies = self.listener.bodies
        self._reserved = self._received = 0
        self._cost: DecodedCost | None = None
        # A request's work (the app) is under way: what its body holds in the budget is kept
        # until the work ends, even once the connection is lost (the work may still decode it).
        self._working = False
        # Set while the request's whole body waits for a thread: how the app refuses it if the
        # budget takes its room (BodyHold).
        self._evicted: Callable[[], None] | None = None
        # Every request's scope: one dict per connection, never changed (ASGI extensions).
        self._extensions: dict[str, dict[object, object]] = {BODY_HOLD: {"hold": self}}
        if self._bodies is not None:
            self.app = _Working(self.app, self)

    # --- accept, TLS, close ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accepted (plain TCP): take a place, then start TLS, all within the deadline."""
        self._carrier = transport
        if not self.listener.capacity.admit(self):
            self._phase = _CLOSED
            self.listener.on_closed(Closed.REFUSED)
            transport.abort()
            return
        self._since = self.loop.time()
        self._arm()
        if self.listener.tls is None:
            self._hand(transport)
            return
        transport.pause_reading()  # asyncio reads nothing until the TLS protocol takes over
        self._early, self._hello = [], []
        self._handshake = self.loop.create_task(self._start_tls(transport, self.listener.tls))
        self._handshake.add_done_callback(self._secured)

    async def _start_tls(
        self, transport: asyncio.Transport, tls: ssl.SSLContext
    ) -> asyncio.Transport | None:
        if transport.is_closing():  # evicted before this task ran: the loop would wait forever
            return None
        hello, self._hello = b"".join(self._hello or ()), None
        if hello:  # first thing once start_tls has set its protocol, before it starts
            self.loop.call_soon(_handover, transport, self, hello)
        return await self.loop.start_tls(
            transport,
            self,
            tls,
            server_side=True,
            # Backstops: our own timer closes first; a close_notify never answered neither holds
            # the connection for the loop's 30 s.
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
        if secured is None or self._phase is _CLOSED:
            # A failed handshake (the loop closed the socket) or our abort during it.
            self._forget()
            return
        self._carrier, early, self._early = secured, self._early or [], None
        self._hand(secured)
        self.app = with_tls_extension(self.app, secured)  # the client certificate, per request
        for data in early:
            self.data_received(data)

    def _hand(self, transport: asyncio.Transport) -> None:
        """To uvicorn, which answers on it through ``_OneWrite``."""
        self._handed = True
        super().connection_made(transport)
        self.transport = cast("asyncio.Transport", _OneWrite(transport, self))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handed:
            super().connection_lost(exc)
        self._forget()

    def evict(self) -> None:
        """The cap needs this connection's place (``Capacity`` has let it go already)."""
        self._close(Closed.EVICTED)

    def _close(self, reason: Closed) -> None:
        if self._phase is _CLOSED:
            return
        self._forget()
        self.listener.on_closed(reason)
        if self._handshake is not None and not self._handshake.done():
            self._handshake.cancel()
        if self._carrier is not None:
            self.listener.outbox.flush(self.loop)  # what it was answered goes before the abort
            self._carrier.abort()

    def give_way(self) -> None:
        """The body budget needs what this connection's body holds (already released): a body
        arriving is closed, one waiting for a thread is refused by the app."""
        evicted, self._evicted = self._evicted, None
        if evicted is not None:
            evicted()
        else:
            self._close(Closed.BODY_BUDGET)

    # --- BodyHold, for the app: the request's whole body waits for a thread -----------------

    def wait(self, evicted: Callable[[], None]) -> None:
        if (bodies := self._bodies) is not None and self._phase is not _CLOSED:
            self._evicted = evicted
            bodies.budget.waiting(self)

    def proceed(self) -> None:
        self._evicted = None
        if (bodies := self._bodies) is not None:
            bodies.budget.arrived(self)

    def _forget(self) -> None:
        if self._phase is not _CLOSED:  # once per connection
            self.listener.closed.closed()
        self._phase = _CLOSED
        self._handshake = None
        self._disarm()
        self.listener.capacity.leave(self)
        if (bodies := self._bodies) is not None and not self._working:
            bodies.budget.release(self)

    def work_began(self) -> None:
        self._working = True

    def work_ended(self) -> None:
        """A request's work is over (answered, dropped or failed)."""
        self._working, self._evicted = False, None
        if self._phase is _CLOSED and (bodies := self._bodies) is not None:
            bodies.budget.release(self)  # lost meanwhile: held until now

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
        if self._hello is not None:  # TLS not started: the client's first flight, in plain TCP
            self._hello.append(data)
            if self._carrier is not None:
                self._carrier.pause_reading()
            return
        if self._early is not None:
            self._early.append(data)
            return
        if self._phase is _CLOSED:
            return
        if self._phase is _IDLE:  # a new request's first byte
            self._phase, self._since = _WAITING, self.loop.time()
            self.listener.capacity.waiting(self)
        if self._head is not None:
            self._head += len(data)
        super().data_received(data)  # the request, if whole, is being answered: on_message_complete
        if self._phase is not _WAITING:
            return
        if self._head is not None and self._head > self.listener.limits.header_bytes:
            self._too_large()  # and still no end of the headers
        elif self._deadline is None:
            self._arm()  # the request did not arrive whole: from now on it runs against time

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._partial = True

    def on_headers_complete(self) -> None:
        head, self._head = self._head, None
        if (
            head is not None
            and head > self.listener.limits.header_bytes
            and (self._head_bytes() > self.listener.limits.header_bytes)
        ):
            self._oversized = True
            raise _HeadersTooLargeError
        if (bodies := self._bodies) is None:
            super().on_headers_complete()
            return
        self._received = 0
        self.scope["extensions"] = self._extensions  # uvicorn's scope has none of its own
        declared = self._content_length()
        self._reserved = min(declared, MAX_BODY_BYTES)
        # A body declared within DECODED_FROM_BYTES is never charged for decoding: not scanned.
        self._cost = None if 0 < declared <= DECODED_FROM_BYTES else DecodedCost()
        if not self._reserved or bodies.budget.take(self, self._reserved):
            super().on_headers_complete()
            return
        # Refused before a byte of it is read: answered 503 by the app uvicorn runs for this
        # request alone, which closes the connection; what arrives meanwhile is not counted.
        self._reserved = sys.maxsize
        app, self.app = self.app, bodies.over_budget
        try:
            super().on_headers_complete()
        finally:
            self.app = app

    def _content_length(self) -> int:
        """The declared length (httptools has refused a malformed or repeated one); 0 if none."""
        for name, value in self.headers:
            if name == b"content-length":
                return int(value) if value.isdigit() else 0
        return 0

    def on_body(self, body: bytes) -> None:
        bodies = self._bodies
        if bodies is not None and not self.cycle.response_complete:  # else uvicorn drops it
            self._received += len(body)
            if (cost := self._cost) is not None:
                decoded = cost.of(body)  # every chunk: what is in a string depends on them all
                if self._received > DECODED_FROM_BYTES:
                    self._received += decoded
            if self._received > self._reserved:  # chunked, longer than declared, or costly
                if self._phase is _CLOSED:
                    return
                if not bodies.budget.take(self, self._received - self._reserved):
                    self._close(Closed.BODY_BUDGET)
                    return
                self._reserved = self._received
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._partial, self._head = False, 0
        if (bodies := self._bodies) is not None:
            bodies.budget.arrived(self)
        if self._phase is not _WAITING:
            return
        if self.cycle.response_complete and not self.pipeline:
            self._idle()  # answered before it was whole (413): nothing more to answer
        else:
            self._answering()

    def on_response_complete(self) -> None:
        cast("_OneWrite", self.transport).flush()  # a head without a body (HEAD, 204)
        queued = bool(self.pipeline)
        super().on_response_complete()
        if self._phase is _WAITING and (bodies := self._bodies) is not None:
            bodies.budget.release(self)  # answered before its body was whole: it is dropped
        if self._phase is not _ANSWERING:
            return
        if self.transport.is_closing():
            # Answered on a connection going away (a 500, or a 400 to what followed the body):
            # its body is dropped now, not when the peer finishes the TLS close, up to
            # ssl_shutdown_timeout later.
            if (bodies := self._bodies) is not None:
                bodies.budget.release(self)
            return
        if self._partial:  # part of the next one
            self._phase, self._since = _WAITING, self.loop.time()
            self.listener.capacity.waiting(self)
            self._arm()
        elif not queued:  # else a pipelined request, already whole, is being answered
            self._idle()

    def _answering(self) -> None:
        self._phase = _ANSWERING
        self._disarm()
        self.listener.capacity.answering(self)

    def _idle(self) -> None:
        """Answered, nothing more begun: what its bodies reserved is free again."""
        self._phase = _IDLE
        self._disarm()
        self.listener.capacity.idle(self)
        if (bodies := self._bodies) is not None:
            bodies.budget.release(self)

    # --- headers over the cap ---------------------------------------------------------------

    def _head_bytes(self) -> int:
        """The request line and headers as sent, give or take their separators."""
        return len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to what httptools cannot parse; 431 when it is the headers' size."""
        if not self._oversized:
            super().send_400_response(msg)
            return
        self._too_large()

    def _too_large(self) -> None:
        self.listener.on_closed(Closed.HEADER_SIZE)
        self._phase = _CLOSED  # counted; it leaves the cap once closed (connection_lost)
        self._disarm()  # the TLS close_notify is bounded by ssl_shutdown_timeout
        body = b"request headers exceed %d bytes" % self.listener.limits.header_bytes
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()


class _Working:
    """The app of one connection, telling it when a request's work begins and ends."""

    __slots__ = ("_app", "_connection")

    def __init__(self, app: ASGIApp, connection: LimitedHttpToolsProtocol) -> None:
        self._app, self._connection = app, connection

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._connection.work_began()
        try:
            await self._app(scope, receive, send)
        finally:
            self._connection.work_ended()


class _OneWrite:
    """The transport uvicorn answers on, but a response's head waits for its first body bytes:
    uvicorn writes them separately, and each write costs a TLS record and a loopback or network
    send of its own. What is written goes through the listener's ``Outbox``: at the end of the
    loop's pass while other connections are being answered, or before the connection is closed;
    at once when none is and the outbox holds nothing."""

    __slots__ = ("_capacity", "_connection", "_head", "_loop", "_outbox", "_transport")

    def __init__(self, transport: asyncio.Transport, connection: LimitedHttpToolsProtocol) -> None:
        self._transport = transport
        self._connection = connection
        self._capacity = connection.listener.capacity
        self._outbox = connection.listener.outbox
        self._loop = connection.loop
        self._head = b""

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._head:
            data, self._head = self._head + data, b""
        elif data[:9] == b"HTTP/1.1 " and data[:13] != b"HTTP/1.1 100 ":
            self._head = bytes(data)
            return
        self._send(data)

    def flush(self) -> None:
        if self._head:
            head, self._head = self._head, b""
            self._send(head)

    def _send(self, data: bytes | bytearray | memoryview) -> None:
        outbox = self._outbox
        if outbox.holding or self._capacity.answering_besides(self._connection):
            outbox.write(self._loop, self._transport, data)
        else:
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._outbox.flush(self._loop)
        self._transport.close()

    def is_closing(self) -> bool:
        # Asked twice per request (uvicorn's and our on_response_complete): not through
        # __getattr__, which a failed attribute lookup reaches only after building its error.
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _handover(transport: asyncio.Transport, plain: asyncio.BaseProtocol, data: bytes) -> None:
    """``data`` to the TLS protocol start_tls has set on ``transport``, as its transport would
    hand it (BufferedProtocol; before its connection_made, it only buffers the bytes)."""
    tls = transport.get_protocol()  # uvloop's is no asyncio.BufferedProtocol subclass
    if transport.is_closing() or tls is plain or not hasattr(tls, "buffer_updated"):
        return
    buffered = cast("asyncio.BufferedProtocol", tls)
    view = memoryview(data)
    while view:
        buffer = memoryview(buffered.get_buffer(len(view)))
        size = min(len(buffer), len(view))
        buffer[:size] = view[:size]
        buffered.buffer_updated(size)
        view = view[size:]


class LimitedServer(uvicorn.Server):
    """Says ``https`` for a listener whose TLS ``LimitedHttpToolsProtocol`` starts (uvicorn's config
    has no ``ssl`` then, so that it accepts plain TCP)."""

    def _log_started_message(self, listeners: Sequence[SocketType]) -> None:
        listener: Listener | None = getattr(self.config.http_protocol_class, "listener", None)
        if listener is not None and (tls := listener.tls) is not None:
            self.config.ssl = tls  # read for this line only: the listener is already open
        super()._log_started_message(listeners)


def limited_config(
    app: Callable[..., Any],
    *,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    on_closed: OnClosed,
    limits: Limits = Limits(),
    bodies: Bodies | None = None,
    **kwargs: Any,
) -> uvicorn.Config:
    """A listener of ``app`` under ``limits``: HTTPS with exactly ``tls`` (kept by identity, so
    certificates reloaded into it serve new handshakes), plain HTTP without; with ``bodies``,
    the request bodies it holds at once share that budget."""
    listener = Listener(Capacity(limits.connections), tls, limits, on_closed, bodies)
    protocol = type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"listener": listener})
    # No proxy stands in front of nicguard, so no X-Forwarded-For is believed: uvicorn's default
    # trusts it from 127.0.0.1, where a sidecar or `kubectl port-forward` would forge the peer.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        **{"loop": "uvloop", "proxy_headers": False, **kwargs},
    )
