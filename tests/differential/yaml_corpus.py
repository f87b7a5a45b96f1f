"""The generated corpus of YAML texts the YAML differential tests read with Trainer's, kubectl's and
nicguard's readers: real runtimes (Trainer's snapshot of AICR's TCPXO runtime, an MPI runtime, a
TrainingRuntime copy without apiVersion/kind, a runtime wired by DRA claims) misspelled one
construct at a time at every step of the path to the wiring, DRA claims included.
Deterministic: a table times a product, no randomness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Final

import yaml

from tests.builders import DEFAULT_INTERFACE, INTERFACES, PROFILE, by_template
from tests.differential.yaml_minimal import MINIMAL
from tests.differential.yaml_mutations import (
    FEW,
    GOOD,
    RUNTIME,
    RUNTIME_PATH,
    SPELLINGS,
    entry_mutations,
    job_mutations,
    list_mutations,
)
from tests.differential.yaml_text import Map, Node, Seq, Step, at, node_of, text_of
from tests.support.paths import ROOT

ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
SNAPSHOT_FIXTURE: Final = (
    ROOT / "tests/fixtures/upstream/trainer-v2.3.0/snapshots/tj-runtime-snapshot-v2.3.0.yaml"
)


@dataclass(frozen=True, slots=True)
class Case:
    """One text, and where it came from (``base: step path: mutation``)."""

    label: str
    text: str


def _runtime(name: str, *, namespaced: bool, typed: bool) -> dict[str, object]:
    def job(job_name: str, labels: dict[str, str], gpus: int) -> dict[str, object]:
        container: dict[str, object] = {"name": job_name, "image": "pytorch/pytorch:2.11.0"}
        if gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
        return {
            "name": job_name,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "template": {
                        "metadata": {"annotations": {DEFAULT_INTERFACE: "eth0", INTERFACES: GOOD}},
                        "spec": {"containers": [container]},
                    }
                },
            },
        }

    labels = {"trainer.kubeflow.org/framework": "torch"}
    metadata: dict[str, object] = {"name": name, "labels": labels}
    if namespaced:
        metadata["namespace"] = "team"
        # Bound to the recipe, so AICR's conventions (default-interface eth0, eth0 first) judge
        # the mutations of its wiring too (docs/rules.md, bound and unbound templates).
        labels["nicguard.dev/recipe-bound"] = "true"
    found: dict[str, object] = {
        "metadata": metadata,
        "spec": {
            "mlPolicy": {"numNodes": 2, "mpi": {"runLauncherAsNode": True}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        job("launcher", {}, 0),
                        job("node", {ANCESTOR: "trainer"}, 8),
                        job("evaluator", {}, 8),
                    ]
                }
            },
        },
    }
    if typed:
        kind = "TrainingRuntime" if namespaced else "ClusterTrainingRuntime"
        return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, **found}
    return found


def _dra_runtime() -> dict[str, object]:
    """An A4 ClusterTrainingRuntime wired by DRA claims (docs/dra.md): its node pod claims all
    RDMA NICs (default-rdma) and the netdev NICs, in its containers and an init container; an
    evaluator job (not wired) shares one ResourceClaim."""

    def job(name: str, labels: dict[str, str], pod: dict[str, object]) -> dict[str, object]:
        return {
            "name": name,
            "template": {"metadata": {"labels": labels}, "spec": {"template": {"spec": pod}}},
        }

    def container(name: str, *claims: dict[str, str]) -> dict[str, object]:
        return {"name": name, "image": "busybox", "resources": {"claims": list(claims)}}

    node = {
        "resourceClaims": [by_template(), by_template("default-netdev", name="netdev")],
        "initContainers": [container("setup", {"name": "netdev"})],
        "containers": [container("node", {"name": "rdma", "request": "rdma"}, {"name": "netdev"})],
    }
    evaluator = {
        "resourceClaims": [{"name": "shared", "resourceClaimName": "shared-rdma"}],
        "containers": [container("evaluator", {"name": "shared"})],
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed-dranet", "labels": {PROFILE: "a4-dranet"}},
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        job("node", {ANCESTOR: "trainer"}, node),
                        job("evaluator", {}, evaluator),
                    ]
                }
            },
        },
    }


@cache
def snapshot_fixture_text() -> str:
    """``data.runtime`` of the upstream fixture: Trainer v2.3.0's Marshal of AICR's TCPXO CTR."""
    configmap = yaml.safe_load(Path(SNAPSHOT_FIXTURE).read_text(encoding="utf-8"))
    text = configmap["data"]["runtime"]
    assert isinstance(text, str)
    return text


def bases() -> dict[str, Node]:
    """The documents every mutation starts from."""
    fixture = yaml.safe_load(snapshot_fixture_text())
    return {
        "trainer-snapshot": node_of(fixture),
        "mpi-ctr": node_of(_runtime(RUNTIME, namespaced=False, typed=True)),
        "bare-tr": node_of(_runtime(RUNTIME, namespaced=True, typed=False)),
        "dra-ctr": node_of(_dra_runtime()),
    }


def wiring_paths(root: Node) -> Iterator[tuple[Step, ...]]:
    """Every map entry on the path to the wiring: the runtime's kind and name, the MPI flag,
    and in each replicatedJob its name, its ancestor label and its pod-template annotations."""
    for path in (
        ("apiVersion",),
        ("kind",),
        ("metadata",),
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("metadata", "labels"),
        ("spec",),
        ("spec", "mlPolicy"),
        ("spec", "mlPolicy", "mpi"),
        ("spec", "mlPolicy", "mpi", "runLauncherAsNode"),
        ("spec", "template"),
        ("spec", "template", "spec"),
        ("spec", "template", "spec", "replicatedJobs"),
    ):
        if _has(root, path):
            yield path
    jobs = at(root, RUNTIME_PATH)
    assert isinstance(jobs, Seq)
    for index in range(len(jobs.items)):
        job = (*RUNTIME_PATH, index)
        for tail in (
            ("name",),
            ("template",),
            ("template", "metadata"),
            ("template", "metadata", "labels"),
            ("template", "metadata", "labels", ANCESTOR),
            ("template", "spec"),
            ("template", "spec", "template"),
            ("template", "spec", "template", "metadata"),
            ("template", "spec", "template", "metadata", "annotations"),
            ("template", "spec", "template", "metadata", "annotations", INTERFACES),
            ("template", "spec", "template", "metadata", "annotations", DEFAULT_INTERFACE),
        ):
            if _has(root, (*job, *tail)):
                yield (*job, *tail)
        yield from claims_paths(root, (*job, "template", "spec", "template", "spec"))


_POD_CLAIM_FIELDS: Final = ("name", "resourceClaimTemplateName", "resourceClaimName")
_CONTAINER_LISTS: Final = ("initContainers", "containers")


def claims_paths(root: Node, spec: tuple[Step, ...]) -> Iterator[tuple[Step, ...]]:
    """Every map entry on the path to the DRA claims of the pod spec at ``spec``: the spec, its
    ``resourceClaims`` and each entry's fields, each (init) container's ``resources.claims``
    and each reference's fields."""
    claims = (*spec, "resourceClaims")
    found = [spec, claims]
    found += [(*claims, i, key) for i in range(_length(root, claims)) for key in _POD_CLAIM_FIELDS]
    for containers in ((*spec, key) for key in _CONTAINER_LISTS):
        found.append(containers)
        for index in range(_length(root, containers)):
            used = (*containers, index, "resources", "claims")
            found += [used[:-1], used]
            found += [(*used, i, key) for i in range(_length(root, used)) for key in _REFERENCE]
    yield from (path for path in found if _has(root, path))


