"""Graceful shutdown of ``nicguard serve`` (file mode) as a process: SIGTERM, drain, exit 0.

After SIGTERM: /readyz fails at once, /validate keeps answering for --shutdown-delay with
``Connection: close``; then the listener closes, idle keep-alive connections are closed, an
in-flight request still gets its answer, and the process exits 0.

What is asserted is the order of these steps and who closed what, not how fast: the delay is long
enough for the steps inside it on a loaded machine, the listener does not close before it (the
server sleeps for it), and every other wait only bounds a hang. An idle connection closed at all
was closed by the drain (its keep-alive is 120 s); the drain did not wait for its 10 s bound when
uvicorn did not log that it gave up on it.
"""

from __future__ import annotations

import http.client
import signal
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from tests.harness.procs import Process, http_status, wait_until
from tests.live_serve import live_serve
from tests.support.paths import ROOT

# Timing windows on a live process: not the fast unit tier (`make unit`); `make slow` runs them.
pytestmark = pytest.mark.slow

REVIEW: Final = (ROOT / "examples" / "reviews" / "good-runtime.json").read_bytes()
DELAY: Final = 5.0  # the steps inside it take well under a second on a loaded machine
TIMEOUT: Final = 30.0  # bounds a hang only; shorter than the 120 s keep-alive of `nicguard serve`


@dataclass(frozen=True, slots=True)
class Served:
    process: Process
    port: int
    context: ssl.SSLContext
    log: Path
    probes: str
    sockets: list[ssl.SSLSocket] = field(default_factory=list)

    def readyz(self) -> int | None:
        return http_status(f"{self.probes}/readyz")

    def connect(self) -> ssl.SSLSocket:
        plain = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.sockets.append(self.context.wrap_socket(plain, server_hostname="localhost"))
        return self.sockets[-1]

    def refuses(self) -> bool | None:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return True
        return None


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with live_serve(tmp_path, f"--shutdown-delay={DELAY}") as live:
        started = Served(live.process, live.port, live.context, live.process.log, live.probes)
        try:
            yield started
        finally:
            for sock in started.sockets:
                sock.close()


HEAD: Final = "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
REQUEST: Final = f"{HEAD}Content-Length: {len(REVIEW)}\r\n\r\n".encode() + REVIEW


def answer(sock: ssl.SSLSocket) -> http.client.HTTPResponse:
    response = http.client.HTTPResponse(sock)
    response.begin()
    response.read()
    return response


def validate(sock: ssl.SSLSocket) -> http.client.HTTPResponse:
    sock.sendall(REQUEST)
    return answer(sock)


def closed(sock: ssl.SSLSocket) -> bool | None:
    """True once the server has closed the connection (then we close ours, as clients do)."""
    sock.settimeout(0.05)
    try:
        if sock.recv(1) != b"":
            raise AssertionError("unexpected bytes on an idle connection")
    except TimeoutError:
        return None
    except (ssl.SSLError, ConnectionError):
        pass
    sock.close()
    return True


def test_sigterm_fails_readiness_keeps_serving_for_the_delay_then_drains(served: Served) -> None:
    rebalanced, idle = served.connect(), served.connect()
    for sock in (rebalanced, idle):
        normal = validate(sock)
        assert normal.status == 200
        assert normal.getheader("connection") is None  # keep-alive while serving normally
    # A request whose body is still on its way when the server stops accepting.
    in_flight = served.connect()
    in_flight.sendall(REQUEST[:-10])

    sent = time.monotonic()
    served.process.signal(signal.SIGTERM)
    wait_until(lambda: served.readyz() == 503 or None, timeout=DELAY, what="/readyz 503")

    # Within the delay: answers go on, each closing its connection so the client re-balances.
    draining = validate(rebalanced)
    assert draining.status == 200
    assert draining.getheader("connection") == "close"
    wait_until(lambda: closed(rebalanced), timeout=2, what="the server to close the connection")
    fresh = served.connect()
    reply = validate(fresh)
    assert reply.status == 200
    assert reply.getheader("connection") == "close"
    wait_until(lambda: closed(fresh), timeout=2, what="the server to close the connection")
    assert closed(idle) is None  # idle keep-alive connections are kept until the delay ends
    assert served.process.running()

    # After the delay: no new connections; idle ones closed at once (before their keep-alive
    # timeout), the in-flight request answered; then exit 0.
    wait_until(served.refuses, timeout=TIMEOUT, what="the listener to close")
    assert time.monotonic() - sent >= DELAY  # not before: the server sleeps for the delay
    # Closed by the drain, not by its keep-alive (120 s), while the in-flight request waits.
    wait_until(lambda: closed(idle), timeout=TIMEOUT, what="the idle connection to be closed")
    assert closed(in_flight) is None
    in_flight.sendall(REQUEST[-10:])
    assert answer(in_flight).status == 200
    wait_until(lambda: closed(in_flight), timeout=TIMEOUT, what="the last connection to be closed")
    assert served.process.wait(TIMEOUT) == 0
    log = served.log.read_bytes()
    assert b"shutting down" in log
    assert b"timeout graceful shutdown exceeded" not in log  # the 10 s drain bound never fired
