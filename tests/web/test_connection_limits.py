"""Each connection limit of ``app.web.connection_limits`` on a real uvicorn listener over real TLS,
with small limits: the deadline (handshake, headers, body), the header cap, the connection cap.

What is asserted is what the listener did (which connections it closed, why, in which order), never
how soon: a deadline is shown to fire by the reason recorded for the close, and every wait for a
close only bounds a hang. The deadline itself is 2 s, many times a loaded machine's TLS handshake,
so that no connection meant to live is closed by it; tests that need no deadline get 60 s."""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from starlette.types import Receive, Scope, Send

from app.certificates.certdir import ensure_cert_dir
from app.certificates.tls import server_ssl_context
from app.web.connection_limits import Closed, LimitedServer, Limits, limited_config

SECONDS = 2.0
LIMITS = Limits(connections=3, request_seconds=SECONDS, header_bytes=1024)
# For the tests that show no deadline: no connection of theirs comes near it.
UNTIMED = Limits(connections=3, request_seconds=60.0, header_bytes=1024)
HANG = 30.0  # bounds a wait for what the listener does at once, or at SECONDS
# Seconds each on a live listener: the timing tier (make slow), not make unit.
timing = pytest.mark.slow
REQUEST = b"POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nok"


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body, more = body + message.get("body", b""), message.get("more_body", False)
    headers = [(b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class Listening:
    port: int
    client: ssl.SSLContext
    closed: list[Closed] = field(default_factory=list)
    sockets: list[socket.socket] = field(default_factory=list)

    def raw(self) -> socket.socket:
        self.sockets.append(socket.create_connection(("127.0.0.1", self.port), timeout=5))
        return self.sockets[-1]

    def connect(self) -> ssl.SSLSocket:
        self.sockets.append(self.client.wrap_socket(self.raw(), server_hostname="localhost"))
        return self.sockets[-1]  # type: ignore[return-value]


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Listening]:
    """A listener whose request deadline is ``SECONDS``."""
    yield from serving(tmp_path, LIMITS)


@pytest.fixture
def untimed(tmp_path: Path) -> Iterator[Listening]:
    """A listener whose deadline no test reaches."""
    yield from serving(tmp_path, UNTIMED)


def serving(tmp_path: Path, limits: Limits) -> Iterator[Listening]:
    files = ensure_cert_dir(tmp_path / "certs", ["localhost", "127.0.0.1"])
    client = ssl.create_default_context(cafile=str(files.ca))
    closed: list[Closed] = []
    config = limited_config(
        echo,
        host="127.0.0.1",
        port=0,
        tls=server_ssl_context(files.cert, files.key),
        on_closed=closed.append,
        limits=limits,
        log_config=None,
        lifespan="off",
        timeout_keep_alive=30,
    )
    server = LimitedServer(config)
    thread = threading.Thread(target=server.run, name="limited-under-test")
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "uvicorn exited during start-up"
            assert time.monotonic() < deadline, "no start within 10 s"
            time.sleep(0.01)  # polling start-up, not synchronising a behaviour under test
        port = server.servers[0].sockets[0].getsockname()[1]
        listening = Listening(port, client, closed)
        try:
            yield listening
        finally:
            for sock in listening.sockets:
                sock.close()
    finally:
        server.should_exit = True
        thread.join(15)


def eof_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the peer closed ``sock`` (reading and dropping what it sends), or None."""
    started = time.monotonic()
    end = started + seconds
    while (left := end - time.monotonic()) > 0:
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            ready = True
        else:
            ready = bool(select.select([sock], [], [], left)[0])
        if not ready:
            continue
        try:
            sock.setblocking(False)
            data = sock.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            continue
        except (OSError, ssl.SSLError):
            return time.monotonic() - started
        if not data:
            return time.monotonic() - started
    return None


def answer(sock: ssl.SSLSocket) -> bytes:
    sock.setblocking(True)
    sock.settimeout(5)
    data = b""
    while not data.endswith(b"\r\n\r\nok"):
        chunk = sock.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


def wait_for(condition: Callable[[], bool], seconds: float = HANG) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)  # polling a counter another thread updates


@timing
def test_a_keep_alive_connection_serves_request_after_request_past_the_deadline(
    listening: Listening,
) -> None:
    sock = listening.connect()
    for _ in range(2):
        sock.sendall(REQUEST)
        assert answer(sock).startswith(b"HTTP/1.1 200")
        assert eof_within(sock, SECONDS * 1.5) is None  # idle is not "late": keep-alive holds
    sock.sendall(REQUEST)
    assert answer(sock).startswith(b"HTTP/1.1 200")
    assert listening.closed == []


@timing
def test_headers_trickled_a_line_at_a_time_are_closed_at_the_deadline(
    listening: Listening,
) -> None:
    sock = listening.connect()
    started = time.monotonic()
    sock.sendall(b"POST /x HTTP/1.1\r\n")
    while time.monotonic() - started < HANG:  # a line every SECONDS / 4 until closed
        try:
            sock.sendall(b"X-Slow: 1\r\n")
        except OSError:
            break
        if eof_within(sock, SECONDS / 4) is not None:
            break
    assert eof_within(sock, HANG) is not None
    # Closed for the deadline although lines kept arriving: trickling does not extend it.
    wait_for(lambda: listening.closed == [Closed.DEADLINE])


@timing
def test_a_body_that_stalls_after_the_headers_is_closed_without_an_answer(
    listening: Listening,
) -> None:
    sock = listening.connect()
    sock.sendall(REQUEST[:-1])  # the headers and one byte of the body
    sock.setblocking(True)
    sock.settimeout(HANG)
    assert sock.recv(65536) == b""  # no 408, no 500: closed
    wait_for(lambda: listening.closed == [Closed.DEADLINE])


@timing
def test_a_connection_that_never_starts_tls_is_closed_at_the_deadline(
    listening: Listening,
) -> None:
    assert eof_within(listening.raw(), HANG) is not None
    wait_for(lambda: listening.closed == [Closed.DEADLINE])


@timing
def test_a_later_request_gets_its_own_deadline_from_its_first_byte(
    listening: Listening,
) -> None:
    sock = listening.connect()
    sock.sendall(REQUEST)
    answer(sock)
    sock.sendall(b"POST /x HTTP/1.1\r\n")
    assert eof_within(sock, HANG) is not None
    wait_for(lambda: listening.closed == [Closed.DEADLINE])


@timing
def test_headers_over_the_cap_get_431_and_are_closed(untimed: Listening) -> None:
    sock = untimed.connect()
    sock.sendall(b"POST /x HTTP/1.1\r\nX-Big: " + b"a" * 2048)
    sock.setblocking(True)
    sock.settimeout(5)
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 431 ")
    assert untimed.closed == [Closed.HEADER_SIZE]


@timing
def test_at_the_cap_the_longest_waiting_connection_makes_room(untimed: Listening) -> None:
    serving = untimed.connect()
    serving.sendall(REQUEST)
    answer(serving)  # idle keep-alive: evicted only when nothing waits
    waiting = [untimed.raw() for _ in range(2)]
    newest = untimed.connect()  # the cap is 3: the oldest waiting one gives way
    assert eof_within(waiting[0], HANG) is not None  # no deadline of 60 s comes first
    newest.sendall(REQUEST)
    assert answer(newest).startswith(b"HTTP/1.1 200")
    serving.sendall(REQUEST)
    assert answer(serving).startswith(b"HTTP/1.1 200")
    assert not select.select([waiting[1]], [], [], 0)[0]  # the younger one kept its place
    assert untimed.closed == [Closed.EVICTED]


@timing
def test_headers_over_the_cap_in_one_piece_get_431_and_are_closed(untimed: Listening) -> None:
    """Headers that end within the write that carries them: httptools has parsed them whole."""
    sock = untimed.connect()
    sock.sendall(b"POST /x HTTP/1.1\r\nX-Big: " + b"a" * 2048 + b"\r\nContent-Length: 2\r\n\r\nok")
    sock.setblocking(True)
    sock.settimeout(5)
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 431 ")
    assert untimed.closed == [Closed.HEADER_SIZE]


def test_pipelined_requests_are_answered_in_order(untimed: Listening) -> None:
    """Their answers are held to the end of a loop pass (app/web/outbox.py): still in order."""
    sock = untimed.connect()
    bodies = [b"%02d" % n for n in range(5)]
    sock.sendall(b"".join(REQUEST[:-2] + body for body in bodies))
    sock.setblocking(True)
    sock.settimeout(5)
    reply = b""
    while reply.count(b"HTTP/1.1 200 ") < len(bodies) or not reply.endswith(bodies[-1]):
        chunk = sock.recv(65536)
        assert chunk, f"closed after {reply!r}"
        reply += chunk
    answered = [part.rpartition(b"\r\n\r\n")[2] for part in reply.split(b"HTTP/1.1 200 ")[1:]]
    assert answered == bodies


def test_connections_answered_in_one_pass_each_get_their_own_answer(untimed: Listening) -> None:
    socks = [untimed.connect() for _ in range(3)]
    for n, sock in enumerate(socks):
        sock.sendall(REQUEST[:-2] + b"o%d" % n)
    for n, sock in enumerate(socks):
        sock.setblocking(True)
        sock.settimeout(5)
        reply = b""
        while not reply.endswith(b"\r\n\r\no%d" % n):
            chunk = sock.recv(65536)
            assert chunk, f"closed after {reply!r}"
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 200 ")
