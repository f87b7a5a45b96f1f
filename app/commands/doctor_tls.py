"""Each webhook entry's ``caBundle`` against the certificate nicguard serves: fetched over TLS when
the entry calls a URL; for a Service, which this machine cannot reach, the API server's own call
(the doors' dry-run) is the proof, and only the bundle itself is read here.
"""

from __future__ import annotations

import base64
import binascii
import socket
import ssl
from datetime import datetime
from typing import Final
from urllib.parse import urlsplit

from app.certificates.pem import parse_bundle
from app.certificates.rotation import verifies
from app.domain.doctor import Mark
from app.domain.doctor_webhooks import Bundle
from app.domain.fields import JsonMap, as_list, as_map, str_at

CONNECT_SECONDS: Final = 5.0


def bundles(configuration: JsonMap, now: datetime) -> dict[str, Bundle]:
    """What each entry's ``caBundle`` verifies, by entry name (one TLS handshake per URL)."""
    served: dict[str, bytes | str] = {}
    found = {}
    for raw in as_list(configuration.get("webhooks")) or ():
        entry = as_map(raw) or {}
        bundle = _decoded(str_at(entry, "clientConfig", "caBundle") or "")
        url = str_at(entry, "clientConfig", "url")
        if not parse_bundle(bundle):
            found[str_at(entry, "name") or ""] = Bundle(Mark.FAIL, "caBundle holds no certificate")
        elif url:
            if url not in served:
                served[url] = _served_leaf(url)
            found[str_at(entry, "name") or ""] = _verified(bundle, url, served[url], now)
        else:
            count = len(parse_bundle(bundle))
            seen = "the API server's call in the doors check verifies it"
            found[str_at(entry, "name") or ""] = Bundle(Mark.OK, f"caBundle of {count} CA; {seen}")
    return found


def _decoded(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _verified(bundle: bytes, url: str, leaf: bytes | str, now: datetime) -> Bundle:
    if isinstance(leaf, str):
        return Bundle(Mark.WARN, f"cannot fetch the certificate served at {url}: {leaf}")
    host = urlsplit(url).hostname or ""
    if verifies(leaf, bundle, host, now):
        return Bundle(Mark.OK, f"caBundle verifies the certificate served at {url}")
    return Bundle(Mark.FAIL, f"caBundle does not verify the certificate served at {url}")


def _served_leaf(url: str) -> bytes | str:
    """The PEM of the certificate ``url`` presents, or why it could not be had."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    # Not verified here on purpose: the point is to see the certificate and judge it ourselves.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=CONNECT_SECONDS) as sock,
            context.wrap_socket(sock, server_hostname=host) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except OSError as error:
        return f"{type(error).__name__}: {error}"
    if not der:
        return "no certificate presented"
    return ssl.DER_cert_to_PEM_cert(der).encode("ascii")
