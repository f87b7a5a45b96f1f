"""POST /validate as a raw ASGI endpoint: what a test client cannot send (a stalled or split
body, a disconnect, draining) and the bodies orjson refuses but the json module decodes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.cluster import CacheStatus, ClusterSnapshot
from app.domain.policy import Policy
from app.metrics import Metrics
from app.web.admission import create_admission_app
from tests.web.conftest import EXAMPLES, sample_review

Message = dict[str, Any]
JSON = {"Content-Type": "application/json"}


def _app(view: ClusterSnapshot, *, draining: bool = False, body_timeout: float = 10.0) -> Any:
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    return create_admission_app(
        view=view,
        policy=Policy(),
        metrics=metrics,
        draining=lambda: draining,
        body_timeout=body_timeout,
    )


def _scope(method: str = "POST", path: str = "/validate") -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8443),
    }


class _Client:
    """The receive() side of one request: ``messages`` in turn, then nothing, ever. With
    ``wait`` each message arrives one event-loop turn after receive() is called (so receive
    suspends, as it does when the body is still on the wire). Counts receive() calls begun
    and ended (returned, or closed while waiting)."""

    def __init__(self, messages: Sequence[Message], *, wait: bool = False) -> None:
        self.pending, self.wait = list(messages), wait
        self.begun = self.ended = 0

    async def receive(self) -> Message:
        self.begun += 1
        try:
            loop = asyncio.get_running_loop()
            if self.pending:
                if self.wait:
                    arrived = loop.create_future()
                    loop.call_soon(arrived.set_result, None)
                    await arrived
                return self.pending.pop(0)
            await loop.create_future()  # never done
            raise AssertionError("unreachable")
        finally:
            self.ended += 1


def _call(
    app: Any, scope: Message, messages: Sequence[Message], *, wait: bool = False
) -> list[Message]:
    """Run one request; the messages the app sent."""
    return _run(app, scope, _Client(messages, wait=wait))


def _run(app: Any, scope: Message, client: _Client) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(scope, client.receive, send))
    return sent


def _answer(sent: list[Message]) -> tuple[int, dict[bytes, bytes], Any]:
    start, body = sent
    assert start["type"] == "http.response.start"
    assert body["type"] == "http.response.body"
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body["body"])
    return start["status"], headers, json.loads(body["body"])


def _review_bytes(name: str = "drifted-runtime") -> bytes:
    return (EXAMPLES / "reviews" / f"{name}.json").read_bytes()


@pytest.mark.parametrize("wait", [False, True], ids=["buffered", "on the wire"])
def test_a_body_split_over_many_messages_is_judged(
    example_state: ClusterSnapshot, wait: bool
) -> None:
    body = _review_bytes()
    pieces = [body[i : i + 100] for i in range(0, len(body), 100)]
    messages = [{"type": "http.request", "body": p, "more_body": True} for p in pieces]
    messages.append({"type": "http.request", "body": b"", "more_body": False})
    client = _Client(messages, wait=wait)
    status, headers, answer = _answer(_run(_app(example_state), _scope(), client))
    assert status == 200
    assert b"connection" not in headers
    assert answer["response"]["allowed"] is False
    assert client.begun == client.ended == len(messages)


@pytest.mark.parametrize("wait", [False, True], ids=["buffered", "on the wire"])
@pytest.mark.parametrize("received", [0, 1, 2], ids=["nothing", "one chunk", "two chunks"])
def test_a_body_not_received_in_time_gets_408(
    example_state: ClusterSnapshot, wait: bool, received: int
) -> None:
    chunk = {"type": "http.request", "body": b'{"kind": ', "more_body": True}
    client = _Client([chunk] * received, wait=wait)
    sent = _run(_app(example_state, body_timeout=0.05), _scope(), client)
    status, _, answer = _answer(sent)
    assert (status, answer) == (408, {"error": "body not received in time", "status": 408})
    assert client.begun == client.ended == received + 1  # the waiting receive() was closed


@pytest.mark.parametrize("wait", [False, True], ids=["buffered", "on the wire"])
def test_a_streamed_body_over_3_mib_gets_413(example_state: ClusterSnapshot, wait: bool) -> None:
    chunk = {"type": "http.request", "body": b" " * (1024 * 1024), "more_body": True}
    sent = _call(_app(example_state), _scope(), [chunk] * 4, wait=wait)
    assert _answer(sent)[:1] == (413,)


@pytest.mark.parametrize("wait", [False, True], ids=["at once", "after a wait"])
def test_a_client_gone_before_its_body_gets_no_answer(
    example_state: ClusterSnapshot, wait: bool
) -> None:
    messages = [{"type": "http.disconnect"}]
    assert _call(_app(example_state), _scope(), messages, wait=wait) == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/validate", 200), ("GET", "/validate", 405), ("POST", "/mutate", 404)],
)
def test_while_draining_every_answer_closes_its_connection(
    example_state: ClusterSnapshot, method: str, path: str, status: int
) -> None:
    request = {"type": "http.request", "body": _review_bytes(), "more_body": False}
    sent = _call(_app(example_state, draining=True), _scope(method, path), [request])
    assert sent[0]["status"] == status
    assert (b"connection", b"close") in sent[0]["headers"]


def test_other_methods_keep_fastapi_answers(client: TestClient) -> None:
    reply = client.put("/validate", content=b"{}", headers=JSON)
    assert (reply.status_code, reply.headers["allow"]) == (405, "POST")
    assert reply.json() == {"detail": "Method Not Allowed"}
    assert client.post("/mutate", json={}).json() == {"detail": "Not Found"}
    moved = client.post("/validate/", content=_review_bytes(), headers=JSON, follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (307, "http://testserver/validate")


def _with_number(value: str) -> bytes:
    text = _review_bytes("good-runtime").decode()
    assert '"numNodes": 2' in text
    return text.replace('"numNodes": 2', f'"numNodes": {value}').encode()


def _with(name: str, change: Callable[[str], str]) -> bytes:
    return change(_review_bytes(name).decode()).encode()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_with_number("9" * 30), id="integer beyond 64 bits"),
        pytest.param(_with_number("-" + "9" * 30), id="negative integer beyond 64 bits"),
        pytest.param(_with_number("NaN"), id="NaN"),
        pytest.param(_with_number("1e400"), id="float overflow"),
        pytest.param(b"\xef\xbb\xbf" + _review_bytes("good-runtime"), id="UTF-8 BOM"),
        pytest.param(_review_bytes("good-runtime").decode().encode("utf-16-le"), id="UTF-16"),
    ],
)
def test_bodies_orjson_refuses_are_judged_as_json_decodes_them(
    client: TestClient, body: bytes
) -> None:
    reply = client.post("/validate", content=body, headers=JSON)
    assert reply.status_code == 200, reply.text
    assert reply.json()["response"]["allowed"] is True


def test_an_integer_over_python_digit_limit_is_400(client: TestClient) -> None:
    reply = client.post("/validate", content=_with_number("9" * 5000), headers=JSON)
    assert reply.status_code == 400
    assert reply.json() == {"error": "body is not valid JSON", "status": 400}


def test_a_lone_surrogate_is_echoed_escaped_in_a_denial(client: TestClient) -> None:
    named = '"name": "torch-distributed-tcpxo"'
    body = _with("drifted-runtime", lambda text: text.replace(named, '"name": "t\\ud800x"', 1))
    reply = client.post("/validate", content=body, headers=JSON)
    assert reply.status_code == 200, reply.text
    status = reply.json()["response"]["status"]
    assert status["message"].startswith("ClusterTrainingRuntime/t\\ud800x: ")
    assert status["details"]["name"] == "t\\ud800x"


def test_non_ascii_names_are_answered_as_utf8(client: TestClient) -> None:
    review = sample_review("drifted-runtime")
    review["request"]["name"] = "tést☃"  # the object's own name keeps it recipe-bound
    reply = client.post("/validate", content=json.dumps(review).encode(), headers=JSON)
    assert reply.status_code == 200
    assert reply.json()["response"]["status"]["details"]["name"] == "tést☃"
