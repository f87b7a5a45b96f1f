"""A throw-away ECDSA P-256 CA and the certificates it signs, written atomically to a directory.

The CA key is kept as ``ca.key`` (0600) next to the pair so client certificates can be issued later.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.tls.pair import TLSConfigError, load_certificate, parse_private_key, read_file
from app.tls.storage import CertFiles, write_cert, write_key

CA_CN: Final = "nicguard-ca"
ALWAYS_HOSTS: Final = ("localhost", "127.0.0.1")
# Tolerates clock skew between us and the apiserver, as kube-webhook-certgen does.
BACKDATE: Final = timedelta(minutes=5)


def required_sans(hosts: Iterable[str]) -> tuple[str, ...]:
    """Normalised SANs for ``hosts`` plus localhost and 127.0.0.1, de-duplicated, in order."""
    sans: dict[str, None] = {}
    for raw in (*hosts, *ALWAYS_HOSTS):
        host = raw.strip().removeprefix("[").removesuffix("]")
        if not host:
            continue
        try:
            sans[str(ipaddress.ip_address(host))] = None
        except ValueError:
            if not host.isascii() or any(ch.isspace() for ch in host):
                raise TLSConfigError(
                    f"invalid host {raw!r}: not an IP or A-label DNS name"
                ) from None
            sans[host.lower()] = None
    return tuple(sans)


def _general_name(san: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(san))
    except ValueError:
        return x509.DNSName(san)


def _builder(
    cn: str,
    key: ec.EllipticCurvePrivateKey,
    validity: tuple[datetime, datetime],
    issuer: x509.Certificate | None,
) -> x509.CertificateBuilder:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(validity[0])
        .not_valid_after(validity[1])
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )
    if issuer is None:
        return builder.issuer_name(subject)
    # Key identifiers let strict verifiers (VERIFY_X509_STRICT, Go) build the chain.
    ski = issuer.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
    return builder.issuer_name(issuer.subject).add_extension(aki, critical=False)


def _key_usage(*, digital_signature: bool = False, cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    cn: str,
    sans: Sequence[str],
    usage: x509.ObjectIdentifier,
    *,
    days: int,
    now: datetime,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    # A leaf outliving its CA would fail verification early anyway; clamp it.
    not_after = min(now + timedelta(days=days), ca.not_valid_after_utc)
    builder = (
        _builder(cn, key, (now - BACKDATE, not_after), ca)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        names = [_general_name(san) for san in sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


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
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        _builder(CA_CN, ca_key, (when - BACKDATE, when + timedelta(days=ca_days)), None)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cn = next((san for san in sans if isinstance(_general_name(san), x509.DNSName)), sans[0])
    leaf, key = _leaf(
        ca, ca_key, cn, sans, ExtendedKeyUsageOID.SERVER_AUTH, days=leaf_days, now=when
    )
    if not cert_dir.is_dir():
        try:
            cert_dir.mkdir(mode=0o700, parents=True)
            cert_dir.chmod(0o700)  # mkdir's mode is filtered by the umask.
        except OSError as exc:
            raise TLSConfigError(f"{cert_dir}: cannot create ({exc.strerror})") from exc
    files = CertFiles.in_dir(cert_dir)
    write_key(files.ca_key, ca_key)
    write_cert(files.ca, ca)
    # Key before certificate: a reloader polling in between sees a mismatch and keeps the old pair.
    write_key(files.key, key)
    write_cert(files.cert, leaf)
    return files


def issue_client_cert(
    ca: CertFiles,
    cn: str,
    out_dir: Path,
    *,
    name: str = "client",
    days: int = 30,
    now: datetime | None = None,
) -> CertFiles:
    """Sign a clientAuth certificate for ``cn`` with ``ca``'s CA; writes ``<name>.crt/.key``."""
    _check_days(days=days)
    ca_cert = load_certificate(ca.ca)
    ca_key = parse_private_key(read_file(ca.ca_key), ca.ca_key)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TLSConfigError(f"{ca.ca_key}: not an ECDSA key")
    when = now or datetime.now(UTC)
    cert, key = _leaf(ca_cert, ca_key, cn, (), ExtendedKeyUsageOID.CLIENT_AUTH, days=days, now=when)
    out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = CertFiles(cert=out_dir / f"{name}.crt", key=out_dir / f"{name}.key", ca=ca.ca)
    write_key(files.key, key)
    write_cert(files.cert, cert)
    return files
