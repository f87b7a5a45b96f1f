"""Trainer, Network and GKENetworkParamSet objects for the e2e tier, built from ``examples/``
with fresh names.

ClusterTrainingRuntimes are cluster-scoped and never deleted (no garbage collector), so every
test names its own; ``recipe_bound=True`` adds the label that binds any runtime to the recipe.
A TrainJob overrides its node pods' annotations through the field its Trainer release has:
``spec.runtimePatches`` (v2.2+) or ``spec.podTemplateOverrides`` (v2.1); ``for_trainer`` turns
the examples (written for v2.2+) into the v2.1 form.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from tests.harness.controlplane import ROOT

EXAMPLES: Final = ROOT / "examples"
TRAINER: Final = "trainer.kubeflow.org/v1alpha1"
INTERFACES: Final = "networking.gke.io/interfaces"
NETWORK_KIND: Final = "Network"
PARAM_SET_KIND: Final = "GKENetworkParamSet"
RECIPE_BOUND: Final = "nicguard.dev/recipe-bound"
WEBHOOK: Final = "validate.nicguard.dev"
DENIED: Final = f'admission webhook "{WEBHOOK}" denied the request: '
# The mapping recorded in examples/cluster/recipe-configmap.yaml, in order.
RECIPE_PAIRS: Final = tuple((f"eth{i + 1}", f"gpu-nic-{i}") for i in range(8))

Obj = dict[str, Any]
Pairs = Sequence[tuple[str, str]]

RUNTIME_PATCHES: Final = "runtimePatches"
POD_TEMPLATE_OVERRIDES: Final = "podTemplateOverrides"
# Trainer validates ``runtimePatches[].manager`` as a domain-prefixed path.
PATCH_MANAGER: Final = "example.com/e2e"


@dataclass(frozen=True, slots=True)
class Trainer:
    """A Kubeflow Trainer release: its CRDs (``tests/e2e/crds/trainer-<version>``), its override,
    and whether its controller copies the runtime into a snapshot ConfigMap (v2.3+, SPEC §14)."""

    version: str
    override_field: str
    snapshots: bool = False


TRAINER_V2_3: Final = Trainer("v2.3.0", RUNTIME_PATCHES, snapshots=True)
TRAINER_V2_2: Final = Trainer("v2.2.1", RUNTIME_PATCHES)
TRAINER_V2_1: Final = Trainer("v2.1.0", POD_TEMPLATE_OVERRIDES)
TRAINERS: Final = {t.version: t for t in (TRAINER_V2_3, TRAINER_V2_2, TRAINER_V2_1)}


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


def node_override(trainer: Trainer, annotations: Mapping[str, str]) -> Obj:
    """The ``spec`` field of ``trainer``'s release that sets the node pods' ``annotations``."""
    metadata = {"annotations": dict(annotations)}
    if trainer.override_field == POD_TEMPLATE_OVERRIDES:
        return {POD_TEMPLATE_OVERRIDES: [{"targetJobs": [{"name": "node"}], "metadata": metadata}]}
    job = {"name": "node", "template": {"spec": {"template": {"metadata": metadata}}}}
    spec = {"replicatedJobs": [job]}
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": spec}}}
    return {RUNTIME_PATCHES: [patch]}


def for_trainer(job: Obj, trainer: Trainer) -> Obj:
    """A TrainJob written with ``runtimePatches`` (pod metadata only) in ``trainer``'s form.

    For v2.1 each patched replicatedJob becomes one ``podTemplateOverrides`` entry, in order.
    """
    converted = copy.deepcopy(job)
    if trainer.override_field == RUNTIME_PATCHES:
        return converted
    overrides = []
    for patch in converted["spec"].pop(RUNTIME_PATCHES, []):
        for replicated in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            pod = replicated["template"]["spec"]["template"]
            if set(pod) != {"metadata"}:
                raise ValueError(f"only pod metadata converts to {POD_TEMPLATE_OVERRIDES}: {pod}")
            target = [{"name": replicated["name"]}]
            overrides.append({"targetJobs": target, "metadata": pod["metadata"]})
    converted["spec"][POD_TEMPLATE_OVERRIDES] = overrides
    return converted


def network(name: str, network_type: str = "Device") -> Obj:
    """A Network like the examples' (of ``spec.type`` ``network_type``), on the
    GKENetworkParamSet of the same name (its status goes through the subresource;
    ``param_set(name)`` is what it references)."""
    obj = strip(_example_doc(NETWORK_KIND))
    obj["metadata"] = {"name": name}
    obj["spec"]["parametersRef"]["name"] = name
    obj["spec"]["type"] = network_type
    return obj


def param_set(name: str, mode: str | None = "NetDevice") -> Obj:
    """A GKENetworkParamSet like the examples', its own VPC subnet, ``spec.deviceMode`` ``mode``
    (None: none, as an L3 Network's), its status through the subresource: ``param_set_status``."""
    obj = strip(_example_doc(PARAM_SET_KIND))
    obj["metadata"] = {"name": name}
    obj["spec"] |= {"vpcSubnet": f"subnet-{name}", "deviceMode": mode}
    if mode is None:
        del obj["spec"]["deviceMode"]
    return obj


def _example_doc(kind: str) -> Obj:
    """The first document of ``kind`` in ``examples/cluster/networks.yaml`` (with its status)."""
    return next(doc for doc in load("cluster/networks.yaml", raw=True) if doc["kind"] == kind)


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


def param_set_status(network_name: str, *, ready: bool, reason: str = "", message: str = "") -> Obj:
    """A GKENetworkParamSet ``status`` as GKE writes it: the Network it backs, condition Ready
    ``ready`` (reason ``GNPReady`` when True)."""
    return {
        "networkName": network_name,
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": reason or ("GNPReady" if ready else "GNPNotReady"),
                "message": message,
                "lastTransitionTime": "2026-11-02T09:14:01Z",
            }
        ],
    }


def with_pairs(pairs: Pairs, swap: tuple[int, int]) -> list[tuple[str, str]]:
    """``pairs`` with the entries at two 0-based positions exchanged (same pairs, new order)."""
    swapped = list(pairs)
    first, second = swap
    swapped[first], swapped[second] = swapped[second], swapped[first]
    return swapped
