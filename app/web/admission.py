"""The webhook endpoint ``POST /validate``: HTTP checks, then translate, judge, audit, answer.

Malformed requests get a short JSON 4xx; nothing here raises a 5xx or waits forever.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Final

from fastapi import FastAPI, Request
from fastapi.responses import Response
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
_JSON: Final = "application/json"
# json.dumps(..., separators=(",", ":")) builds this on every call; build it once.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"))


class HTTPProblemError(Exception):
    """A request answered with an HTTP 4xx and a short JSON error."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def create_admission_app(
    *,
    view: ClusterView,
    policy: Policy,
    metrics: Metrics,
    draining: Callable[[], bool] = lambda: False,
) -> FastAPI:
    """``draining()`` true (after SIGTERM): answers carry ``Connection: close``."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(_CloseWhenDraining, draining=draining)

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        started = time.perf_counter()
        try:
            admission = admission_from_body(await _json_body(request))
        except HTTPProblemError as problem:
            return _problem(metrics, problem.status, problem.reason)
        except MalformedReviewError as error:
            return _problem(metrics, 400, str(error))
        verdict = _judge(admission, view, policy)
        seconds = time.perf_counter() - started
        metrics.observe(
            verdict=verdict,
            # A label from a closed set: the raw kind is client input (unbounded, maybe not UTF-8).
            kind=admission.review.kind.value if admission.review.kind else "other",
            operation=admission.review.operation.value,
            dry_run=admission.dry_run,
            seconds=seconds,
        )
        audit.record_decision(
            uid=admission.uid,
            operation=admission.review.operation.value,
            dry_run=admission.dry_run,
            group=admission.group,
            kind=admission.kind,
            namespace=admission.review.namespace,
            name=admission.name,
            username=admission.username,
            verdict=verdict,
            duration_ms=seconds * 1000,
        )
        return Response(
            content=_ENCODER.encode(review_response(admission, verdict)), media_type=_JSON
        )

    return app


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


async def _json_body(request: Request) -> object:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != _JSON:
        raise HTTPProblemError(415, "content type must be application/json")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise HTTPProblemError(413, "body exceeds 3 MiB")
    try:
        body = await asyncio.wait_for(_read_capped(request), BODY_TIMEOUT_SECONDS)
    except TimeoutError:
        raise HTTPProblemError(408, "body not received in time") from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise HTTPProblemError(400, "body is not valid JSON") from None


async def _read_capped(request: Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HTTPProblemError(413, "body exceeds 3 MiB")
        chunks.append(chunk)
    return b"".join(chunks)


def _problem(metrics: Metrics, status: int, reason: str) -> Response:
    metrics.rejected.labels(str(status)).inc()
    audit.record_rejected(status=status, reason=reason)
    body = json.dumps({"error": reason, "status": status})
    return Response(content=body, status_code=status, media_type=_JSON)


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
