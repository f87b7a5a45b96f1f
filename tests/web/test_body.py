"""Reading a request's JSON body (app.web.body) from ASGI messages: content type, the 3 MiB
cap, the deadline, a client gone, and decoding as the json module did before orjson."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from typing import Final

import pytest
from starlette.types import Message, Receive, Scope

from app.web.abandonment import ClientGoneError
from app.web.body import (
    MAX_BODY_BYTES,
    HTTPProblemError,
    decode_json,
    json_body,
)

JSON: Final = (b"content-type", b"application/json")


def scope(*headers: tuple[bytes, bytes]) -> Scope:
    return {"type": "http", "method": "POST", "path": "/validate", "headers": list(headers)}


def ready(messages: Sequence[Message]) -> Receive:
    """A server that buffered the whole body: every receive() answers without waiting."""
    pending = list(messages)

    async def receive() -> Message:
        return pending.pop(0)

    return receive


async def arriving(messages: Sequence[Message]) -> object:
    """The body of ``messages`` that arrive only once the app waits for them."""
    queue: asyncio.Queue[Message] = asyncio.Queue()

    async def deliver() -> None:  # runs once the reader waits on the empty queue
        for message in messages:
            queue.put_nowait(message)

    delivery = asyncio.create_task(deliver())
    try:
        return await json_body(scope(JSON), queue.get, 5.0)
    finally:
        await delivery


def chunk(data: bytes, *, more: bool = False) -> Message:
    return {"type": "http.request", "body": data, "more_body": more}


def read(messages: Sequence[Message], *headers: tuple[bytes, bytes]) -> object:
    return asyncio.run(json_body(scope(*headers), ready(messages), 5.0))


@pytest.mark.parametrize(
    ("headers", "messages", "expected"),
    [
        pytest.param((JSON,), [chunk(b'{"a": 1}')], {"a": 1}, id="one chunk"),
        pytest.param(
            (JSON,),
            [chunk(b'{"a"', more=True), {"type": "http.other"}, chunk(b": [1, 2]}")],
            {"a": [1, 2]},
            id="chunks joined, other messages ignored",
        ),
        pytest.param(
            ((b"content-type", b"Application/JSON; charset=utf-8"),),
            [chunk(b"[]")],
            [],
            id="content type with parameters, any case",
        ),
        pytest.param(
            (JSON, (b"host", b"x"), (b"content-type", b"text/plain"), (b"content-length", b"4")),
            [chunk(b"true")],
            True,
            id="the first content type counts",
        ),
        pytest.param(
            (JSON, (b"content-length", b"x")), [chunk(b"null")], None, id="a garbled length"
        ),
    ],
)
def test_a_json_body_is_read_and_decoded(
    headers: tuple[tuple[bytes, bytes], ...], messages: list[Message], expected: object
) -> None:
    assert read(messages, *headers) == expected


@pytest.mark.parametrize(
    ("headers", "messages", "status", "reason"),
    [
        pytest.param((), [chunk(b"{}")], 415, "content type must be application/json", id="none"),
        pytest.param(
            ((b"content-type", b"application/yaml"),),
            [chunk(b"{}")],
            415,
            "content type must be application/json",
            id="yaml",
        ),
        pytest.param(
            (JSON, (b"content-length", str(MAX_BODY_BYTES + 1).encode())),
            [],
            413,
            "body exceeds 3 MiB",
            id="a declared length over the cap, refused unread",
        ),
        pytest.param(
            (JSON,),
            [chunk(b" " * MAX_BODY_BYTES, more=True), chunk(b"1")],
            413,
            "body exceeds 3 MiB",
            id="chunks over the cap",
        ),
        pytest.param((JSON,), [chunk(b"{")], 400, "body is not valid JSON", id="not JSON"),
        pytest.param(
            (JSON,), [chunk(b"[" * 100_000)], 400, "body is not valid JSON", id="nested too deep"
        ),
    ],
)
def test_a_bad_request_is_a_problem_with_its_status(
    headers: tuple[tuple[bytes, bytes], ...], messages: list[Message], status: int, reason: str
) -> None:
    with pytest.raises(HTTPProblemError) as raised:
        read(messages, *headers)
    assert (raised.value.status, raised.value.reason, str(raised.value)) == (
        status,
        reason,
        reason,
    )


def test_a_client_gone_before_its_body_is_no_one_to_answer() -> None:
    with pytest.raises(ClientGoneError):
        read([chunk(b"{", more=True), {"type": "http.disconnect"}], JSON)


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param([chunk(b'{"late": true}')], {"late": True}, id="one chunk"),
        pytest.param([chunk(b"[1,", more=True), chunk(b"2]")], [1, 2], id="two chunks, both late"),
    ],
)
def test_a_body_that_has_to_be_waited_for_is_read_too(
    messages: list[Message], expected: object
) -> None:
    assert asyncio.run(arriving(messages)) == expected


def test_a_late_client_gone_is_no_one_to_answer() -> None:
    with pytest.raises(ClientGoneError):
        asyncio.run(arriving([chunk(b"[", more=True), {"type": "http.disconnect"}]))


def test_a_body_that_does_not_arrive_in_time_is_408() -> None:
    async def never() -> Message:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    with pytest.raises(HTTPProblemError) as raised:
        asyncio.run(json_body(scope(JSON), never, 0.01))
    assert (raised.value.status, raised.value.reason) == (408, "body not received in time")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b'{"a": [1, "x"]}', {"a": [1, "x"]}, id="plain JSON, orjson"),
        pytest.param(b'"\\ud800"', "\ud800", id="a lone surrogate escape"),
        pytest.param(b"18446744073709551616", 2**64, id="an integer beyond 64 bits"),
        pytest.param(b'\xef\xbb\xbf{"bom": 1}', {"bom": 1}, id="a UTF-8 BOM"),
        pytest.param('{"u": 16}'.encode("utf-16"), {"u": 16}, id="UTF-16"),
        pytest.param('{"u": 32}'.encode("utf-32"), {"u": 32}, id="UTF-32"),
    ],
)
def test_decode_json_answers_as_the_json_module_did(body: bytes, expected: object) -> None:
    assert decode_json(body) == expected == json.loads(body)


def test_decode_json_takes_nan_as_the_json_module_does() -> None:
    found = decode_json(b"[NaN, Infinity]")
    assert isinstance(found, list)
    assert math.isnan(found[0])
    assert found[1] == math.inf


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", json.JSONDecodeError),
        (b"{", json.JSONDecodeError),
        (b"[1,]", json.JSONDecodeError),
        (b"\xff", UnicodeDecodeError),
        (b"[" * 100_000, RecursionError),
    ],
)
def test_decode_json_refuses_what_neither_decodes(body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_json(body)
