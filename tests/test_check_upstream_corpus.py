"""Table test: nicguard's ``check`` path over REAL upstream objects (tests/fixtures/upstream/).

Every fixture file comes from upstream (Kubeflow Trainer tags, NVIDIA AICR, Google's GPUDirect
samples and docs, gke-networking-api reason constants); its header names the source and what was
changed. ``tests/fixtures/upstream/README.md`` has one row per file with its expected verdict.

Expected verdicts follow docs/rules.md (amended: InterfaceNameInvalid = "a valid Linux interface
name", so ``gpu0rdma0`` is accepted; ``eth0 -> pod-network`` accepted; MPI ``runLauncherAsNode``
makes ``launcher`` a second wired template). Rows marked ``# FAILED at HEAD`` failed before
issue #11's fixes. Rows that need §5's runtime attribution (issue #19) are added with that issue;
their fixtures are already here.

Pods (Google's samples, GKE/AICR docs) are judged at the Pod door, and their wiring is also
"transplanted": the two ``networking.gke.io`` annotations are copied unchanged into the node pod
template of a minimal ClusterTrainingRuntime built here (tmp_path), so the upstream layout meets
the rules that bind runtimes too.
"""

from __future__ import annotations

import argparse
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.commands.check import CheckResult, check_files
from app.config import Settings, settings_from
from tests.support.paths import ROOT, UPSTREAM

HEADER = "# nicguard upstream corpus"
WIRING_KEYS = ("networking.gke.io/interfaces", "networking.gke.io/default-interface")

# States: each entry is a file or directory, under the repo (examples/...) or under UPSTREAM.
A3MEGA = ("examples/cluster",)  # 8 gpu-nic Networks (+ a not-ready spare), the TCPXO recipe
A3MEGA_NO_RECIPE = ("examples/cluster/networks.yaml",)
A3MEGA_EKS_RECIPE = (
    "examples/cluster/networks.yaml",
    "aicr/recipes/eks-training-recipe-configmap.yaml",  # real RecipeResult, no kubeflow-trainer
)
A3MEGA_SNAPSHOT_CM = (
    "examples/cluster/networks.yaml",
    "aicr/docs/agent-deployment-snapshot-configmap.yaml",  # kind: Snapshot under snapshot.yaml
)
GB200 = ("gke-networking/a4x-gb200",)
GB200_RDMA2_NETDEVICE = ("gke-networking/a4x-gb200-rdma2-netdevice",)
GB200_NOT_READY = ("gke-networking/a4x-gb200-not-ready",)
A3ULTRA = ("gke-networking/a3ultra-a4",)
MULTI_HOST_NIC = ("gke-networking/multi-host-nic",)  # the L3 Network secondary-network
MULTI_HOST_NIC_POD = "gke-docs/compute-gpu-multi-host-nic-pod.yaml"
MULTI_HOST_NIC_VERBATIM = "gke-docs/compute-gpu-multi-host-nic-pod-verbatim.yaml"
GATEWAY_POD = "gateway-7d9f8-x2k4q"

SNAPSHOT_RECIPE = (("NICGUARD_RECIPE_CONFIGMAP", "gpu-operator/aicr-snapshot"),)

CTR = "ClusterTrainingRuntime"
TR = "TrainingRuntime"
TJ = "TrainJob"

V21 = "trainer-v2.1.0/runtimes/"
V23 = "trainer-v2.3.0/runtimes/"
TORCH_V23 = V23 + "torch_distributed.yaml"
AICR_TCPXO = "aicr/torch-distributed-tcpxo-cluster-training-runtime.yaml"
AICR_RDMA = "aicr/torch-distributed-rdma-cluster-training-runtime.yaml"
AICR_NVLS = "aicr/validators/gb200-gke-runtime-nvls.yaml"
SKETCH = "aicr/docs/fabric-attached-training-sketch.yaml"


