"""The body budget on a real uvicorn listener over real TLS, in front of the real ``/validate``:
a Content-Length that does not fit is refused before its body is read, bodies still arriving
give way to a new one, chunked bodies reserve as they arrive, and every path releases."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from app.certificates.certdir import ensure_cert_dir
from app.certificates.tls import server_ssl_context
from app.domain.cluster import CacheStatus, ClusterSnapshot
from app.domain.policy import Policy
from app.metrics import Metrics
from app.web.admission import create_admission_app, over_budget_app
from app.web.body_budget import BodyBudget
from app.web.connection_limits import Bodies, Closed, LimitedServer, Limits, limited_config
from tests.support.costly_jobset import Edit, costly_jobset_update
from tests.web.conftest import EXAMPLES, RECIPE
from tests.web.test_admission_costly import HeldView

BUDGET: Final = 1024 * 1024
REVIEW: Final = (EXAMPLES / "reviews" / "drifted-runtime.json").read_bytes()


@dataclass
class Served:
    port: int
    client: ssl.SSLContext
    budget: BodyBudget
    metrics: Metrics
    closed: list[Closed] = field(default_factory=list)
    sockets: list[ssl.SSLSocket] = field(default_factory=list)

    def connect(self) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.sockets.append(self.client.wrap_socket(raw, server_hostname="localhost"))
        return self.sockets[-1]

    def rejected(self, status: str) -> float:
        return float(self.metrics.rejected.labels(status)._value.get())


def head(length: int | None, path: bytes = b"/validate") -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return (
        b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n%s\r\n\r\n"
        % (path, framing)
    )


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def response(sock: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    """One response read whole (its Content-Length), or AssertionError when closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        assert got, f"closed after {data!r}"
        data += got
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(body) < int(headers["content-length"]):
        got = sock.recv(65536)
        assert got, "closed in the body"
        body += got
    return int(lines[0].split()[1]), headers, body


def closed(sock: ssl.SSLSocket) -> bool:
    """True once the peer closed (EOF or reset) within the socket's timeout, reading and
    dropping anything before it; False when it is still open then."""
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except (OSError, ssl.SSLError):
        return True
    return True


def wait_for(condition: Callable[[], bool], seconds: float = 5) -> None:
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)  # polling state the server's thread updates


def serving(
    tmp_path: Path,
    example_state: ClusterSnapshot,
    app: ASGIApp | None,
    seconds: float = 30.0,
    budget_bytes: int = BUDGET,
) -> Iterator[Served]:
    """``seconds`` is the request deadline and the TLS close's bound (ssl_shutdown_timeout): long
    by default, so that a reservation freed only once the TLS close ends fails ``wait_for``."""
    files = ensure_cert_dir(tmp_path / "certs", ["localhost", "127.0.0.1"])
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    budget = BodyBudget(budget_bytes)
    closed_reasons: list[Closed] = []
    admission = app or create_admission_app(
        view=example_state, policy=Policy(), metrics=metrics, recipe=RECIPE
    )
    config = limited_config(
        admission,
        host="127.0.0.1",
        port=0,
        tls=server_ssl_context(files.cert, files.key),
        on_closed=closed_reasons.append,
        limits=Limits(connections=16, request_seconds=seconds),
        bodies=Bodies(budget, over_budget_app(metrics, BUDGET)),
        log_config=None,
        lifespan="off",
    )
    server = LimitedServer(config)
    thread = threading.Thread(target=server.run, name="budget-under-test")
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), 10)
        assert thread.is_alive(), "uvicorn exited during start-up"
        port = server.servers[0].sockets[0].getsockname()[1]
        client = ssl.create_default_context(cafile=str(files.ca))
        served = Served(port, client, budget, metrics, closed_reasons)
        try:
            yield served
        finally:
            for sock in served.sockets:
                sock.close()
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.fixture
def served(tmp_path: Path, example_state: ClusterSnapshot) -> Iterator[Served]:
    yield from serving(tmp_path, example_state, None)


def test_a_review_is_answered_and_its_reservation_released_on_a_kept_connection(
    served: Served,
) -> None:
    sock = served.connect()
    for _ in range(3):
        sock.sendall(head(len(REVIEW)) + REVIEW)
        status, _, body = response(sock)
        assert status == 200
        assert b'"allowed":false' in body
        wait_for(lambda: served.budget.held == 0)


def test_a_content_length_that_does_not_fit_is_refused_before_its_body_is_read(
    served: Served,
) -> None:
    before = served.rejected("503")
    refused = served.connect()
    refused.sendall(head(BUDGET + 1))  # never fits, whatever is evicted; no body sent
    status, headers, body = response(refused)
    assert status == 503
    assert headers["retry-after"] == "1"
    assert headers["connection"] == "close"
    assert json.loads(body) == {
        "error": "request bodies held at once would exceed the body budget (1 MiB); retry later",
        "status": 503,
    }
    assert closed(refused)
    assert served.rejected("503") == before + 1
    wait_for(lambda: served.budget.held == 0)


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_that_goes_away_mid_body_releases_its_reservation(
    served: Served, how: str
) -> None:
    for framing in (4000, None):
        sock = served.connect()
        sock.sendall(head(framing) + (chunk(b"x" * 1000) if framing is None else b"x" * 1000))
        wait_for(lambda: served.budget.held > 0)
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        wait_for(lambda: served.budget.held == 0)


