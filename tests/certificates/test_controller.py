"""The certificate controller (app.certificates.controller) against the fake API server's
object store: the Lease holder writes the Secret and the caBundles, every replica installs and
verifies what the Secret holds, and readiness says what it waits for."""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import pytest
from kubernetes.client import ApiClient, ApiException

from app.certificates.certdir import CertFiles
from app.certificates.controller import NOT_VERIFIED, CertController, Targets
from app.certificates.pem import check_pair
from app.certificates.rotation import Lifetimes
from app.domain.cluster import ObjectName
from tests.certificates.support import SVC
from tests.support.apiserver import ObjectStore, client_of, status

SECRET: Final = "/api/v1/namespaces/nicguard-system/secrets/nicguard-tls"
CONFIGURATION: Final = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/nicguard"
)
LEASE: Final = "/apis/coordination.k8s.io/v1/namespaces/nicguard-system/leases/nicguard-cert"
WAITING: Final = "waiting for the certificate Secret nicguard-system/nicguard-tls"
LIFETIMES: Final = Lifetimes(ca=timedelta(days=365), leaf=timedelta(days=90))
SERVICE: Final = {"name": "nicguard", "namespace": "nicguard-system"}
WRITES: Final = {"POST", "PUT", "PATCH", "DELETE"}


def targets(identity: str, period: float = 10.0) -> Targets:
    return Targets(
        secret=ObjectName("nicguard-system", "nicguard-tls"),
        webhook_configuration="nicguard",
        lease=ObjectName("nicguard-system", "nicguard-cert"),
        identity=identity,
        period=period,
    )


def webhook_configuration() -> dict[str, object]:
    hooks = [{"name": name, "clientConfig": {"service": SERVICE}} for name in ("a", "b")]
    return {"metadata": {"name": "nicguard"}, "webhooks": hooks}


def foreign_lease() -> dict[str, object]:
    renewed = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {"holderIdentity": "pod-z", "leaseDurationSeconds": 30, "renewTime": renewed}
    return {"metadata": {"name": "nicguard-cert"}, "spec": spec}


def served(cert_dir: Path) -> str:
    """The fingerprint of the pair installed in ``cert_dir``, as the server would serve it."""
    files = CertFiles.in_dir(cert_dir)
    return check_pair(files.cert, files.key).fingerprint


@pytest.fixture
def store() -> ObjectStore:
    found = ObjectStore()
    found.put(CONFIGURATION, webhook_configuration())
    return found


@pytest.fixture
def api_client(store: ObjectStore) -> Iterator[ApiClient]:
    with client_of(store) as (_, client):
        yield client


def controller(api_client: ApiClient, cert_dir: Path, identity: str = "pod-a") -> CertController:
    return CertController(
        api_client, targets(identity), cert_dir=cert_dir, hosts=[SVC], lifetimes=LIFETIMES
    )


def writes(store_requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(method, path) for method, path in store_requests if method in WRITES]


def test_the_lease_holder_writes_the_secret_and_bundles_then_installs_and_verifies(
    store: ObjectStore, api_client: ApiClient, tmp_path: Path
) -> None:
    certs = controller(api_client, tmp_path)
    assert certs.not_ready_because("any") == WAITING
    assert certs.ca_expiry() is None
    certs.sync(datetime.now(UTC))
    secret = store.objects[SECRET]
    assert store.objects[LEASE]["spec"]["holderIdentity"] == "pod-a"
    bundles = {
        hook["clientConfig"]["caBundle"] for hook in store.objects[CONFIGURATION]["webhooks"]
    }
    assert bundles == {secret["data"]["ca.crt"]}
    installed = CertFiles.in_dir(tmp_path)
    assert base64.b64decode(secret["data"]["tls.crt"]) == installed.cert.read_bytes()
    fingerprint = served(tmp_path)
    assert certs.not_ready_because(fingerprint) is None
    assert certs.verifies(fingerprint)
    assert certs.not_ready_because("an older certificate") == NOT_VERIFIED
    assert not certs.verifies("an older certificate")
    expiry = certs.ca_expiry()
    assert expiry is not None
    assert datetime.now(UTC) + timedelta(days=364) < datetime.fromtimestamp(expiry, UTC)


