"""The webhook endpoint ``POST /validate``: HTTP checks, then translate, judge, audit, answer.

Malformed requests get a short JSON 4xx; nothing here raises a 5xx or waits forever.
"""

from __future__ import annotations

import asyncio
import json
import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final

import orjson
from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import audit
from app.domain.cluster import ClusterView
from app.domain.evaluation import evaluate
from app.domain.policy import Policy
from app.domain.verdict import Verdict
from app.domain.violations import Code, Violation
from app.metrics import Metrics
from app.web.response import review_response
from app.web.review import Admission, MalformedReviewError, admission_from_body

MAX_BODY_BYTES: Final = 3 * 1024 * 1024
BODY_TIMEOUT_SECONDS: Final = 10.0
PATH: Final = "/validate"
_JSON: Final = "application/json"
# json.dumps(..., separators=(",", ":")) builds this on every call; build it once.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))
_CONTENT_TYPE: Final = (b"content-type", b"application/json")


class HTTPProblemError(Exception):
    """A request answered with an HTTP 4xx and a short JSON error."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _ClientGoneError(Exception):
    """The client disconnected before its body arrived: there is no one to answer."""


def create_admission_app(
    *,
    view: ClusterView,
    policy: Policy,
    metrics: Metrics,
    draining: Callable[[], bool] = lambda: False,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
) -> ASGIApp:
    """``draining()`` true (after SIGTERM): answers carry ``Connection: close``. A body not
    received within ``body_timeout`` seconds is answered with a 408."""
    validate = _Validate(view=view, policy=policy, metrics=metrics, body_timeout=body_timeout)
    # Everything but POST /validate (other methods and paths, lifespan) goes through FastAPI, so
    # it keeps FastAPI's answers (405 with Allow, 404, trailing-slash redirects).
    others = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    others.add_middleware(_CloseWhenDraining, draining=draining)
    others.router.routes.append(Route(PATH, validate, methods=["POST"]))
    return _AdmissionApp(validate=_CloseWhenDraining(validate, draining), others=others)


class _AdmissionApp:
    """Pure ASGI: POST /validate skips FastAPI's routing, middleware stack, Request and Response
    objects (measured: most of the echo baseline's own CPU per request)."""

    def __init__(self, *, validate: ASGIApp, others: ASGIApp) -> None:
        self._validate, self._others = validate, others

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH and scope["method"] == "POST":
            await self._validate(scope, receive, send)
        else:
            await self._others(scope, receive, send)


class _Validate:
    """``POST /validate`` as an ASGI endpoint."""

    def __init__(
        self, *, view: ClusterView, policy: Policy, metrics: Metrics, body_timeout: float
    ) -> None:
        self._view, self._policy, self._metrics = view, policy, metrics
        self._body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        try:
            admission = admission_from_body(await _json_body(scope, receive, self._body_timeout))
        except HTTPProblemError as problem:
            status, content = (
                problem.status,
                _problem(self._metrics, problem.status, problem.reason),
            )
        except MalformedReviewError as error:
            status, content = 400, _problem(self._metrics, 400, str(error))
        except _ClientGoneError:
            return
        else:
            status, content = 200, self._judged(admission, started)
        headers = [(b"content-length", b"%d" % len(content)), _CONTENT_TYPE]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _judged(self, admission: Admission, started: float) -> bytes:
        verdict = _judge(admission, self._view, self._policy)
        seconds = time.perf_counter() - started
        review = admission.review
        operation = review.operation.value
        self._metrics.observe(
            verdict=verdict,
            # A label from a closed set: the raw kind is client input (unbounded, maybe not UTF-8).
            kind=review.kind.value if review.kind else "other",
            operation=operation,
            dry_run=admission.dry_run,
            seconds=seconds,
        )
        audit.record_decision(
            uid=admission.uid,
            operation=operation,
            dry_run=admission.dry_run,
            group=admission.group,
            kind=admission.kind,
            namespace=review.namespace,
            name=admission.name,
            username=admission.username,
            verdict=verdict,
            duration_ms=seconds * 1000,
        )
        return encode_json(review_response(admission, verdict))


def encode_json(value: object) -> bytes:
    """Compact JSON; orjson, or the json module for what orjson refuses (a lone surrogate from a
    JSON escape in the request, an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return _ENCODER.encode(value).encode()


def decode_json(body: bytes) -> object:
    """orjson, or the json module for what orjson refuses and json accepted before (a lone
    surrogate escape, NaN, integers beyond 64 bits, a BOM, UTF-16/32): the same answers as
    before. Raises ValueError or RecursionError on what neither decodes."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def _judge(admission: Admission, view: ClusterView, policy: Policy) -> Verdict:
    try:
        return evaluate(admission.review, view, policy)
    except Exception as error:  # a bug must deny in-band: never allow, never a 5xx
        audit.record_failure(uid=admission.uid, error=error)
        return Verdict(
            violations=(
                Violation(
                    code=Code.CLUSTER_STATE_UNAVAILABLE,
                    field="",
                    message="nicguard hit an internal error while judging this object; "
                    "it is denied (see the webhook's log)",
                ),
            )
        )


async def _json_body(scope: Scope, receive: Receive, timeout: float) -> object:
    content_type, length = _headers(scope)
    if content_type.split(";", 1)[0].strip().lower() != _JSON:
        raise HTTPProblemError(415, "content type must be application/json")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise HTTPProblemError(413, "body exceeds 3 MiB")
    try:
        return decode_json(await _read_body(receive, timeout))
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
    without waiting: no timer is needed, and asyncio.wait_for's Task and extra trips through
    the event loop would cost about a sixth of the request's CPU (measured). From the first
    receive() that has to wait, the rest of the read runs under asyncio.wait_for.
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
            raise _ClientGoneError
        return False

    def joined(self) -> bytes:
        return b"".join(self.chunks)


def _problem(metrics: Metrics, status: int, reason: str) -> bytes:
    metrics.rejected.labels(str(status)).inc()
    audit.record_rejected(status=status, reason=reason)
    return json.dumps({"error": reason, "status": status}).encode()


class _CloseWhenDraining:
    """While draining, every answer closes its connection, so the apiserver reconnects (through
    the Service) to a replica that stays. Pure ASGI: one call per request otherwise. A request
    begun before SIGTERM keeps its connection; the next one on it closes it (and uvicorn's
    shutdown closes whatever is left after the delay)."""

    def __init__(self, app: ASGIApp, draining: Callable[[], bool]) -> None:
        self._app, self._draining = app, draining

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._draining():  # the request path: nothing added
            await self._app(scope, receive, send)
            return

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, closing)
