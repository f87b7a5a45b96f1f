"""Small builders of Trainer objects, Networks, recipes and cluster snapshots for the tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import yaml

from app.documents import load_yaml
from app.domain.cluster import ClusterSnapshot, ObjectName, snapshot_of
from app.domain.kinds import Copy, Kind, Role, workload_kind
from app.domain.review import Operation, Review
from app.domain.runtime_snapshot import read_snapshot, snapshot_owner
from app.domain.verdict import Verdict
from app.kubeyaml.claimants import claimant_in

INTERFACES: Final = "networking.gke.io/interfaces"
DEFAULT_INTERFACE: Final = "networking.gke.io/default-interface"
RECIPE_BOUND: Final = "nicguard.dev/recipe-bound"
TCPXO_RUNTIME: Final = "torch-distributed-tcpxo"
TCPXO_MANIFEST: Final = (
    "components/kubeflow-trainer/manifests/torch-distributed-tcpxo-cluster-training-runtime.yaml"
)
RECIPE_NAME: Final = ObjectName("nicguard-system", "nicguard-recipe")
TRAINER_API: Final = "trainer.kubeflow.org/v1alpha1"
NODE_PATH: Final = "spec.template.spec.replicatedJobs[0].template.spec.template"
ANNOTATIONS_PATH: Final = f"{NODE_PATH}.metadata.annotations"
INTERFACES_PATH: Final = f"{ANNOTATIONS_PATH}[{INTERFACES}]"

Pair = tuple[str, str]
GPU_NICS: Final = tuple(f"gpu-nic-{i}" for i in range(8))
PAIRS: Final = tuple((f"eth{i + 1}", net) for i, net in enumerate(GPU_NICS))
"""The eight secondary pairs every default recipe and runtime agree on."""


def entries(pairs: Iterable[Pair]) -> list[dict[str, str]]:
    return [{"interfaceName": name, "network": net} for name, net in pairs]


def annotation(pairs: Iterable[Pair] = PAIRS) -> str:
    """The interfaces annotation value: eth0->default followed by ``pairs``."""
    return json.dumps(entries([("eth0", "default"), *pairs]))


def wired(pairs: Iterable[Pair] = PAIRS, *, default: str | None = "eth0") -> dict[str, object]:
    """Node annotations wiring ``pairs`` (and the default interface unless None)."""
    found: dict[str, object] = {INTERFACES: annotation(pairs)}
    if default is not None:
        found[DEFAULT_INTERFACE] = default
    return found


def node_job(
    annotations: Mapping[str, object] | None = None, *, name: str = "node"
) -> dict[str, object]:
    metadata = {} if annotations is None else {"annotations": dict(annotations)}
    return {
        "name": name,
        "template": {"spec": {"template": {"metadata": metadata, "spec": {"containers": []}}}},
    }


def mpi_runtime(
    name: str = "deepspeed-tcpxo",
    *,
    launcher: Mapping[str, object] | None = None,
    node: Mapping[str, object] | None = None,
    launcher_as_node: object = True,
    labels: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """An MPI CTR (launcher job first, as in Trainer's deepspeed) with ``runLauncherAsNode``."""
    found = runtime(name, jobs=[node_job(launcher, name="launcher"), node_job(node)], labels=labels)
    spec = found["spec"]
    assert isinstance(spec, dict)
    spec["mlPolicy"] = {"numNodes": 2, "mpi": {"runLauncherAsNode": launcher_as_node}}
    return found


def runtime(
    name: str = TCPXO_RUNTIME,
    *,
    annotations: Mapping[str, object] | None = None,
    kind: Kind = Kind.CLUSTER_TRAINING_RUNTIME,
    labels: Mapping[str, object] | None = None,
    namespace: str = "team",
    jobs: Sequence[object] | None = None,
) -> dict[str, object]:
    """A CTR or TR whose replicatedJobs are ``jobs`` or a single node job with ``annotations``."""
    metadata: dict[str, object] = {"name": name}
    if kind is Kind.TRAINING_RUNTIME:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    replicated = list(jobs) if jobs is not None else [node_job(annotations)]
    return {
        "apiVersion": TRAINER_API,
        "kind": kind.value,
        "metadata": metadata,
        "spec": {"template": {"spec": {"replicatedJobs": replicated}}},
    }


def bound(
    name: str = "custom", *, annotations: Mapping[str, object] | None = None
) -> dict[str, object]:
    """A CTR bound to the recipe by label rather than by name."""
    return runtime(name, annotations=annotations, labels={RECIPE_BOUND: "true"})


def trainjob(
    runtime_name: str = TCPXO_RUNTIME,
    *,
    ref: Mapping[str, object] | None = None,
    patches: Sequence[Mapping[str, object] | None] = (),
    overrides: Sequence[Mapping[str, object]] = (),
    namespace: str = "team",
) -> dict[str, object]:
    """A TrainJob naming ``runtime_name`` (or ``ref``); ``patches`` are node annotation maps."""
    spec: dict[str, object] = {
        "runtimeRef": dict(ref) if ref is not None else {"name": runtime_name}
    }
    if patches:
        spec["runtimePatches"] = [runtime_patch(p) for p in patches]
    if overrides:
        spec["podTemplateOverrides"] = [dict(o) for o in overrides]
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": "job", "namespace": namespace},
        "spec": spec,
    }


