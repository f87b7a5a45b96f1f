"""The server SSLContext (TLS >= 1.2, AEAD ciphers only) and handing it to uvicorn unchanged.

uvicorn >= 0.47 accepts ``ssl_context_factory``; we return our own context from it so uvicorn
never builds one from file names, and later ``load_cert_chain`` calls on it affect new handshakes.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import uvicorn

from app.tls.pair import TLSConfigError, parse_pair, read_file

# Only ECDHE key exchange with AEAD ciphers for TLS 1.2; TLS 1.3 suites are all AEAD already.
TLS12_CIPHERS: Final = "ECDHE+AESGCM:ECDHE+CHACHA20"
_PROC_FDS: Final = Path("/proc/self/fd")


@contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    # OpenSSL only loads from paths; an in-memory file avoids writing keys anywhere else.
    if hasattr(os, "memfd_create") and _PROC_FDS.is_dir():
        fd = os.memfd_create("nicguard-tls", os.MFD_CLOEXEC)
        try:
            with open(fd, "wb", closefd=False) as out:
                out.write(data)
            yield str(_PROC_FDS / str(fd))
        finally:
            os.close(fd)
        return
    fd, tmp = tempfile.mkstemp(suffix=".pem")  # created 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield tmp
    finally:
        Path(tmp).unlink(missing_ok=True)


def load_pem_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load already-validated bytes, so a file changing in between cannot slip in unchecked.

    A mismatched ``load_cert_chain`` would leave ``ctx`` with the new certificate and no key.
    """
    with _pem_path(cert_pem) as cert_path, _pem_path(key_pem) as key_path:
        ctx.load_cert_chain(cert_path, key_path)


def new_server_context(*, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server context without a certificate yet."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    ctx.set_ciphers(TLS12_CIPHERS)
    if client_ca is not None:
        try:
            ctx.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise TLSConfigError(f"{client_ca}: cannot load client CA ({exc})") from exc
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def server_ssl_context(cert: Path, key: Path, *, client_ca: Path | None = None) -> ssl.SSLContext:
    """Context serving ``cert``/``key``; ``client_ca`` makes a client certificate mandatory."""
    cert_pem, key_pem = read_file(cert), read_file(key)
    parse_pair(cert_pem, key_pem, cert_path=cert, key_path=key, now=datetime.now(UTC))
    ctx = new_server_context(client_ca=client_ca)
    load_pem_pair(ctx, cert_pem, key_pem)
    return ctx


def make_uvicorn_config(
    app: Callable[..., Any], *, host: str, port: int, ssl_context: ssl.SSLContext, **kwargs: Any
) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving HTTPS with exactly ``ssl_context`` (kept by identity)."""
    ssl_args = sorted(name for name in kwargs if name.startswith("ssl_"))
    if ssl_args:
        raise TypeError(f"ssl_context replaces {', '.join(ssl_args)}")

    def factory(_config: uvicorn.Config, _default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return ssl_context

    return uvicorn.Config(app, host=host, port=port, ssl_context_factory=factory, **kwargs)
