"""No TrainJob patch reaches a pod's ``resourceClaims`` (Trainer v2.1.0 and v2.3.0), shown with
Trainer's own types (the oracle reflects over them) and its own CRDs (the structural schema the
apiserver prunes a TrainJob with). A TrainJob's effective claims are therefore its runtime's (SPEC
§16). A Trainer that lets patches carry claims (kubeflow/trainer#4027 proposes it) fails these
tests: then the claims join the differential corpus and the effective merge (by ``name``)."""

from __future__ import annotations

from typing import Final

import pytest
import yaml

from tests.differential.oracle import Oracle
from tests.support.paths import ROOT

UPGRADE: Final = (
    "a Trainer TrainJob can now carry pod resourceClaims (kubeflow/trainer#4027?): merge them into "
    "the TrainJob's effective claims by name as Trainer does (SPEC §16) and add them to the "
    "differential corpus"
)

POD_SPEC_PATCH: Final = frozenset(
    {
        "affinity",
        "containers",
        "imagePullSecrets",
        "initContainers",
        "nodeSelector",
        "schedulingGates",
        "securityContext",
        "serviceAccountName",
        "terminationGracePeriodSeconds",
        "tolerations",
        "volumes",
    }
)
"""Trainer v2.3.0's PodSpecPatch: a new field is a decision to review, not a silent pass."""

CONTAINER_PATCH: Final = frozenset({"env", "name", "securityContext", "volumeMounts"})


def test_no_runtime_patch_reaches_a_pod_s_resource_claims(oracle: Oracle) -> None:
    found = oracle.patchable()
    assert "resourceClaims" not in found.pod_spec, UPGRADE
    assert found.pod_claims == (), UPGRADE


def test_the_pod_spec_patch_carries_exactly_these_fields(oracle: Oracle) -> None:
    found = oracle.patchable()
    assert found.pod_spec == POD_SPEC_PATCH
    assert found.container == found.init_container == CONTAINER_PATCH


def test_a_container_names_a_claim_only_through_resources_per_node(oracle: Oracle) -> None:
    """``resourcesPerNode.claims`` names a pod claim; it cannot create one, and a patched container
    carries no ``resources`` at all."""
    found = oracle.patchable()
    assert found.container_claims == ("spec.trainer.resourcesPerNode.claims",)
    assert "resources" not in found.container


def _trainjob_schema(version: str) -> dict[str, object]:
    crds = ROOT / "tests" / "e2e" / "crds" / f"trainer-{version}"
    path = crds / "trainer.kubeflow.org_trainjobs.yaml"
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    schema = served["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def _paths_named(schema: object, names: frozenset[str], path: str = "") -> list[str]:
    """Every property path (``.items`` for list elements) whose last name is one of ``names``."""
    if not isinstance(schema, dict):
        return []
    found = []
    properties = schema.get("properties", {})
    assert isinstance(properties, dict)
    for name, child in properties.items():
        here = f"{path}.{name}" if path else str(name)
        if name in names:
            found.append(here)
        found.extend(_paths_named(child, names, here))
    found.extend(_paths_named(schema.get("items"), names, f"{path}[]"))
    return found


@pytest.mark.parametrize("version", ["v2.1.0", "v2.3.0"])
def test_the_trainjob_crd_prunes_every_pod_claim(version: str) -> None:
    """What the apiserver keeps of a TrainJob: no ``resourceClaims`` anywhere (podTemplateOverrides
    at v2.1.0, runtimePatches at v2.3.0), and a container's ``claims`` only in resourcesPerNode."""
    schema = _trainjob_schema(version)
    assert _paths_named(schema, frozenset({"resourceClaims", "resourceClaimName"})) == [], UPGRADE
    assert _paths_named(schema, frozenset({"claims"})) == ["spec.trainer.resourcesPerNode.claims"]
