"""Every certificate nicguard makes: an ECDSA P-256 CA, and the leaves it signs.

The cert dir (``certdir``), the Secret's rotation (``rotation``) and the tests' client certificates
all come from ``authority`` and ``leaf``, so they carry the same extensions.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.certificates.pem import KeyPair, TLSConfigError, general_name

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


def authority(cn: str, lifetime: timedelta, now: datetime) -> KeyPair:
    """A self-signed CA named ``cn`` that may sign leaves only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(cn, key, (now - BACKDATE, now + lifetime), None)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    return KeyPair.new(cert, key)


def leaf(
    ca: KeyPair,
    sans: Sequence[str],
    *,
    lifetime: timedelta,
    now: datetime,
    usage: x509.ObjectIdentifier = ExtendedKeyUsageOID.SERVER_AUTH,
    cn: str | None = None,
) -> KeyPair:
    """A certificate signed by ``ca`` for ``sans`` (already normalised, see ``required_sans``).

    ``cn`` defaults to the first DNS name among ``sans``, else the first of them.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    # A leaf outliving its CA would fail verification early anyway; clamp it.
    not_after = min(now + lifetime, ca.cert.not_valid_after_utc)
    if cn is None:
        cn = next((san for san in sans if isinstance(general_name(san), x509.DNSName)), sans[0])
    builder = (
        _builder(cn, key, (now - BACKDATE, not_after), ca.cert)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        names = [general_name(san) for san in sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return KeyPair.new(builder.sign(ca.key, hashes.SHA256()), key)
