"""Trainer and Network objects for the e2e tier, built from ``examples/`` with fresh names.

ClusterTrainingRuntimes are cluster-scoped and never deleted (no garbage collector), so every
test names its own; ``recipe_bound=True`` adds the label that binds any runtime to the recipe.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterable, Sequence
from typing import Any, Final

import yaml

from tests.e2e.controlplane import ROOT

EXAMPLES: Final = ROOT / "examples"
TRAINER: Final = "trainer.kubeflow.org/v1alpha1"
INTERFACES: Final = "networking.gke.io/interfaces"
RECIPE_BOUND: Final = "nicguard.dev/recipe-bound"
WEBHOOK: Final = "validate.nicguard.dev"
DENIED: Final = f'admission webhook "{WEBHOOK}" denied the request: '
# The mapping recorded in examples/cluster/recipe-configmap.yaml, in order.
RECIPE_PAIRS: Final = tuple((f"eth{i + 1}", f"gpu-nic-{i}") for i in range(8))

Obj = dict[str, Any]
Pairs = Sequence[tuple[str, str]]


def unique(prefix: str) -> str:
    """A DNS-1123 name no other test uses."""
    return f"{prefix}-{secrets.token_hex(3)}"


def load(relative: str, *, raw: bool = False) -> list[Obj]:
    """The documents of ``examples/<relative>``, without server-owned fields unless ``raw``."""
    docs = yaml.safe_load_all((EXAMPLES / relative).read_text())
    return [doc if raw else strip(doc) for doc in docs if isinstance(doc, dict)]


def strip(obj: Obj) -> Obj:
    """A copy without ``status`` and ``metadata.resourceVersion`` (the server owns both)."""
    clean = copy.deepcopy(obj)
    clean.pop("status", None)
    clean.get("metadata", {}).pop("resourceVersion", None)
    return clean


def example(relative: str) -> Obj:
    (only,) = load(relative)
    return only


def as_list(objects: Iterable[Obj]) -> str:
    """A ``kind: List`` as JSON, for ``kubectl ... -f -``."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})


def interfaces(pairs: Pairs) -> str:
    """The annotation value: eth0->default first, then ``pairs`` in order."""
    entries = [("eth0", "default"), *pairs]
    return json.dumps([{"interfaceName": i, "network": n} for i, n in entries])


def node_annotations(runtime: Obj) -> dict[str, str]:
    """The (mutable) annotations of a runtime's node pod template."""
    (node,) = (
        j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node"
    )
    metadata: dict[str, Any] = node["template"]["spec"]["template"].setdefault("metadata", {})
    annotations: dict[str, str] = metadata.setdefault("annotations", {})
    return annotations


def runtime(
    name: str,
    *,
    namespace: str | None = None,
    pairs: Pairs | None = RECIPE_PAIRS,
    recipe_bound: bool = False,
) -> Obj:
    """The shipped TCPXO runtime renamed: a CTR, or a TR when ``namespace`` is given."""
    obj = example("cluster/torch-distributed-tcpxo.yaml")
    obj["metadata"] = {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}}
    if namespace is not None:
        obj["kind"] = "TrainingRuntime"
        obj["metadata"]["namespace"] = namespace
    if recipe_bound:
        obj["metadata"]["labels"][RECIPE_BOUND] = "true"
    if pairs is not None:
        node_annotations(obj)[INTERFACES] = interfaces(pairs)
    return obj


def trainjob(name: str, namespace: str, runtime_name: str, kind: str = "") -> Obj:
    """``examples/objects/good-trainjob.yaml`` renamed, on ``runtime_name``."""
    obj = example("objects/good-trainjob.yaml")
    obj["metadata"] = {"name": name, "namespace": namespace}
    obj["spec"]["runtimeRef"] = {"name": runtime_name} | ({"kind": kind} if kind else {})
    return obj


def network(name: str) -> Obj:
    """A Device Network like the examples' (its status goes through the subresource)."""
    obj = strip(load("cluster/networks.yaml")[1])
    obj["metadata"] = {"name": name}
    obj["spec"]["parametersRef"]["name"] = name
    return obj


def conditions(*, ready: bool, reason: str = "", message: str = "") -> Obj:
    """A Network ``status`` with Ready and ParamsReady both ``ready``."""
    status = "True" if ready else "False"
    return {
        "conditions": [
            {
                "type": kind,
                "status": status,
                "reason": reason or ("NetworkReady" if ready else "ParamsNotReady"),
                "message": message,
                "lastTransitionTime": "2026-11-02T09:14:05Z",
            }
            for kind in ("Ready", "ParamsReady")
        ]
    }


def with_pairs(pairs: Pairs, swap: tuple[int, int]) -> list[tuple[str, str]]:
    """``pairs`` with the entries at two 0-based positions exchanged (same pairs, new order)."""
    swapped = list(pairs)
    first, second = swap
    swapped[first], swapped[second] = swapped[second], swapped[first]
    return swapped
