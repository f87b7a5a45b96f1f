"""Google's own DRANET workloads (tests/fixtures/upstream/cluster-toolkit/, each headed with its
source): its templates read as the apiserver stores them, and runtimes built from its pods judged
as SPEC §16 says, through ``check``.

cluster-toolkit's node-pool module applies ``default-rdma`` rendered from a Terraform template
(``dranet_allocation_mode`` ``All`` by default, or ``ExactCount``, with no count); its A4X example
pods claim it beside NVIDIA's IMEX channel template, which the ComputeDomain controller creates
later; its A4X Max example brings a template of its own (``ExactCount``, 8).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from app.commands.check import check_files
from app.config import settings_from
from app.domain.claims import ClaimRequest, ClaimTemplate, claim_template_of, pod_claims
from app.domain.fields import FieldPath
from app.domain.kinds import Kind
from app.domain.policy import PROFILE_LABEL
from tests.builders import runtime
from tests.support.paths import UPSTREAM

TOOLKIT: Final = UPSTREAM / "cluster-toolkit"
DEFAULT_RDMA: Final = TOOLKIT / "gke-node-pool" / "resource-claim-template.yaml.tftpl"
A4X: Final = TOOLKIT / "gke-a4x" / "nccl-jobset-example.yaml"
A4X_MAX: Final = TOOLKIT / "gke-a4x-max-bm" / "nccl-jobset-example.yaml"
IMEX_A4X: Final = UPSTREAM / "gke-samples" / "gpudirect-rdma" / "nccl-test-imex-a4x.yaml"
GB200: Final = UPSTREAM / "gke-networking" / "a4x-gb200" / "networks.yaml"
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


# -- runtimes built from the pods, judged ------------------------------------------------------


def runtime_of(pod: dict[str, Any], *, profile: str | None) -> dict[str, Any]:
    """A TrainingRuntime of ``NAMESPACE`` whose node job runs ``pod`` (bound to ``profile``)."""
    return runtime(
        "dranet",
        kind=Kind.TRAINING_RUNTIME,
        namespace=NAMESPACE,
        labels=None if profile is None else {PROFILE_LABEL: profile},
        jobs=[{"name": "node", "template": {"spec": {"template": pod}}}],
    )


def annotated(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` also wired by annotation, as Google's A4X GPUDirect sample wires its pods."""
    (sample, *_) = (d for d in documents(IMEX_A4X) if d.get("kind") == "Pod")
    wiring = {
        k: v
        for k, v in sample["metadata"]["annotations"].items()
        if k.startswith("networking.gke.io/")
    }
    changed: dict[str, Any] = json.loads(json.dumps(pod))
    changed["metadata"].setdefault("annotations", {}).update(wiring)
    return changed


def imex_channel() -> dict[str, Any]:
    """The IMEX channel template the examples' ComputeDomain has NVIDIA's controller create
    (its request's shape is ours: nicguard reads only that it asks for no RDMA NIC)."""
    request = {
        "name": "channel",
        "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": CHANNEL, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def a4x_max_template() -> dict[str, Any]:
    template = one(A4X_MAX, "ResourceClaimTemplate")
    template["metadata"]["namespace"] = NAMESPACE
    return template


def judged(
    tmp_path: Path,
    runtime: dict[str, Any],
    templates: list[dict[str, Any]],
    networks: Path | None = None,
) -> tuple[bool, set[str], str]:
    """``check`` of ``runtime`` against a state holding ``templates`` (and ``networks``):
    allowed, codes, messages."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "templates.yaml").write_text(yaml.safe_dump_all(templates) if templates else "")
    if networks is not None:
        (state / "networks.yaml").write_text(networks.read_text(encoding="utf-8"))
    subject = tmp_path / "runtime.yaml"
    subject.write_text(yaml.safe_dump(runtime))
    (result,) = check_files(state, [subject], settings_from(argparse.Namespace(), {}))
    verdict = result.verdict
    messages = "\n".join(v.message for v in verdict.violations)
    return verdict.allowed, {v.code.value for v in verdict.violations}, messages


@pytest.mark.parametrize(
    ("pod", "profile", "templates", "codes", "fragments"),
    [
        pytest.param(A4X, "a4x-dranet", [default_rdma("All", NAMESPACE)], set(), (), id="a4x"),
        pytest.param(
            A4X,
            "a4x-dranet",
            [default_rdma("ExactCount", NAMESPACE), imex_channel()],
            {"RdmaClaimMismatch"},
            ("1 mrdma.google.com device",),
            id="a4x-exact-count-without-count",
        ),
        pytest.param(
            A4X,
            "a4x-dranet",
            [],
            {"ResourceClaimTemplateNotFound"},
            ("default-rdma",),
            id="a4x-before-the-node-pool-applied-it",
        ),
        pytest.param(A4X_MAX, "a4x-max-dranet", [a4x_max_template()], set(), (), id="a4x-max"),
        pytest.param(
            A4X_MAX,
            "a4x-dranet",
            [a4x_max_template(), imex_channel()],
            {"RdmaClaimMismatch"},
            ("8 mrdma.google.com devices",),
            id="a4x-max-pod-bound-to-a4x",
        ),
    ],
)
def test_a_runtime_running_the_example_pod_is_judged_by_its_profile(
    tmp_path: Path,
    pod: Path,
    profile: str,
    templates: list[dict[str, Any]],
    codes: set[str],
    fragments: tuple[str, ...],
) -> None:
    allowed, found, messages = judged(
        tmp_path, runtime_of(worker_pod(pod), profile=profile), templates
    )
    assert (allowed, found) == (not codes, codes), messages
    for fragment in fragments:
        assert fragment in messages


@pytest.mark.parametrize("profile", [None, "a4x-dranet"])
def test_the_a4x_pod_also_wired_by_annotation_is_a_wiring_mode_conflict(
    tmp_path: Path, profile: str | None
) -> None:
    """On the GB200 cluster the sample is written for, rdma-0..3 are Device-type Networks."""
    pod = annotated(worker_pod(A4X))
    _, found, _ = judged(
        tmp_path, runtime_of(pod, profile=profile), [default_rdma("All", NAMESPACE)], GB200
    )
    assert "WiringModeConflict" in found
