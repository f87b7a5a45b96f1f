"""Tests for app.certificates.builder: SANs, and client certificates from the same builder."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID

from app.certificates.builder import required_sans
from app.certificates.certdir import issue_self_signed
from app.certificates.pem import TLSConfigError, check_pair
from tests.certificates.support import (
    NOW,
    load_cert,
    names,
)
from tests.client_certs import issue_client_cert


def test_required_sans_normalises_and_always_adds_loopback() -> None:
    assert required_sans(["Nicguard.Svc", "[::1]", " 127.0.0.1 ", "", "0:0::1"]) == (
        "nicguard.svc",
        "::1",
        "127.0.0.1",
        "localhost",
    )


def test_client_cert_is_signed_by_the_ca_for_client_auth(tmp_path: Path) -> None:
    ca = issue_self_signed(tmp_path / "ca", [])
    client = issue_client_cert(ca, "kube-apiserver", tmp_path / "client", now=NOW)

    cert = load_cert(client.cert)
    cert.verify_directly_issued_by(load_cert(ca.ca))
    assert cert.subject.rfc4514_string() == "CN=kube-apiserver"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert client.ca == ca.ca
    assert stat.S_IMODE(client.key.stat().st_mode) == 0o600
    assert check_pair(client.cert, client.key, now=NOW).sans == ()


def test_client_cert_needs_the_ecdsa_ca_key(tmp_path: Path) -> None:
    ca = issue_self_signed(tmp_path / "ca", [])
    ca.ca_key.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(TLSConfigError, match=names(ca.ca_key, "not an ECDSA key")):
        issue_client_cert(ca, "kube-apiserver", tmp_path / "client")