@dataclass(frozen=True)
class Transplant:
    """Copy a Pod's wiring annotations into a minimal CTR named ``name``."""

    pod_file: str
    pod: str
    name: str


@dataclass(frozen=True)
class Row:
    id: str
    files: tuple[str, ...]
    state: tuple[str, ...]
    kind: str
    name: str
    allowed: bool
    codes: frozenset[str] = frozenset()
    exact: bool = True
    """False: ``codes`` must be present, others may be too."""
    namespace: str | None = None
    warns: bool | None = None
    """True: at least one warning; False: none; None: not checked."""
    text: tuple[str, ...] = ()
    """Substrings that must appear in the violation messages and warnings."""
    env: tuple[tuple[str, str], ...] = ()
    transplant: Transplant | None = None


def _codes(*codes: str) -> frozenset[str]:
    return frozenset(codes)


def _stock(prefix: str, path: str, name: str) -> Row:
    return Row(f"{prefix}{path}", (prefix + path,), A3MEGA, CTR, name, True, warns=False)


_STOCK_V21 = [
    ("data-cache/torch_distributed_with_cache.yaml", "torch-distributed-with-cache"),
    ("deepspeed_distributed.yaml", "deepspeed-distributed"),  # mpi runLauncherAsNode: true
    ("mlx_distributed.yaml", "mlx-distributed"),  # mpi runLauncherAsNode: true
    ("torch_distributed.yaml", "torch-distributed"),
    ("torchtune/llama3_2/llama3_2_1B.yaml", "torchtune-llama3.2-1b"),
    ("torchtune/llama3_2/llama3_2_3B.yaml", "torchtune-llama3.2-3b"),
    ("torchtune/qwen2_5/qwen2_5_1.5B.yaml", "torchtune-qwen2.5-1.5b"),
]
_STOCK_V23 = [
    *_STOCK_V21,
    ("jax_distributed.yaml", "jax-distributed"),
    ("xgboost_distributed.yaml", "xgboost-distributed"),
]

SNAPSHOTS = "trainer-v2.3.0/snapshots/"