def runtime_patch(annotations: Mapping[str, object] | None, job: str = "node") -> dict[str, object]:
    """A Trainer >= 2.2 runtimePatches entry setting the pod annotations of ``job``."""
    metadata = {} if annotations is None else {"annotations": dict(annotations)}
    replicated = {"name": job, "template": {"spec": {"template": {"metadata": metadata}}}}
    return {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [replicated]}}}}


def override(annotations: Mapping[str, object], *targets: str) -> dict[str, object]:
    """A Trainer 2.1 podTemplateOverrides entry for ``targets`` (default: the node job)."""
    return {
        "targetJobs": [{"name": t} for t in targets or ("node",)],
        "metadata": {"annotations": dict(annotations)},
    }


def condition(kind: str, status: str = "True", **extra: str) -> dict[str, str]:
    return {"type": kind, "status": status, **extra}


def network(
    name: str,
    *,
    ready: bool = True,
    params_ready: bool = True,
    param_kind: str | None = "GKENetworkParamSet",
    conditions: Sequence[object] | None = None,
    network_type: str = "Device",
) -> dict[str, object]:
    """A ``networks.networking.gke.io/v1`` object; usable with the defaults."""
    spec: dict[str, object] = {"type": network_type}
    if param_kind is not None:
        spec["parametersRef"] = {"group": "networking.gke.io", "kind": param_kind, "name": name}
    if conditions is None:
        conditions = [
            condition("Ready", "True" if ready else "False", reason="NotReady", message="down"),
            condition("ParamsReady", "True" if params_ready else "False", reason="NoParams"),
        ]
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "Network",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"conditions": list(conditions)},
    }


def param_set(name: str, mode: str = "NetDevice", *, ready: bool = True) -> dict[str, object]:
    """A ``GKENetworkParamSet`` in ``mode``, Ready unless told otherwise."""
    status = "True" if ready else "False"
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": name},
        "spec": {"vpc": f"{name}-vpc", "vpcSubnet": f"{name}-subnet", "deviceMode": mode},
        "status": {
            "conditions": [
                condition("Ready", status, reason="GNPReady" if ready else "VPCNotFound")
            ]
        },
    }


GB200_NETWORKS: Final = ("gvnic-1", "rdma-0", "rdma-1", "rdma-2", "rdma-3")
GB200_PAIRS: Final = tuple((f"eth{i + 1}", net) for i, net in enumerate(GB200_NETWORKS))
RDMA_RUNTIME: Final = "torch-distributed-rdma"


def gb200(*objects: object, modes: Mapping[str, str] | None = None) -> ClusterSnapshot:
    """A GB200 cluster: gvnic-1 (NetDevice) and rdma-0..3 (RDMA), param sets in ``modes``."""
    chosen = {name: "NetDevice" if name == "gvnic-1" else "RDMA" for name in GB200_NETWORKS}
    chosen |= dict(modes or {})
    sets = [param_set(name, mode) for name, mode in chosen.items()]
    return snapshot(*sets, *objects, networks=GB200_NETWORKS, no_recipe=True)


def plain_recipe(pairs: Iterable[Pair] = PAIRS) -> dict[str, str]:
    """ConfigMap data with a plain ``tcpxoInterfaces`` list (JSON is YAML)."""
    return {"tcpxoInterfaces": json.dumps(entries(pairs))}


def recipe_result(
    override_pairs: Iterable[Pair] | None = PAIRS,
    *,
    manifests: Sequence[str] = (TCPXO_MANIFEST,),
    enabled: object = None,
    configuration: Iterable[Pair] | None = None,
) -> dict[str, object]:
    """An AICR RecipeResult document whose kubeflow-trainer component ships ``manifests``."""
    overrides: dict[str, object] = {}
    if override_pairs is not None:
        overrides["tcpxoInterfaces"] = entries(override_pairs)
    if enabled is not None:
        overrides["enabled"] = enabled
    result: dict[str, object] = {
        "kind": "RecipeResult",
        "apiVersion": "aicr.run/v1beta2",
        "componentRefs": [
            {"name": "gke-nccl-tcpxo", "type": "Helm"},
            {"name": "kubeflow-trainer", "manifestFiles": list(manifests), "overrides": overrides},
        ],
    }
    if configuration is not None:
        result["configuration"] = {"gke": {"tcpxoInterfaces": entries(configuration)}}
    return result


