"""``app.web.outbox``: a listener's writes held to the end of the loop's pass, in order, and
flushed before nicguard closes or aborts a connection; on a transport that records what it is
asked, and through the limited protocol uvicorn runs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from app.web.connection_limits import LimitedHttpToolsProtocol, limited_config
from app.web.outbox import Outbox

REQUEST = b"POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nok"


class Recording(asyncio.Transport):
    """asyncio's transport, reduced to a record of what it was asked, shared between several."""

    def __init__(self, name: str, record: list[tuple[str, bytes]]) -> None:
        super().__init__()
        self.name, self.record, self.closing = name, record, False

    def write(self, data: Any) -> None:
        self.record.append((self.name, bytes(data)))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.record.append((self.name, b"<close>"))
        self.closing = True

    def abort(self) -> None:
        self.record.append((self.name, b"<abort>"))
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8443), "peername": ("127.0.0.1", 40000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class Failing(Recording):
    def write(self, data: Any) -> None:
        raise RuntimeError("the socket went away")


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def end_of_pass(loop: asyncio.AbstractEventLoop) -> None:
    """Run the loop until what is ready now has run (a callback scheduled now runs after it)."""
    done = loop.create_future()
    loop.call_soon(done.set_result, None)
    loop.run_until_complete(done)


def test_writes_are_held_until_the_pass_ends_then_written_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    record: list[tuple[str, bytes]] = []
    a, b = Recording("a", record), Recording("b", record)
    outbox = Outbox()
    outbox.write(loop, a, b"a1")
    outbox.write(loop, b, b"b1")
    outbox.write(loop, a, b"a2")
    assert record == []
    assert outbox.holding
    end_of_pass(loop)
    assert record == [("a", b"a1"), ("b", b"b1"), ("a", b"a2")]
    assert not outbox.holding


def test_flush_writes_at_once_and_the_pass_then_writes_only_what_came_after(
    loop: asyncio.AbstractEventLoop,
) -> None:
    record: list[tuple[str, bytes]] = []
    a = Recording("a", record)
    outbox = Outbox()
    outbox.write(loop, a, b"first")
    outbox.flush(loop)
    assert record == [("a", b"first")]
    outbox.write(loop, a, b"second")
    end_of_pass(loop)
    assert record == [("a", b"first"), ("a", b"second")]


def test_a_transport_closing_meanwhile_gets_nothing(loop: asyncio.AbstractEventLoop) -> None:
    record: list[tuple[str, bytes]] = []
    a, b = Recording("a", record), Recording("b", record)
    outbox = Outbox()
    outbox.write(loop, a, b"lost")
    outbox.write(loop, b, b"kept")
    a.closing = True  # the peer went away before the pass ended
    end_of_pass(loop)
    assert record == [("b", b"kept")]


def test_a_write_that_fails_is_reported_and_the_others_are_written(
    loop: asyncio.AbstractEventLoop,
) -> None:
    record: list[tuple[str, bytes]] = []
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    outbox = Outbox()
    outbox.write(loop, Failing("bad", record), b"x")
    outbox.write(loop, Recording("good", record), b"y")
    end_of_pass(loop)
    assert record == [("good", b"y")]
    assert [type(c["exception"]) for c in reported] == [RuntimeError]


def listener_of(app: Any) -> uvicorn.Config:
    """A plain-TCP limited listener of ``app``."""
    config = limited_config(
        app, host="127.0.0.1", port=0, tls=None, on_closed=lambda _: None, log_config=None
    )
    config.load()
    return config


def connection(
    config: uvicorn.Config,
    loop: asyncio.AbstractEventLoop,
    record: list[tuple[str, bytes]],
    name: str = "conn",
) -> LimitedHttpToolsProtocol:
    """A connection of the listener ``config``, on a recording transport named ``name``."""
    limited = config.http_protocol_class
    assert issubclass(limited, LimitedHttpToolsProtocol)
    protocol = limited(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    protocol.connection_made(Recording(name, record))
    return protocol


def answering(
    app: Any, loop: asyncio.AbstractEventLoop, record: list[tuple[str, bytes]], count: int
) -> list[LimitedHttpToolsProtocol]:
    """``count`` connections of one listener of ``app``, each sent a whole request at once."""
    config = listener_of(app)
    connections = [connection(config, loop, record, f"c{n}") for n in range(count)]
    for each in connections:
        each.data_received(REQUEST)
    return connections


async def answer_ok(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    headers = [(b"content-length", b"8")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"answered"})


def run_passes(loop: asyncio.AbstractEventLoop) -> None:
    for _ in range(3):  # the apps' tasks, then the outbox's callback
        end_of_pass(loop)


def answered_seeing(
    loop: asyncio.AbstractEventLoop, count: int
) -> tuple[list[int], list[tuple[str, bytes]]]:
    """``count`` connections answered in one pass: the writes each app saw made when its answer
    was sent, and what was written in the end."""
    record: list[tuple[str, bytes]] = []
    seen: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await answer_ok(scope, receive, send)
        seen.append(len(record))

    answering(app, loop, record, count)
    run_passes(loop)
    return seen, record


def test_an_answer_made_while_no_other_is_being_made_is_written_at_once(
    loop: asyncio.AbstractEventLoop,
) -> None:
    seen, record = answered_seeing(loop, 1)
    assert seen == [1]  # written before the app returned: no pass waited for
    assert len(record) == 1
    assert record[0][1].startswith(b"HTTP/1.1 200 OK\r\n")
    assert record[0][1].endswith(b"\r\n\r\nanswered")


def test_answers_made_in_one_pass_are_written_together_at_its_end(
    loop: asyncio.AbstractEventLoop,
) -> None:
    seen, record = answered_seeing(loop, 3)
    assert seen == [0, 0, 0]  # each held: others were being answered, then it was queued
    assert [name for name, _ in record] == ["c0", "c1", "c2"]
    assert all(data.endswith(b"answered") for _, data in record)


def test_an_answer_held_when_nicguard_aborts_the_connection_is_written_first(
    loop: asyncio.AbstractEventLoop,
) -> None:
    record: list[tuple[str, bytes]] = []
    connections: list[LimitedHttpToolsProtocol] = []

    async def answer_then_evict(scope: Scope, receive: Receive, send: Send) -> None:
        await answer_ok(scope, receive, send)
        answered.append(1)
        if len(answered) == 2:  # both answers held: the cap takes the first's place now
            connections[0].evict()

    answered: list[int] = []
    connections += answering(answer_then_evict, loop, record, 2)
    run_passes(loop)
    assert [(name, data[-8:]) for name, data in record] == [
        ("c0", b"answered"),
        ("c1", b"answered"),
        ("c0", b"<abort>"),
    ]


def test_an_answer_held_when_uvicorn_closes_the_connection_is_written_first(
    loop: asyncio.AbstractEventLoop,
) -> None:
    record: list[tuple[str, bytes]] = []
    config = listener_of(answer_ok)
    first, closing = connection(config, loop, record, "c0"), connection(config, loop, record, "c1")
    first.data_received(REQUEST)
    closing.data_received(REQUEST.replace(b"Host:", b"Connection: close\r\nHost:"))
    run_passes(loop)
    assert [(name, data[-8:]) for name, data in record] == [
        ("c0", b"answered"),
        ("c1", b"answered"),
        ("c1", b"<close>"),
    ]