_REFERENCE: Final = ("name", "request")


def claims_lists(root: Node) -> Iterator[tuple[str, tuple[Step, ...]]]:
    """The lists of maps on the path to the DRA claims, each with a name for its mutations."""
    jobs = at(root, RUNTIME_PATH)
    assert isinstance(jobs, Seq)
    for index in range(len(jobs.items)):
        spec: tuple[Step, ...] = (*RUNTIME_PATH, index, "template", "spec", "template", "spec")
        lists = [(*spec, "resourceClaims"), *((*spec, key) for key in _CONTAINER_LISTS)]
        for key in _CONTAINER_LISTS:
            containers = (*spec, key)
            lists += (
                (*containers, i, "resources", "claims") for i in range(_length(root, containers))
            )
        for path in lists:
            if _length(root, path):
                yield ".".join(str(step) for step in path), path


def _length(root: Node, path: tuple[Step, ...]) -> int:
    """How many items the list at ``path`` has (0: absent, or not a list of maps)."""
    if not _has(root, path):
        return 0
    found = at(root, path)
    if not isinstance(found, Seq) or not all(isinstance(i, Map) for i in found.items):
        return 0
    return len(found.items)


def _has(root: Node, path: tuple[Step, ...]) -> bool:
    try:
        at(root, path)
    except (StopIteration, AssertionError, IndexError):
        return False
    return True


