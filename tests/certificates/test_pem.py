"""Tests for app.certificates.pem: checking a pair, one line naming the file; atomic writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from app.certificates.certdir import CertFiles, issue_self_signed
from app.certificates.pem import TLSConfigError, check_pair, write_atomic
from tests.certificates.support import (
    SVC,
    expired_pair,
    fingerprint,
    load_cert,
    mismatched_pair,
    names,
)

# --- writing -------------------------------------------------------------------------------


def test_a_missing_parent_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        TLSConfigError, match=names(tmp_path / "gone" / "tls.crt", "cannot write (No such file")
    ):
        write_atomic(tmp_path / "gone" / "tls.crt", b"", 0o644)


# --- check_pair ----------------------------------------------------------------------------


def test_check_pair_describes_the_served_cert(served: CertFiles) -> None:
    info = check_pair(served.cert, served.key)

    leaf = load_cert(served.cert)
    assert info.fingerprint == fingerprint(leaf.public_bytes(serialization.Encoding.DER))
    assert info.not_after == leaf.not_valid_after_utc
    assert set(info.sans) == {SVC, "localhost", "::1", "127.0.0.1"}


def _garbage_cert(tmp: Path) -> CertFiles:
    files = issue_self_signed(tmp / "a", [])
    files.cert.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n")
    return files


def _encrypted_key(tmp: Path) -> CertFiles:
    files = issue_self_signed(tmp / "a", [])
    key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    return files


def _missing_key(tmp: Path) -> CertFiles:
    files = issue_self_signed(tmp / "a", [])
    files.key.unlink()
    return files


@pytest.mark.parametrize(
    ("make", "named", "problem"),
    [
        (expired_pair, "cert", "certificate expired at"),
        (mismatched_pair, "key", "private key does not match certificate"),
        (_garbage_cert, "cert", "not a PEM certificate"),
        (_encrypted_key, "key", "not an unencrypted PEM private key"),
        (_missing_key, "key", "cannot read (No such file or directory)"),
    ],
)
def test_check_pair_rejects_with_one_line_naming_the_file(
    tmp_path: Path, make: Callable[[Path], CertFiles], named: str, problem: str
) -> None:
    files = make(tmp_path)

    with pytest.raises(TLSConfigError) as caught:
        check_pair(files.cert, files.key)

    message = str(caught.value)
    assert message.startswith(f"{getattr(files, named)}: ")
    assert problem in message
    assert "\n" not in message


def test_check_pair_honours_now(served: CertFiles) -> None:
    later = check_pair(served.cert, served.key).not_after + timedelta(seconds=1)
    with pytest.raises(TLSConfigError, match="expired"):
        check_pair(served.cert, served.key, now=later)
