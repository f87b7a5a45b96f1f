"""Who sent a request: the TCP peer (ASGI ``scope["client"]``) and the subject of the client
certificate it presented (the ASGI TLS extension, ``scope["extensions"]["tls"]``).

uvicorn fills in ``client`` but not the TLS extension: ``with_tls_extension`` adds it for the
requests of one connection, from the connection's TLS transport, whatever HTTP protocol serves it.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, Final

from cryptography import x509
from starlette.types import ASGIApp, Receive, Scope, Send

# https://asgi.readthedocs.io/en/latest/specs/tls.html
TLS_EXTENSION: Final = "tls"


def source_address(scope: Scope) -> str:
    """``ip:port`` of the TCP peer (``[ip]:port`` for IPv6); "" when the server did not say."""
    client = scope.get("client")
    if not client:
        return ""
    host, port = client[0], client[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def client_subject(scope: Scope) -> str | None:
    """The RFC 4514 subject of the client certificate the peer presented, or None."""
    extensions = scope.get("extensions")
    tls = extensions.get(TLS_EXTENSION) if extensions else None
    name = tls.get("client_cert_name") if tls else None
    return name if isinstance(name, str) else None


def with_tls_extension(app: ASGIApp, transport: asyncio.BaseTransport) -> ASGIApp:
    """``app``, with the TLS extension added to the scope of every request on ``transport``
    when its peer presented a certificate (only asked for with ``--client-ca``, which makes the
    handshake verify it); ``app`` itself otherwise, so a connection without one costs nothing."""
    tls_object = transport.get_extra_info("ssl_object")
    if not isinstance(tls_object, ssl.SSLObject | ssl.SSLSocket):
        return app
    der = tls_object.getpeercert(binary_form=True)
    if not der:
        return app
    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    # The spec's mandatory keys that nicguard does not read are None ("unable to provide").
    tls = {"server_cert": None, "client_cert_name": subject, "client_cert_error": None}
    return _WithTLS(app, {**tls, "tls_version": None, "cipher_suite": None})


class _WithTLS:
    """One connection's requests, each told the connection's TLS facts."""

    def __init__(self, app: ASGIApp, tls: dict[str, Any]) -> None:
        self._app, self._tls = app, tls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            extensions = scope.get("extensions") or {}
            scope["extensions"] = {**extensions, TLS_EXTENSION: self._tls}
        await self._app(scope, receive, send)
