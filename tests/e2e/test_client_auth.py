"""nicguard with ``--client-ca``: only the apiserver, presenting a client certificate, gets in.

kube-apiserver runs with ``--admission-control-config-file``: an AdmissionConfiguration whose
ValidatingAdmissionWebhook configuration names a kubeconfig with a ``users`` entry for the
webhook's ``host:port`` (``127.0.0.1:<port>``: k8s.io/apiserver util/webhook matches a URL
webhook's host:port exactly, then ``*.`` suffixes) carrying a client certificate signed by the CA
nicguard was given. Its own control plane (the apiserver is restarted without it once).
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from app.certificates.certdir import CertFiles, issue_self_signed
from tests.client_certs import issue_client_cert
from tests.harness import expect
from tests.harness.controlplane import ControlPlane
from tests.harness.faults import (
    ALLOWED,
    DIVERGES,
    example_review,
    healthy,
    numbers,
    outcome,
    post_review,
)
from tests.harness.objects import RECIPE_PAIRS, WEBHOOK, runtime, unique, with_pairs
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, populate
from tests.harness.state import grant_developers, install_crds
from tests.harness.webhook import Nicguard, install_base, register, wait_effective

pytestmark = pytest.mark.e2e

ADMISSION_CONFIG: Final = "admission-config.yaml"
HANDSHAKE_TIMEOUT: Final = 5.0


@dataclass(frozen=True, slots=True)
class Mutual:
    stack: Stack
    client: CertFiles  # what the apiserver presents
    stranger: CertFiles  # a client certificate from a CA nicguard does not trust
    admission_args: tuple[str, ...]

    @property
    def plane(self) -> ControlPlane:
        return self.stack.plane

    @property
    def nicguard(self) -> Nicguard:
        return self.stack.nicguard


def write_admission_config(workdir: Path, webhook_port: int, client: CertFiles) -> Path:
    """The AdmissionConfiguration and the kubeconfig it names (both JSON, valid YAML)."""
    kubeconfig = workdir / "webhook-kubeconfig.json"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "users": [
                    {
                        "name": f"127.0.0.1:{webhook_port}",
                        "user": {
                            "client-certificate": str(client.cert),
                            "client-key": str(client.key),
                        },
                    }
                ],
            }
        )
    )
    config = workdir / ADMISSION_CONFIG
    plugin = {
        "name": "ValidatingAdmissionWebhook",
        "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration",
            "kubeConfigFile": str(kubeconfig),
        },
    }
    config.write_text(
        json.dumps(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [plugin],
            }
        )
    )
    return config


@pytest.fixture(scope="module")
def mutual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mutual]:
    workdir = tmp_path_factory.mktemp("client-auth")
    clients_ca = issue_self_signed(workdir / "clients-ca", [])
    client = issue_client_cert(clients_ca, "kube-apiserver", workdir / "apiserver-client")
    strangers_ca = issue_self_signed(workdir / "strangers-ca", [])
    stranger = issue_client_cert(strangers_ca, "kube-apiserver", workdir / "stranger")
    args = (f"--admission-control-config-file={workdir / ADMISSION_CONFIG}",)
    plane = ControlPlane(workdir, apiserver_args=args)
    nicguard = Nicguard(plane, workdir, args=[f"--client-ca={clients_ca.ca}"])
    write_admission_config(workdir, nicguard.port, client)
    try:
        plane.start()
        install_crds(plane)
        config = install_base(plane)
        grant_developers(plane)
        nicguard.start()
        register(plane, nicguard, config)
        stack = Stack(plane, nicguard, config, workdir)
        populate(stack)
        yield Mutual(stack, client, stranger, args)
    finally:
        try:
            nicguard.stop()
        finally:
            plane.stop()


def server_context(mutual: Mutual, *, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(mutual.nicguard.cert_dir / "ca.crt"))
    if version is not None:
        context.minimum_version = context.maximum_version = version
    return context


def raw_post(port: int, context: ssl.SSLContext) -> bytes:
    """POST an empty JSON body over TLS; returns the raw answer.

    Raises when TLS is refused, including a connection closed without an answer."""
    request = (
        b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    with (
        socket.create_connection(("127.0.0.1", port), timeout=HANDSHAKE_TIMEOUT) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(request)
        chunks = []
        while chunk := tls.recv(4096):
            chunks.append(chunk)
    if not chunks:
        # A TLS 1.3 server rejecting the client certificate after the client's handshake.
        raise ConnectionAbortedError("closed without an answer")
    return b"".join(chunks)


def test_the_apiserver_authenticates_with_its_client_certificate(mutual: Mutual) -> None:
    name = unique("tcpxo-mtls")
    drifted = runtime(name, pairs=with_pairs(RECIPE_PAIRS, (1, 2)), recipe_bound=True)
    expect.denied(mutual.stack.apply(drifted), f"ClusterTrainingRuntime/{name}", DIVERGES)
    expect.allowed(
        mutual.stack.apply(runtime(name, recipe_bound=True)),
        f"clustertrainingruntime.trainer.kubeflow.org/{name} created",
    )
    lines = [d for d in mutual.nicguard.decisions() if d["resource_name"] == name]
    assert [d["allowed"] for d in lines] == [False, True]
    # Each line names its sender: the apiserver's loopback address and its client certificate.
    for line in lines:
        assert line["source_address"].startswith("127.0.0.1:"), line
        assert line["client_subject"] == "CN=kube-apiserver", line


@pytest.mark.parametrize(
    "version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["TLSv1.2", "TLSv1.3"]
)
def test_a_direct_call_without_the_client_certificate_is_refused(
    mutual: Mutual, version: ssl.TLSVersion
) -> None:
    port = mutual.nicguard.port
    refused = []
    for client in (None, mutual.stranger):
        context = server_context(mutual, version=version)
        if client is not None:
            context.load_cert_chain(client.cert, client.key)
        # TLS 1.2 fails in the handshake; a TLS 1.3 client finishes its side first and gets
        # the server's certificate_required alert on its first read. No HTTP answer either way.
        with pytest.raises((ssl.SSLError, ConnectionError)) as failed:
            raw_post(port, context)
        refused.append(type(failed.value).__name__ + ": " + str(failed.value)[:80])
    trusted = server_context(mutual, version=version)
    trusted.load_cert_chain(mutual.client.cert, mutual.client.key)
    assert raw_post(port, trusted).startswith(b"HTTP/1.1 400 ")  # in, and {} is no review
    status, body = post_review(mutual.nicguard.url, example_review("good-runtime"), trusted)
    assert (status, outcome(body)[0]) == (200, ALLOWED)
    numbers(f"client-ca-{version.name}", f"no client cert / stranger's cert refused: {refused}")


def test_an_apiserver_without_the_client_certificate_cannot_call_nicguard(
    mutual: Mutual,
) -> None:
    """Without its AdmissionConfiguration the apiserver's calls fail: with failurePolicy Fail
    nothing is admitted, which proves the client certificate is what lets it in."""
    plane = mutual.plane
    plane.stop_apiserver(crash=True)
    plane.apiserver_args = []
    try:
        plane.start_apiserver()
        name = unique("tcpxo-no-cert")
        run = mutual.stack.apply(runtime(name, recipe_bound=True))
        assert run.returncode == 1, expect.shown(run)
        assert f'failed calling webhook "{WEBHOOK}"' in run.stderr, expect.shown(run)
        assert mutual.stack.kubectl("get", "clustertrainingruntime", name).returncode == 1
    finally:
        plane.stop_apiserver(crash=True)
        plane.apiserver_args = list(mutual.admission_args)
        plane.start_apiserver()
    wait_effective(plane, mutual.nicguard, WEBHOOK)
    # A restarted apiserver answers 403 until its RBAC is loaded: wait for nicguard's caches
    # to resync before judging an object that needs them.
    wait_until(lambda: healthy(mutual.nicguard) or None, timeout=60, what="caches to resync")
    expect.allowed(mutual.stack.apply(runtime(name, recipe_bound=True)), "created")
    numbers(
        "client-ca-apiserver-without-cert",
        f"kubectl saw: {run.stderr.strip().splitlines()[-1][-160:]}",
    )
