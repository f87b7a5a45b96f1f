"""Serving a certificate pair that is rotated on disk, without restarting the server."""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
from datetime import UTC, datetime
from pathlib import Path

from app.tls.context import load_pem_pair
from app.tls.pair import CertInfo, TLSConfigError, parse_pair, read_file

logger = logging.getLogger(__name__)


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
        load_pem_pair(context, cert_pem, key_pem)
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
                load_pem_pair(self._context, cert_pem, key_pem)
            except (TLSConfigError, ssl.SSLError, OSError) as exc:
                self._keep_old(str(exc))
                return False
            self._info, self._loaded = info, digest
        logger.info(
            "reloaded TLS certificate",
            extra={"fingerprint": info.fingerprint, "not_after": info.not_after.isoformat()},
        )
        return True
