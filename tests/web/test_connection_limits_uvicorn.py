"""What ``app.web.connection_limits`` and ``app.serve`` take from uvicorn, pinned: each uvicorn
method they override or call still exists with the parameters they were written against, and
each attribute of the httptools protocol they read is still set. An upgrade of uvicorn that
moves one fails here, by name, rather than as a connection limit that silently stops holding."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, Final

import pytest
import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.web.connection_limits import LimitedHttpToolsProtocol, limited_config

Parameters = list[tuple[str, inspect._ParameterKind]]

POSITIONAL: Final = inspect.Parameter.POSITIONAL_OR_KEYWORD
SELF: Final = ("self", POSITIONAL)

# uvicorn's method -> the parameters app/web/connection_limits.py and app/serve.py rely on.
PINNED: Final[dict[tuple[type, str], Parameters]] = {
    (HttpToolsProtocol, "__init__"): [
        SELF,
        ("config", POSITIONAL),
        ("server_state", POSITIONAL),
        ("app_state", POSITIONAL),
        ("_loop", POSITIONAL),
    ],
    (HttpToolsProtocol, "connection_made"): [SELF, ("transport", POSITIONAL)],
    (HttpToolsProtocol, "connection_lost"): [SELF, ("exc", POSITIONAL)],
    (HttpToolsProtocol, "data_received"): [SELF, ("data", POSITIONAL)],
    (HttpToolsProtocol, "on_message_begin"): [SELF],
    (HttpToolsProtocol, "on_headers_complete"): [SELF],
    (HttpToolsProtocol, "on_body"): [SELF, ("body", POSITIONAL)],
    (HttpToolsProtocol, "on_message_complete"): [SELF],
    (HttpToolsProtocol, "on_response_complete"): [SELF],
    (HttpToolsProtocol, "send_400_response"): [SELF, ("msg", POSITIONAL)],
    (uvicorn.Server, "_log_started_message"): [SELF, ("listeners", POSITIONAL)],
    (uvicorn.Server, "capture_signals"): [SELF],
    (uvicorn.Config, "get_loop_factory"): [SELF],
}


def parameters(function: Callable[..., Any]) -> Parameters:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(
    ("owner", "name"), list(PINNED), ids=[f"{o.__name__}.{n}" for o, n in PINNED]
)
def test_a_uvicorn_method_we_override_or_call_keeps_its_parameters(owner: type, name: str) -> None:
    method = owner.__dict__.get(name)
    assert method is not None, f"uvicorn's {owner.__name__} no longer defines {name}"
    assert parameters(getattr(owner, name)) == PINNED[owner, name]


@pytest.mark.parametrize(
    "name",
    [
        "connection_made",
        "connection_lost",
        "data_received",
        "on_message_begin",
        "on_headers_complete",
        "on_body",
        "on_message_complete",
        "on_response_complete",
        "send_400_response",
    ],
)
def test_the_limiter_overrides_with_the_same_parameters(name: str) -> None:
    assert name in LimitedHttpToolsProtocol.__dict__
    assert parameters(getattr(LimitedHttpToolsProtocol, name)) == parameters(
        getattr(HttpToolsProtocol, name)
    )


def test_the_protocol_attributes_the_limiter_reads_are_set_per_connection() -> None:
    config = uvicorn.Config(lambda scope, receive, send: None, log_config=None)
    loop = asyncio.new_event_loop()
    try:
        protocol = HttpToolsProtocol(config, ServerState(), {}, _loop=loop)
        assert protocol.loop is loop
        # Read by the limiter: the transport, the request being answered and those queued behind
        # it; the url and headers (set per request) are how the 431 measures the headers and the
        # body budget finds the Content-Length; the app, swapped for a request over the budget.
        assert {"transport", "cycle", "pipeline", "headers", "app"} <= vars(protocol).keys()
    finally:
        loop.close()


def test_a_limited_listener_runs_httptools_on_uvloop() -> None:
    config = limited_config(
        lambda scope, receive, send: None,
        host="127.0.0.1",
        port=0,
        tls=None,
        on_closed=lambda reason: None,
        log_config=None,
    )
    config.load()
    assert issubclass(config.http_protocol_class, LimitedHttpToolsProtocol)
    factory = config.get_loop_factory()
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
