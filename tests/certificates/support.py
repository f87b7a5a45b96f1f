"""What the certificate tests share: names, clocks, reading PEM back, and bad pairs to try."""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from app.certificates.certdir import CertFiles, issue_self_signed

SVC = "nicguard.nicguard-system.svc"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def tls_warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


def names(path: Path, problem: str) -> str:
    """A ``match=`` pattern for a one-line error about ``path`` that starts with ``problem``."""
    return "^" + re.escape(f"{path}: {problem}")


def expired_pair(tmp: Path) -> CertFiles:
    return issue_self_signed(tmp / "old", [], now=datetime.now(UTC) - timedelta(days=400))


def mismatched_pair(tmp: Path) -> CertFiles:
    files = issue_self_signed(tmp / "a", [])
    other = issue_self_signed(tmp / "b", [])
    return CertFiles(cert=files.cert, key=other.key, ca=files.ca)
