"""The self-managed certificates seen from outside: replicas, the Secret, caBundles, the Lease.

A cluster here starts like a fresh install: namespace and RBAC from the kustomize output, the
shipped webhook configuration registered *without* a caBundle (``url:`` per replica, as in
``webhook.py``), and nicguard replicas as the nicguard ServiceAccount with the controller on.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import socket
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography import x509

from tests.harness.controlplane import ControlPlane
from tests.harness.stack import Stack
from tests.harness.state import checked, grant_developers, install_crds
from tests.harness.webhook import Nicguard, install_base, wait_policy_effective

SECRET: Final = ("nicguard-system", "nicguard-tls")
LEASE: Final = ("nicguard-system", "nicguard-cert-writer")
CONFIGURATION: Final = "nicguard"


@dataclass(frozen=True, slots=True)
class Cluster:
    stack: Stack  # its nicguard is the first replica
    replicas: dict[str, Nicguard]

    @property
    def plane(self) -> ControlPlane:
        return self.stack.plane


def replica(plane: ControlPlane, workdir: Path, name: str, *args: str) -> Nicguard:
    """A replica (not started) named ``name`` in the Lease, with its own cert dir and log."""
    home = workdir / name
    home.mkdir()
    return Nicguard(plane, home, args=[f"--pod-name={name}", *args])


def webhook_name(index: int) -> str:
    return "validate.nicguard.dev" if index == 0 else f"validate-{index}.nicguard.dev"


def without_ca(config: dict[str, Any], urls: Sequence[str]) -> dict[str, Any]:
    """The shipped configuration, its Trainer webhook repeated once per url, no caBundle at all."""
    registered = copy.deepcopy(config)
    shipped = registered["webhooks"][0]  # validate.nicguard.dev, the Trainer objects
    registered["webhooks"] = [
        {**copy.deepcopy(shipped), "name": webhook_name(i), "clientConfig": {"url": url}}
        for i, url in enumerate(urls)
    ]
    return registered


def register_without_ca(plane: ControlPlane, config: dict[str, Any], urls: Sequence[str]) -> None:
    registered = json.dumps(without_ca(config, urls))
    checked(plane.kubectl("admin", "apply", "-f", "-", input=registered), "registering")


@contextlib.contextmanager
def fresh_cluster(workdir: Path, names: Sequence[str], *args: str) -> Iterator[Cluster]:
    """A control plane and one replica per name, each behind its own webhook; all started.

    No cluster state yet (``stack.populate`` or parts of it): only the CRDs."""
    plane = ControlPlane(workdir)
    replicas = {name: replica(plane, workdir, name, *args) for name in names}
    try:
        plane.start()
        install_crds(plane)
        config = install_base(plane)
        grant_developers(plane)
        register_without_ca(plane, config, [r.url for r in replicas.values()])
        # Every caBundle patch of the controller, the first included, under the policy.
        wait_policy_effective(plane)
        for started in replicas.values():
            started.start()  # ready: Secret installed and verifying against every caBundle
        yield Cluster(Stack(plane, next(iter(replicas.values())), config, workdir), replicas)
    finally:
        try:
            for stopped in replicas.values():
                stopped.stop()
        finally:
            plane.stop()


def secret(plane: ControlPlane) -> dict[str, Any]:
    namespace, name = SECRET
    run = plane.kubectl("admin", "get", "secret", name, "-n", namespace, "-o", "json")
    found: dict[str, Any] = json.loads(checked(run, "reading the Secret").stdout)
    return found


def secret_data(plane: ControlPlane) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in secret(plane).get("data", {}).items()}


def ca_bundles(plane: ControlPlane) -> list[bytes]:
    """The decoded caBundle of each webhook of the configuration, in order."""
    run = plane.kubectl(
        "admin", "get", "validatingwebhookconfiguration", CONFIGURATION, "-o", "json"
    )
    config = json.loads(checked(run, "reading the webhook configuration").stdout)
    return [base64.b64decode(h["clientConfig"].get("caBundle", "")) for h in config["webhooks"]]


def lease_holder(plane: ControlPlane) -> str:
    namespace, name = LEASE
    path = "jsonpath={.spec.holderIdentity}"
    run = plane.kubectl("admin", "get", "lease", name, "-n", namespace, "-o", path)
    return checked(run, "reading the Lease").stdout.strip()


def certificates(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem) if pem.strip() else []


def fingerprint(pem_or_der: bytes) -> str:
    der = pem_or_der
    if pem_or_der.startswith(b"-----BEGIN"):
        der = ssl.PEM_cert_to_DER_cert(pem_or_der.decode())
    return hashlib.sha256(der).hexdigest()


def handshake(port: int, bundle: bytes) -> str:
    """The fingerprint of what 127.0.0.1:``port`` serves to a client trusting only ``bundle``,
    checking the host as the apiserver does; raises ``ssl.SSLError`` when verification fails."""
    if not bundle.strip():
        raise ssl.SSLError("empty caBundle: nothing is trusted")
    context = ssl.create_default_context(cadata=bundle.decode())  # only these CAs
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as plain,
        context.wrap_socket(plain, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return fingerprint(der)
