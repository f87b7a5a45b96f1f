"""The oracle is built from the upstream versions the differential tests' docstrings state:
those Trainer v2.3.0's go.mod pins (sigs.k8s.io/yaml and its goyaml.v2 read snapshots and files)."""

from __future__ import annotations

from tests.differential.oracle import Oracle

PINNED = {
    "github.com/GoogleCloudPlatform/gke-networking-api": "v0.2.11",
    "github.com/kubeflow/trainer/v2": "v2.3.0",
    "sigs.k8s.io/jobset": "v0.12.0",
    "k8s.io/apimachinery": "v0.36.2",
    "k8s.io/api": "v0.36.2",
    "sigs.k8s.io/yaml": "v1.6.0",
    "go.yaml.in/yaml/v2": "v2.4.3",
}


def test_the_oracle_runs_the_pinned_upstream_code(oracle: Oracle) -> None:
    modules = oracle.versions()
    assert {path: modules.get(path) for path in PINNED} == PINNED
