"""Self-managed certificates kept in a Secret: what to change next, and whether a leaf is trusted.

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

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from app.certificates.builder import BACKDATE, CA_CN, authority, leaf, required_sans
from app.certificates.pem import KeyPair, ec_pair, fingerprint, general_name, parse_bundle

CA_CERT, CA_KEY, NEXT_CERT, NEXT_KEY = "ca.crt", "ca.key", "next-ca.crt", "next-ca.key"
LEAF_CERT, LEAF_KEY, BUNDLE = "tls.crt", "tls.key", "ca-bundle.crt"


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


def _valid(cert: x509.Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now < cert.not_valid_after_utc


def _due(cert: x509.Certificate, now: datetime) -> bool:
    """Past 2/3 of the lifetime, counted from issuance (``not_before`` is backdated)."""
    issued = min(cert.not_valid_before_utc + BACKDATE, cert.not_valid_after_utc)
    return now >= issued + (cert.not_valid_after_utc - issued) * 2 / 3


def _authority(
    data: Mapping[str, bytes], cert_name: str, key_name: str, now: datetime
) -> KeyPair | None:
    pair = ec_pair(data.get(cert_name), data.get(key_name))
    if pair is None or not _valid(pair.cert, now):
        return None
    try:
        is_ca = pair.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return None
    return pair if is_ca else None


def _new_ca(lifetime: timedelta, now: datetime) -> KeyPair:
    # A CN per CA (like kube-apiserver's "name@unix-time") tells the CAs of a bundle apart.
    return authority(f"{CA_CN}@{int(now.timestamp())}", lifetime, now)


def _leaf_problem(
    served: KeyPair | None, ca: KeyPair, sans: Sequence[str], now: datetime
) -> str | None:
    if served is None:
        return "missing or not a matching ECDSA pair"
    try:
        served.cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not issued by the current CA"
    if not _valid(served.cert, now):
        return "expired or not yet valid"
    try:
        names = served.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subjectAltName"
    present = {str(name.value).lower() for name in names}
    absent = [san for san in sans if san not in present]
    if absent:
        return f"not valid for {', '.join(absent)}"
    return "past 2/3 of its lifetime" if _due(served.cert, now) else None


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
    trusted = parse_bundle(data.get(BUNDLE))
    if upcoming is not None and (
        ca is None or all(upcoming.cert in parse_bundle(b) for b in webhook_bundles)
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
    served = ec_pair(data.get(LEAF_CERT), data.get(LEAF_KEY))
    problem = _leaf_problem(served, ca, sans, now)
    if problem is not None or served is None:
        served = leaf(ca, sans, lifetime=lifetimes.leaf, now=now)
        actions.append(f"issued a new serving certificate ({problem})")
    bundle = _bundle([*([upcoming.cert] if upcoming else []), ca.cert, *trusted], now)
    new = {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem, LEAF_CERT: served.cert_pem}
    new |= {LEAF_KEY: served.key_pem, BUNDLE: bundle}
    if upcoming is not None:
        new |= {NEXT_CERT: upcoming.cert_pem, NEXT_KEY: upcoming.key_pem}
    wanted = {fingerprint(cert) for cert in parse_bundle(bundle)}
    patch = any({fingerprint(c) for c in parse_bundle(b)} != wanted for b in webhook_bundles)
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


def _subject(server_name: str) -> x509.DNSName | x509.IPAddress:
    # The host of a webhook URL may be an IP literal in brackets.
    name = general_name(server_name.strip("[]"))
    return name if isinstance(name, x509.IPAddress) else x509.DNSName(server_name)


def verifies(leaf_pem: bytes, bundle_pem: bytes, server_name: str, now: datetime) -> bool:
    """Whether a TLS client trusting ``bundle_pem`` accepts ``leaf_pem`` for ``server_name``."""
    cas = parse_bundle(bundle_pem)
    if not cas:
        return False
    try:
        cert = x509.load_pem_x509_certificate(leaf_pem)
        builder = PolicyBuilder().store(Store(cas)).time(now)
        builder.build_server_verifier(_subject(server_name)).verify(cert, [])
    except (ValueError, VerificationError):
        return False
    return True
