"""The one router of both listeners (app.web.router): its routes and nothing else, FastAPI's
answers for the rest (404, 405 with Allow), and no schema or docs pages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from app.web.router import router


async def echo(request: Request) -> Response:
    return PlainTextResponse(f"{request.method} {request.url.path}")


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    routes = [Route("/validate", echo, methods=["POST"]), Route("/healthz", echo)]
    with TestClient(router(routes)) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path", "status", "body"),
    [
        pytest.param("POST", "/validate", 200, "POST /validate", id="a route"),
        pytest.param("GET", "/healthz", 200, "GET /healthz", id="another route"),
        pytest.param("HEAD", "/healthz", 200, "", id="HEAD of a GET route"),
        pytest.param("GET", "/other", 404, '{"detail":"Not Found"}', id="no such route"),
        pytest.param("POST", "/validate/", 307, "", id="a trailing slash: redirected"),
        pytest.param("GET", "/docs", 404, '{"detail":"Not Found"}', id="no docs page"),
        pytest.param("GET", "/redoc", 404, '{"detail":"Not Found"}', id="no redoc page"),
        pytest.param("GET", "/openapi.json", 404, '{"detail":"Not Found"}', id="no schema"),
    ],
)
def test_only_its_routes_are_answered(
    client: TestClient, method: str, path: str, status: int, body: str
) -> None:
    response = client.request(method, path, follow_redirects=False)
    assert (response.status_code, response.text) == (status, body)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("GET", "/validate", "POST"), ("DELETE", "/healthz", "GET, HEAD")],
)
def test_a_method_a_route_does_not_take_is_405_with_allow(
    client: TestClient, method: str, path: str, allow: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == set(allow.split(", "))  # a set


def test_an_empty_router_answers_everything_404() -> None:
    with TestClient(router([])) as client:
        assert client.get("/").status_code == 404
        assert client.post("/validate").status_code == 404