DOCUMENT_FORMS: Final = (
    ("plain", "", ""),
    ("--- first", "---\n", ""),
    ("--- with comment", "--- # Trainer's copy\n", ""),
    ("--- x", "--- x\n", ""),
    ("... end", "", "...\n"),
    ("%YAML 1.1", "%YAML 1.1\n---\n", ""),
    ("%YAML 1.2", "%YAML 1.2\n---\n", ""),
    ("second document other", "", "---\nmetadata: {name: other}\n"),
    ("empty second document", "", "---\n"),
    ("comment second document", "", "--- # nothing\n# more\n"),
    ("null first document", "---\n~\n---\n", ""),
    ("byte order mark", "\ufeff", ""),
    ("leading comment", "# a copy\n\n", ""),
)
"""A document's surroundings: separators, directives, terminators, further documents."""


def text_forms(label: str, text: str) -> Iterator[Case]:
    for name, head, tail in DOCUMENT_FORMS:
        yield Case(f"{label}: {name}", head + text + tail)
    yield Case(f"{label}: crlf", text.replace("\n", "\r\n"))
    yield Case(f"{label}: json", json.dumps(yaml.safe_load(text)))


BASES: Final = ("mpi-ctr", "bare-tr", "trainer-snapshot", "dra-ctr", "minimal")


@cache
def snapshot_corpus(base: str) -> tuple[Case, ...]:
    """Every text a snapshot's ``data.runtime`` is tried with, from one of the ``BASES``."""
    if base == "minimal":
        return tuple(Case(f"minimal: {label}", text) for label, text in MINIMAL)
    root = bases()[base]
    found: list[Case] = []
    if base == "trainer-snapshot":
        found += text_forms(f"{base} verbatim", snapshot_fixture_text())
    found += text_forms(base, text_of(root))
    found.append(Case(f"{base}: flow", text_of(replace(root, flow=True))))  # type: ignore[arg-type]
    spellings = SPELLINGS if base == "mpi-ctr" else FEW
    for path in wiring_paths(root):
        shown = ".".join(str(step) for step in path)
        for mutation, mutated in entry_mutations(root, path, spellings):
            found.append(Case(f"{base}: {shown}: {mutation}", text_of(mutated)))
    for mutation, mutated in job_mutations(root):
        found.append(Case(f"{base}: {mutation}", text_of(mutated)))
    for shown, path in claims_lists(root):
        for mutation, mutated in list_mutations(root, path, "entries"):
            found.append(Case(f"{base}: {shown}: {mutation}", text_of(mutated)))
    return tuple(found)
