"""Reviews of 64 KiB or more are decoded and judged on a thread of their own, one at a time: the
event loop answers other reviews meanwhile, and one kept waiting too long for its turn is
refused with a 503, never allowed unjudged (SPEC §15, docs/operations.md)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from typing import Any

from app.domain.claimants import Claimant
from app.domain.cluster import (
    CacheStatus,
    ClaimTemplates,
    ClusterSnapshot,
    Networks,
    RuntimeKey,
    Unverifiable,
)
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.recipe import Recipe, RecipeMissing
from app.metrics import Metrics
from app.web.admission import COSTLY_FROM_BYTES, COSTLY_FROM_TEMPLATES, create_admission_app
from tests.support.costly_jobset import Edit, costly_jobset_update
from tests.web.conftest import EXAMPLES

Message = dict[str, Any]
SMALL = (EXAMPLES / "reviews" / "drifted-runtime.json").read_bytes()
COSTLY = costly_jobset_update(Edit.BROKEN, templates=100)


class HeldView:
    """``state``, whose Networks a judging thread reads only once ``release()`` is called."""

    def __init__(self, state: ClusterSnapshot) -> None:
        self.state = state
        self.entered = threading.Event()
        self.readers: list[str] = []
        self._gate = threading.Event()

    def release(self) -> None:
        self._gate.set()

    def networks(self) -> Networks | Unverifiable:
        reader = threading.current_thread().name
        self.readers.append(reader)
        if reader.startswith("judging"):
            self.entered.set()
            self._gate.wait()
        return self.state.networks()

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        return self.state.recipe()

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        return self.state.runtime(kind, namespace, name)

    def runtimes(self) -> Iterable[tuple[RuntimeKey, JsonMap]] | Unverifiable:
        return self.state.runtimes()

    def claim_templates(self) -> ClaimTemplates | Unverifiable:
        return self.state.claim_templates()

    def claimants(self) -> Iterable[Claimant]:
        return self.state.claimants()


def _app(view: HeldView | ClusterSnapshot, costly_wait: float = 1.5) -> Any:
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    return create_admission_app(
        view=view, policy=Policy(), metrics=metrics, costly_wait=costly_wait
    )


def _scope() -> Message:
    return {
        "type": "http",
        "method": "POST",
        "path": "/validate",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 40000),
    }


async def _post(app: Any, body: bytes) -> tuple[int, Any]:
    """One request whose body is all there; its status and decoded answer."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(_scope(), receive, send)
    start, answer = sent
    return start["status"], json.loads(answer["body"])


def _codes(answer: Any) -> str:
    codes: str = answer["response"]["auditAnnotations"]["violations"]
    return codes


def test_a_costly_review_is_answered_as_a_small_one_would_be(
    example_state: ClusterSnapshot,
) -> None:
    assert len(COSTLY) >= COSTLY_FROM_BYTES > len(SMALL)
    view = HeldView(example_state)
    view.release()
    status, answer = asyncio.run(_post(_app(view), COSTLY))
    assert status == 200
    assert answer["response"]["allowed"] is False
    assert _codes(answer) == "NetworkDuplicated,NetworkNotFound"
    assert view.readers == ["judging_0"]


def test_a_small_body_wiring_many_templates_is_judged_as_a_costly_one(
    example_state: ClusterSnapshot,
) -> None:
    """Templates, not only bytes, make a review costly: one under 64 KiB wiring more than 32
    (object and oldObject alike) goes to the judging thread; one wiring 32 stays on the loop."""
    many = costly_jobset_update(Edit.BROKEN, templates=COSTLY_FROM_TEMPLATES // 2 + 1)
    few = costly_jobset_update(Edit.BROKEN, templates=COSTLY_FROM_TEMPLATES // 2)
    assert len(few) < len(many) < COSTLY_FROM_BYTES
    for body, reader in [(many, "judging_0"), (few, "MainThread")]:
        view = HeldView(example_state)
        view.release()
        status, answer = asyncio.run(_post(_app(view), body))
        assert (status, _codes(answer)) == (200, "NetworkDuplicated,NetworkNotFound")
        assert view.readers == [reader]


def test_the_loop_answers_a_small_review_while_a_costly_one_is_judged(
    example_state: ClusterSnapshot,
) -> None:
    view = HeldView(example_state)

    async def scenario() -> tuple[tuple[int, Any], tuple[int, Any]]:
        app = _app(view)
        costly = asyncio.create_task(_post(app, COSTLY))
        await asyncio.get_running_loop().run_in_executor(None, view.entered.wait)
        try:
            small = await _post(app, SMALL)  # answered while the costly one is held
        finally:
            view.release()
        return small, await costly

    (small_status, small), (costly_status, costly) = asyncio.run(scenario())
    assert (small_status, small["response"]["allowed"]) == (200, False)
    assert (costly_status, costly["response"]["allowed"]) == (200, False)
    assert view.readers == ["judging_0", "MainThread"]


def test_a_costly_review_kept_waiting_for_its_turn_is_refused_not_allowed(
    example_state: ClusterSnapshot,
) -> None:
    view = HeldView(example_state)

    async def scenario() -> tuple[tuple[int, Any], tuple[int, Any]]:
        app = _app(view, costly_wait=0.05)
        first = asyncio.create_task(_post(app, COSTLY))
        await asyncio.get_running_loop().run_in_executor(None, view.entered.wait)
        try:
            second = await _post(app, COSTLY)  # its turn never comes while the first is held
        finally:
            view.release()
        return await first, second

    (first_status, first), (second_status, second) = asyncio.run(scenario())
    assert (first_status, first["response"]["allowed"]) == (200, False)
    assert second_status == 503
    assert second == {
        "error": "costly reviews before this one kept it waiting 0.05 s; refused unjudged, retry",
        "status": 503,
    }
    assert view.readers == ["judging_0"]


def test_a_costly_body_that_is_no_review_is_refused_as_a_small_one_is(
    example_state: ClusterSnapshot,
) -> None:
    padding = " " * COSTLY_FROM_BYTES
    for body, reason in [
        (b"[" + padding.encode(), "body is not valid JSON"),
        (b"[" * COSTLY_FROM_BYTES + b"]" * COSTLY_FROM_BYTES, "body is not valid JSON"),
        (json.dumps({"kind": "Other", "pad": padding}).encode(), "body is not an AdmissionReview"),
    ]:
        status, answer = asyncio.run(_post(_app(example_state), body))
        assert (status, answer["error"]) == (400, reason)
