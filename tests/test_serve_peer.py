"""The decision line says who sent the review (``nicguard serve`` as a process, over real TLS):
the TCP peer as ``source_address``, and the client certificate's subject as ``client_subject``
when one was presented (``--client-ca``), so a line forged by a pod that reached /validate can be
told from the apiserver's (docs/operations.md, Security)."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any, Final

from cryptography import x509

from app.certificates.certdir import CertFiles, issue_self_signed
from tests.client_certs import issue_client_cert
from tests.harness.procs import wait_until
from tests.live_serve import LiveServe, live_serve
from tests.support.paths import ROOT

EXAMPLES: Final = ROOT / "examples" / "reviews"
TIMEOUT: Final = 10.0


def review(uid: str) -> bytes:
    body: dict[str, Any] = json.loads((EXAMPLES / "drifted-runtime.json").read_text())
    body["request"]["uid"] = uid
    return json.dumps(body).encode()


def post(
    served: LiveServe, uid: str, context: ssl.SSLContext, headers: dict[str, str] | None = None
) -> str:
    """POST one review (with ``headers`` added); returns the client's own ``ip:port`` of that
    connection."""
    connection = http.client.HTTPSConnection(
        "127.0.0.1", served.port, context=context, timeout=TIMEOUT
    )
    try:
        headers = {"Content-Type": "application/json", **(headers or {})}
        connection.request("POST", "/validate", body=review(uid), headers=headers)
        assert connection.sock is not None
        host, port = connection.sock.getsockname()[:2]
        reply = connection.getresponse()
        assert reply.status == 200, reply.read()
        reply.read()
    finally:
        connection.close()
    return f"{host}:{port}"


def decision(served: LiveServe, uid: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        for line in served.log_text().splitlines():
            entry = json.loads(line)
            if entry.get("event_type") == "admission_decision" and entry["admission_uid"] == uid:
                return dict(entry)
        return None

    return wait_until(found, timeout=TIMEOUT, what=f"the decision line of {uid}")


def test_without_a_client_certificate_the_line_has_the_peer_and_no_subject(
    tmp_path: Path,
) -> None:
    with live_serve(tmp_path) as served:
        source = post(served, "peer-1", served.context)
        line = decision(served, "peer-1")
    assert line["source_address"] == source
    assert source.startswith("127.0.0.1:")
    assert "client_subject" not in line


def test_forwarding_headers_cannot_forge_the_peer(tmp_path: Path) -> None:
    """A loopback peer (a sidecar, ``kubectl port-forward``) is not a proxy nicguard trusts."""
    forged = {
        "X-Forwarded-For": "10.96.0.1",
        "X-Forwarded-Proto": "https",
        "X-Real-IP": "10.96.0.1",
        "Forwarded": "for=10.96.0.1;proto=https",
    }
    with live_serve(tmp_path) as served:
        source = post(served, "forged-1", served.context, forged)
        line = decision(served, "forged-1")
    assert line["source_address"] == source
    assert source.startswith("127.0.0.1:")


def test_with_a_client_certificate_the_line_has_its_subject(tmp_path: Path) -> None:
    clients: CertFiles = issue_self_signed(tmp_path / "clients-ca", [])
    apiserver = issue_client_cert(clients, "kube-apiserver", tmp_path / "client")
    subject = x509.load_pem_x509_certificate(apiserver.cert.read_bytes()).subject
    with live_serve(tmp_path, f"--client-ca={clients.ca}") as served:
        context = served.context
        context.load_cert_chain(apiserver.cert, apiserver.key)
        # Two requests on two connections: each line is its own connection's.
        sources = [post(served, f"mtls-{i}", context) for i in range(2)]
        lines = [decision(served, f"mtls-{i}") for i in range(2)]
    assert [line["source_address"] for line in lines] == sources
    assert sources[0] != sources[1]
    assert [line["client_subject"] for line in lines] == [subject.rfc4514_string()] * 2
    assert "CN=kube-apiserver" in lines[0]["client_subject"]
