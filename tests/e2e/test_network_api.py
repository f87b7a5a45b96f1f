"""A cluster created without multi-networking: no Network API at all (its own control plane)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness import expect
from tests.harness.objects import example, runtime, unique
from tests.harness.stack import Stack, running
from tests.harness.state import create_namespace

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Like ``stack`` but the networking.gke.io CRDs are never installed."""
    with running(tmp_path_factory.mktemp("no-network-api"), network_api=False) as started:
        yield started


def test_wired_runtime_without_network_api_is_denied(bare: Stack) -> None:
    namespace = unique("e2e")
    create_namespace(bare.plane, namespace)
    name = unique("torch-tcpxo")
    expect.denied(
        bare.apply(runtime(name, namespace=namespace)),
        f"TrainingRuntime/{namespace}/{name}",
        "NetworkAPINotServed",
        "the cluster does not serve networks.networking.gke.io/v1, so no Network can back these",
        "--enable-multi-networking",
    )
    unwired = example("cluster/torch-distributed.yaml")
    unwired["metadata"]["name"] = plain = unique("torch-plain")
    expect.allowed(
        bare.apply(unwired), f"clustertrainingruntime.trainer.kubeflow.org/{plain} created"
    )
