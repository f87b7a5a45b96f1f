"""Tests for app.tls: issuing, checking, the server context, hot reload, and a live uvicorn."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import ssl
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.tls import (
    CertFiles,
    CertReloader,
    TLSConfigError,
    check_pair,
    ensure_cert_dir,
    issue_client_cert,
    issue_self_signed,
    make_uvicorn_config,
    required_sans,
    server_ssl_context,
)
from app.tls.storage import write_atomic

SVC = "nicguard.nicguard-system.svc"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

Message = MutableMapping[str, Any]


# --- helpers -------------------------------------------------------------------------------


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def tls_warnings(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno == logging.WARNING]


def names(path: Path, problem: str) -> str:
    """A ``match=`` pattern for a one-line error about ``path`` that starts with ``problem``."""
    return "^" + re.escape(f"{path}: {problem}")


async def hello(
    scope: Message,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    assert scope["type"] == "http"
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def serving(ctx: ssl.SSLContext) -> Iterator[int]:
    """Run uvicorn with ``ctx`` in a thread; yields the port it bound."""
    config = make_uvicorn_config(
        hello,
        host="127.0.0.1",
        port=0,
        ssl_context=ctx,
        log_config=None,
        lifespan="off",
        access_log=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-under-test")
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "uvicorn exited during start-up"
            assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
            time.sleep(0.01)
        assert config.ssl is ctx
        yield int(server.servers[0].sockets[0].getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert not thread.is_alive()


@dataclass(frozen=True)
class Fetched:
    version: str | None
    fingerprint: str
    response: bytes


def client_context(
    ca_pem: str, *, version: ssl.TLSVersion | None = None, client: CertFiles | None = None
) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem)
    # What Python 3.13+ enforces by default, and close to what Go's verifier requires.
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    if client is not None:
        ctx.load_cert_chain(client.cert, client.key)
    return ctx


def fetch(port: int, ctx: ssl.SSLContext, *, server_hostname: str = "localhost") -> Fetched:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        tls.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        chunks = []
        while chunk := tls.recv(4096):
            chunks.append(chunk)
        if not chunks:
            # A TLS 1.3 server rejecting the client certificate after the client's handshake.
            raise ConnectionAbortedError("closed without a response")
        return Fetched(tls.version(), fingerprint(der), b"".join(chunks))


def assert_ok(fetched: Fetched) -> None:
    assert fetched.response.startswith(b"HTTP/1.1 200 ")
    assert fetched.response.endswith(b"ok")


@pytest.fixture
def served(tmp_path: Path) -> CertFiles:
    return issue_self_signed(tmp_path / "certs", [SVC, "::1"])


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


def test_a_missing_parent_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        TLSConfigError, match=names(tmp_path / "gone" / "tls.crt", "cannot write (No such file")
    ):
        write_atomic(tmp_path / "gone" / "tls.crt", b"", 0o644)


def test_required_sans_normalises_and_always_adds_loopback() -> None:
    assert required_sans(["Nicguard.Svc", "[::1]", " 127.0.0.1 ", "", "0:0::1"]) == (
        "nicguard.svc",
        "::1",
        "127.0.0.1",
        "localhost",
    )


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


# --- check_pair ----------------------------------------------------------------------------


def test_check_pair_describes_the_served_cert(served: CertFiles) -> None:
    info = check_pair(served.cert, served.key)

    leaf = load_cert(served.cert)
    assert info.fingerprint == fingerprint(leaf.public_bytes(serialization.Encoding.DER))
    assert info.not_after == leaf.not_valid_after_utc
    assert set(info.sans) == {SVC, "localhost", "::1", "127.0.0.1"}


def _expired(tmp: Path) -> CertFiles:
    return issue_self_signed(tmp / "old", [], now=datetime.now(UTC) - timedelta(days=400))


def _mismatched(tmp: Path) -> CertFiles:
    files = issue_self_signed(tmp / "a", [])
    other = issue_self_signed(tmp / "b", [])
    return CertFiles(cert=files.cert, key=other.key, ca=files.ca)


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
        (_expired, "cert", "certificate expired at"),
        (_mismatched, "key", "private key does not match certificate"),
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


# --- ensure_cert_dir -----------------------------------------------------------------------


def test_ensure_creates_a_missing_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    files = ensure_cert_dir(tmp_path / "certs", [SVC])

    assert files == CertFiles.in_dir(tmp_path / "certs")
    assert SVC in check_pair(files.cert, files.key).sans
    [record] = tls_warnings(caplog, "app.tls.certdir")
    assert record.__dict__["reason"] == "missing ca.crt, tls.crt, tls.key"
    assert record.__dict__["cert_dir"] == str(tmp_path / "certs")


def test_ensure_reuses_a_valid_dir(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = issue_self_signed(tmp_path, [SVC], now=NOW)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    again = ensure_cert_dir(tmp_path, [SVC.upper(), "127.0.0.1"], now=NOW + timedelta(days=59))

    assert again == first
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert not tls_warnings(caplog, "app.tls.certdir")


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
    [record] = tls_warnings(caplog, "app.tls.certdir")
    assert reason in record.__dict__["reason"]


# --- server context and uvicorn config -----------------------------------------------------


def test_server_context_is_tls12_plus_with_aead_ecdhe_only(served: CertFiles) -> None:
    ctx = server_ssl_context(served.cert, served.key)

    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.options & ssl.OP_NO_COMPRESSION
    assert ctx.verify_mode == ssl.CERT_NONE
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12
    assert all(name.startswith("ECDHE-") for name in tls12)
    assert all("GCM" in name or "CHACHA20" in name for name in tls12)


def test_server_context_requires_client_certs_given_a_ca(served: CertFiles) -> None:
    ctx = server_ssl_context(served.cert, served.key, client_ca=served.ca)
    assert ctx.verify_mode == ssl.CERT_REQUIRED


def test_server_context_names_a_bad_client_ca(served: CertFiles, tmp_path: Path) -> None:
    with pytest.raises(TLSConfigError, match=names(tmp_path / "nope.crt", "cannot load client CA")):
        server_ssl_context(served.cert, served.key, client_ca=tmp_path / "nope.crt")


def test_server_context_rejects_a_mismatched_pair(tmp_path: Path) -> None:
    files = _mismatched(tmp_path)
    with pytest.raises(TLSConfigError, match="does not match"):
        server_ssl_context(files.cert, files.key)


def test_server_context_loads_without_memfd(
    served: CertFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "memfd_create", raising=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    made: list[str] = []
    real_mkstemp = tempfile.mkstemp

    def spy(suffix: str) -> tuple[int, str]:
        fd, name = real_mkstemp(suffix=suffix)
        made.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", spy)

    ctx = server_ssl_context(served.cert, served.key)

    assert [Path(name).parent for name in made] == [scratch, scratch]
    assert not any(scratch.iterdir())  # key material does not linger on disk
    with serving(ctx) as port:
        assert_ok(fetch(port, client_context(served.ca.read_text())))


def test_uvicorn_config_refuses_competing_ssl_options(served: CertFiles) -> None:
    ctx = server_ssl_context(served.cert, served.key)
    with pytest.raises(TypeError, match="ssl_certfile, ssl_keyfile"):
        make_uvicorn_config(
            hello,
            host="127.0.0.1",
            port=8443,
            ssl_context=ctx,
            ssl_keyfile=str(served.key),
            ssl_certfile=str(served.cert),
        )


def test_uvicorn_config_uses_the_given_context(served: CertFiles) -> None:
    ctx = server_ssl_context(served.cert, served.key)
    config = make_uvicorn_config(
        hello, host="127.0.0.1", port=8443, ssl_context=ctx, log_config=None, lifespan="off"
    )
    config.load()
    assert config.ssl is ctx
    assert config.is_ssl


# --- CertReloader (no server) --------------------------------------------------------------


def _replace(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.new")
    tmp.write_bytes(src.read_bytes())
    os.replace(tmp, dst)


def reloading(files: CertFiles) -> CertReloader:
    return CertReloader(server_ssl_context(files.cert, files.key), files.cert, files.key)


def test_reloader_is_idle_while_files_are_unchanged(served: CertFiles) -> None:
    reloader = reloading(served)
    assert reloader.info == check_pair(served.cert, served.key)
    assert reloader.not_after == reloader.info.not_after
    assert [reloader.maybe_reload() for _ in range(3)] == [False, False, False]


def test_reloader_waits_for_a_complete_pair(
    served: CertFiles, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reloader = reloading(served)
    old = reloader.info
    new = issue_self_signed(tmp_path / "new", [SVC], leaf_days=30)

    _replace(new.cert, served.cert)
    assert reloader.maybe_reload() is False
    assert reloader.maybe_reload() is False
    assert reloader.info == old
    [record] = tls_warnings(caplog, "app.tls.reloader")
    assert "does not match" in record.__dict__["reason"]

    _replace(new.key, served.key)
    assert reloader.maybe_reload() is True
    assert reloader.info == check_pair(new.cert, new.key)
    assert reloader.not_after != old.not_after
    assert reloader.maybe_reload() is False


def test_reloader_ignores_a_truncated_write(
    served: CertFiles, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reloader = reloading(served)
    old = reloader.info
    new = issue_self_signed(tmp_path / "new", [SVC])
    pem = new.cert.read_bytes()
    served.cert.write_bytes(pem[: len(pem) // 2])  # a writer that is not atomic, caught midway

    assert reloader.maybe_reload() is False
    assert reloader.info == old
    [record] = tls_warnings(caplog, "app.tls.reloader")
    assert "not a PEM certificate" in record.__dict__["reason"]


def test_reloader_survives_vanished_files(
    served: CertFiles, caplog: pytest.LogCaptureFixture
) -> None:
    reloader = reloading(served)
    old = reloader.info
    saved = served.key.read_bytes()
    served.key.unlink()

    assert reloader.maybe_reload() is False
    assert reloader.maybe_reload() is False
    assert len(tls_warnings(caplog, "app.tls.reloader")) == 1

    served.key.write_bytes(saved)
    assert reloader.maybe_reload() is False
    assert reloader.info == old


def test_reloader_refuses_an_expired_replacement(served: CertFiles, tmp_path: Path) -> None:
    reloader = reloading(served)
    old = reloader.info
    expired = _expired(tmp_path)
    _replace(expired.key, served.key)
    _replace(expired.cert, served.cert)

    assert reloader.maybe_reload() is False
    assert reloader.info == old


def test_reloader_follows_a_secret_volume_symlink_swap(tmp_path: Path) -> None:
    # The kubelet's atomic writer: tls.crt -> ..data/tls.crt, ..data -> a versioned dir.
    mount = tmp_path / "mount"
    v1 = issue_self_signed(mount / "..v1", [SVC])
    v2 = issue_self_signed(mount / "..v2", [SVC])
    (mount / "..data").symlink_to("..v1")
    for name in ("tls.crt", "tls.key"):
        (mount / name).symlink_to(f"..data/{name}")
    reloader = reloading(CertFiles(cert=mount / "tls.crt", key=mount / "tls.key", ca=v1.ca))
    assert reloader.info == check_pair(v1.cert, v1.key)

    (mount / "..data_tmp").symlink_to("..v2")
    os.replace(mount / "..data_tmp", mount / "..data")

    assert reloader.maybe_reload() is True
    assert reloader.info == check_pair(v2.cert, v2.key)


def test_reloader_refuses_to_start_on_a_bad_pair(served: CertFiles, tmp_path: Path) -> None:
    files = _mismatched(tmp_path)
    with pytest.raises(TLSConfigError, match="does not match"):
        CertReloader(server_ssl_context(served.cert, served.key), files.cert, files.key)


def test_reloader_serves_what_it_checked(served: CertFiles, tmp_path: Path) -> None:
    ctx = server_ssl_context(served.cert, served.key)
    newer = issue_self_signed(tmp_path / "newer", [SVC])  # files rotated before the reloader

    reloader = CertReloader(ctx, newer.cert, newer.key)

    assert reloader.context is ctx
    with serving(ctx) as port:
        fetched = fetch(port, client_context(newer.ca.read_text()))
    assert (
        fetched.fingerprint
        == reloader.info.fingerprint
        == check_pair(newer.cert, newer.key).fingerprint
    )


# --- live uvicorn --------------------------------------------------------------------------


def test_live_tls_versions_and_rotation_without_restart(served: CertFiles, tmp_path: Path) -> None:
    reloader = reloading(served)
    old_ca = served.ca.read_text()
    old_fp = reloader.info.fingerprint

    with serving(reloader.context) as port:
        for version, name in [
            (ssl.TLSVersion.TLSv1_2, "TLSv1.2"),
            (ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
        ]:
            fetched = fetch(port, client_context(old_ca, version=version))
            assert_ok(fetched)
            assert (fetched.version, fetched.fingerprint) == (name, old_fp)
        assert_ok(fetch(port, client_context(old_ca), server_hostname="127.0.0.1"))
        assert_ok(fetch(port, client_context(old_ca), server_hostname=SVC))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # TLSVersion.TLSv1_1 itself
            legacy = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            legacy.minimum_version = ssl.TLSVersion.TLSv1
            legacy.maximum_version = ssl.TLSVersion.TLSv1_1
        legacy.load_verify_locations(cadata=old_ca)
        legacy.set_ciphers("DEFAULT:@SECLEVEL=0")  # so the refusal comes from the server
        with pytest.raises(ssl.SSLError) as refused:
            fetch(port, legacy)
        # The server hangs up on the ClientHello without an alert (s_client: 0 bytes read).
        assert refused.value.reason in {
            "TLSV1_ALERT_PROTOCOL_VERSION",
            "UNEXPECTED_EOF_WHILE_READING",
        }
        legacy.maximum_version = ssl.TLSVersion.TLSv1_2
        assert fetch(port, legacy).version == "TLSv1.2"  # the same client, one version up

        # Rotate one file at a time, so the poll in between sees a half-written pair.
        new = issue_self_signed(tmp_path / "staging", [SVC])
        new_ca = new.ca.read_text()
        _replace(new.cert, served.cert)
        assert reloader.maybe_reload() is False
        assert fetch(port, client_context(old_ca)).fingerprint == old_fp

        _replace(new.key, served.key)
        assert reloader.maybe_reload() is True
        fetched = fetch(port, client_context(new_ca))
        assert_ok(fetched)
        assert fetched.fingerprint == check_pair(new.cert, new.key).fingerprint != old_fp
        with pytest.raises(ssl.SSLCertVerificationError):
            fetch(port, client_context(old_ca))


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_live_client_ca_is_enforced(
    served: CertFiles, tmp_path: Path, version: ssl.TLSVersion
) -> None:
    clients_ca = issue_self_signed(tmp_path / "clients-ca", [])
    apiserver = issue_client_cert(clients_ca, "kube-apiserver", tmp_path / "client")
    stranger = issue_client_cert(served, "stranger", tmp_path / "stranger")
    ca = served.ca.read_text()
    ctx = server_ssl_context(served.cert, served.key, client_ca=clients_ca.ca)

    with serving(ctx) as port:
        assert_ok(fetch(port, client_context(ca, version=version, client=apiserver)))
        for client in (None, stranger):
            # TLS 1.3 clients finish their handshake first and only see the refusal on reading.
            with pytest.raises((ssl.SSLError, ConnectionError)):
                fetch(port, client_context(ca, version=version, client=client))
