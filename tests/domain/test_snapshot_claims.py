"""A runtime snapshot's DRA claims read as Trainer reads them (docs/rules.md,
RuntimeSnapshotInvalid; docs/dra.md): the pod's ``resourceClaims`` and the containers'
``resources.claims`` are on the path to the wiring, so a key Go's case-insensitive field matching
would land on one of them is refused, and duplicates and merge keys are judged as goyaml.v2 reads
them."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from app.domain.cluster import ClusterSnapshot
from app.domain.evaluate import evaluate
from app.domain.kinds import Copy
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.domain.runtime_decoding import typed_reading_problem
from app.domain.runtime_snapshot import RuntimeSnapshot, read_snapshot
from app.domain.verdict import Verdict
from app.kubeyaml import load_snapshot_yaml
from tests.builders import claim_template, codes, exactly, snapshot
from tests.support.claimed_snapshots import FOLDED, TAMPERED, claimed_copy

POD = "spec.template.spec.replicatedJobs[0].template.spec.template"
READ_AS = "the copy in data.runtime cannot be read as Trainer reads it: "


@cache
def _cluster() -> ClusterSnapshot:
    """Namespace team-a's templates, as examples/dranet has them: all RDMA NICs, and one."""
    return snapshot(
        claim_template("default-rdma", namespace="team-a"),
        claim_template("rdma-one-nic", exactly(mode=None), namespace="team-a"),
    )


def _read(configmap: dict[str, Any]) -> RuntimeSnapshot:
    return read_snapshot(configmap, "tj", load_snapshot_yaml)


def _judged(configmap: dict[str, Any]) -> Verdict:
    request = Review(
        operation=Operation.CREATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace="team-a",
        obj=configmap,
        snapshot=_read(configmap),
    )
    return evaluate(request, _cluster(), Policy())


def test_trainers_copy_of_the_dranet_runtime_is_allowed() -> None:
    verdict = _judged(claimed_copy())
    assert verdict.allowed, verdict
    assert codes(verdict) == ()


@pytest.mark.parametrize("tampering", list(TAMPERED))
def test_a_claim_trainer_would_read_by_folding_is_refused_naming_the_key(tampering: str) -> None:
    """Trainer v2.3.0 reads rdma-one-nic from each of these copies (the differential oracle
    shows it); the exact keys say default-rdma."""
    verdict = _judged(claimed_copy(TAMPERED[tampering]))
    assert not verdict.allowed
    assert codes(verdict) == ("RuntimeSnapshotInvalid",)
    (violation,) = verdict.violations
    assert violation.field == "data.runtime"
    problem = _read(claimed_copy(TAMPERED[tampering])).problem or ""
    assert problem.startswith(f"{READ_AS}`{POD}.")
    assert f"{FOLDED[tampering]}` may be read by Trainer as `{POD}." in problem
    assert problem.endswith("(Go matches field names ignoring case)")
    assert problem in violation.message


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            (
                "                  resourceClaimTemplateName: default-rdma\n",
                "                  resourceClaimTemplateName: default-rdma\n"
                "                  resourceClaimTemplateName: rdma-one-nic\n",
            ),
            id="duplicate-key-later-wins",
        ),
        pytest.param(
            (
                "                  resourceClaimTemplateName: default-rdma\n",
                "                  resourceClaimTemplateName: default-rdma\n"
                "                  <<: {resourceClaimTemplateName: rdma-one-nic}\n",
            ),
            id="merge-key-after-the-explicit-key",
        ),
        pytest.param(
            (
                "                  resourceClaimTemplateName: default-rdma\n",
                "                  resourceClaimTemplateName: default-rdma\n"
                "                resourceClaims:\n"
                "                - name: rdma\n"
                "                  resourceClaimTemplateName: rdma-one-nic\n",
            ),
            id="second-list-of-the-exact-key-wins",
        ),
    ],
)
def test_duplicates_and_merge_keys_on_the_claims_are_judged_as_read(
    edit: tuple[str, str],
) -> None:
    """The later key wins for Trainer as for nicguard: the later claim is the one judged."""
    found = _read(claimed_copy(edit))
    assert found.problem is None, found.problem
    verdict = _judged(claimed_copy(edit))
    assert codes(verdict) == ("RdmaClaimMismatch",)
    assert "rdma-one-nic" in verdict.violations[0].message


