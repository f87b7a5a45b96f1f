"""PEM certificates and keys: reading, checking and writing them, fingerprints, key matching.

Every failure on a file is a ``TLSConfigError`` whose text is one line naming the file.
"""

from __future__ import annotations

import ipaddress
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

_SPKI: Final = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


class TLSConfigError(Exception):
    """A certificate, key or CA file that cannot be used; ``str()`` is one line naming the file."""


@dataclass(frozen=True, slots=True)
class CertInfo:
    """A certificate: expiry, SANs (DNS lower-cased, IPs normalised), SHA-256 of the DER."""

    not_after: datetime
    sans: tuple[str, ...]
    fingerprint: str
    not_before: datetime


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its ECDSA key, with the PEM bytes they came from (kept byte for byte)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def new(cls, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> KeyPair:
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cls(cert, key, cert.public_bytes(serialization.Encoding.PEM), key_pem)


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the DER, in hex: how logs, /readyz and the controller name a certificate."""
    return cert.fingerprint(hashes.SHA256()).hex()


def same_key(key: PrivateKeyTypes, cert: x509.Certificate) -> bool:
    """Whether ``key`` is the private half of ``cert``'s public key."""
    return key.public_key().public_bytes(*_SPKI) == cert.public_key().public_bytes(*_SPKI)


def general_name(host: str) -> x509.DNSName | x509.IPAddress:
    """``host`` as a subjectAltName: an IP address, else a DNS name."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


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


def parse_bundle(pem: bytes | None) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle; none when it is empty or unparsable."""
    try:
        return x509.load_pem_x509_certificates(pem) if pem else []
    except ValueError:
        return []


def ec_pair(cert_pem: bytes | None, key_pem: bytes | None) -> KeyPair | None:
    """The pair, or None when either is missing or unparsable, not ECDSA, or they mismatch."""
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not same_key(key, cert):
        return None
    return KeyPair(cert, key, cert_pem, key_pem)


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
        fingerprint=fingerprint(cert),
        not_before=cert.not_valid_before_utc,
    )


def parse_pair(
    cert_pem: bytes, key_pem: bytes, *, cert_path: Path, key_path: Path, now: datetime
) -> CertInfo:
    """Check already-read bytes, so what is checked is exactly what gets loaded."""
    cert = parse_certificate(cert_pem, cert_path)
    key = parse_private_key(key_pem, key_path)
    if not same_key(key, cert):
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


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Readers see the old file or the new one, never a partial write."""
    try:
        # mkstemp creates the file 0600, so key bytes are never readable by others, even briefly.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise TLSConfigError(f"{path}: cannot write ({exc.strerror})") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise TLSConfigError(f"{path}: cannot write ({exc.strerror})") from exc
        raise


def write_pair(pair: KeyPair, cert_path: Path, key_path: Path) -> None:
    """Key (0600) before certificate (0644): a reloader polling in between sees a mismatch and
    keeps the old pair."""
    write_atomic(key_path, pair.key_pem, 0o600)
    write_atomic(cert_path, pair.cert_pem, 0o644)
