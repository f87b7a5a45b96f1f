"""Tests for app.certificates.tls: the server context, hot reload, and a live uvicorn."""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app.certificates.certdir import CertFiles, issue_self_signed
from app.certificates.pem import TLSConfigError, check_pair
from app.certificates.tls import CertReloader, make_uvicorn_config, server_ssl_context
from tests.certificates.support import (
    SVC,
    expired_pair,
    fingerprint,
    mismatched_pair,
    names,
    tls_warnings,
)
from tests.client_certs import issue_client_cert

Message = MutableMapping[str, Any]


# --- helpers -------------------------------------------------------------------------------


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
    files = mismatched_pair(tmp_path)
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
    [record] = tls_warnings(caplog, "app.certificates.tls")
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
    [record] = tls_warnings(caplog, "app.certificates.tls")
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
    assert len(tls_warnings(caplog, "app.certificates.tls")) == 1

    served.key.write_bytes(saved)
    assert reloader.maybe_reload() is False
    assert reloader.info == old


def test_reloader_refuses_an_expired_replacement(served: CertFiles, tmp_path: Path) -> None:
    reloader = reloading(served)
    old = reloader.info
    expired = expired_pair(tmp_path)
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
    files = mismatched_pair(tmp_path)
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
