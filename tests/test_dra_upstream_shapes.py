"""Google's own DRANET workloads (tests/fixtures/upstream/cluster-toolkit/, each headed with its
source): its templates and pod claims read as the apiserver stores them (SPEC §16).

cluster-toolkit's node-pool module applies ``default-rdma`` rendered from a Terraform template
(``dranet_allocation_mode`` ``All`` by default, or ``ExactCount``, with no count); its A4X example
pods claim it beside NVIDIA's IMEX channel template, which the ComputeDomain controller creates
later; its A4X Max example brings a template of its own (``ExactCount``, 8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from app.domain.claims import ClaimRequest, ClaimTemplate, claim_template_of, pod_claims
from app.domain.fields import FieldPath
from tests.support.paths import UPSTREAM

TOOLKIT: Final = UPSTREAM / "cluster-toolkit"
DEFAULT_RDMA: Final = TOOLKIT / "gke-node-pool" / "resource-claim-template.yaml.tftpl"
A4X: Final = TOOLKIT / "gke-a4x" / "nccl-jobset-example.yaml"
A4X_MAX: Final = TOOLKIT / "gke-a4x-max-bm" / "nccl-jobset-example.yaml"
IMEX_A4X: Final = UPSTREAM / "gke-samples" / "gpudirect-rdma" / "nccl-test-imex-a4x.yaml"
RDMA: Final = "mrdma.google.com"
CHANNEL: Final = "nccl-test-compute-domain-channel"
NAMESPACE: Final = "team"
INTERFACES: Final = "networking.gke.io/interfaces"


def default_rdma(allocation_mode: str = "All", namespace: str | None = None) -> dict[str, Any]:
    """The node-pool module's template as Terraform renders it (``templatefile``)."""
    text = DEFAULT_RDMA.read_text(encoding="utf-8")
    text = text.replace("${device_class_name}", RDMA).replace("${allocation_mode}", allocation_mode)
    assert "${" not in text
    found: dict[str, Any] = yaml.safe_load(text)
    if namespace is not None:
        found["metadata"]["namespace"] = namespace
    return found


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]


def one(path: Path, kind: str) -> dict[str, Any]:
    (found,) = (d for d in documents(path) if d.get("kind") == kind)
    return found


def worker_pod(path: Path) -> dict[str, Any]:
    """The pod template of the JobSet's one replicatedJob."""
    (job,) = one(path, "JobSet")["spec"]["replicatedJobs"]
    pod: dict[str, Any] = job["template"]["spec"]["template"]
    return pod


def test_default_rdma_claims_every_rdma_nic_of_a_node() -> None:
    assert claim_template_of(default_rdma()) == ClaimTemplate(
        "default", "default-rdma", (ClaimRequest("req-mrdma", RDMA, allocation_mode="All"),)
    )


def test_default_rdma_in_exact_count_mode_claims_one_nic() -> None:
    """The module passes no count: the apiserver's default, 1, is what the pods get."""
    assert claim_template_of(default_rdma("ExactCount", NAMESPACE)) == ClaimTemplate(
        NAMESPACE, "default-rdma", (ClaimRequest("req-mrdma", RDMA, count=1),)
    )


def test_the_a4x_max_example_claims_eight_nics_by_count() -> None:
    template = one(A4X_MAX, "ResourceClaimTemplate")
    assert claim_template_of(template) == ClaimTemplate(
        "default", "nccl-test-all-mrdma", (ClaimRequest("req-mrdma", RDMA, count=8),)
    )


@pytest.mark.parametrize(
    ("path", "templates"),
    [
        pytest.param(A4X, (CHANNEL, "default-rdma"), id="a4x"),
        pytest.param(A4X_MAX, (CHANNEL, "nccl-test-all-mrdma"), id="a4x-max"),
    ],
)
def test_the_example_pods_claim_the_rdma_nics_beside_the_imex_channel(
    path: Path, templates: tuple[str, ...]
) -> None:
    pod = worker_pod(path)
    claims = pod_claims(pod["spec"]["resourceClaims"], FieldPath("spec.resourceClaims"))
    assert tuple(c.template for c in claims.templates) == templates
    assert claims.shared == ()
    assert INTERFACES not in pod["metadata"].get("annotations", {})