def configmap(
    data: Mapping[str, object] | None,
    *,
    name: ObjectName = RECIPE_NAME,
    resource_version: str | None = "7",
) -> dict[str, object]:
    metadata: dict[str, object] = {"namespace": name.namespace, "name": name.name}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    found: dict[str, object] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    if data is not None:
        found["data"] = dict(data)
    return found


def snapshot(
    *objects: object,
    networks: Iterable[str] = GPU_NICS,
    recipe: Mapping[str, object] | None = None,
    no_recipe: bool = False,
) -> ClusterSnapshot:
    """A cluster with usable ``networks``, the recipe (default: plain PAIRS) and ``objects``
    (the snapshots and workloads among them that name templates: claimants, as a file state's)."""
    found: list[object] = [network(name) for name in networks]
    if not no_recipe:
        found.append(configmap(plain_recipe() if recipe is None else recipe))
    return snapshot_of(
        [*found, *objects], recipe_name=RECIPE_NAME, load_yaml=load_yaml, claimant_of=claimant_in
    )


def with_metadata(obj: Mapping[str, object], **fields: object) -> dict[str, object]:
    """A copy of ``obj`` with ``fields`` set in its metadata."""
    metadata = obj.get("metadata")
    found = dict(metadata) if isinstance(metadata, Mapping) else {}
    return {**obj, "metadata": {**found, **fields}}


def review(
    obj: Mapping[str, object],
    *,
    operation: Operation = Operation.CREATE,
    old: Mapping[str, object] | None = None,
    subresource: str = "",
) -> Review:
    """A request for ``obj``; kind and namespace are read from the object."""
    kind: Role = workload_kind(obj) or Kind(str(obj["kind"]))
    metadata = obj.get("metadata")
    namespace = metadata.get("namespace", "") if isinstance(metadata, dict) else ""
    return Review(
        operation=operation,
        kind=kind,
        namespace=str(namespace),
        obj=obj,
        old_obj=old,
        subresource=subresource,
    )


TRAINJOB_OWNER: Final = {
    "apiVersion": TRAINER_API,
    "kind": "TrainJob",
    "name": "job",
    "uid": "0b5e8f5c-2d7a-4f3e-9d1c-6a4b3c2d1e0f",
    "controller": True,
    "blockOwnerDeletion": True,
}
"""The controller owner reference Trainer sets on TrainJob team/job's runtime snapshot."""


def bare(obj: Mapping[str, object]) -> dict[str, object]:
    """A runtime copied as Trainer v2.3.0 writes it: without apiVersion and kind."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def copy_of(
    runtime_obj: object, *, name: str = "job-runtime-snapshot", owners: object = None
) -> dict[str, object]:
    """The runtime snapshot ConfigMap team/``name`` holding ``runtime_obj`` (an object, dumped
    as YAML, or the text itself), owned by TrainJob team/job unless ``owners`` says otherwise."""
    text = runtime_obj if isinstance(runtime_obj, str) else yaml.safe_dump(runtime_obj)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "team",
            "ownerReferences": [TRAINJOB_OWNER] if owners is None else owners,
        },
        "data": {"runtime": text},
    }


JOB_SET_API: Final = "jobset.x-k8s.io/v1alpha2"
WORKLOAD_NAMESPACE: Final = "team-a"


def controller(kind: str, name: str, api_version: str = "batch/v1") -> dict[str, object]:
    """The ``ownerReferences`` entry of the controller ``kind`` ``name``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": "7c1f3a52-9e4b-4d8a-b6f0-2a3e5d7c9b11",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _workload_metadata(
    name: str | None, owners: Sequence[object], **fields: object
) -> dict[str, object]:
    metadata: dict[str, object] = {"namespace": WORKLOAD_NAMESPACE, **fields}
    if name is not None:
        metadata["name"] = name
    if owners:
        metadata["ownerReferences"] = list(owners)
    return metadata


def job_set(
    *jobs: object,
    name: str = "llama",
    owners: Sequence[object] = (),
    suspend: bool = False,
) -> dict[str, object]:
    """A JobSet in team-a whose replicatedJobs are ``jobs`` (``node_job`` builds them)."""
    return {
        "apiVersion": JOB_SET_API,
        "kind": "JobSet",
        "metadata": _workload_metadata(name, owners),
        "spec": {"suspend": suspend, "replicatedJobs": list(jobs)},
    }


