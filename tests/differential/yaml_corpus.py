"""The generated corpus of YAML texts the YAML differential tests read with Trainer's, kubectl's and
nicguard's readers: real runtimes (Trainer's snapshot of AICR's TCPXO runtime, an MPI runtime, a
TrainingRuntime copy without apiVersion/kind) misspelled one construct at a time at every step of
the path to the wiring. Deterministic: a table times a product, no randomness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Final

import yaml

from tests.builders import DEFAULT_INTERFACE, INTERFACES
from tests.differential.yaml_minimal import MINIMAL
from tests.differential.yaml_mutations import (
    FEW,
    GOOD,
    RUNTIME,
    RUNTIME_PATH,
    SPELLINGS,
    entry_mutations,
    job_mutations,
)
from tests.differential.yaml_text import Node, Seq, Step, at, node_of, text_of
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

    metadata: dict[str, object] = {
        "name": name,
        "labels": {"trainer.kubeflow.org/framework": "torch"},
    }
    if namespaced:
        metadata["namespace"] = "team"
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


BASES: Final = ("mpi-ctr", "bare-tr", "trainer-snapshot", "minimal")


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
    return tuple(found)