ROWS: list[Row] = [
    # --- Trainer's runtime snapshots of the AICR TCPXO runtime, as v2.3.0 and the fixed release
    # write them: read as the runtime they copy, admitted (docs/rules.md). ---
    *(
        Row(
            f"trainer snapshot {variant}",
            (f"{SNAPSHOTS}tj-runtime-snapshot-{variant}.yaml",),
            A3MEGA,
            "ConfigMap",
            "tj-runtime-snapshot",
            True,
            namespace="team-a",
            warns=False,
        )
        for variant in ("v2.3.0", "fixed")
    ),
    # --- Kubeflow Trainer stock runtimes: unwired -> allowed, no warning (docs/rules.md). ---
    *(_stock(V21, path, name) for path, name in _STOCK_V21),
    *(_stock(V23, path, name) for path, name in _STOCK_V23),
    # --- Kubeflow Trainer v2.3.0 examples/ and docs: unwired objects and TrainJobs. ---
    Row(
        "v2.3.0 examples 01-multi-node",
        ("trainer-v2.3.0/examples/yaml/01-multi-node.yaml", TORCH_V23),
        A3MEGA,
        TJ,
        "multi-node-example",
        True,
        warns=False,
    ),
    Row(  # runtimePatches carry JobSet-level annotations only: not pod wiring.
        "v2.3.0 examples 02-runtime-patches",
        ("trainer-v2.3.0/examples/yaml/02-runtime-patches.yaml", TORCH_V23),
        A3MEGA,
        TJ,
        "runtime-patches-example",
        True,
        warns=False,
    ),
    Row(
        "v2.3.0 examples 03-kueue",
        ("trainer-v2.3.0/examples/yaml/03-kueue-integration.yaml", TORCH_V23),
        A3MEGA,
        TJ,
        "kueue-example",
        True,
        warns=False,
    ),
    Row(
        "v2.3.0 examples 04-volcano CTR",
        ("trainer-v2.3.0/examples/yaml/04-volcano-integration.yaml",),
        A3MEGA,
        CTR,
        "torch-distributed-volcano",
        True,
        warns=False,
    ),
    Row(
        "v2.3.0 examples 04-volcano TrainJob",
        ("trainer-v2.3.0/examples/yaml/04-volcano-integration.yaml",),
        A3MEGA,
        TJ,
        "volcano-example",
        True,
        warns=False,
    ),
    Row(
        "v2.3.0 examples 05-multi-step TR",
        ("trainer-v2.3.0/examples/yaml/05-multi-step.yaml",),
        A3MEGA,
        TR,
        "torch-with-dataset-init",
        True,
        warns=False,
    ),
    Row(
        "v2.3.0 examples 05-multi-step TrainJob",
        ("trainer-v2.3.0/examples/yaml/05-multi-step.yaml",),
        A3MEGA,
        TJ,
        "multi-step-example",
        True,
        warns=False,
    ),
    Row(
        "v2.3.0 examples flux-runtime",
        ("trainer-v2.3.0/examples/flux/flux-runtime.yaml",),
        A3MEGA,
        CTR,
        "flux-distributed",
        True,
        warns=False,
    ),
    *(
        Row(
            f"v2.3.0 examples flux {stem}",
            (
                f"trainer-v2.3.0/examples/flux/{stem}.yaml",
                "trainer-v2.3.0/examples/flux/flux-runtime.yaml",
            ),
            A3MEGA,
            TJ,
            name,
            True,
            warns=False,
        )
        for stem, name in [
            ("flux-interactive", "lammps-flux-interactive"),
            ("lammps-train-gpus", "lammps-flux"),
            ("lammps-train-job", "lammps-flux"),
        ]
    ),
    *(
        Row(
            f"v2.3.0 docs runtime guide {kind} {ns}/{name}",
            ("trainer-v2.3.0/docs/runtime-guide.yaml",),
            A3MEGA,
            kind,
            name,
            True,
            namespace=ns,
            warns=False,
        )
        for kind, ns, name in [
            (CTR, "", "torch-distributed"),
            (TJ, "default", "example-train-job"),
            (TR, "team-a", "pytorch-team-runtime"),
            (TJ, "team-a", "example-train-job"),
        ]
    ),
    Row(  # runtime pytorch-distributed-gpu exists nowhere: allow with a warning (docs/rules.md).
        "v2.3.0 docs runtime-patches TrainJob (runtime absent)",
        ("trainer-v2.3.0/docs/runtime-patches-trainjob.yaml",),
        A3MEGA,
        TJ,
        "pytorch-distributed",
        True,
        warns=True,
        text=("pytorch-distributed-gpu",),
    ),
    Row(  # v2.1 proposal shape (podTemplateOverrides, apiVersion v2alpha1), runtime absent.
        "v2.1.0 proposal podTemplateOverrides TrainJob (runtime absent)",
        ("trainer-v2.1.0/docs/proposal-2170-podtemplateoverrides-trainjob.yaml",),
        A3MEGA,
        TJ,
        "pytorch-distributed",
        True,
        namespace="tenant-alpha",
        warns=True,
    ),
    # --- AICR TCPXO runtime (recipe-bound by name; a3-mega-tcpxo profile). ---
    Row(
        "aicr tcpxo vs a3-mega cluster",
        (AICR_TCPXO,),
        A3MEGA,
        CTR,
        "torch-distributed-tcpxo",
        True,
        warns=False,
    ),
    Row(
        "aicr tcpxo, no recipe ConfigMap",
        (AICR_TCPXO,),
        A3MEGA_NO_RECIPE,
        CTR,
        "torch-distributed-tcpxo",
        False,
        _codes("RecipeUnavailable"),
    ),
    Row(  # a real RecipeResult without kubeflow-trainer delivers nothing: nothing recipe-bound.
        "aicr tcpxo, recipe = AICR eks-training RecipeResult",
        (AICR_TCPXO,),
        A3MEGA_EKS_RECIPE,
        CTR,
        "torch-distributed-tcpxo",
        True,
    ),
    # FAILED at HEAD a05c5ce (allowed: the document's kind was not checked).
    Row(  # the Snapshot `aicr snapshot` writes, under snapshot.yaml: never switches the check off.
        "aicr tcpxo, recipe-configmap points at an AICR Snapshot ConfigMap",
        (AICR_TCPXO,),
        A3MEGA_SNAPSHOT_CM,
        CTR,
        "torch-distributed-tcpxo",
        False,
        _codes("RecipeInvalid"),
        env=SNAPSHOT_RECIPE,
    ),
    Row(  # GB200 cluster: no recipe, no gpu-nic Networks.
        "aicr tcpxo vs gb200 cluster",
        (AICR_TCPXO,),
        GB200,
        CTR,
        "torch-distributed-tcpxo",
        False,
        _codes("RecipeUnavailable", "NetworkNotFound"),
    ),
    # --- AICR GB200 RDMA runtime (a4x-gb200-rdma profile, bound by name; docs/rules.md). ---
    Row(
        "aicr rdma vs gb200 cluster",
        (AICR_RDMA,),
        GB200,
        CTR,
        "torch-distributed-rdma",
        True,
        warns=False,
    ),
    # The param sets' own state too (docs/rules.md): rdma-1's is deleted, rdma-3's SubnetNotFound.
    Row(
        "aicr rdma vs gb200, three broken pairs",
        (AICR_RDMA,),
        GB200_NOT_READY,
        CTR,
        "torch-distributed-rdma",
        False,
        _codes("NetworkNotReady"),
        exact=False,
        text=(
            "rdma-1",
            "rdma-2",
            "rdma-3",
            "GNPDeleted",
            "DeviceModeMissing",
            "GNPParamsNotReady",
            "GKENetworkParamSet rdma-1 does not exist",
            "GKENetworkParamSet rdma-3: Ready=SubnetNotFound",
        ),
    ),
    Row(  # bound by name to a4x-gb200-rdma: the param set behind rdma-2 is NetDevice, not RDMA.
        "aicr rdma vs gb200, rdma-2 param set NetDevice",
        (AICR_RDMA,),
        GB200_RDMA2_NETDEVICE,
        CTR,
        "torch-distributed-rdma",
        False,
        _codes("DeviceModeMismatch"),
        text=("eth4->rdma-2", "deviceMode NetDevice", "profile a4x-gb200-rdma requires RDMA"),
    ),
    Row(
        "aicr rdma vs a3-mega cluster",
        (AICR_RDMA,),
        A3MEGA,
        CTR,
        "torch-distributed-rdma",
        False,
        _codes("NetworkNotFound"),
        text=("gvnic-1", "rdma-0", "rdma-3"),
    ),
    # AICR's GB200 NCCL benchmark TrainingRuntime (MPI, runLauncherAsNode: false: launcher unwired).
    Row(
        "aicr gb200 nvls TR vs gb200",
        (AICR_NVLS,),
        GB200,
        TR,
        "nccl-all-reduce-runtime",
        True,
        warns=False,
    ),
    Row(  # not profile-bound (a TR without the label): device modes are not judged.
        "aicr gb200 nvls TR vs gb200, rdma-2 param set NetDevice",
        (AICR_NVLS,),
        GB200_RDMA2_NETDEVICE,
        TR,
        "nccl-all-reduce-runtime",
        True,
    ),
    Row(
        "aicr gb200 nvls TR vs gb200, three broken pairs",
        (AICR_NVLS,),
        GB200_NOT_READY,
        TR,
        "nccl-all-reduce-runtime",
        False,
        _codes("NetworkNotReady"),
    ),
    # AICR's doc "placement sketch" applied verbatim: placeholder instead of JSON.
    Row(
        "aicr doc sketch TR",
        (SKETCH,),
        A3MEGA,
        TR,
        "torch-tcpxo",
        False,
        _codes("InterfacesAnnotationMalformed"),
    ),
    # Issue #19 (docs/rules.md) makes the message name the runtime to fix (torch-tcpxo).
    Row(  # inherits the runtime's wiring unchanged.
        "aicr doc sketch TrainJob",
        (SKETCH,),
        A3MEGA,
        TJ,
        "",
        False,
        _codes("InterfacesAnnotationMalformed"),
    ),
    # --- Pod layouts from Google's samples and the docs, transplanted into a CTR. ---
    Row(  # A3 High TCPX, 4 NICs, Google's names vpc1..vpc4.
        "transplant gke tcpx sample (vpc1..4) vs a3-mega",
        (),
        A3MEGA,
        CTR,
        "transplant-tcpx",
        False,
        _codes("NetworkNotFound"),
        transplant=Transplant(
            "gke-samples/gpudirect-tcpx/nccl-test-latest.yaml",
            "nccl-test-host-1",
            "transplant-tcpx",
        ),
    ),
    Row(  # A3 Mega TCPXO, 8 NICs, vpc1..vpc8.
        "transplant gke tcpxo sample (vpc1..8) vs a3-mega",
        (),
        A3MEGA,
        CTR,
        "transplant-tcpxo",
        False,
        _codes("NetworkNotFound"),
        transplant=Transplant(
            "gke-samples/gpudirect-tcpxo/nccl-test-latest.yaml",
            "nccl-test-host-1",
            "transplant-tcpxo",
        ),
    ),
    Row(  # same layout under the recipe-bound name: diverges from the recipe too.
        "transplant gke tcpxo sample as torch-distributed-tcpxo",
        (),
        A3MEGA,
        CTR,
        "torch-distributed-tcpxo",
        False,
        _codes("MappingDivergesFromRecipe", "NetworkNotFound"),
        transplant=Transplant(
            "gke-samples/gpudirect-tcpxo/nccl-test-latest.yaml",
            "nccl-test-host-1",
            "torch-distributed-tcpxo",
        ),
    ),
    Row(  # AICR's own doc Pod names gpu-nic0 (no dash); examples/cluster has gpu-nic-0.
        "transplant aicr tcpxo doc pod (gpu-nic0..7) vs a3-mega",
        (),
        A3MEGA,
        CTR,
        "transplant-aicr-doc",
        False,
        _codes("NetworkNotFound"),
        text=("gpu-nic0",),
        transplant=Transplant(
            "aicr/docs/gke-tcpxo-networking-pod.yaml", "my-workload", "transplant-aicr-doc"
        ),
    ),
    Row(  # A3 Ultra/A4 Standard: eth2..eth9 -> rdma-0..7, eth1 skipped (not contiguous).
        "transplant gke rdma sample (eth2..9) vs a3-ultra",
        (),
        A3ULTRA,
        CTR,
        "transplant-rdma",
        True,
        warns=False,
        transplant=Transplant(
            "gke-samples/gpudirect-rdma/nccl-test.yaml", "nccl-test-host-1", "transplant-rdma"
        ),
    ),
    Row(  # A3 Ultra/A4 Autopilot: eth1 -> gvnic-1, eth2..eth9 -> rdma-0..7.
        "transplant gke rdma autopilot sample vs a3-ultra",
        (),
        A3ULTRA,
        CTR,
        "transplant-rdma-ap",
        True,
        warns=False,
        transplant=Transplant(
            "gke-samples/gpudirect-rdma/nccl-test-autopilot.yaml",
            "nccl-test-host-1",
            "transplant-rdma-ap",
        ),
    ),
    # FAILED at HEAD a05c5ce: InterfaceNameInvalid (^eth[1-9][0-9]*$); the rule is now "a valid
    # Linux interface name".
    Row(
        "transplant ai-hypercomputer doc (gpu0rdma0..gpu7rdma0) vs a3-ultra",
        (),
        A3ULTRA,
        CTR,
        "transplant-gpurdma",
        True,
        warns=False,
        transplant=Transplant(
            "gke-docs/ai-hypercomputer-nccl-collect-and-understand-pod.yaml",
            "my-workload",
            "transplant-gpurdma",
        ),
    ),
    Row(  # A4X sample: eth2..eth5 -> rdma-0..3, no gvnic-1.
        "transplant gke a4x imex sample vs gb200",
        (),
        GB200,
        CTR,
        "transplant-a4x",
        True,
        warns=False,
        transplant=Transplant(
            "gke-samples/gpudirect-rdma/nccl-test-imex-a4x.yaml",
            "nccl-test-host-1",
            "transplant-a4x",
        ),
    ),
    # --- Google's "multiple host NICs" gateway Pod (default route on eth1): GKE runs it, so an
    # unbound template is admitted; the recipe's runtime is held to AICR's eth0 (SPEC §3). ---
    Row(
        "gke multi-host-nic gateway pod as google prints it",
        (MULTI_HOST_NIC_VERBATIM,),
        MULTI_HOST_NIC,
        "Pod",
        GATEWAY_POD,
        False,
        _codes("InterfacesAnnotationMalformed"),
        text=("is not valid JSON",),
    ),
    Row(
        "transplant gke multi-host-nic gateway into a team runtime",
        (),
        MULTI_HOST_NIC,
        CTR,
        "team-gateway",
        True,
        warns=False,
        transplant=Transplant(MULTI_HOST_NIC_POD, GATEWAY_POD, "team-gateway"),
    ),
    Row(
        "transplant gke multi-host-nic gateway into the recipe's runtime",
        (),
        (*A3MEGA, *MULTI_HOST_NIC),
        CTR,
        "torch-distributed-tcpxo",
        False,
        _codes("DefaultInterfaceInvalid"),
        exact=False,
        text=('networking.gke.io/default-interface is "eth1"',),
        transplant=Transplant(MULTI_HOST_NIC_POD, GATEWAY_POD, "torch-distributed-tcpxo"),
    ),
]