def test_chunked_bodies_reserve_as_they_arrive_and_one_beyond_the_budget_is_closed(
    served: Served,
) -> None:
    sock = served.connect()
    sock.sendall(head(None) + chunk(b"x" * 10_000))
    wait_for(lambda: served.budget.held == 10_000)
    sock.sendall(chunk(b"x" * 20_000))
    wait_for(lambda: served.budget.held == 30_000)
    sock.sendall(chunk(b"x" * (BUDGET - 30_000 + 1)))  # one byte over: nothing else to evict
    assert closed(sock)
    wait_for(lambda: served.budget.held == 0)
    assert served.closed == [Closed.BODY_BUDGET]

    whole = served.connect()
    whole.sendall(head(None) + chunk(REVIEW[:100]) + chunk(REVIEW[100:]) + b"0\r\n\r\n")
    assert response(whole)[0] == 200
    wait_for(lambda: served.budget.held == 0)


def test_a_body_longer_than_its_content_length_is_not_held_beyond_it(served: Served) -> None:
    sock = served.connect()
    # The bytes past the declared length are the next request, which is not HTTP: 400, closed.
    sock.sendall(head(len(REVIEW)) + REVIEW + b"x" * 5000 + b"\r\n\r\n")
    assert response(sock)[0] == 400
    assert closed(sock)
    wait_for(lambda: served.budget.held == 0)


