"""Reading who sent a request from its ASGI scope (the live TLS path: tests/test_serve_peer.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from app.web.peer import client_subject, source_address, with_tls_extension


@pytest.mark.parametrize(
    ("client", "expected"),
    [
        (("10.0.0.2", 41234), "10.0.0.2:41234"),
        (["10.0.0.2", 41234], "10.0.0.2:41234"),  # some servers give a list
        (("fd00::1", 443), "[fd00::1]:443"),
        (None, ""),
    ],
)
def test_the_source_address_is_ip_colon_port(client: Any, expected: str) -> None:
    assert source_address({"type": "http", "client": client}) == expected
    if client is None:
        assert source_address({"type": "http"}) == ""


@pytest.mark.parametrize(
    ("extensions", "expected"),
    [
        ({"tls": {"client_cert_name": "CN=kube-apiserver"}}, "CN=kube-apiserver"),
        ({"tls": {"client_cert_name": None}}, None),
        ({"tls": {}}, None),
        ({"http.response.trailers": {}}, None),
        (None, None),
    ],
)
def test_the_client_subject_comes_from_the_tls_extension(
    extensions: dict[str, Any] | None, expected: str | None
) -> None:
    assert client_subject({"type": "http", "extensions": extensions}) == expected


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("never called")


class _PlainTransport(asyncio.Transport):
    """A TCP transport: no ``ssl_object``."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def test_a_connection_without_tls_keeps_the_app_unchanged() -> None:
    assert with_tls_extension(_app, _PlainTransport()) is _app
