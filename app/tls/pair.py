"""Reading and checking a PEM certificate/key pair; every failure is one line naming the file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


class TLSConfigError(Exception):
    """A certificate, key or CA file that cannot be used; ``str()`` is one line naming the file."""


@dataclass(frozen=True, slots=True)
class CertInfo:
    """A certificate: expiry, SANs (DNS lower-cased, IPs normalised), SHA-256 of the DER."""

    not_after: datetime
    sans: tuple[str, ...]
    fingerprint: str
    not_before: datetime


def read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TLSConfigError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from exc


def parse_certificate(pem: bytes, path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise TLSConfigError(f"{path}: not a PEM certificate") from exc


def load_certificate(path: Path) -> x509.Certificate:
    return parse_certificate(read_file(path), path)


def parse_private_key(pem: bytes, path: Path) -> PrivateKeyTypes:
    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # TypeError is how cryptography reports an encrypted key given no password.
        raise TLSConfigError(f"{path}: not an unencrypted PEM private key") from exc


def cert_sans(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    dns = [name.lower() for name in san.get_values_for_type(x509.DNSName)]
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return (*dns, *ips)


def cert_info(cert: x509.Certificate) -> CertInfo:
    return CertInfo(
        not_after=cert.not_valid_after_utc,
        sans=cert_sans(cert),
        fingerprint=hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest(),
        not_before=cert.not_valid_before_utc,
    )


def parse_pair(
    cert_pem: bytes, key_pem: bytes, *, cert_path: Path, key_path: Path, now: datetime
) -> CertInfo:
    """Check already-read bytes, so what is checked is exactly what gets loaded."""
    cert = parse_certificate(cert_pem, cert_path)
    key = parse_private_key(key_pem, key_path)
    if key.public_key().public_bytes(*_SPKI) != cert.public_key().public_bytes(*_SPKI):
        raise TLSConfigError(f"{key_path}: private key does not match certificate {cert_path}")
    info = cert_info(cert)
    if info.not_after <= now:
        raise TLSConfigError(f"{cert_path}: certificate expired at {info.not_after.isoformat()}")
    return info


def check_pair(cert_path: Path, key_path: Path, *, now: datetime | None = None) -> CertInfo:
    """Raise TLSConfigError when either file is unreadable or not PEM, they mismatch, or expired."""
    return parse_pair(
        read_file(cert_path),
        read_file(key_path),
        cert_path=cert_path,
        key_path=key_path,
        now=now or datetime.now(UTC),
    )
