"""Bodies whose JSON strings are dense in `,` `[` `{`, against a live ``nicguard serve`` (file mode,
real TLS): six clients post ~250 KiB ConfigMaps whose data is commas without pause, beside a
legitimate client written like the apiserver, whose every review is answered (one of them a
~170 KiB Pod that kubectl applied, its last-applied annotation JSON in a string), and a 1 MiB
runtime-snapshot copy, denied RuntimeSnapshotInvalid (SPEC §10, "Memory under hostile input").
The flood runs in a process of its own. The numbers it prints are the ones in RELIABILITY.md."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import multiprocessing
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tests.live_serve import LiveServe, closed_counts, live_serve, memory_kib
from tests.support.hostile_snapshots import configmap_review_body, snapshot_review_body
from tests.support.paths import ROOT

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized
    from multiprocessing.synchronize import Event

REVIEWS_DIR: Final = ROOT / "examples" / "reviews"


def applied_pod() -> bytes:
    """The Pod captured from kube-apiserver as ``kubectl apply`` leaves it: the whole object, as
    JSON in a string (dense in `,` `[` `{`), in its last-applied annotation; with a long
    environment, as a real training Pod has, ~150 KiB."""
    review = json.loads((REVIEWS_DIR / "served-pod.json").read_bytes())
    pod = review["request"]["object"]
    applied = {k: v for k, v in pod.items() if k in ("apiVersion", "kind", "spec")}
    env = [{"name": f"SETTING_{n}", "value": f"[{n},{{}}]"} for n in range(3000)]
    applied["spec"] = {**applied["spec"], "env": env}
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(applied)
    return json.dumps(review).encode()


# The legitimate client's reviews, what their answers hold, in turn: a runtime denied, a Pod
# captured from kube-apiserver allowed, and the same Pod applied by kubectl.
LEGITIMATE: Final = (
    ((REVIEWS_DIR / "drifted-runtime.json").read_bytes(), b'"allowed":false'),
    ((REVIEWS_DIR / "served-pod.json").read_bytes(), b'"allowed":true'),
    (applied_pod(), b'"allowed":true'),
)
APISERVER_WRITE: Final = 4096
FLOODERS: Final = 6
COMMAS: Final = configmap_review_body("commas", {"csv": "," * (250 * 1024)})
SNAPSHOT_COPY: Final = "," * (1024 * 1024)  # a 1 MiB copy; what it holds is beside the point
REVIEWS: Final = 90  # the legitimate client's: every other one on a new connection
FLOOD_SECONDS: Final = 120.0  # at most: the flood stops once the reviews are answered
RSS_LIMIT_MIB: Final = 200


@dataclass
class Flood:
    """What the flooding clients saw."""

    answered: dict[int, int] = field(default_factory=dict)  # status -> count
    closed: int = 0


async def flooder(port: int, context: ssl.SSLContext, stop: Event, flood: Flood) -> None:
    """``COMMAS`` over and over on a kept connection, each sent once the last is answered."""
    request = (
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(COMMAS), COMMAS)
    )
    loop = asyncio.get_running_loop()
    until = loop.time() + FLOOD_SECONDS
    while not stop.is_set() and loop.time() < until:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname="localhost"
            )
            while not stop.is_set() and loop.time() < until:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                status = int(head.split()[1])
                flood.answered[status] = flood.answered.get(status, 0) + 1
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            flood.closed += 1
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()


def run_flood(
    port: int,
    ca: str,
    stop: Event,
    answered: Synchronized[int],
    report: multiprocessing.Queue[Flood],
) -> None:
    """In a process of its own: ``FLOODERS`` clients until ``stop``; ``answered`` counts their
    answers as they come, so that the test knows the flood is on."""
    context = ssl.create_default_context(cafile=ca)
    flood = Flood()

    async def count() -> None:
        while not stop.is_set():
            answered.value = sum(flood.answered.values())
            await asyncio.sleep(0.05)  # publishing a counter, not waiting for an event

    async def main() -> None:
        counting = asyncio.create_task(count())
        await asyncio.gather(*(flooder(port, context, stop, flood) for _ in range(FLOODERS)))
        counting.cancel()

    asyncio.run(main())
    report.put(flood)


def post(connection: http.client.HTTPSConnection, body: bytes) -> tuple[int, bytes]:
    """As the apiserver writes a review (Go's net/http, through a 4 KiB bufio.Writer): the
    headers, then the body in 4 KiB writes, so that its body may arrive after its headers."""
    connection.putrequest("POST", "/validate", skip_accept_encoding=True)
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders()
    for start in range(0, len(body), APISERVER_WRITE):
        connection.send(body[start : start + APISERVER_WRITE])
    reply = connection.getresponse()
    return reply.status, reply.read()


def test_bodies_dense_in_commas_inside_strings_close_no_review(tmp_path: Path) -> None:
    with live_serve(tmp_path) as server:
        flood_beside_legitimate_reviews(server)


def flood_beside_legitimate_reviews(server: LiveServe) -> None:
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    answered = spawn.Value("i", 0)
    reports: multiprocessing.Queue[Flood] = spawn.Queue()
    flooding = spawn.Process(
        target=run_flood, args=(server.port, str(server.ca), stop, answered, reports)
    )
    flooding.start()
    kept = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.context)
    closed: list[str] = []
    started = time.monotonic()
    try:
        deadline = started + 60
        while answered.value < FLOODERS:  # every flooder answered at least once, on average
            assert flooding.is_alive()
            assert time.monotonic() < deadline, "the flood never got going"
            time.sleep(0.01)  # polling a counter the flood process updates
        during = answered.value
        for n in range(REVIEWS):
            fresh = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.context)
            connection = fresh if n % 2 else kept
            review, verdict = LEGITIMATE[n // 2 % len(LEGITIMATE)]
            try:
                status, body = post(connection, review)
            except (OSError, http.client.HTTPException) as error:
                closed.append(f"review {n}: {error!r}")
                connection.close()
                continue
            finally:
                fresh.close()
            assert status == 200, body
            assert verdict in body, body
        for update in (False, True):
            copy = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.context)
            try:
                status, body = post(copy, snapshot_review_body(SNAPSHOT_COPY, update=update))
            except (OSError, http.client.HTTPException) as error:
                closed.append(f"1 MiB snapshot copy, update={update}: {error!r}")
                continue
            finally:
                copy.close()
            assert status == 200, body[:300]
            assert b'"allowed":false' in body
            assert b"RuntimeSnapshotInvalid" in body, body[:600]
        during = answered.value - during
    finally:
        stop.set()
        flood = reports.get(timeout=FLOOD_SECONDS + 30)
        flooding.join()
        kept.close()
    elapsed = time.monotonic() - started
    closes = closed_counts(server.probe_port)
    peak = memory_kib(server.process.pid)["VmHWM"]
    print(  # noqa: T201 - the numbers RELIABILITY.md records (-rP)
        f"RELIABILITY string-dense bodies: {FLOODERS} clients x {len(COMMAS) / 1024:.0f} KiB "
        f"of commas in a string for {elapsed:.1f} s (answers {flood.answered}, closed "
        f"{flood.closed}; {during} while the legitimate client ran); {REVIEWS} reviews and "
        f"2 x 1 MiB snapshot copies, closed {len(closed)}; nicguard closed {closes}; "
        f"RSS peak {peak / 1024:.0f} MiB"
    )
    assert closed == []
    assert flood.closed == 0
    assert closes.get("body_budget", 0) == 0
    assert set(flood.answered) == {200}
    assert during > 0, "the flood ended before the legitimate client did"
    assert peak / 1024 <= RSS_LIMIT_MIB
    assert server.process.running()
