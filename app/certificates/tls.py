"""The server SSLContext (TLS >= 1.2, AEAD ciphers only), handed to uvicorn unchanged, and
reloading a pair rotated on disk into it without restarting the server.

uvicorn >= 0.47 accepts ``ssl_context_factory``; we return our own context from it so uvicorn
never builds one from file names, and later ``load_cert_chain`` calls on it affect new handshakes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import uvicorn

from app.certificates.pem import CertInfo, TLSConfigError, parse_pair, read_file

logger = logging.getLogger(__name__)

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


def _load_pem_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load already-validated bytes, so a file changing in between cannot slip in unchecked.

    A mismatched ``load_cert_chain`` would leave ``ctx`` with the new certificate and no key.
    """
    with _pem_path(cert_pem) as cert_path, _pem_path(key_pem) as key_path:
        ctx.load_cert_chain(cert_path, key_path)


def _new_server_context(*, client_ca: Path | None = None) -> ssl.SSLContext:
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
    ctx = _new_server_context(client_ca=client_ca)
    _load_pem_pair(ctx, cert_pem, key_pem)
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


def _digest(cert_pem: bytes, key_pem: bytes) -> bytes:
    # Length-prefixed so moving bytes between the two files changes the digest.
    return hashlib.sha256(len(cert_pem).to_bytes(8, "big") + cert_pem + key_pem).digest()


class CertReloader:
    """Reloads ``cert``/``key`` into one server SSLContext whenever their contents change.

    Polling compares file digests (Kubernetes secret volumes swap a symlink, so mtime watches on the
    file paths can miss updates). Call ``maybe_reload`` from the serving event loop's thread, since
    OpenSSL does not promise that changing a context races safely with handshakes using it.
    """

    def __init__(self, context: ssl.SSLContext, cert: Path, key: Path) -> None:
        """Take over ``context`` (from ``server_ssl_context``); raise TLSConfigError if bad now."""
        self._context = context
        self._cert = cert
        self._key = key
        cert_pem, key_pem = read_file(cert), read_file(key)
        self._info = self._parse(cert_pem, key_pem)
        # Load again what we digest, in case the files changed since the context was built.
        _load_pem_pair(context, cert_pem, key_pem)
        self._loaded = self._seen = _digest(cert_pem, key_pem)
        self._last_error: str | None = None
        self._lock = threading.Lock()

    @property
    def context(self) -> ssl.SSLContext:
        return self._context

    @property
    def info(self) -> CertInfo:
        return self._info

    @property
    def not_after(self) -> datetime:
        """Expiry of the certificate new handshakes present."""
        return self._info.not_after

    def _parse(self, cert_pem: bytes, key_pem: bytes) -> CertInfo:
        return parse_pair(
            cert_pem, key_pem, cert_path=self._cert, key_path=self._key, now=datetime.now(UTC)
        )

    def _keep_old(self, reason: str) -> None:
        # Log a problem once, not on every poll while it lasts.
        if reason != self._last_error:
            logger.warning(
                "keeping the previous TLS certificate",
                extra={"reason": reason, "fingerprint": self._info.fingerprint},
            )
        self._last_error = reason

    def maybe_reload(self) -> bool:
        """Reload when the files changed and form a valid pair; True when a new pair is served.

        Never raises: a missing, half-written or invalid pair keeps the current one and is logged.
        """
        with self._lock:
            try:
                cert_pem, key_pem = read_file(self._cert), read_file(self._key)
            except TLSConfigError as exc:
                self._keep_old(str(exc))
                return False
            self._last_error = None
            digest = _digest(cert_pem, key_pem)
            if digest == self._seen:
                return False
            self._seen = digest
            if digest == self._loaded:
                return False
            try:
                info = self._parse(cert_pem, key_pem)
                _load_pem_pair(self._context, cert_pem, key_pem)
            except (TLSConfigError, ssl.SSLError, OSError) as exc:
                self._keep_old(str(exc))
                return False
            self._info, self._loaded = info, digest
        logger.info(
            "reloaded TLS certificate",
            extra={"fingerprint": info.fingerprint, "not_after": info.not_after.isoformat()},
        )
        return True
