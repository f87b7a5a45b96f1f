"""The cert dir side of the self-managed certificates: verify a served pair, install a Secret's.

``SecretCertificates`` is what ``app.kube.certificates`` drives (it cannot import ``app.tls``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from app.tls.pair import parse_certificate, parse_pair
from app.tls.rotation import (
    CA_CERT,
    LEAF_CERT,
    LEAF_KEY,
    Lifetimes,
    Plan,
    certificates,
    plan_rotation,
)
from app.tls.storage import CertFiles, write_atomic


def _subject(server_name: str) -> x509.DNSName | x509.IPAddress:
    try:
        return x509.IPAddress(ipaddress.ip_address(server_name.strip("[]")))
    except ValueError:
        return x509.DNSName(server_name)


def verifies(leaf_pem: bytes, bundle_pem: bytes, server_name: str, now: datetime) -> bool:
    """Whether a TLS client trusting ``bundle_pem`` accepts ``leaf_pem`` for ``server_name``."""
    cas = certificates(bundle_pem)
    if not cas:
        return False
    try:
        leaf = x509.load_pem_x509_certificate(leaf_pem)
        builder = PolicyBuilder().store(Store(cas)).time(now)
        builder.build_server_verifier(_subject(server_name)).verify(leaf, [])
    except (ValueError, VerificationError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class Installed:
    """The pair of a Secret as written to the cert dir; ``changed`` when a file was rewritten."""

    fingerprint: str
    leaf: bytes
    ca_not_after: datetime
    changed: bool


class SecretCertificates:
    """Planning, verification and installation for the controller in ``app.kube.certificates``."""

    def __init__(self, cert_dir: Path, hosts: Sequence[str], lifetimes: Lifetimes) -> None:
        self._files = CertFiles.in_dir(cert_dir)
        self._hosts = tuple(hosts)
        self._lifetimes = lifetimes

    def plan(
        self, current: Mapping[str, bytes] | None, webhook_bundles: Sequence[bytes], now: datetime
    ) -> Plan:
        return plan_rotation(
            current, webhook_bundles, hosts=self._hosts, lifetimes=self._lifetimes, now=now
        )

    def verifies(self, leaf: bytes, bundle: bytes, server_name: str, now: datetime) -> bool:
        return verifies(leaf, bundle, server_name, now)

    def install(self, data: Mapping[str, bytes], now: datetime) -> Installed:
        """Write ca.crt, tls.key, tls.crt (in that order) where they differ; TLSConfigError if bad.

        Key before certificate: a reloader polling in between sees a mismatch, keeps the old pair.
        """
        cert, key, ca = (data.get(name, b"") for name in (LEAF_CERT, LEAF_KEY, CA_CERT))
        files = self._files
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