def _source(entry: str) -> Path:
    return ROOT / entry if entry.startswith("examples/") else UPSTREAM / entry


def _state(tmp_path: Path, entries: tuple[str, ...]) -> Path:
    """The state entries copied side by side into one directory (file mode reads it recursively)."""
    state = tmp_path / "state"
    for index, entry in enumerate(entries):
        source, target = _source(entry), state / str(index)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.mkdir(parents=True)
            shutil.copy(source, target / source.name)
    return state


def _settings(env: tuple[tuple[str, str], ...]) -> Settings:
    return settings_from(argparse.Namespace(), dict(env))


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]


def _pod_wiring(pod_file: str, pod: str) -> dict[str, str]:
    for doc in _documents(UPSTREAM / pod_file):
        metadata: Mapping[str, Any] = doc.get("metadata") or {}
        if doc.get("kind") == "Pod" and metadata.get("name") == pod:
            annotations: Mapping[str, str] = metadata.get("annotations") or {}
            return {key: annotations[key] for key in WIRING_KEYS if key in annotations}
    raise AssertionError(f"no Pod {pod} in {pod_file}")


def _transplant(tmp_path: Path, spec: Transplant) -> Path:
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": CTR,
        "metadata": {"name": spec.name},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {
                                    "template": {
                                        "metadata": {
                                            "annotations": _pod_wiring(spec.pod_file, spec.pod)
                                        },
                                        "spec": {
                                            "containers": [{"name": "node", "image": "trainer"}]
                                        },
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }
    path = tmp_path / "transplant.yaml"
    path.write_text(yaml.safe_dump(runtime, sort_keys=False), encoding="utf-8")
    return path


def _pick(results: list[CheckResult], row: Row) -> CheckResult:
    found = [
        r
        for r in results
        if r.kind == row.kind
        and r.name == row.name
        and (row.namespace is None or r.namespace == row.namespace)
    ]
    assert len(found) == 1, f"{row.kind} {row.namespace}/{row.name}: {len(found)} results"
    return found[0]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_upstream_object_verdict(row: Row, tmp_path: Path) -> None:
    files = [UPSTREAM / f for f in row.files]
    if row.transplant is not None:
        files.append(_transplant(tmp_path, row.transplant))
    result = _pick(check_files(_state(tmp_path, row.state), files, _settings(row.env)), row)

    codes = {v.code.value for v in result.verdict.violations}
    shown = [f"[{v.code.value}] {v.message} @ {v.field}" for v in result.verdict.violations]
    assert result.verdict.allowed is row.allowed, shown or result.verdict.warnings
    if row.exact:
        assert codes == row.codes, shown
    else:
        assert row.codes <= codes, shown
    if row.warns is not None:
        assert bool(result.verdict.warnings) is row.warns, result.verdict.warnings
    said = "\n".join([v.message for v in result.verdict.violations] + list(result.verdict.warnings))
    for text in row.text:
        assert text in said, said


# Each upstream Pod at the Pod door (docs/rules.md, the workload doors), against the cluster its
# Networks are named for; the vpc1..vpcN of Google's TCPX/TCPXO samples and AICR's gpu-nicN (no
# dash) exist on no state here.
POD_VERDICTS = [
    ("gke-samples/gpudirect-tcpx/nccl-test-latest.yaml", A3MEGA, False),
    ("gke-samples/gpudirect-tcpxo/nccl-test-latest.yaml", A3MEGA, False),
    ("gke-samples/gpudirect-rdma/nccl-test.yaml", A3ULTRA, True),
    ("gke-samples/gpudirect-rdma/nccl-test-autopilot.yaml", A3ULTRA, True),
    ("gke-samples/gpudirect-rdma/nccl-test-imex-a4x.yaml", GB200, True),
    ("gke-docs/ai-hypercomputer-nccl-collect-and-understand-pod.yaml", A3ULTRA, True),
    ("aicr/docs/gke-tcpxo-networking-pod.yaml", A3MEGA, False),
    (MULTI_HOST_NIC_POD, MULTI_HOST_NIC, True),
]


@pytest.mark.parametrize(
    ("pod_file", "state", "allowed"), POD_VERDICTS, ids=[row[0] for row in POD_VERDICTS]
)
def test_upstream_pods_are_judged_at_the_pod_door(
    pod_file: str, state: tuple[str, ...], allowed: bool, tmp_path: Path
) -> None:
    """Each wired Pod of the sample (Services and ComputeDomains are not judged), named in its
    messages; a Network the state lacks is NetworkNotFound."""
    results = check_files(_state(tmp_path, state), [UPSTREAM / pod_file], _settings(()))
    assert results
    assert {r.kind for r in results} == {"Pod"}
    for result in results:
        shown = [f"[{v.code.value}] {v.message}" for v in result.verdict.violations]
        assert result.verdict.allowed is allowed, shown
        assert all(v.code.value == "NetworkNotFound" for v in result.verdict.violations), shown
        assert all(
            v.message.startswith(f"Pod default/{result.name}: ") for v in result.verdict.violations
        )


CORPUS = sorted(p for p in UPSTREAM.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(UPSTREAM)) for p in CORPUS])
def test_corpus_file_is_sourced_and_listed(path: Path) -> None:
    """Every file names its source in a header, parses, and has a row in the README."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith(HEADER), "missing the source header"
    assert re.search(r"^#\s+(commit|ref|url):", text, re.MULTILINE), (
        "header names no commit/ref/url"
    )
    assert re.search(r"^#\s+change:", text, re.MULTILINE), "header does not say what was changed"
    assert _documents(path), "no YAML object"
    readme = (UPSTREAM / "README.md").read_text(encoding="utf-8")
    assert f"`{path.relative_to(UPSTREAM)}`" in readme, "no README row"
