"""The costliest runtime snapshot reviews any ConfigMap writer can make the apiserver send, against
a live ``nicguard serve`` (file mode, real TLS): a 1 MiB and a 256 KiB ``spec: [{},{},…]`` copy
and an alias bomb, as CREATE and UPDATE, sent concurrently while ``/healthz`` is polled without
pause. The copy is a JSON string: its `{},` are text, not structure, so the body budget charges
its bytes and every review, the 1 MiB ones too, is denied RuntimeSnapshotInvalid, none closed.
RSS stays within 200 MiB and every ``/healthz`` poll is answered 200 throughout (SPEC §10,
§14). The numbers it prints are the ones in RELIABILITY.md: how long the probes took is printed,
not asserted (a busy machine decides it)."""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import pytest

from tests.harness.procs import http_status
from tests.live_serve import LiveServe, live_serve, memory_kib
from tests.support.hostile_snapshots import alias_bomb, empty_maps, snapshot_review_body

pytestmark = pytest.mark.slow

SENDERS: Final = 4
ROUNDS: Final = 8
RSS_BOUND_MIB: Final = 200
HOSTILE: Final = {
    "1 MiB spec: [{},...]": empty_maps(count=(1024 * 1024 - 30) // 3),
    "256 KiB spec: [{},...]": empty_maps(),
    "alias bomb": alias_bomb(),
}
BODIES: Final = [
    (f"{name} {'UPDATE' if update else 'CREATE'}", snapshot_review_body(text, update=update))
    for name, text in HOSTILE.items()
    for update in (False, True)
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServe]:
    with live_serve(tmp_path) as served:
        yield served


def _send(server: LiveServe, closed: list[str]) -> list[tuple[str, float]]:
    """Every hostile body, ROUNDS times over, on a kept connection: each one denied (one closed
    instead is recorded, and a new connection follows)."""
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.context)
    took: list[tuple[str, float]] = []
    try:
        for _ in range(ROUNDS):
            for name, body in BODIES:
                started = time.perf_counter()
                try:
                    connection.request(
                        "POST", "/validate", body=body, headers={"Content-Type": "application/json"}
                    )
                    reply = connection.getresponse()
                    answer = reply.read()
                except (ConnectionError, ssl.SSLError):
                    closed.append(name)
                    connection.close()  # the next request opens a new connection
                    continue
                took.append((name, time.perf_counter() - started))
                assert reply.status == 200, (name, answer[:200])
                assert b'"allowed":false' in answer, name
                assert b"RuntimeSnapshotInvalid" in answer, (name, answer[:400])
    finally:
        connection.close()
    return took


def test_the_costliest_snapshot_reviews_leave_memory_within_bounds_and_probes_answered(
    server: LiveServe,
) -> None:
    pid = server.process.pid
    rss_before = memory_kib(pid)["VmRSS"]
    done = threading.Event()
    probes: list[tuple[int | None, float]] = []
    peak = [rss_before]
    closed: list[str] = []

    def poll() -> None:
        while not done.is_set():
            started = time.perf_counter()
            status = http_status(f"{server.probes}/healthz")  # None: no answer in 5 s
            probes.append((status, time.perf_counter() - started))
            peak[0] = max(peak[0], memory_kib(pid)["VmRSS"])

    poller = threading.Thread(target=poll, name="healthz-poller")
    poller.start()
    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=SENDERS) as senders:
            sent = [senders.submit(_send, server, closed) for _ in range(SENDERS)]
            results = [f.result() for f in sent]
    finally:
        done.set()
        poller.join()
    elapsed = time.perf_counter() - started
    took = [t for result in results for t in result]
    slowest_probe = max((seconds for _, seconds in probes), default=0.0)
    slowest = {name: max(t for n, t in took if n == name) for name in {n for n, _ in took}}
    print(  # noqa: T201 - the numbers RELIABILITY.md records (-rP)
        f"RELIABILITY snapshot cost: {len(took)} hostile snapshot reviews from {SENDERS} "
        f"clients in {elapsed:.1f} s, {len(closed)} closed; slowest answer per kind "
        + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in slowest.items())
        + f"; /healthz {len(probes)} polls, max {slowest_probe * 1000:.0f} ms; "
        f"RSS {rss_before / 1024:.0f} -> peak {peak[0] / 1024:.0f} MiB"
    )
    assert closed == []
    assert len(took) == SENDERS * ROUNDS * len(BODIES)
    assert probes, "/healthz was never polled"
    assert [status for status, _ in probes if status != 200] == []  # every poll answered 200
    assert peak[0] / 1024 <= RSS_BOUND_MIB
    assert server.process.running()
