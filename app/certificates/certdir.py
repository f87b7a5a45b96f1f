"""The ``--cert-dir``: a self-signed pair reused while good and regenerated otherwise, or the pair
of the certificate Secret installed there.

The CA key is kept as ``ca.key`` (0600) next to the pair, so the CA can sign more certificates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.exceptions import InvalidSignature

from app.certificates.builder import CA_CN, authority, leaf, required_sans
from app.certificates.pem import (
    TLSConfigError,
    check_pair,
    load_certificate,
    parse_certificate,
    parse_pair,
    write_atomic,
    write_pair,
)
from app.certificates.rotation import CA_CERT, LEAF_CERT, LEAF_KEY

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CertFiles:
    """Paths of a served (or client) certificate, its key, and the CA that signed it."""

    cert: Path
    key: Path
    ca: Path

    @classmethod
    def in_dir(cls, cert_dir: Path) -> CertFiles:
        return cls(cert=cert_dir / "tls.crt", key=cert_dir / "tls.key", ca=cert_dir / "ca.crt")

    @property
    def ca_key(self) -> Path:
        """The CA's private key, kept next to ``ca`` by ``issue_self_signed``."""
        return self.ca.with_name("ca.key")


@dataclass(frozen=True, slots=True)
class Installed:
    """The pair of a Secret as written to the cert dir; ``changed`` when a file was rewritten."""

    fingerprint: str
    leaf: bytes
    ca_not_after: datetime
    changed: bool


def _check_days(**days: int) -> None:
    for name, value in days.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")


def issue_self_signed(
    cert_dir: Path,
    hosts: Sequence[str],
    *,
    ca_days: int = 365,
    leaf_days: int = 90,
    now: datetime | None = None,
) -> CertFiles:
    """Write a new CA and a serving certificate for ``hosts`` (+ localhost, 127.0.0.1)."""
    _check_days(ca_days=ca_days, leaf_days=leaf_days)
    when = now or datetime.now(UTC)
    sans = required_sans(hosts)
    ca = authority(CA_CN, timedelta(days=ca_days), when)
    served = leaf(ca, sans, lifetime=timedelta(days=leaf_days), now=when)
    if not cert_dir.is_dir():
        try:
            cert_dir.mkdir(mode=0o700, parents=True)
            cert_dir.chmod(0o700)  # mkdir's mode is filtered by the umask.
        except OSError as exc:
            raise TLSConfigError(f"{cert_dir}: cannot create ({exc.strerror})") from exc
    files = CertFiles.in_dir(cert_dir)
    write_pair(ca, files.ca, files.ca_key)
    write_pair(served, files.cert, files.key)
    return files


def _unusable_because(files: CertFiles, hosts: Sequence[str], now: datetime) -> str | None:
    missing = [path.name for path in (files.ca, files.cert, files.key) if not path.is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    try:
        info = check_pair(files.cert, files.key, now=now)
        served, ca = load_certificate(files.cert), load_certificate(files.ca)
    except TLSConfigError as exc:
        return str(exc)
    # Renew at 2/3 of the lifetime, as cert-manager does, or earlier when the CA expires first.
    expires = min(info.not_after, ca.not_valid_after_utc)
    if expires - now < (info.not_after - info.not_before) / 3:
        return f"{files.cert}: renewal due, chain expires {expires.isoformat()}"
    absent = [san for san in required_sans(hosts) if san not in info.sans]
    if absent:
        return f"{files.cert}: not valid for {', '.join(absent)}"
    try:
        served.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return f"{files.cert}: not issued by {files.ca}"
    return None


def ensure_cert_dir(
    cert_dir: Path, hosts: Sequence[str], *, now: datetime | None = None
) -> CertFiles:
    """Reuse the pair in ``cert_dir`` when valid for ``hosts`` and not due; else issue new ones."""
    when = now or datetime.now(UTC)
    files = CertFiles.in_dir(cert_dir)
    reason = _unusable_because(files, hosts, when)
    if reason is None:
        return files
    logger.warning(
        "generating a self-signed TLS certificate",
        extra={"cert_dir": str(cert_dir), "reason": reason},
    )
    return issue_self_signed(cert_dir, hosts, now=when)


def install(files: CertFiles, data: Mapping[str, bytes], now: datetime) -> Installed:
    """Write a Secret's ca.crt, tls.key, tls.crt (in that order) to ``files`` where they differ;
    TLSConfigError (nothing written) when they are not a valid pair.

    Key before certificate: a reloader polling in between sees a mismatch, keeps the old pair.
    """
    cert, key, ca = (data.get(name, b"") for name in (LEAF_CERT, LEAF_KEY, CA_CERT))
    info = parse_pair(cert, key, cert_path=files.cert, key_path=files.key, now=now)
    ca_cert = parse_certificate(ca, files.ca)
    changed = False
    for path, pem, mode in (
        (files.ca, ca, 0o644),
        (files.key, key, 0o600),
        (files.cert, cert, 0o644),
    ):
        if not path.is_file() or path.read_bytes() != pem:
            write_atomic(path, pem, mode)
            changed = True
    return Installed(info.fingerprint, cert, ca_cert.not_valid_after_utc, changed)
