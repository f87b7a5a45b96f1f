"""Malformed requests get a short JSON 4xx, never a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import sample_review

JSON = {"Content-Type": "application/json"}


def review_with(**request: object) -> dict[str, object]:
    review = sample_review("good-runtime")
    review["request"].update(request)
    return review


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param(b"{not json", 400, id="not json"),
        pytest.param(b"[]", 400, id="json list"),
        pytest.param(b'{"kind": "AdmissionReview"}', 400, id="no apiVersion"),
        pytest.param(
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}',
            400,
            id="v1beta1",
        ),
        pytest.param(
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            400,
            id="no request",
        ),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, 400, id="deeply nested"),
    ],
)
def test_bodies_that_are_not_reviews_get_400(client: TestClient, body: bytes, status: int) -> None:
    reply = client.post("/validate", content=body, headers=JSON)
    assert reply.status_code == status
    assert reply.json()["status"] == status
    assert reply.json()["error"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"uid": ""}, id="empty uid"),
        pytest.param({"uid": None}, id="no uid"),
        pytest.param({"operation": "PATCH"}, id="unknown operation"),
        pytest.param({"object": None}, id="create without object"),
        pytest.param({"object": "a string"}, id="object not a map"),
        pytest.param({"oldObject": [1, 2]}, id="oldObject not a map"),
    ],
)
def test_reviews_missing_what_we_need_get_400(
    client: TestClient, change: dict[str, object]
) -> None:
    reply = client.post("/validate", json=review_with(**change))
    assert reply.status_code == 400
    assert reply.headers["content-type"] == "application/json"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
def test_wrong_content_type_gets_415(client: TestClient, content_type: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    reply = client.post("/validate", content=b"{}", headers=headers)
    assert reply.status_code == 415


def test_content_type_with_charset_is_accepted(client: TestClient) -> None:
    reply = client.post(
        "/validate",
        content=json.dumps(sample_review("good-runtime")).encode(),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert reply.status_code == 200


def test_declared_oversized_body_gets_413(client: TestClient) -> None:
    body = b"{" + b" " * (3 * 1024 * 1024) + b"}"
    reply = client.post("/validate", content=body, headers=JSON)
    assert reply.status_code == 413


def test_streamed_oversized_body_gets_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(4):
            yield b" " * (1024 * 1024)

    reply = client.post("/validate", content=chunks(), headers=JSON)
    assert reply.status_code == 413


def test_other_methods_and_paths_are_4xx(client: TestClient) -> None:
    assert client.get("/validate").status_code == 405
    assert client.post("/mutate", json={}).status_code == 404