def batch_job(
    annotations: Mapping[str, object] | None,
    *,
    name: str = "llama-node-0",
    owners: Sequence[object] = (),
) -> dict[str, object]:
    """A ``batch/v1`` Job in team-a whose pod template carries ``annotations``."""
    metadata = {} if annotations is None else {"annotations": dict(annotations)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _workload_metadata(name, owners),
        "spec": {"template": {"metadata": metadata, "spec": {"containers": []}}},
    }


def pod(
    annotations: Mapping[str, object] | None,
    *,
    name: str | None = "llama-node-0-0-x2k",
    owners: Sequence[object] = (),
    generate_name: str | None = None,
) -> dict[str, object]:
    """A Pod in team-a carrying ``annotations``."""
    fields: dict[str, object] = {}
    if annotations is not None:
        fields["annotations"] = dict(annotations)
    if generate_name is not None:
        fields["generateName"] = generate_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _workload_metadata(name, owners, **fields),
        "spec": {"containers": []},
    }


def snapshot_review(configmap: Mapping[str, object]) -> Review:
    """The CREATE of runtime snapshot ``configmap`` (``copy_of`` builds one) in team."""
    owner = snapshot_owner(configmap)
    assert owner is not None
    return Review(
        operation=Operation.CREATE,
        kind=Copy.RUNTIME_SNAPSHOT,
        namespace="team",
        obj=configmap,
        snapshot=read_snapshot(configmap, owner, load_yaml),
    )


def codes(verdict: Verdict) -> tuple[str, ...]:
    """The denying codes, in report order."""
    return tuple(v.code.value for v in verdict.violations)


def waived_codes(verdict: Verdict) -> tuple[str, ...]:
    return tuple(v.code.value for v in verdict.waived)


def messages(verdict: Verdict) -> str:
    """Every denial message and warning, one per line, for fragment assertions."""
    return "\n".join([v.message for v in verdict.violations] + list(verdict.warnings))


RESOURCE_API: Final = "resource.k8s.io/v1"
RDMA: Final = "mrdma.google.com"


def exactly(
    device_class: str = RDMA,
    *,
    mode: str | None = "All",
    count: object = None,
    name: str = "rdma",
    **fields: object,
) -> dict[str, object]:
    """A ResourceClaimTemplate request of ``exactly`` one class (fields left out when None;
    ``fields`` are more of ``exactly``'s, e.g. ``selectors``, ``adminAccess``)."""
    found: dict[str, object] = {"deviceClassName": device_class, **fields}
    if mode is not None:
        found["allocationMode"] = mode
    if count is not None:
        found["count"] = count
    return {"name": name, "exactly": found}


ONE_NIC_SELECTOR: Final = [{"cel": {"expression": 'device.attributes["dra.net"].ifName == "eth1"'}}]
"""A CEL selector that narrows ``All`` to one NIC."""


def first_available(*classes: str, name: str = "rdma") -> dict[str, object]:
    return {
        "name": name,
        "firstAvailable": [
            {"name": f"alt{i}", "deviceClassName": c} for i, c in enumerate(classes)
        ],
    }


def claim_template(
    name: str = "default-rdma",
    *requests: object,
    namespace: str | None = "team",
    **devices: object,
) -> dict[str, object]:
    """A ResourceClaimTemplate as the apiserver stores it (default: one request of all RDMA
    NICs); ``devices`` are more fields of ``spec.spec.devices`` (``constraints``, ``config``)."""
    metadata: dict[str, object] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": metadata,
        "spec": {"spec": {"devices": {"requests": list(requests or (exactly(),)), **devices}}},
    }


def claimed_job(
    *claims: Mapping[str, object],
    annotations: Mapping[str, object] | None = None,
    name: str = "node",
) -> dict[str, object]:
    """A node job whose pod template has ``spec.resourceClaims`` = ``claims``."""
    job = node_job(annotations, name=name)
    template = job["template"]
    assert isinstance(template, dict)
    template["spec"]["template"]["spec"]["resourceClaims"] = [dict(c) for c in claims]
    return job


def by_template(template: str = "default-rdma", *, name: str = "rdma") -> dict[str, str]:
    """A ``resourceClaims`` entry naming a ResourceClaimTemplate."""
    return {"name": name, "resourceClaimTemplateName": template}


PROFILE: Final = "nicguard.dev/profile"


def dra_runtime(
    *claims: Mapping[str, object],
    profile: str = "a4-dranet",
    name: str = "torch-distributed-dranet",
    kind: Kind = Kind.TRAINING_RUNTIME,
    annotations: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """A runtime bound by label to a DRA profile whose node pod claims ``claims``."""
    return runtime(
        name,
        kind=kind,
        labels={PROFILE: profile},
        jobs=[claimed_job(*claims, annotations=annotations)],
    )