def test_a_large_body_counts_what_decoding_it_would_hold(served: Served) -> None:
    """200 KiB of padding fits; 200 KiB of ``{}`` (4.5 MiB of dicts once decoded) does not,
    however much is free: it is closed as it arrives, never decoded."""
    size = 200 * 1024
    padding = b'{"padding":"' + b"x" * (size - 14) + b'"}'
    costly = b"[" + b"{}," * ((size - 2) // 3 - 1) + b"{}]"
    cheap = served.connect()
    cheap.sendall(head(len(padding)) + padding)
    assert response(cheap)[0] == 400  # answered: not an AdmissionReview
    sock = served.connect()
    sock.sendall(head(len(costly)))
    with contextlib.suppress(OSError, ssl.SSLError):  # closed while we send
        sock.sendall(costly)
    assert closed(sock)
    assert served.closed == [Closed.BODY_BUDGET]
    wait_for(lambda: served.budget.held == 0)


def test_what_a_body_holds_in_its_strings_is_charged_as_its_bytes(served: Served) -> None:
    """200 KiB of `,[{` inside a string decodes to one string of 200 KiB: it holds its bytes,
    not 25 MiB of structure; the string goes on across chunks, and is answered once whole."""
    sock = served.connect()
    first = b'{"padding":"' + b"," * 40_000
    sock.sendall(head(None) + chunk(first))
    wait_for(lambda: served.budget.held == len(first))
    second = b",[{" * 70_000  # past DECODED_FROM_BYTES, all of it in the string
    sock.sendall(chunk(second))
    wait_for(lambda: served.budget.held == len(first) + len(second))
    sock.sendall(chunk(b'"}') + b"0\r\n\r\n")
    assert response(sock)[0] == 400  # answered: not an AdmissionReview
    wait_for(lambda: served.budget.held == 0)
    assert served.closed == []


def test_each_body_on_a_kept_connection_is_read_afresh(served: Served) -> None:
    """A body left inside a string (not JSON: 400) does not make the next body's structure a
    string: 200 KiB of `{},` is closed as it arrives."""
    sock = served.connect()
    sock.sendall(head(None) + chunk(b'["' + b"x" * 100_000) + b"0\r\n\r\n")
    assert response(sock)[0] == 400
    costly = b"[" + b"{}," * 70_000 + b"{}]"
    sock.sendall(head(None))
    with contextlib.suppress(OSError, ssl.SSLError):  # closed while we send
        sock.sendall(chunk(costly))
    assert closed(sock)
    assert served.closed == [Closed.BODY_BUDGET]
    wait_for(lambda: served.budget.held == 0)


def test_a_body_whose_client_has_gone_stays_reserved_until_its_work_ends(
    tmp_path: Path, example_state: ClusterSnapshot
) -> None:
    """Work still under way may decode and judge the body: what it holds is counted until the
    work ends (or is dropped), not let go of when the connection is lost."""
    gone, finish = threading.Event(), threading.Event()

    async def working(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # the body
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        await asyncio.get_running_loop().run_in_executor(None, finish.wait)

    with contextlib.contextmanager(serving)(tmp_path, example_state, working) as served:
        sock = served.connect()
        sock.sendall(head(len(REVIEW)) + REVIEW)
        wait_for(lambda: served.budget.held == len(REVIEW))
        sock.close()
        assert gone.wait(10)
        assert served.budget.held == len(REVIEW)  # the connection is lost, the work goes on
        finish.set()
        wait_for(lambda: served.budget.held == 0)


def test_a_whole_body_waiting_for_its_turn_gives_way_and_is_refused_with_a_503(
    tmp_path: Path, example_state: ClusterSnapshot
) -> None:
    """Three costly reviews: the first is judged (held), the second waits for its turn, the third
    does not fit beside both. The waiting one gives way: answered 503, unjudged; the other two
    are judged. Each is charged 378 to 543 kB (its 154 kB and what decoding holds, counted from
    whichever chunk passes 64 KiB: TLS chunks it as it will), so two always fit, three never."""
    view = HeldView(example_state)
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    app = create_admission_app(view=view, policy=Policy(), metrics=metrics, recipe=RECIPE)
    first, second, third = (
        costly_jobset_update(Edit.BROKEN, templates=100, uid=uid) for uid in ("1", "2", "3")
    )
    with contextlib.contextmanager(serving)(
        tmp_path, example_state, app, budget_bytes=1_110_000
    ) as served:
        judged, waiting, arriving = served.connect(), served.connect(), served.connect()
        judged.sendall(head(len(first)) + first)
        assert view.entered.wait(10)
        waiting.sendall(head(len(second)) + second)
        wait_for(lambda: served.budget.bodies_waiting == 1, 30)
        arriving.sendall(head(len(third)) + third)
        status, _, body = response(waiting)
        assert (status, json.loads(body)["error"]) == (
            503,
            "the body budget needed the room this review held while it waited its turn "
            "(the largest waiting gives way); refused unjudged, retry",
        )
        view.release()
        for sock in (judged, arriving):
            status, _, body = response(sock)
            assert status == 200
            assert b'"allowed":false' in body
        assert view.readers == ["judging_0", "judging_0"]  # the refused one was never judged
        assert served.closed == []
        wait_for(lambda: served.budget.held == 0)


@pytest.mark.slow  # the deadline has to pass
def test_a_body_stalled_past_the_deadline_releases_its_reservation(
    tmp_path: Path, example_state: ClusterSnapshot
) -> None:
    # The deadline has to be long enough for the reservation to be seen before it fires: 3 s,
    # many times a loaded machine's handshake and poll; the waits for the close bound a hang.
    with contextlib.contextmanager(serving)(tmp_path, example_state, None, 3.0) as served:
        for framing in (4000, None):
            sock = served.connect()
            sock.sendall(head(framing) + (chunk(b"x" * 10) if framing is None else b"x" * 10))
            wait_for(lambda: served.budget.held > 0)
            sock.settimeout(30)
            assert closed(sock)
            # Released once the request's work sees the connection gone (a few turns of the
            # loop after the close): what the work holds is counted until it ends.
            wait_for(lambda: served.budget.held == 0)
        assert served.closed == [Closed.DEADLINE, Closed.DEADLINE]


def test_a_body_still_arriving_gives_way_to_a_new_one(served: Served) -> None:
    waiting = served.connect()
    waiting.sendall(head(BUDGET - 100) + b"{")  # nearly the whole budget, one byte of it in
    wait_for(lambda: served.budget.held == BUDGET - 100)
    answered = served.connect()
    answered.sendall(head(len(REVIEW)) + REVIEW)  # does not fit beside it: it is evicted
    assert response(answered)[0] == 200
    assert closed(waiting)
    assert served.closed == [Closed.BODY_BUDGET]
    wait_for(lambda: served.budget.held == 0)


class Held:
    """An app that reads the body whole, then waits to answer until told: a body being
    answered (or, told to raise, an app failing)."""

    def __init__(self) -> None:
        self.go: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.raise_instead = False
        self.reading = 0

    def answer(self, *, fail: bool) -> None:
        """From the test's thread: let the app answer (or raise)."""
        assert self.loop is not None
        assert self.go is not None
        self.raise_instead = fail
        self.loop.call_soon_threadsafe(self.go.set)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        self.loop, self.go = asyncio.get_running_loop(), asyncio.Event()
        self.reading += 1
        await self.go.wait()
        if self.raise_instead:
            raise RuntimeError("the app failed")
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def held_app() -> Held:
    return Held()


@pytest.fixture
def held(tmp_path: Path, example_state: ClusterSnapshot, held_app: Held) -> Iterator[Served]:
    yield from serving(tmp_path, example_state, held_app)


@pytest.mark.parametrize("fails", [False, True], ids=["answered", "app raises"])
def test_whole_bodies_being_answered_are_not_evicted_a_new_one_gets_503(
    held: Served, held_app: Held, fails: bool
) -> None:
    first = held.connect()
    first.sendall(head(BUDGET - 10) + b"x" * (BUDGET - 10))
    wait_for(lambda: held_app.reading == 1)
    second = held.connect()
    second.sendall(head(100))
    status, headers, _ = response(second)
    assert status == 503
    assert headers["retry-after"] == "1"
    assert held.closed == []
    held_app.answer(fail=fails)
    status = response(first)[0]
    assert status == (500 if fails else 200)
    wait_for(lambda: held.budget.held == 0)
    with contextlib.suppress(OSError):
        first.close()
