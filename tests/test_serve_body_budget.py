"""The slow-body flood against a live ``nicguard serve`` (file mode, real TLS): 100 connections
each streaming almost 3 MiB within the request deadline, reconnecting whenever they are refused
or closed, while ``/healthz`` is polled and the apiserver's reviews keep coming; then the same
with some of them sending, at full speed, 3 MiB bodies that decode to 24 times their size. The
flood runs in a process of its own, so that its work does not delay the probes measured here.
The numbers it prints ("RELIABILITY ...") are the ones in RELIABILITY.md; how long ``/healthz``
took is printed, not asserted (a busy machine decides it): each poll must be answered 200."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import multiprocessing
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from tests.live_serve import LiveServe, closed_counts, live_serve, memory_kib
from tests.support.paths import ROOT

pytestmark = pytest.mark.slow  # ~45 s: two rounds of the deadline, then the heap's sweep

REVIEW: Final = (ROOT / "examples" / "reviews" / "drifted-runtime.json").read_bytes()
ATTACKERS: Final = 100
BODY_BYTES: Final = 3 * 1024 * 1024 - 4096  # almost the 3 MiB cap
COSTLY: Final = b"[" + b"{}," * ((BODY_BYTES - 2) // 3 - 1) + b"{}]"  # 72 MiB of dicts
SLICE_BYTES: Final = 64 * 1024
SLICE_EVERY: Final = 0.16  # 48 slices: the whole body in ~7.7 s, inside the 10 s deadline
FLOOD_SECONDS: Final = 20.0
RSS_LIMIT_MIB: Final = 200  # SPEC §10
PROBE_TIMEOUT: Final = 10.0  # a /healthz poll's client timeout, bounding a hang only
AFTER_WITHIN: Final = 20.0  # the heap's sweep runs every 10 s
MIB: Final = 1024 * 1024


@dataclass
class Flood:
    """What the attackers saw."""

    connections: int = 0
    answered: dict[int, int] = field(default_factory=dict)  # status -> count
    closed: int = 0  # closed by nicguard before an answer
    sent_whole: int = 0


async def attacker(
    port: int, context: ssl.SSLContext, until: float, flood: Flood, *, costly: bool = False
) -> None:
    """Slow bodies of padding, or (``costly``) bodies of empty objects sent at full speed."""
    head = (
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % BODY_BYTES
    )
    body = COSTLY if costly else b'{"padding":"' + b"x" * (BODY_BYTES - 14) + b'"}'
    every = 0.0 if costly else SLICE_EVERY
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        flood.connections += 1
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname="localhost"
            )
        except (OSError, ssl.SSLError):
            flood.closed += 1
            continue
        reading = asyncio.create_task(reader.readuntil(b"\r\n"))
        reading.add_done_callback(retrieved)
        try:
            writer.write(head)
            for start in range(0, len(body), SLICE_BYTES):
                if reading.done():
                    break
                writer.write(body[start : start + SLICE_BYTES])
                await writer.drain()
                # The attack's own pace: the body trickles in over most of the deadline.
                await asyncio.wait({reading}, timeout=every)
            else:
                flood.sent_whole += 1
            status = int((await reading).split()[1])
            flood.answered[status] = flood.answered.get(status, 0) + 1
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, IndexError, ValueError):
            flood.closed += 1
        finally:
            if not reading.done():
                reading.cancel()
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()


def retrieved(task: asyncio.Task[bytes]) -> None:
    """An answer no one awaits once a send failed: its error is the closed count's, not a log's."""
    if not task.cancelled():
        task.exception()


def run_flood(port: int, ca: str, costly: int, report: multiprocessing.Queue[Flood]) -> None:
    """In a process of its own: ``ATTACKERS`` attackers, ``costly`` of them fast and costly."""
    context = ssl.create_default_context(cafile=ca)
    flood = Flood()

    async def main() -> None:
        until = asyncio.get_running_loop().time() + FLOOD_SECONDS
        await asyncio.gather(
            *(attacker(port, context, until, flood, costly=n < costly) for n in range(ATTACKERS))
        )

    asyncio.run(main())
    report.put(flood)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServe]:
    with live_serve(tmp_path) as served:
        yield served


def review(connection: http.client.HTTPSConnection) -> int:
    connection.request(
        "POST", "/validate", body=REVIEW, headers={"Content-Type": "application/json"}
    )
    reply = connection.getresponse()
    body = reply.read()
    if reply.status == 503:
        assert reply.getheader("Retry-After"), body
    else:
        assert reply.status == 200, body
        assert b'"allowed":false' in body
    return reply.status


def healthz(probe_port: int) -> float:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", probe_port, timeout=PROBE_TIMEOUT)
    try:
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    return time.perf_counter() - started


@pytest.mark.parametrize("costly", [0, 10], ids=["slow bodies", "and costly ones"])
def test_slow_body_flood_stays_within_memory_and_keeps_answering(
    server: LiveServe, costly: int
) -> None:
    pid = server.process.pid
    before = memory_kib(pid)["VmRSS"]
    spawn = multiprocessing.get_context("spawn")
    reports: multiprocessing.Queue[Flood] = spawn.Queue()
    flooding = spawn.Process(target=run_flood, args=(server.port, str(server.ca), costly, reports))
    flooding.start()
    worst_healthz, peak_rss = 0.0, 0
    statuses: dict[int, int] = {}
    kept = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.context)
    try:
        while flooding.is_alive():
            worst_healthz = max(worst_healthz, healthz(server.probe_port))
            peak_rss = max(peak_rss, memory_kib(pid)["VmRSS"])
            fresh = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.context)
            for connection in (kept, fresh):
                try:
                    status = review(connection)
                except (OSError, http.client.HTTPException):
                    status = 0  # closed unanswered: the assertion below shows the closed counts
                    connection.close()
                statuses[status] = statuses.get(status, 0) + 1
            fresh.close()
    finally:
        # The flood ends FLOOD_SECONDS after it began, plus what its last bodies take: this
        # only bounds a hang.
        flood = reports.get(timeout=FLOOD_SECONDS * 10)
        flooding.join()
    during = memory_kib(pid)
    # After: the heap's sweep gives back what the flood left free; poll for it with a deadline.
    deadline = time.monotonic() + AFTER_WITHIN
    after = during["VmRSS"]
    while time.monotonic() < deadline and after > before + 16 * 1024:
        worst_healthz = max(worst_healthz, healthz(server.probe_port))
        after = memory_kib(pid)["VmRSS"]
    hwm = memory_kib(pid)["VmHWM"]
    closed = closed_counts(server.probe_port)
    print(  # noqa: T201 - the numbers RELIABILITY.md records (-rP)
        f"RELIABILITY body flood ({costly} costly): "
        f"{ATTACKERS} TLS connections x {BODY_BYTES / MIB:.2f} MiB over "
        f"{len(range(0, BODY_BYTES, SLICE_BYTES)) * SLICE_EVERY:.1f} s for {FLOOD_SECONDS:.0f} s "
        f"({flood.connections} connections, answers {flood.answered}, closed {flood.closed}, "
        f"sent whole {flood.sent_whole}); RSS {before / 1024:.0f} -> peak {hwm / 1024:.0f} "
        f"(sampled {peak_rss / 1024:.0f}) -> {during['VmRSS'] / 1024:.0f} at the end -> "
        f"{after / 1024:.0f} MiB after; /healthz worst {worst_healthz * 1000:.0f} ms; "
        f"reviews meanwhile {statuses}; closed {closed}"
    )
    assert hwm / 1024 <= RSS_LIMIT_MIB
    assert statuses.get(200, 0) > 0
    # A review whose body has begun to arrive can be evicted like any body still arriving, as
    # SPEC allows (closed before its body is read); seen once in ~3,200 during a costly flood.
    # Never refused otherwise, and never more than a rare one.
    assert set(statuses) <= {200, 0}, (
        f"the budget was never full of bodies being answered: {closed}"
    )
    assert statuses.get(0, 0) * 100 <= statuses[200], (statuses, closed)
    assert server.process.running()
    assert review(kept) == 200
    kept.close()
