"""Reading a request's JSON body: content type, a 3 MiB cap, a timeout, then decoding.

What is wrong with the request raises ``HTTPProblemError`` with the status to answer.
"""

from __future__ import annotations

import asyncio
import json
import types
from collections.abc import Awaitable, Generator
from typing import Any, Final

import orjson
from starlette.types import Message, Receive, Scope

from app.web.abandonment import ClientGoneError

MAX_BODY_BYTES: Final = 3 * 1024 * 1024
BODY_TIMEOUT_SECONDS: Final = 10.0
_JSON: Final = "application/json"


class HTTPProblemError(Exception):
    """A request answered with an HTTP 4xx and a short JSON error."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


async def json_body(scope: Scope, receive: Receive, timeout: float) -> object:
    return decoded(await body_bytes(scope, receive, timeout))


async def body_bytes(scope: Scope, receive: Receive, timeout: float) -> bytes:
    """The body of a JSON request, undecoded (``decoded`` decodes it)."""
    content_type, length = _headers(scope)
    if content_type.split(";", 1)[0].strip().lower() != _JSON:
        raise HTTPProblemError(415, "content type must be application/json")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise HTTPProblemError(413, "body exceeds 3 MiB")
    return await _read_body(receive, timeout)


def decoded(body: bytes) -> object:
    """``decode_json``, or a 400 for what is not JSON."""
    try:
        return decode_json(body)
    except (ValueError, RecursionError):
        raise HTTPProblemError(400, "body is not valid JSON") from None


def _headers(scope: Scope) -> tuple[str, str]:
    """The first Content-Type and Content-Length (ASGI servers lower-case header names)."""
    content_type: bytes | None = None
    length: bytes | None = None
    for key, value in scope["headers"]:
        if key == b"content-type":
            if content_type is None:
                content_type = value
        elif key == b"content-length" and length is None:
            length = value
    return (content_type or b"").decode("latin-1"), (length or b"").decode("latin-1")


async def _read_body(receive: Receive, timeout: float) -> bytes:
    """The body, at most 3 MiB, or a 408 when it does not arrive within ``timeout`` seconds.

    Servers call the app once the body is buffered, as a rule, and then receive() returns
    without waiting: no timer is needed. From the first receive() that has to wait, the rest of
    the read runs under asyncio.wait_for: the common case pays for no timer at all.
    """
    body = _Body()
    while True:
        call = receive().__await__()
        try:
            waiting_on = call.send(None)
        except StopIteration as returned:
            if body.complete_with(returned.value):
                return body.joined()
            continue
        rest = _read_rest(_finish(call, waiting_on), receive, body)
        try:
            return await asyncio.wait_for(rest, timeout)
        except TimeoutError:
            raise HTTPProblemError(408, "body not received in time") from None


async def _read_rest(pending: Awaitable[Message], receive: Receive, body: _Body) -> bytes:
    message = await pending
    while not body.complete_with(message):
        message = await receive()
    return body.joined()


@types.coroutine
def _finish(
    call: Generator[Any, None, Message], waiting_on: object
) -> Generator[Any, None, Message]:
    """Await the rest of a receive() call begun by hand that suspended on ``waiting_on``: hand
    that to the Task running us, then resume the call once it is done. If the Task is
    cancelled meanwhile (the timeout), the call is closed so that it stops waiting too."""
    try:
        yield waiting_on
    except BaseException:
        call.close()
        raise
    return (yield from call)


class _Body:
    """The chunks of a request body received so far."""

    __slots__ = ("chunks", "size")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0

    def complete_with(self, message: Message) -> bool:
        """Take one ASGI message; True once the body is complete."""
        kind = message["type"]
        if kind == "http.request":
            chunk: bytes = message.get("body", b"")
            self.size += len(chunk)
            if self.size > MAX_BODY_BYTES:
                raise HTTPProblemError(413, "body exceeds 3 MiB")
            self.chunks.append(chunk)
            return not message.get("more_body", False)
        if kind == "http.disconnect":
            raise ClientGoneError
        return False

    def joined(self) -> bytes:
        return b"".join(self.chunks)


def decode_json(body: bytes) -> object:
    """orjson, or the json module for what orjson refuses and json accepted before (a lone
    surrogate escape, NaN, integers beyond 64 bits, a BOM, UTF-16/32): the same answers as
    before. Raises ValueError or RecursionError on what neither decodes."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)