def test_a_pass_with_nothing_due_writes_only_the_lease(store: ObjectStore, tmp_path: Path) -> None:
    with client_of(store) as (server, api_client):
        certs = controller(api_client, tmp_path)
        certs.sync(datetime.now(UTC))
        first = len(server.requests)
        certs.sync(datetime.now(UTC))
        again = [(r.method, r.path) for r in server.requests[first:]]
    assert writes(again) == [("PUT", LEASE)]
    assert certs.verifies(served(tmp_path))


@pytest.mark.parametrize(
    ("lease", "failing"),
    [
        pytest.param(True, None, id="another replica holds the Lease"),
        pytest.param(False, ("GET", LEASE), id="the Lease cannot be read"),
    ],
)
def test_a_replica_not_leading_installs_what_the_secret_holds_and_writes_nothing(
    store: ObjectStore,
    api_client: ApiClient,
    tmp_path: Path,
    lease: bool,
    failing: tuple[str, str] | None,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    controller(api_client, tmp_path / "a").sync(datetime.now(UTC))
    if lease:
        store.put(LEASE, foreign_lease())
    if failing is not None:
        store.failing[failing] = status(500, "InternalError")
    with client_of(store) as (server, other_client):
        follower = controller(other_client, tmp_path / "b", identity="pod-b")
        follower.sync(datetime.now(UTC))
    assert writes([(r.method, r.path) for r in server.requests]) == []
    assert served(tmp_path / "b") == served(tmp_path / "a")
    assert follower.not_ready_because(served(tmp_path / "b")) is None


def test_without_the_lease_and_without_a_secret_a_replica_waits_for_the_holder(
    store: ObjectStore, api_client: ApiClient, tmp_path: Path
) -> None:
    store.put(LEASE, foreign_lease())
    certs = controller(api_client, tmp_path)
    certs.sync(datetime.now(UTC))
    assert certs.not_ready_because("any") == (f"{WAITING} (not found; the Lease holder creates it)")
    assert SECRET not in store.objects
    assert not CertFiles.in_dir(tmp_path).cert.exists()


def test_without_a_webhook_configuration_the_certificate_is_ready_but_not_verified(
    store: ObjectStore, api_client: ApiClient, tmp_path: Path
) -> None:
    del store.objects[CONFIGURATION]
    certs = controller(api_client, tmp_path)
    certs.sync(datetime.now(UTC))
    assert SECRET in store.objects
    assert certs.not_ready_because(served(tmp_path)) is None
    assert not certs.verifies(served(tmp_path))  # no webhook trusts it: there is none


def test_a_write_that_conflicts_fails_the_pass(
    store: ObjectStore, api_client: ApiClient, tmp_path: Path
) -> None:
    store.failing[("POST", "/api/v1/namespaces/nicguard-system/secrets")] = status(
        409, "AlreadyExists"
    )
    with pytest.raises(ApiException) as raised:
        controller(api_client, tmp_path).sync(datetime.now(UTC))
    assert raised.value.status == 409


class Heard(logging.Handler):
    """Sets ``event`` when the controller logs ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message, self.event = message, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == self.message:
            self.event.set()


@pytest.fixture
def heard() -> Iterator[Heard]:
    handler = Heard("certificate controller failure")
    logger = logging.getLogger("app.certificates.controller")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def test_started_it_installs_until_stopped_then_hands_the_lease_over(
    store: ObjectStore, api_client: ApiClient, tmp_path: Path
) -> None:
    installed = threading.Event()
    certs = CertController(
        api_client, targets("pod-a", 0.05), cert_dir=tmp_path, hosts=[SVC], lifetimes=LIFETIMES
    )
    certs.start(installed.set)
    try:
        assert installed.wait(30)
    finally:
        certs.stop()
    assert store.objects[LEASE]["spec"]["holderIdentity"] == ""
    assert certs.verifies(served(tmp_path))


def test_a_failing_pass_is_retried_and_its_error_shown_while_waiting(
    store: ObjectStore, api_client: ApiClient, tmp_path: Path, heard: Heard
) -> None:
    store.failing[("GET", SECRET)] = status(500, "InternalError", "etcdserver: timeout")
    certs = CertController(
        api_client, targets("pod-a", 0.05), cert_dir=tmp_path, hosts=[SVC], lifetimes=LIFETIMES
    )
    certs.start(lambda: None)
    try:
        assert heard.event.wait(30)
        assert certs.not_ready_because("any") == f"{WAITING} (HTTP 500: etcdserver: timeout)"
    finally:
        certs.stop()
