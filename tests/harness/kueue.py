"""Kueue v0.17.0 beside the chain (``tests/harness/chain.py``): its CRDs, RBAC and webhooks as
published, the integrations batch/job, JobSet and TrainJob enabled, as its own ServiceAccount.

Its cert rotator must stay on (off, Kueue reads metrics certificates from a fixed ``/etc`` path):
the rotator's Secret is seeded with a CA and a serving certificate naming both its Service and
127.0.0.1, the same files are written into its cert dir, and its webhooks and CRD conversion are
registered by ``url:`` under the names the rotator injects its CA into. The visibility server,
which binds every interface, is off (``VisibilityOnDemand=false``).
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.harness.chain import (
    NAMESPACE,
    WEBHOOK_KINDS,
    Chain,
    Controller,
    launch,
    published,
    service_account,
)
from tests.harness.objects import as_list
from tests.harness.procs import free_ports
from tests.harness.state import checked, wait_established

CRDS: Final = "kueue/config/components/crd"
WEBHOOKS: Final = "kueue/config/components/webhook"
RBAC: Final = "kueue/config/components/rbac"
SERVICE: Final = (
    "kueue-webhook-service"  # the rotator's webhook configurations: kueue-*-webhook-configuration
)
SECRET: Final = "kueue-webhook-server-cert"
CA_NAME: Final = "kueue-ca"  # the rotator verifies its CA for this name
FRAMEWORKS: Final = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
# What the enabled integrations and Kueue's own API are served at: the webhooks kept.
SERVED: Final = {
    ("batch", "jobs"),
    ("jobset.x-k8s.io", "jobsets"),
    ("trainer.kubeflow.org", "trainjobs"),
}
KUEUE_API: Final = "kueue.x-k8s.io"
# Longer than the rotator's 90-day look-ahead, or it would mint a certificate without 127.0.0.1.
LIFETIME: Final = timedelta(days=365)
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS#1: the rotator reads its CA key back with x509.ParsePKCS1PrivateKey.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: str,
    key: rsa.RSAPrivateKey,
    issuer: tuple[x509.Certificate, rsa.RSAPrivateKey] | None,
    names: list[x509.GeneralName],
) -> x509.Certificate:
    now = datetime.now(UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + LIFETIME)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def seeded_certificates() -> dict[str, bytes]:
    """``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` as the rotator keeps them in its Secret,
    the serving certificate for its Service and for 127.0.0.1."""
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = _certificate(CA_NAME, ca_key, None, [x509.DNSName(CA_NAME)])
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    service = f"{SERVICE}.{NAMESPACE}.svc"
    names = [x509.DNSName(service), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    leaf = _certificate(service, key, (ca, ca_key), names)
    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "ca.key": _pem_key(ca_key),
        "tls.crt": leaf.public_bytes(serialization.Encoding.PEM),
        "tls.key": _pem_key(key),
    }


def served(hook: dict[str, Any]) -> bool:
    """Whether a Kueue webhook is one of an enabled integration's or of Kueue's own API."""
    for rule in hook.get("rules", []):
        for group in rule["apiGroups"]:
            if group == KUEUE_API or any((group, r) in SERVED for r in rule["resources"]):
                return True
    return False


def by_url(client: dict[str, Any], base_url: str, bundle: str) -> dict[str, Any]:
    return {"url": f"{base_url}{client['service']['path']}", "caBundle": bundle}


@contextlib.contextmanager
def running_kueue(chain: Chain, workdir: Path) -> Iterator[Controller]:
    """Kueue started on ``chain``, ready; stopped and its webhook configurations deleted after."""
    plane, bins = chain.plane, chain.bins
    files = seeded_certificates()
    bundle = base64.b64encode(files["ca.crt"]).decode("ascii")
    webhook_port, health_port = free_ports(2)
    base_url = f"https://127.0.0.1:{webhook_port}"

    crds = published(plane, bins / CRDS)
    for crd in crds:
        webhook = crd["spec"].get("conversion", {}).get("webhook")
        if webhook:
            webhook["clientConfig"] = by_url(webhook["clientConfig"], base_url, bundle)
    checked(plane.kubectl("admin", "create", "-f", "-", input=as_list(crds)), "Kueue's CRDs")
    wait_established(plane, [f"crd/{crd['metadata']['name']}" for crd in crds])

    kubeconfig = service_account(plane, published(plane, bins / RBAC), "kueue-")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in files.items()},
    }
    checked(plane.kubectl("admin", "create", "-f", "-", input=json.dumps(secret)), "the Secret")
    certs = workdir / "kueue-certs"
    certs.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if name != "ca.key":
            (certs / name).write_bytes(data)

    configs = []
    for doc in published(plane, bins / WEBHOOKS):
        if doc.get("kind") in WEBHOOK_KINDS:
            config = {**doc, "metadata": {"name": f"kueue-{doc['metadata']['name']}"}}
            config["webhooks"] = [
                {**hook, "clientConfig": by_url(hook["clientConfig"], base_url, bundle)}
                for hook in doc["webhooks"]
                if served(hook)
            ]
            configs.append(config)
    checked(plane.kubectl("admin", "create", "-f", "-", input=as_list(configs)), "Kueue's hooks")

    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": SERVICE,
            "webhookSecretName": SECRET,
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    (workdir / "kueue-config.yaml").write_text(json.dumps(config))
    argv = [str(bins / "bin" / "kueue"), f"--config={workdir / 'kueue-config.yaml'}"]
    argv += ["--feature-gates=VisibilityOnDemand=false"]
    controller = Controller("kueue", launch("kueue", argv, workdir, kubeconfig), health_port)
    try:
        controller.wait_ready()
        yield controller
    finally:
        controller.process.stop()
        for made in configs:
            plane.kubectl("admin", "delete", made["kind"].lower(), made["metadata"]["name"])
