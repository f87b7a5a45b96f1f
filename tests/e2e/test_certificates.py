"""Self-managed certificates on a fresh install: the controller makes the apiserver trust nicguard.

The webhook configuration is registered from the shipped manifest with no caBundle; nicguard
(as its ServiceAccount, RBAC from the manifests) creates the Secret, patches the caBundle, and
only then reports ready; the apiserver then calls it. A second replica follows the Secret and
takes the writer's Lease over when the first one shuts down.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509

from tests.harness import expect
from tests.harness.certs import (
    Cluster,
    ca_bundles,
    certificates,
    fingerprint,
    fresh_cluster,
    handshake,
    lease_holder,
    replica,
    secret,
    secret_data,
    without_ca,
)
from tests.harness.objects import RECIPE_PAIRS, runtime, unique, with_pairs
from tests.harness.procs import http_status, wait_until
from tests.harness.stack import populate
from tests.harness.webhook import Nicguard

pytestmark = pytest.mark.e2e

HANDOVER_TIMEOUT = 15.0  # well under the Lease's 30 s: the leaving writer releases it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with fresh_cluster(tmp_path_factory.mktemp("certificates"), ["replica-a"]) as started:
        populate(started.stack)
        yield started


def log_lines(nicguard: Nicguard) -> list[dict[str, object]]:
    text = (nicguard.workdir / "nicguard.log").read_text(errors="replace")
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def messages(nicguard: Nicguard) -> list[str]:
    return [str(line.get("message")) for line in log_lines(nicguard)]


def metric(nicguard: Nicguard, name: str) -> float:
    url = f"http://127.0.0.1:{nicguard.probe_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    (value,) = re.findall(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(value)


def test_the_controller_creates_the_secret_and_patches_the_ca_bundle(cluster: Cluster) -> None:
    plane, first = cluster.plane, cluster.replicas["replica-a"]
    stored = secret(plane)
    assert stored["type"] == "kubernetes.io/tls"
    assert stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "nicguard"
    data = secret_data(plane)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"}
    ca, leaf = x509.load_pem_x509_certificate(data["ca.crt"]), certificates(data["tls.crt"])[0]
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    sans = {str(name.value) for name in names}
    assert {"nicguard.nicguard-system.svc", "127.0.0.1"} <= sans
    assert ca_bundles(plane) == [data["ca-bundle.crt"]]
    assert certificates(data["ca-bundle.crt"]) == [ca]
    # What replica-a serves is the Secret's certificate, trusted through the caBundle.
    assert handshake(first.port, data["ca-bundle.crt"]) == fingerprint(data["tls.crt"])
    assert (first.cert_dir / "tls.crt").read_bytes() == data["tls.crt"]
    assert lease_holder(plane) == "replica-a"
    assert metric(first, "nicguard_cabundle_verifies") == 1.0
    expiry = metric(first, "nicguard_ca_certificate_expiry_timestamp_seconds")
    assert expiry == ca.not_valid_after_utc.timestamp()
    assert ca.not_valid_after_utc - datetime.now(UTC) > timedelta(days=729)  # default: 2 years
    said = messages(first)
    assert "writing the certificate Secret" in said
    assert "patching the caBundle of the webhook configuration" in said


def test_the_apiserver_calls_nicguard_through_the_patched_ca_bundle(cluster: Cluster) -> None:
    good = unique("tcpxo-selfmanaged")
    expect.allowed(
        cluster.stack.apply(runtime(good, recipe_bound=True)),
        f"clustertrainingruntime.trainer.kubeflow.org/{good} created",
    )
    drifted = unique("tcpxo-selfmanaged")
    obj = runtime(drifted, pairs=with_pairs(RECIPE_PAIRS, (2, 3)), recipe_bound=True)
    expect.denied(
        cluster.stack.apply(obj), f"ClusterTrainingRuntime/{drifted}", "MappingDivergesFromRecipe"
    )
    decided = {d["resource_name"] for d in cluster.replicas["replica-a"].decisions()}
    assert {good, drifted} <= decided


@pytest.mark.parametrize("how", [["apply"], ["apply", "--server-side", "--force-conflicts"]])
def test_reapplying_the_configuration_keeps_the_patched_ca_bundle(
    cluster: Cluster, how: list[str]
) -> None:
    plane = cluster.plane
    patched = ca_bundles(plane)
    assert patched[0]
    manifest = without_ca(cluster.stack.webhook_config, [cluster.replicas["replica-a"].url])
    expect.allowed(plane.kubectl("admin", *how, "-f", "-", input=json.dumps(manifest)))
    assert ca_bundles(plane) == patched


def test_a_second_replica_follows_and_takes_over_when_the_writer_leaves(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    plane, first = cluster.plane, cluster.replicas["replica-a"]
    second = replica(plane, tmp_path_factory.mktemp("replica-b"), "replica-b")
    second.start()  # ready: it installed the Secret's pair, which verifies against the caBundle
    try:
        data = secret_data(plane)
        assert handshake(second.port, data["ca-bundle.crt"]) == fingerprint(data["tls.crt"])
        assert lease_holder(plane) == "replica-a"
        assert "writing the certificate Secret" not in messages(second)
        first.stop()  # SIGTERM: drains, then releases the Lease
        wait_until(
            lambda: lease_holder(plane) == "replica-b" or None,
            timeout=HANDOVER_TIMEOUT,
            what="replica-b to hold the Lease",
            diagnose=second.report,
        )
        assert "certificate writer" in messages(second)
        first.start()  # back as a follower: same Secret, no new certificate
        assert lease_holder(plane) == "replica-b"
        assert secret_data(plane) == data
        assert http_status(f"http://127.0.0.1:{second.probe_port}/readyz") == 200
    finally:
        second.stop()
