"""The webhook endpoint ``POST /validate``: HTTP checks, translate, evaluate, log, answer.

Malformed requests get a short JSON 4xx; nothing here raises a 5xx or waits forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Final, cast

import orjson
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import decisions
from app.domain.assessment import Assessment, assess
from app.domain.cluster import (
    ClusterView,
    ObjectName,
    RuntimeFetch,
    RuntimeKey,
    Unverifiable,
    WithRuntime,
)
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.policy import Policy
from app.domain.verdict import Code, Verdict, Violation
from app.metrics import Metrics
from app.web import peer
from app.web.abandonment import ClientGoneError, ClientWatch, Queue
from app.web.body import (
    BODY_TIMEOUT_SECONDS,
    HTTPProblemError,
    body_bytes,
    decoded,
)
from app.web.body_budget import BODY_HOLD, MIB, BodyHold
from app.web.request import (
    AdmissionRequest,
    MalformedReviewError,
    decodes_yaml,
    request_from_body,
)
from app.web.response import review_response
from app.web.review_identity import UNKNOWN, ReviewIdentity, identity_in, identity_of
from app.web.router import router
from app.web.runtime_reads import Outcome, RuntimeReads
from app.web.turns import Turn, WaitedTooLongError

PATH: Final = "/validate"
_CONTENT_TYPE: Final = (b"content-type", b"application/json")
RUNTIME_FETCH_SECONDS: Final = 1.0
# A body this large may hold thousands of wired templates (a 3 MiB JobSet UPDATE holds 2,000, old
# and new: ~0.25 s of CPU), so it is decoded and judged on a thread of its own, one at a time,
# never on the event loop that answers the other reviews and the probes. A smaller one costs at
# most a few milliseconds: on the loop, the thread hand-off would cost it more than it saves.
COSTLY_FROM_BYTES: Final = 64 * 1024
# So is one that wires more templates than this (object and oldObject counted alike): a body
# under 64 KiB may hold hundreds of small wired templates (~10 ms of judging on the loop, 300 of
# them, measured). Counted as the interfaces annotation's key in the undecoded body, a C-level
# search; the apiserver writes it as it is (a forged body that escapes it is judged on the loop,
# within the cost of its 64 KiB). A body shorter than this many of the smallest wired templates
# (each over 64 bytes: the key, a one-entry list) cannot hold them, and is not searched.
COSTLY_FROM_TEMPLATES: Final = 32
_WIRED: Final = b'"networking.gke.io/interfaces"'
_SEARCHED_FROM_BYTES: Final = COSTLY_FROM_TEMPLATES * 64
# How long a review waits for its turn on a thread (the judging thread's, the YAML thread's):
# the second left of the webhook's 3 s timeout is for judging it (0.2 s of CPU at most). Beyond
# that it is refused at once (503), never allowed.
COSTLY_WAIT_SECONDS: Final = 2.0


_AHEAD: Final = {
    Queue.JUDGING: "costly reviews",
    Queue.YAML: "ConfigMap reviews",
}


class _RefusedError(Exception):
    """A review refused unjudged for what others hold: logged with what identifies it."""

    def __init__(self, reason: str, identity: ReviewIdentity) -> None:
        super().__init__(reason)
        self.reason, self.identity = reason, identity


def create_admission_app(
    *,
    view: ClusterView,
    policy: Policy,
    metrics: Metrics,
    draining: Callable[[], bool] = lambda: False,
    body_timeout: float = BODY_TIMEOUT_SECONDS,
    fetch_runtime: RuntimeFetch | None = None,
    recipe: ObjectName | None = None,
    costly_wait: float = COSTLY_WAIT_SECONDS,
) -> ASGIApp:
    """``draining()`` true (after SIGTERM): answers carry ``Connection: close``. A body not
    received within ``body_timeout`` seconds is answered with a 408. ``fetch_runtime`` reads a
    TrainJob's runtime that ``view`` lacks (Kubernetes mode), within 1 s, under the bounds of
    ``RuntimeReads``. ``recipe``
    names the recipe ConfigMap, whose writes are judged (no other ConfigMap is). A review of
    ``COSTLY_FROM_BYTES`` or more, or wiring more than ``COSTLY_FROM_TEMPLATES`` templates, is
    judged on a thread of its own, one at a time, and a ConfigMap's decoded on another; one
    that waits ``costly_wait`` seconds for its turn is answered 503, and one whose client has
    gone is dropped."""
    validate = _Validate(
        view=view,
        policy=policy,
        metrics=metrics,
        body_timeout=body_timeout,
        fetch_runtime=fetch_runtime,
        recipe=recipe,
        costly_wait=costly_wait,
    )
    # Everything but POST /validate (other methods and paths, lifespan) goes through FastAPI, so
    # it keeps FastAPI's answers (405 with Allow, 404, trailing-slash redirects).
    others = router([Route(PATH, validate, methods=["POST"])])
    others.add_middleware(_CloseWhenDraining, draining=draining)
    return _AdmissionApp(validate=validate, draining=draining, others=others)


class _AdmissionApp:
    """Pure ASGI: POST /validate skips FastAPI's routing, middleware stack, Request and Response
    objects (measured: most of the echo baseline's own CPU per request), and, until SIGTERM,
    ``_CloseWhenDraining``'s call too."""

    def __init__(self, *, validate: ASGIApp, draining: Callable[[], bool], others: ASGIApp) -> None:
        self._validate, self._draining, self._others = validate, draining, others
        self._closing = _CloseWhenDraining(validate, draining)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH and scope["method"] == "POST":
            if self._draining():
                await self._closing(scope, receive, send)
            else:
                await self._validate(scope, receive, send)
        else:
            await self._others(scope, receive, send)


class _Validate:
    """``POST /validate`` as an ASGI endpoint."""

    def __init__(
        self,
        *,
        view: ClusterView,
        policy: Policy,
        metrics: Metrics,
        body_timeout: float,
        fetch_runtime: RuntimeFetch | None,
        recipe: ObjectName | None,
        costly_wait: float,
    ) -> None:
        self._view, self._policy, self._metrics = view, policy, metrics
        self._body_timeout, self._costly_wait = body_timeout, costly_wait
        # No fetch (file mode): no read, so no outcome of one is exported, not even as 0.
        self._runtime_reads = (
            None
            if fetch_runtime is None
            else RuntimeReads(fetch_runtime, count=metrics.reading_runtimes(Outcome))
        )
        self._recipe = recipe
        # A ConfigMap's YAML (a runtime snapshot's data.runtime: up to 256 KiB from any ConfigMap
        # writer) is decoded here, never on the loop that answers other reviews and the probes;
        # one thread: one parse's memory at a time (docs/operations.md).
        self._decoding = ThreadPoolExecutor(max_workers=1, thread_name_prefix="yaml-decode")
        # Costly reviews: one decoded at a time, from its decoding to its answer.
        self._judging = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judging")
        # Each thread's queue is a turn of ours, not the executor's own queue: a review waits
        # a bounded time, and one whose client has gone leaves it (docs/operations.md).
        self._decoding_turn, self._judging_turn = Turn(), Turn()
        self._dropped = metrics.dropping(Queue)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        try:
            status, content = 200, await self._judged(scope, receive, started)
        except HTTPProblemError as problem:
            status, content = (
                problem.status,
                _problem(self._metrics, problem.status, problem.reason),
            )
        except MalformedReviewError as error:
            status, content = 400, _problem(self._metrics, 400, str(error))
        except _RefusedError as refused:
            status = 503
            content = _refused(self._metrics, refused.reason, refused.identity, scope)
        except ClientGoneError as gone:
            self._dropped(gone.queue)
            return
        headers = [(b"content-length", b"%d" % len(content)), _CONTENT_TYPE]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def _judged(self, scope: Scope, receive: Receive, started: float) -> bytes:
        """The answer to a review. Its body, and what was decoded from it, are let go of before
        the answer is sent: not held while it waits for a client that does not read (no longer
        reserved in the body budget then)."""
        body = await body_bytes(scope, receive, self._body_timeout)
        if len(body) >= COSTLY_FROM_BYTES or (
            len(body) >= _SEARCHED_FROM_BYTES and body.count(_WIRED) > COSTLY_FROM_TEMPLATES
        ):
            return await self._judge_aside(body, scope, receive, started)
        decoded_body = decoded(body)
        if decodes_yaml(decoded_body):
            admission = await self._decode_yaml(decoded_body, scope, receive)
        else:
            admission = request_from_body(decoded_body, self._recipe)
        assessment = assess(admission.review)
        missing = self._missing_runtime(assessment)
        view = self._view if missing is None else await self._with_runtime(admission, *missing)
        return self._answer(admission, assessment, view, scope, started)

    async def _decode_yaml(self, body: object, scope: Scope, receive: Receive) -> AdmissionRequest:
        """A ConfigMap's review, decoded on the YAML thread once it has its turn."""
        identity = partial(identity_of, body)  # only for a refusal
        async with self._turn(self._decoding_turn, Queue.YAML, identity, scope, receive) as watch:
            return await asyncio.get_running_loop().run_in_executor(
                self._decoding, self._decode_yaml_for, watch, body
            )

    def _decode_yaml_for(self, watch: ClientWatch, body: object) -> AdmissionRequest:
        watch.check(Queue.YAML)
        return request_from_body(body, self._recipe)

    async def _judge_aside(
        self, body: bytes, scope: Scope, receive: Receive, started: float
    ) -> bytes:
        """A costly review, decoded and judged on the judging thread once it has its turn; only
        a TrainJob's runtime read, when it needs one, comes back to the loop. Dropped, wherever
        it waits, once its client has gone."""
        identity = partial(identity_in, body)  # only for a refusal
        async with self._turn(self._judging_turn, Queue.JUDGING, identity, scope, receive) as watch:
            loop = asyncio.get_running_loop()
            admission, assessment = await loop.run_in_executor(
                self._judging, self._parse, watch, body
            )
            missing = self._missing_runtime(assessment)
            view = self._view if missing is None else await self._with_runtime(admission, *missing)
            return await loop.run_in_executor(
                self._judging, self._answer_for, watch, admission, assessment, view, scope, started
            )

    @contextlib.asynccontextmanager
    async def _turn(
        self,
        turn: Turn,
        queue: Queue,
        identity: Callable[[], ReviewIdentity],
        scope: Scope,
        receive: Receive,
    ) -> AsyncIterator[ClientWatch]:
        """The thread's turn, its client watched from taking it to giving it back: refused
        (503) beyond the wait or when the body budget takes the body's room meanwhile, dropped
        once the client has gone (``identity`` says whose, for a refusal)."""
        watch = ClientWatch(receive)
        try:
            await self._take(turn, watch, queue, identity, scope)
            try:
                yield watch
            finally:
                turn.give_back()
        finally:
            watch.stop()

    async def _take(
        self,
        turn: Turn,
        watch: ClientWatch,
        queue: Queue,
        identity: Callable[[], ReviewIdentity],
        scope: Scope,
    ) -> None:
        """The thread's turn, within the wait (see ``_turn``)."""
        hold = _body_hold(scope)
        if hold is not None:
            hold.wait(watch.evict)
        try:
            taken = await turn.take(self._costly_wait, watch.interrupted)
        except WaitedTooLongError:
            raise _RefusedError(
                f"{_AHEAD[queue]} before this one kept it waiting {self._costly_wait:g} s; "
                "refused unjudged, retry",
                identity(),
            ) from None
        if taken and not watch.gone and not watch.evicted:
            if hold is not None:
                hold.proceed()
            return
        if taken:
            turn.give_back()
        if watch.evicted:
            raise _RefusedError(
                "the body budget needed the room this review held while it waited its turn "
                "(the largest waiting gives way); refused unjudged, retry",
                identity(),
            )
        raise ClientGoneError(queue)

    def _parse(self, watch: ClientWatch, body: bytes) -> tuple[AdmissionRequest, Assessment]:
        watch.check(Queue.JUDGING)
        admission = request_from_body(decoded(body), self._recipe)
        return admission, assess(admission.review)

    def _answer_for(
        self,
        watch: ClientWatch,
        admission: AdmissionRequest,
        assessment: Assessment,
        view: ClusterView,
        scope: Scope,
        started: float,
    ) -> bytes:
        watch.check(Queue.JUDGING)
        return self._answer(admission, assessment, view, scope, started)

    def _missing_runtime(self, assessment: Assessment) -> tuple[RuntimeReads, RuntimeKey] | None:
        """The reads and the runtime to read when a TrainJob's runtime is not in the synced cache
        (created by the same ``kubectl apply`` a moment ago, its watch event still on the way).
        Asked before any coroutine is made: almost no review needs one."""
        reads, key = self._runtime_reads, assessment.runtime
        if reads is None or key is None or self._view.runtime(*key) is not None:
            return None
        return reads, key

    async def _with_runtime(
        self, admission: AdmissionRequest, reads: RuntimeReads, key: RuntimeKey
    ) -> ClusterView:
        """The view, plus the runtime the cache lacks, read directly."""
        found: JsonMap | Unverifiable | None
        try:
            found = await reads.read(key, RUNTIME_FETCH_SECONDS)
        except Exception as error:  # a bug must not become a 5xx: it is unverifiable
            decisions.record_failure(uid=admission.uid, error=error)
            found = Unverifiable("it is not cached yet and reading it failed")
        return WithRuntime(self._view, key, found)

    def _answer(
        self,
        admission: AdmissionRequest,
        assessment: Assessment,
        view: ClusterView,
        scope: Scope,
        started: float,
    ) -> bytes:
        verdict = _evaluate(admission, assessment, view, self._policy)
        seconds = time.perf_counter() - started
        review = admission.review
        operation = review.operation  # an Operation is its value, a str
        self._metrics.observe(
            verdict=verdict,
            # A label from a closed set: the raw kind is client input (unbounded, maybe not UTF-8).
            kind=review.kind or "other",
            operation=operation,
            dry_run=admission.dry_run,
            seconds=seconds,
        )
        decisions.record_decision(
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
            source_address=peer.source_address(scope),
            client_subject=peer.client_subject(scope),
        )
        return encode_json(review_response(admission, verdict))


def _body_hold(scope: Scope) -> BodyHold | None:
    """The body budget's hold on this request's body, where the server keeps one."""
    extensions = scope.get("extensions")
    hold = extensions.get(BODY_HOLD) if extensions else None
    return cast("BodyHold", hold["hold"]) if hold else None


def encode_json(value: object) -> bytes:
    """Compact JSON; orjson, or the json module for what orjson refuses (a lone surrogate from a
    JSON escape in the request, an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def _evaluate(
    admission: AdmissionRequest, assessment: Assessment, view: ClusterView, policy: Policy
) -> Verdict:
    try:
        return evaluate(admission.review, view, policy, assessment=assessment)
    except Exception as error:  # a bug must deny in-band: never allow, never a 5xx
        decisions.record_failure(uid=admission.uid, error=error)
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


def over_budget_app(metrics: Metrics, budget: int) -> ASGIApp:
    """The answer to a request whose body the body budget cannot hold now (docs/operations.md,
    "Hostile clients"): 503 with Retry-After, its body unread and its connection closed."""
    reason = (
        f"request bodies held at once would exceed the body budget ({budget / MIB:g} MiB); "
        "retry later"
    )

    async def refuse(scope: Scope, _receive: Receive, send: Send) -> None:
        content = _refused(metrics, reason, UNKNOWN, scope)  # its body is never read
        headers = [
            (b"content-length", b"%d" % len(content)),
            _CONTENT_TYPE,
            (b"retry-after", b"1"),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    return refuse


def _refused(metrics: Metrics, reason: str, identity: ReviewIdentity, scope: Scope) -> bytes:
    metrics.rejected.labels("503").inc()
    decisions.record_refused(
        status=503,
        reason=reason,
        uid=identity.uid,
        group=identity.group,
        kind=identity.kind,
        namespace=identity.namespace,
        name=identity.name,
        username=identity.username,
        source_address=peer.source_address(scope),
        client_subject=peer.client_subject(scope),
    )
    return json.dumps({"error": reason, "status": 503}).encode()


def _problem(metrics: Metrics, status: int, reason: str) -> bytes:
    metrics.rejected.labels(str(status)).inc()
    decisions.record_rejected(status=status, reason=reason)
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
