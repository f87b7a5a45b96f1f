"""Tests for app.certificates.certdir: issuing a self-signed dir, reusing or regenerating it,
and installing the pair of the certificate Secret."""

from __future__ import annotations

import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.certificates.builder import required_sans
from app.certificates.certdir import CertFiles, ensure_cert_dir, install, issue_self_signed
from app.certificates.pem import TLSConfigError, check_pair
from app.certificates.rotation import CA_CERT, LEAF_CERT, LEAF_KEY, Lifetimes, Plan, plan_rotation
from app.certificates.tls import CertReloader, server_ssl_context
from tests.certificates.support import (
    NOW,
    SVC,
    load_cert,
    names,
    tls_warnings,
)

# --- issuing -------------------------------------------------------------------------------


def test_issue_writes_a_p256_ca_and_serving_cert(tmp_path: Path) -> None:
    files = issue_self_signed(tmp_path / "new" / "certs", [SVC, "::1"], now=NOW)

    assert sorted(p.name for p in files.cert.parent.iterdir()) == [
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
    ]  # and no temporary files left behind
    ca, leaf = load_cert(files.ca), load_cert(files.cert)
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "nicguard-ca"
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert (constraints.value.ca, constraints.value.path_length) == (True, 0)
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert (usage.key_cert_sign, usage.crl_sign, usage.digital_signature) == (True, True, False)
    for cert in (ca, leaf):
        public = cert.public_key()
        assert isinstance(public, ec.EllipticCurvePublicKey)
        assert public.curve.name == "secp256r1"
        assert cert.not_valid_before_utc == NOW - timedelta(minutes=5)
    assert ca.not_valid_after_utc == NOW + timedelta(days=365)
    assert leaf.not_valid_after_utc == NOW + timedelta(days=90)
    leaf.verify_directly_issued_by(ca)
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [SVC, "localhost"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["::1", "127.0.0.1"]


def test_issue_writes_one_leaf_and_a_private_pkcs8_key(tmp_path: Path) -> None:
    files = issue_self_signed(tmp_path / "certs", [])

    assert files.cert.read_text().count("BEGIN CERTIFICATE") == 1
    assert files.key.read_text().startswith("-----BEGIN PRIVATE KEY-----\n")
    for key in (files.key, files.ca_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.cert.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(files.ca.stat().st_mode) == 0o644


def test_issue_keeps_the_mode_of_an_existing_dir(tmp_path: Path) -> None:
    tmp_path.chmod(0o750)
    issue_self_signed(tmp_path, [])
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o750


def test_leaf_never_outlives_its_ca(tmp_path: Path) -> None:
    files = issue_self_signed(tmp_path, [], ca_days=10, leaf_days=90, now=NOW)
    assert load_cert(files.cert).not_valid_after_utc == NOW + timedelta(days=10)


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").mkdir()  # os.replace cannot put a file over a directory

    with pytest.raises(TLSConfigError, match=names(tmp_path / "tls.crt", "cannot write")):
        issue_self_signed(tmp_path, [])

    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert not any((tmp_path / "tls.crt").iterdir())


@pytest.mark.parametrize("host", ["bücher.example", "two words"])
def test_issue_rejects_bad_hosts(tmp_path: Path, host: str) -> None:
    with pytest.raises(TLSConfigError, match="invalid host"):
        issue_self_signed(tmp_path, [host])


def test_issue_names_a_dir_it_cannot_create(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(TLSConfigError, match=names(tmp_path / "file" / "certs", "cannot create")):
        issue_self_signed(tmp_path / "file" / "certs", [])


def test_issue_rejects_non_positive_lifetimes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="leaf_days"):
        issue_self_signed(tmp_path, [], leaf_days=0)


# --- ensure_cert_dir -----------------------------------------------------------------------


def test_ensure_creates_a_missing_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    files = ensure_cert_dir(tmp_path / "certs", [SVC])

    assert files == CertFiles.in_dir(tmp_path / "certs")
    assert SVC in check_pair(files.cert, files.key).sans
    [record] = tls_warnings(caplog, "app.certificates.certdir")
    assert record.__dict__["reason"] == "missing ca.crt, tls.crt, tls.key"
    assert record.__dict__["cert_dir"] == str(tmp_path / "certs")


def test_ensure_reuses_a_valid_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = issue_self_signed(tmp_path, [SVC], now=NOW)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    again = ensure_cert_dir(tmp_path, [SVC.upper(), "127.0.0.1"], now=NOW + timedelta(days=59))

    assert again == first
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert not tls_warnings(caplog, "app.certificates.certdir")


def _swap_ca(tmp: Path) -> None:
    (tmp / "ca.crt").write_bytes(issue_self_signed(tmp / "other", []).ca.read_bytes())


def _swap_key(tmp: Path) -> None:
    (tmp / "tls.key").write_bytes(issue_self_signed(tmp / "other", []).key.read_bytes())


@pytest.mark.parametrize(
    ("hosts", "days_later", "damage", "reason"),
    [
        ([SVC, "extra.example", "10.0.0.7"], 0, None, "not valid for extra.example, 10.0.0.7"),
        ([SVC], 61, None, "renewal due"),
        ([SVC], 100, None, "certificate expired at"),
        ([SVC], 0, _swap_key, "private key does not match"),
        ([SVC], 0, _swap_ca, "not issued by"),
        ([SVC], 0, lambda tmp: (tmp / "tls.crt").write_text("junk"), "not a PEM certificate"),
        ([SVC], 0, lambda tmp: (tmp / "ca.crt").unlink(), "missing ca.crt"),
    ],
)
def test_ensure_regenerates_and_says_why(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    hosts: list[str],
    days_later: int,
    damage: Callable[[Path], object] | None,
    reason: str,
) -> None:
    old = issue_self_signed(tmp_path, [SVC], now=NOW)
    old_ca = old.ca.read_bytes()
    if damage is not None:
        damage(tmp_path)
    later = NOW + timedelta(days=days_later)

    files = ensure_cert_dir(tmp_path, hosts, now=later)

    info = check_pair(files.cert, files.key, now=later)
    assert info.not_before == later - timedelta(minutes=5)
    assert set(required_sans(hosts)) <= set(info.sans)
    assert files.ca.read_bytes() != old_ca
    load_cert(files.cert).verify_directly_issued_by(load_cert(files.ca))
    [record] = tls_warnings(caplog, "app.certificates.certdir")
    assert reason in record.__dict__["reason"]


# --- installing the certificate Secret's pair ------------------------------------------------

HOSTS = (SVC, "nicguard.nicguard-system")
LIFETIMES = Lifetimes(ca=timedelta(seconds=240), leaf=timedelta(seconds=90))


def written(result: Plan) -> dict[str, bytes]:
    assert result.data is not None, result.actions
    return dict(result.data)


def secret_data(now: datetime) -> dict[str, bytes]:
    """A new Secret's data, as the controller would write it ``now``."""
    return written(plan_rotation(None, [], hosts=HOSTS, lifetimes=LIFETIMES, now=now))


def cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def fp(pem: bytes) -> str:
    return cert(pem).fingerprint(hashes.SHA256()).hex()


@pytest.fixture
def first() -> dict[str, bytes]:
    return secret_data(NOW)


def test_install_writes_the_pair_once_and_the_server_can_load_it(tmp_path: Path) -> None:
    now = datetime.now(UTC)  # the server checks the pair against the real clock
    first = secret_data(now)
    files = CertFiles.in_dir(tmp_path)
    installed = install(files, first, now)
    assert installed.changed
    assert installed.fingerprint == fp(first[LEAF_CERT])
    assert installed.ca_not_after == cert(first[CA_CERT]).not_valid_after_utc
    assert (tmp_path / "tls.crt").read_bytes() == first[LEAF_CERT]
    assert (tmp_path / "ca.crt").read_bytes() == first[CA_CERT]
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    assert not install(files, first, now).changed
    reloader = CertReloader(
        server_ssl_context(tmp_path / "tls.crt", tmp_path / "tls.key"),
        tmp_path / "tls.crt",
        tmp_path / "tls.key",
    )
    assert reloader.info.fingerprint == installed.fingerprint


def test_install_refuses_a_mismatched_pair(tmp_path: Path, first: dict[str, bytes]) -> None:
    other = secret_data(NOW)
    files = CertFiles.in_dir(tmp_path)
    with pytest.raises(TLSConfigError, match="does not match"):
        install(files, {**first, LEAF_KEY: other[LEAF_KEY]}, NOW)
    assert not (tmp_path / "tls.crt").exists()
