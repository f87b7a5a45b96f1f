"""A ``--cert-dir`` whose self-signed pair is reused while good and regenerated otherwise."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature

from app.tls.authority import issue_self_signed, required_sans
from app.tls.pair import TLSConfigError, check_pair, load_certificate
from app.tls.storage import CertFiles

logger = logging.getLogger(__name__)


def _unusable_because(files: CertFiles, hosts: Sequence[str], now: datetime) -> str | None:
    missing = [path.name for path in (files.ca, files.cert, files.key) if not path.is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    try:
        info = check_pair(files.cert, files.key, now=now)
        leaf, ca = load_certificate(files.cert), load_certificate(files.ca)
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
        leaf.verify_directly_issued_by(ca)
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