def _pod(spec: str, key: str = "spec") -> str:
    """A copy whose one job's pod template holds ``key: spec`` (flow YAML)."""
    template = "{template: {spec: {template: {" + key + ": " + spec + "}}}}"
    return "metadata: {name: x}\nspec: {template: {spec: {replicatedJobs: [" + template + "]}}}\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(
            _pod("{}", key="Spec"),
            f"`{POD}.Spec` may be read by Trainer as `{POD}.spec`",
            id="pod-spec-capitalised",
        ),
        pytest.param(
            _pod("{resourceClaim\u017f: []}"),
            f"`{POD}.spec.resourceClaim\u017f` may be read by Trainer as "
            f"`{POD}.spec.resourceClaims`",
            id="resource-claims-long-s",
        ),
        pytest.param(
            _pod("{resourceClaims: [{NAME: a}]}"),
            f"`{POD}.spec.resourceClaims[0].NAME` may be read by Trainer as "
            f"`{POD}.spec.resourceClaims[0].name`",
            id="claim-name-in-capitals",
        ),
        pytest.param(
            _pod("{resourceClaims: [{resourceclaimname: a}]}"),
            f"`{POD}.spec.resourceClaims[0].resourceclaimname` may be read by Trainer as "
            f"`{POD}.spec.resourceClaims[0].resourceClaimName`",
            id="shared-claim-in-lower-case",
        ),
        pytest.param(
            _pod("{resourceClaims: [a]}"),
            f"`{POD}.spec.resourceClaims[0]` is not an object",
            id="claim-not-an-object",
        ),
        pytest.param(
            _pod("{resourceClaims: {}}"),
            f"`{POD}.spec.resourceClaims` is not a list",
            id="claims-an-object",
        ),
        pytest.param(
            _pod("{resourceClaims: [{resourceClaimTemplateName: y}]}"),
            f"`{POD}.spec.resourceClaims[0].resourceClaimTemplateName` is not a string",
            id="template-name-y",
        ),
        pytest.param(
            _pod("{resourceClaims: [{resourceClaimName: 0x10}]}"),
            f"`{POD}.spec.resourceClaims[0].resourceClaimName` is not a string",
            id="claim-name-a-number",
        ),
        pytest.param(
            _pod("{Containers: []}"),
            f"`{POD}.spec.Containers` may be read by Trainer as `{POD}.spec.containers`",
            id="containers-capitalised",
        ),
        pytest.param(
            _pod("{initcontainers: []}"),
            f"`{POD}.spec.initcontainers` may be read by Trainer as `{POD}.spec.initContainers`",
            id="init-containers-in-lower-case",
        ),
        pytest.param(
            _pod("{containers: [{re\u017fources: {}}]}"),
            f"`{POD}.spec.containers[0].re\u017fources` may be read by Trainer as "
            f"`{POD}.spec.containers[0].resources`",
            id="resources-long-s",
        ),
        pytest.param(
            _pod("{containers: [{resources: {Claims: []}}]}"),
            f"`{POD}.spec.containers[0].resources.Claims` may be read by Trainer as "
            f"`{POD}.spec.containers[0].resources.claims`",
            id="container-claims-capitalised",
        ),
        pytest.param(
            _pod("{initContainers: [{resources: {claims: [{Request: a}]}}]}"),
            f"`{POD}.spec.initContainers[0].resources.claims[0].Request` may be read by "
            f"Trainer as `{POD}.spec.initContainers[0].resources.claims[0].request`",
            id="init-container-request-capitalised",
        ),
        pytest.param(
            _pod("{containers: [{resources: {claims: [{name: on}]}}]}"),
            f"`{POD}.spec.containers[0].resources.claims[0].name` is not a string",
            id="container-claim-name-on",
        ),
        pytest.param(
            _pod("{containers: [a]}"),
            f"`{POD}.spec.containers[0]` is not an object",
            id="container-not-an-object",
        ),
    ],
)
def test_what_go_could_read_otherwise_on_the_claims_is_refused(text: str, reason: str) -> None:
    found = _read(claimed_copy() | {"data": {"runtime": text}})
    assert found.runtime is None
    assert (found.problem or "").startswith(f"{READ_AS}{reason}"), found.problem


@pytest.mark.parametrize(
    "pod_spec",
    [
        pytest.param({"NodeSelector": {"a": "b"}, "Volumes": 1}, id="other-pod-fields"),
        pytest.param(
            {"containers": [{"Name": 1, "IMAGE": "x", "resources": {"Limits": {"a": 1}}}]},
            id="other-container-fields",
        ),
        pytest.param(
            {"resourceClaims": [{"name": None, "resourceClaimTemplateName": None}]},
            id="nulls-read-as-unset",
        ),
        pytest.param({"resourceClaims": None, "containers": None}, id="null-lists"),
    ],
)
def test_fields_beside_the_claims_are_not_refused(pod_spec: dict[str, object]) -> None:
    job = {"template": {"spec": {"template": {"spec": pod_spec}}}}
    copied = {"spec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    assert typed_reading_problem(copied) is None
