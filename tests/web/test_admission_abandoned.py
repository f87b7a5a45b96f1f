"""A review whose client has gone is dropped where it waits, undecoded or unjudged, and counted;
one refused for its wait is logged with what identifies it (SPEC §10, docs/operations.md)."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from app.domain.cluster import CacheStatus, ClusterSnapshot
from app.domain.policy import Policy
from app.metrics import Metrics
from app.web.admission import create_admission_app
from tests.support.costly_jobset import Edit, costly_jobset_update
from tests.web.conftest import EXAMPLES, RECIPE
from tests.web.test_admission_costly import HeldView, _scope

Message = dict[str, Any]
COSTLY = costly_jobset_update(Edit.BROKEN, templates=100, uid="held-uid")
WAITING = costly_jobset_update(Edit.BROKEN, templates=100, uid="waiting-uid")
SMALL = (EXAMPLES / "reviews" / "drifted-runtime.json").read_bytes()


def _app(view: HeldView | ClusterSnapshot, costly_wait: float = 30.0) -> tuple[Any, Metrics]:
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    app = create_admission_app(
        view=view, policy=Policy(), metrics=metrics, costly_wait=costly_wait, recipe=RECIPE
    )
    return app, metrics


class Client:
    """One request's client: its body is all there; ``leave()`` disconnects it, as a client
    that gave up would (ASGI's ``receive`` then returns ``http.disconnect``)."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self._left = asyncio.Event()
        self.sent: list[Message] = []

    def leave(self) -> None:
        self._left.set()

    async def receive(self) -> Message:
        if self._body is not None and not self._left.is_set():
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def answer(self) -> tuple[int, Any]:
        start, body = self.sent
        return start["status"], json.loads(body["body"])


def _dropped(metrics: Metrics) -> dict[str, float]:
    return {
        sample.labels["queue"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "nicguard_reviews_dropped"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


async def _turns() -> None:
    """Let the loop run every task ready to run, a hundred times over (no clock)."""
    for _ in range(100):
        await asyncio.sleep(0)


def test_a_costly_review_whose_client_goes_while_it_waits_is_dropped_unjudged(
    example_state: ClusterSnapshot,
) -> None:
    view = HeldView(example_state)
    app, metrics = _app(view)

    async def scenario() -> tuple[Client, Client]:
        held, waiting = Client(COSTLY), Client(WAITING)
        first = asyncio.create_task(app(_scope(), held.receive, held.send))
        await asyncio.get_running_loop().run_in_executor(None, view.entered.wait)
        second = asyncio.create_task(app(_scope(), waiting.receive, waiting.send))
        await _turns()  # the second waits for its turn: the thread is held
        waiting.leave()
        await second  # returns once dropped: its turn has not come
        view.release()
        await first
        return held, waiting

    held, waiting = asyncio.run(scenario())
    assert held.answer()[0] == 200
    assert waiting.sent == []
    assert view.readers == ["judging_0"]  # the dropped review read nothing
    assert _dropped(metrics) == {"event_loop": 0.0, "judging": 1.0, "yaml": 0.0}


def test_a_review_whose_client_went_before_the_loop_took_it_up_is_dropped(
    example_state: ClusterSnapshot,
) -> None:
    app, metrics = _app(example_state)

    async def scenario() -> Client:
        gone = Client(SMALL)
        gone.leave()
        await app(_scope(), gone.receive, gone.send)
        return gone

    assert asyncio.run(scenario()).sent == []
    assert _dropped(metrics) == {"event_loop": 1.0, "judging": 0.0, "yaml": 0.0}


def _configmap_review(uid: str) -> bytes:
    """A ConfigMap's review: decoded on the YAML thread (any ConfigMap may be a snapshot)."""
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "team-a"},
        "data": {"runtime": "kind: ClusterTrainingRuntime\n"},
    }
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "namespace": "team-a",
        "name": "settings",
        "operation": "CREATE",
        "userInfo": {"username": "someone"},
        "object": config_map,
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


def test_a_configmap_review_waits_its_turn_on_the_yaml_thread_and_is_dropped_when_gone(
    example_state: ClusterSnapshot,
) -> None:
    app, metrics = _app(example_state)

    async def scenario() -> tuple[Client, Client]:
        first, second = Client(_configmap_review("first")), Client(_configmap_review("second"))
        # Both are taken up before the loop lets the YAML thread answer the first: the second
        # waits for its turn, and its client goes meanwhile.
        one = asyncio.create_task(app(_scope(), first.receive, first.send))
        two = asyncio.create_task(app(_scope(), second.receive, second.send))
        await asyncio.sleep(0)
        second.leave()
        await asyncio.gather(one, two)
        return first, second

    first, second = asyncio.run(scenario())
    assert first.answer()[0] == 200
    assert second.sent == []
    assert _dropped(metrics) == {"event_loop": 0.0, "judging": 0.0, "yaml": 1.0}


def test_a_review_refused_for_its_wait_is_logged_with_what_identifies_it(
    example_state: ClusterSnapshot, decision_lines: io.StringIO
) -> None:
    view = HeldView(example_state)
    app, metrics = _app(view, costly_wait=0.01)

    async def scenario() -> Client:
        held, waiting = Client(COSTLY), Client(WAITING)
        first = asyncio.create_task(app(_scope(), held.receive, held.send))
        await asyncio.get_running_loop().run_in_executor(None, view.entered.wait)
        try:
            await app(_scope(), waiting.receive, waiting.send)
        finally:
            view.release()
        await first
        return waiting

    waiting = asyncio.run(scenario())
    assert waiting.answer()[0] == 503
    refused = [
        line
        for line in map(json.loads, decision_lines.getvalue().splitlines())
        if line["event_type"] == "admission_refused"
    ]
    assert refused == [
        {
            **{key: refused[0][key] for key in ("time", "severity", "message", "logger")},
            "event_type": "admission_refused",
            "http_status": 503,
            "reason": "costly reviews before this one kept it waiting 0.01 s; "
            "refused unjudged, retry",
            "admission_uid": "waiting-uid",
            "resource_group": "jobset.x-k8s.io",
            "resource_kind": "JobSet",
            "resource_namespace": "team-a",
            "resource_name": "llama",
            "request_username": "system:serviceaccount:kueue-system:kueue-controller-manager",
            "source_address": "127.0.0.1:40000",
        }
    ]
    assert refused[0]["severity"] == "WARNING"
    assert _dropped(metrics) == {"event_loop": 0.0, "judging": 0.0, "yaml": 0.0}
