"""Self-managed certificates kept in a Secret: what to change next, and nothing else.

``plan_rotation`` is pure (the clock is a parameter): from the Secret's data and the caBundles the
webhook configuration holds now, it returns the Secret data to write (or None) and the caBundle the
configuration should hold. A CA is rotated in two phases so the apiserver trusts a CA before any
replica serves a certificate from it: (1) at 2/3 of its lifetime a next CA is added to the bundle
while the old serving certificate stays; (2) once every webhook's caBundle holds the next CA, it
becomes current and signs a new serving certificate. Old CAs stay in the bundle until they expire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from app.tls.authority import BACKDATE, CA_CN, _builder, _general_name, _key_usage, required_sans

CA_CERT, CA_KEY, NEXT_CERT, NEXT_KEY = "ca.crt", "ca.key", "next-ca.crt", "next-ca.key"
LEAF_CERT, LEAF_KEY, BUNDLE = "tls.crt", "tls.key", "ca-bundle.crt"
_SPKI: Final = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True, slots=True)
class Lifetimes:
    ca: timedelta
    leaf: timedelta


@dataclass(frozen=True, slots=True)
class Plan:
    """``data``: the Secret's new data, None when unchanged; ``bundle``: the desired caBundle."""

    data: dict[str, bytes] | None
    bundle: bytes
    patch_webhooks: bool  # some webhook's caBundle differs from ``bundle`` (as a set of CAs)
    actions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Pair:
    """A certificate and its key, with the PEM bytes they came from (kept byte for byte)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def new(cls, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> _Pair:
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cls(cert, key, cert.public_bytes(serialization.Encoding.PEM), key_pem)


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def _valid(cert: x509.Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now < cert.not_valid_after_utc


def _due(cert: x509.Certificate, now: datetime) -> bool:
    """Past 2/3 of the lifetime, counted from issuance (``not_before`` is backdated)."""
    issued = min(cert.not_valid_before_utc + BACKDATE, cert.not_valid_after_utc)
    return now >= issued + (cert.not_valid_after_utc - issued) * 2 / 3


def _pair(data: Mapping[str, bytes], cert_name: str, key_name: str) -> _Pair | None:
    cert_pem, key_pem = data.get(cert_name), data.get(key_name)
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return None
    if key.public_key().public_bytes(*_SPKI) != cert.public_key().public_bytes(*_SPKI):
        return None
    return _Pair(cert, key, cert_pem, key_pem)


def _authority(
    data: Mapping[str, bytes], cert_name: str, key_name: str, now: datetime
) -> _Pair | None:
    pair = _pair(data, cert_name, key_name)
    if pair is None or not _valid(pair.cert, now):
        return None
    try:
        is_ca = pair.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return None
    return pair if is_ca else None


def certificates(pem: bytes | None) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle; none when it is empty or unparsable."""
    try:
        return x509.load_pem_x509_certificates(pem) if pem else []
    except ValueError:
        return []


def _new_ca(lifetime: timedelta, now: datetime) -> _Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    # A CN per CA (like kube-apiserver's "name@unix-time") tells the CAs of a bundle apart.
    name = f"{CA_CN}@{int(now.timestamp())}"
    cert = (
        _builder(name, key, (now - BACKDATE, now + lifetime), None)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    return _Pair.new(cert, key)


def _new_leaf(ca: _Pair, sans: Sequence[str], lifetime: timedelta, now: datetime) -> _Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + lifetime, ca.cert.not_valid_after_utc)  # never outlive the CA
    cn = next((san for san in sans if isinstance(_general_name(san), x509.DNSName)), sans[0])
    cert = (
        _builder(cn, key, (now - BACKDATE, not_after), ca.cert)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([_general_name(san) for san in sans]), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return _Pair.new(cert, key)


def _leaf_problem(leaf: _Pair | None, ca: _Pair, sans: Sequence[str], now: datetime) -> str | None:
    if leaf is None:
        return "missing or not a matching ECDSA pair"
    try:
        leaf.cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not issued by the current CA"
    if not _valid(leaf.cert, now):
        return "expired or not yet valid"
    try:
        names = leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subjectAltName"
    present = {str(name.value).lower() for name in names}
    absent = [san for san in sans if san not in present]
    if absent:
        return f"not valid for {', '.join(absent)}"
    return "past 2/3 of its lifetime" if _due(leaf.cert, now) else None


def plan_rotation(
    current: Mapping[str, bytes] | None,
    webhook_bundles: Sequence[bytes],
    *,
    hosts: Sequence[str],
    lifetimes: Lifetimes,
    now: datetime,
) -> Plan:
    """The next step for the Secret's ``current`` data (None: no Secret) at time ``now``.

    ``webhook_bundles`` holds the caBundle of every webhook in the configuration (none when the
    configuration does not exist: then nobody needs to trust a next CA before it is used).
    """
    data = dict(current or {})
    actions: list[str] = []
    ca = _authority(data, CA_CERT, CA_KEY, now)
    upcoming = _authority(data, NEXT_CERT, NEXT_KEY, now)
    if upcoming is None and NEXT_CERT in data:
        actions.append("dropped the unusable next CA")
    trusted = certificates(data.get(BUNDLE))
    if upcoming is not None and (
        ca is None or all(upcoming.cert in certificates(b) for b in webhook_bundles)
    ):
        why = "every webhook trusts it" if ca else "the current CA is unusable"
        actions.append(f"promoted the next CA: {why}")
        ca, upcoming = upcoming, None
    if ca is None:
        ca = _new_ca(lifetimes.ca, now)
        actions.append("issued a new CA: " + ("no Secret" if current is None else "none usable"))
    elif upcoming is None and _due(ca.cert, now):
        upcoming = _new_ca(lifetimes.ca, now)
        actions.append("generated the next CA: the current CA is past 2/3 of its lifetime")
    sans = required_sans(hosts)
    leaf = _pair(data, LEAF_CERT, LEAF_KEY)
    problem = _leaf_problem(leaf, ca, sans, now)
    if problem is not None or leaf is None:
        leaf = _new_leaf(ca, sans, lifetimes.leaf, now)
        actions.append(f"issued a new serving certificate ({problem})")
    bundle = _bundle([*([upcoming.cert] if upcoming else []), ca.cert, *trusted], now)
    new = {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem, LEAF_CERT: leaf.cert_pem}
    new |= {LEAF_KEY: leaf.key_pem, BUNDLE: bundle}
    if upcoming is not None:
        new |= {NEXT_CERT: upcoming.cert_pem, NEXT_KEY: upcoming.key_pem}
    wanted = {fingerprint(cert) for cert in certificates(bundle)}
    patch = any({fingerprint(c) for c in certificates(b)} != wanted for b in webhook_bundles)
    pruned = sum(1 for cert in trusted if cert.not_valid_after_utc <= now)
    if pruned:
        actions.append(f"pruned {pruned} expired CA(s) from the bundle")
    if new != data and not actions:
        actions.append("rewrote the Secret's data in canonical form")
    return Plan(None if new == data else new, bundle, patch, tuple(actions))


def _bundle(candidates: Sequence[x509.Certificate], now: datetime) -> bytes:
    """Newest first, each CA once, expired ones pruned."""
    seen: dict[str, bytes] = {}
    for cert in candidates:
        if now < cert.not_valid_after_utc:
            seen.setdefault(fingerprint(cert), cert.public_bytes(serialization.Encoding.PEM))
    return b"".join(seen.values())
