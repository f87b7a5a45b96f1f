"""Hostile clients against a live ``nicguard serve`` (file mode, real TLS): 1,000 idle TCP
connections and 300 TLS connections trickling a request's headers, while the apiserver's reviews
are answered, every one. The numbers it prints ("RELIABILITY ...", latencies among them) are the
ones in RELIABILITY.md; latencies are measured, not asserted (a busy machine decides them)."""

from __future__ import annotations

import contextlib
import http.client
import resource
import select
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.live_serve import LiveServe, live_serve, memory_kib
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # ~15 s: the deadline has to pass

REVIEW: Final = (ROOT / "examples" / "reviews" / "drifted-runtime.json").read_bytes()
IDLE: Final = 1000
SLOW: Final = 300
REVIEWS: Final = 200
FRESH_EVERY: Final = 10  # every 10th review on a new connection, the rest on kept ones
# Bounds a hang only: each slow connection is closed by eviction or by the 10 s deadline.
CLOSED_WITHIN: Final = 60.0
CLIENT_TIMEOUT: Final = 30.0  # a review's answer, bounding a hang only
RSS_GROWTH_MIB: Final = 160  # the cap's 128 TLS buffers (~40 MiB) plus what churn leaves


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServe]:
    with live_serve(tmp_path) as served:
        yield served


@pytest.fixture
def many_files() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = IDLE + SLOW + 200
    if soft < needed:
        assert hard == resource.RLIM_INFINITY or hard >= needed, f"RLIMIT_NOFILE hard {hard}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def connect(port: int, context: ssl.SSLContext) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=CLIENT_TIMEOUT)


def review(connection: http.client.HTTPSConnection) -> float:
    started = time.perf_counter()
    connection.request(
        "POST", "/validate", body=REVIEW, headers={"Content-Type": "application/json"}
    )
    reply = connection.getresponse()
    body = reply.read()
    elapsed = time.perf_counter() - started
    assert reply.status == 200, body
    assert b'"allowed":false' in body
    return elapsed


def closed_by_peer(sock: socket.socket) -> bool:
    """Read what is there without blocking; True on EOF or reset."""
    try:
        return sock.recv(65536) == b""
    except (ssl.SSLWantReadError, BlockingIOError):
        return False
    except OSError:
        return True


def test_idle_and_slow_header_connections_leave_every_review_answered(
    server: LiveServe, many_files: None
) -> None:
    process, port, probe_port, context = (
        server.process,
        server.port,
        server.probe_port,
        server.context,
    )
    rss_before = memory_kib(process.pid)["VmRSS"]
    sockets: list[socket.socket] = []
    try:
        sockets += [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(IDLE)]
        slow: dict[socket.socket, float] = {}
        for _ in range(SLOW):
            plain = socket.create_connection(("127.0.0.1", port), timeout=5)
            sockets.append(plain)
            opened = time.monotonic()
            tls = context.wrap_socket(plain, server_hostname="localhost")
            tls.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
            tls.setblocking(False)
            sockets.append(tls)
            slow[tls] = opened

        kept = [connect(port, context) for _ in range(4)]
        latencies: list[float] = []
        for n in range(REVIEWS):
            if n % FRESH_EVERY == 0:
                fresh = connect(port, context)
                latencies.append(review(fresh))
                fresh.close()
            else:
                latencies.append(review(kept[n % len(kept)]))
            if n % 20 == 0:  # the slow ones trickle: one more header line each
                for sock in slow:
                    with contextlib.suppress(OSError, ssl.SSLError):
                        sock.sendall(b"X-Trickle: 1\r\n")
        rss_during = memory_kib(process.pid)["VmRSS"]
        latencies.sort()
        p50 = latencies[len(latencies) // 2] * 1000
        p99 = latencies[int(len(latencies) * 0.99)] * 1000

        # Every slow connection reaches EOF (evicted, or at the 10 s deadline): poll() until then.
        by_fd = {sock.fileno(): sock for sock in slow}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        closed_after: list[float] = []
        deadline = max(slow.values()) + CLOSED_WITHIN
        while by_fd and (left := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                if closed_by_peer(by_fd[fd]):
                    closed_after.append(time.monotonic() - slow[by_fd.pop(fd)])
                    poller.unregister(fd)
        assert not by_fd, f"{len(by_fd)} slow connections open {CLOSED_WITHIN} s after opening"
        rss_after = memory_kib(process.pid)["VmRSS"]
        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/metrics", timeout=5)
            .read()
            .decode()
        )
        counts = {
            line.split('reason="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith('nicguard_connections_closed_total{listener="webhook"')
        }
        print(  # noqa: T201 - the numbers RELIABILITY.md records (-rP)
            f"RELIABILITY hostile: {IDLE} idle + {SLOW} slow-header connections; "
            f"{REVIEWS} reviews p50 {p50:.1f} ms p99 {p99:.1f} ms "
            f"(max {latencies[-1] * 1000:.1f}); "
            f"slow closed after {min(closed_after):.1f}-{max(closed_after):.1f} s; "
            f"RSS {rss_before / 1024:.0f} -> {rss_during / 1024:.0f} (during) -> "
            f"{rss_after / 1024:.0f} MiB (after); closed: {counts}"
        )
        assert len(latencies) == REVIEWS  # each one answered 200 with its denial
        assert (max(rss_during, rss_after) - rss_before) / 1024 < RSS_GROWTH_MIB
        assert counts["evicted"] > 0
        assert counts["deadline"] > 0
        assert process.running()
        for connection in kept:  # the kept connections outlived it all
            review(connection)  # answered 200 with its denial
            connection.close()
    finally:
        for sock in sockets:
            sock.close()
