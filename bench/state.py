"""A file-mode cluster state of 10,000 cached objects, for the RSS measurement.

The example cluster (``examples/cluster``: 9 Networks and their GKENetworkParamSets, the recipe
ConfigMap, 2 ClusterTrainingRuntimes) plus generated Networks and TrainingRuntimes up to 1,000
Networks and 8,000 runtimes; each generated Network comes with the GKENetworkParamSet it
references, both Ready, as a GKE cluster has them: 10,000 cached objects in all.
Generated runtimes are copies of the AICR ``torch-distributed-tcpxo`` runtime (a realistic,
full-size pod template) as namespaced TrainingRuntimes in 40 team namespaces.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

from app.domain.fields import JsonMap
from app.files.state import load_objects

EXAMPLES: Final = Path(__file__).resolve().parents[1] / "examples"
# 10,000 cached objects: 1,000 Networks, their 1,000 GKENetworkParamSets, 8,000 runtimes.
NETWORKS: Final = 1_000
RUNTIMES: Final = 8_000
NAMESPACES: Final = 40
_PER_FILE: Final = 1_000


@dataclass(frozen=True, slots=True)
class StateCounts:
    networks: int
    runtimes: int
    templates: int = 0  # ResourceClaimTemplates; with any, the runtimes claim them

    @property
    def param_sets(self) -> int:
        """Every Network comes with the GKENetworkParamSet it references."""
        return self.networks

    @property
    def total(self) -> int:
        return self.networks + self.param_sets + self.runtimes + self.templates

    def scaled(self, factor: int) -> StateCounts:
        return StateCounts(self.networks * factor, self.runtimes * factor, self.templates * factor)

    def divided(self, divisor: int) -> StateCounts:
        return StateCounts(
            self.networks // divisor, self.runtimes // divisor, self.templates // divisor
        )

    def described(self) -> str:
        templates = f", {self.templates:,} ResourceClaimTemplates" if self.templates else ""
        return (
            f"{self.total:,} cached objects: {self.networks:,} Networks, {self.param_sets:,} "
            f"GKENetworkParamSets, {self.runtimes:,} runtimes{templates}"
        )


def count_objects(path: Path) -> StateCounts:
    """Networks and Trainer runtimes in a file-mode state (what nicguard keeps in its view)."""
    networks = runtimes = 0
    for sourced in load_objects([path]):
        kind = sourced.obj.get("kind")
        networks += kind == "Network"
        runtimes += kind in ("ClusterTrainingRuntime", "TrainingRuntime")
    return StateCounts(networks=networks, runtimes=runtimes)


def write_state(target: Path, *, networks: int = NETWORKS, runtimes: int = RUNTIMES) -> StateCounts:
    """Write the example cluster plus generated objects to ``target``; returns the counts."""
    target.mkdir(parents=True, exist_ok=True)
    for source in sorted((EXAMPLES / "cluster").glob("*.yaml")):
        shutil.copyfile(source, target / source.name)
    base = count_objects(target)
    template = load_one(EXAMPLES / "cluster" / "torch-distributed-tcpxo.yaml")
    _write_chunks(target, "generated-networks", generated_networks(networks - base.networks))
    _write_chunks(
        target, "generated-runtimes", generated_runtimes(template, runtimes - base.runtimes)
    )
    return StateCounts(networks=networks, runtimes=runtimes)


def load_one(path: Path) -> JsonMap:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise TypeError(f"{path}: expected one object")
    return loaded


def generated_networks(count: int, start: int = 0) -> Iterator[dict[str, object]]:
    """``count`` Device Networks (numbered from ``start``), each preceded by the
    GKENetworkParamSet it references (same name); ``2 * count`` objects, every one Ready."""
    for number in range(start, start + count):
        name = f"bench-net-{number:05d}"
        yield generated_param_set(name, number)
        yield {
            "apiVersion": "networking.gke.io/v1",
            "kind": "Network",
            "metadata": {"name": name, "resourceVersion": str(100_000 + number)},
            "spec": {
                "type": "Device",
                "provider": "GKE",
                "parametersRef": {
                    "group": "networking.gke.io",
                    "kind": "GKENetworkParamSet",
                    "name": name,
                },
            },
            "status": {
                "conditions": [
                    {
                        "type": kind,
                        "status": "True",
                        "reason": reason,
                        "message": "",
                        "lastTransitionTime": "2026-11-02T09:14:05Z",
                    }
                    for kind, reason in (("Ready", "NetworkReady"), ("ParamsReady", "GNPReady"))
                ]
            },
        }


def generated_param_set(name: str, number: int) -> dict[str, object]:
    """The GKENetworkParamSet of generated Network ``name``, Ready as GKE reports it."""
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": name, "resourceVersion": str(150_000 + number)},
        "spec": {"vpc": "bench-vpc", "vpcSubnet": f"{name}-subnet", "deviceMode": "NetDevice"},
        "status": {
            "networkName": name,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "GNPReady",
                    "message": "",
                    "lastTransitionTime": "2026-11-02T09:14:01Z",
                }
            ],
        },
    }


def generated_runtimes(
    template: JsonMap, count: int, start: int = 0
) -> Iterator[dict[str, object]]:
    """``count`` copies of ``template`` as TrainingRuntimes ``tcpxo-<number>`` (numbered from
    ``start``) spread over the team namespaces."""
    for number in range(start, start + count):
        runtime = copy.deepcopy(dict(template))
        runtime["kind"] = "TrainingRuntime"
        runtime["metadata"] = {
            "name": f"tcpxo-{number:05d}",
            "namespace": f"team-{number % NAMESPACES:02d}",
            "resourceVersion": str(200_000 + number),
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        }
        yield runtime


def generated_claim_templates(count: int, start: int = 0) -> Iterator[dict[str, object]]:
    """``count`` ResourceClaimTemplates ``rdma-<number>`` (numbered from ``start``) over the team
    namespaces, as cluster-toolkit's ``default-rdma``: every RDMA NIC, or eight by count."""
    for number in range(start, start + count):
        exactly: dict[str, object] = {"deviceClassName": "mrdma.google.com"}
        exactly.update({"allocationMode": "All"} if number % 2 else {"count": 8})
        yield {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {
                "name": f"rdma-{number:05d}",
                "namespace": f"team-{number % NAMESPACES:02d}",
                "resourceVersion": str(300_000 + number),
            },
            "spec": {"spec": {"devices": {"requests": [{"name": "rdma", "exactly": exactly}]}}},
        }


def _write_chunks(target: Path, stem: str, objects: Iterable[dict[str, object]]) -> None:
    chunk: list[str] = []
    part = 0
    for obj in objects:
        chunk.append(json.dumps(obj, separators=(",", ":")))
        if len(chunk) == _PER_FILE:
            (target / f"{stem}-{part:02d}.yaml").write_text("\n---\n".join(chunk) + "\n")
            chunk, part = [], part + 1
    if chunk:
        (target / f"{stem}-{part:02d}.yaml").write_text("\n---\n".join(chunk) + "\n")
