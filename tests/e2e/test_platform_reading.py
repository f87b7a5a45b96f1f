"""What GKE and Trainer would read, not what nicguard would: objects that a namespace user can
apply through ``kubectl`` and whose wiring GKE's JSON decoder or Trainer's merge reads otherwise
are refused (docs/rules.md: InterfacesAnnotationMalformed, PatchDirectiveUnsupported, wired
templates by label); a directive elsewhere in a patch is still admitted.

TrainJob tests run on both Trainer releases' CRDs (``runtimePatches`` on v2.3.0,
``podTemplateOverrides`` on v2.1.0), as tests/e2e/test_trainjobs.py does.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.harness import expect
from tests.harness.objects import (
    INTERFACES,
    PATCH_MANAGER,
    POD_TEMPLATE_OVERRIDES,
    RECIPE_PAIRS,
    Obj,
    interfaces,
    node_override,
    runtime,
    trainjob,
    unique,
    with_pairs,
)
from tests.harness.stack import Stack
from tests.harness.state import create_namespace, eventually

pytestmark = pytest.mark.e2e

ANCESTOR: dict[str, Any] = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


@pytest.fixture
def stack(each_trainer: Stack) -> Stack:
    """Overrides the session ``stack`` (and so ``namespace``): once per Trainer release."""
    return each_trainer


def _entries_with(eth4: str) -> str:
    """The recipe's mapping as annotation text, with entry eth4's keys written as ``eth4``."""
    entries = [
        f'{{"interfaceName":"{i}","network":"{n}"}}'
        for i, n in [("eth0", "default"), *RECIPE_PAIRS]
    ]
    entries[4] = f'{{"interfaceName":"eth4",{eth4}}}'
    return "[" + ",".join(entries) + "]"


def _patched(stack: Stack, namespace: str, annotations: dict[str, str]) -> Obj:
    job = trainjob(unique("job"), namespace, "torch-distributed-tcpxo")
    job["spec"] |= node_override(stack.trainer, annotations)
    return job


@pytest.mark.parametrize(
    ("eth4", "fragment"),
    [
        pytest.param(
            '"network":"gpu-nic-3","Network":"no-such-net"',
            'entry 4 (eth4) has the key "Network", which GKE reads as "network"',
            id="shadow-key",
        ),
        pytest.param(
            '"networ\u212a":"no-such-net"',
            'entry 4 (eth4) has the key "networ\\u212a", which GKE reads as "network"',
            id="kelvin-sign",
        ),
        pytest.param(
            '"network":"gpu-nic-3","network":"no-such-net"',
            'entry 4 (eth4) gives "network" twice (GKE keeps the last)',
            id="field-twice",
        ),
    ],
)
def test_keys_gke_reads_otherwise_are_refused(
    stack: Stack, namespace: str, eth4: str, fragment: str
) -> None:
    job = _patched(stack, namespace, {INTERFACES: _entries_with(eth4)})
    expect.denied(
        stack.apply(job),
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "InterfacesAnnotationMalformed",
        fragment,
    )


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        pytest.param(
            {"$patch": "delete"},
            '"$patch: delete" is a strategic-merge directive: Trainer\'s merge of '
            "{merge} would remove the node job's pod annotations, wiring included.",
            id="delete",
        ),
        pytest.param(
            {"$patch": "replace", "team": "x"},
            "would replace the node job's pod annotations by the patch's",
            id="replace",
        ),
    ],
)
def test_directives_on_the_node_annotations_are_refused(
    stack: Stack, namespace: str, annotations: dict[str, str], fragment: str
) -> None:
    job = _patched(stack, namespace, annotations)
    expect.denied(
        stack.apply(job),
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "PatchDirectiveUnsupported",
        fragment.format(merge=stack.trainer.override_field),
    )
    assert stack.kubectl("get", "trainjob", job["metadata"]["name"], "-n", namespace).returncode


def test_a_directive_elsewhere_in_a_patch_is_admitted(stack: Stack, namespace: str) -> None:
    """``nodeSelector`` is a string map of the pod spec: its directive survives the schema,
    and it does not reach the wiring."""
    job = trainjob(unique("job"), namespace, "torch-distributed-tcpxo")
    selector = {"$patch": "replace", "cloud.google.com/gke-nodepool": "a3-mega"}
    if stack.trainer.override_field == POD_TEMPLATE_OVERRIDES:
        overrides = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": selector}}]
        job["spec"][POD_TEMPLATE_OVERRIDES] = overrides
    else:
        pod = {"spec": {"nodeSelector": selector}, "metadata": {"annotations": {"team": "x"}}}
        node = {"name": "node", "template": {"spec": {"template": pod}}}
        spec = {"replicatedJobs": [node]}
        job["spec"]["runtimePatches"] = [
            {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": spec}}}
        ]
    expect.allowed(stack.apply(job), f"trainjob.trainer.kubeflow.org/{job['metadata']['name']}")


def _decoy(name: str, worker_pairs: list[tuple[str, str]] | None) -> Obj:
    """The recipe-bound TCPXO runtime whose correctly wired ``node`` job lost Trainer's label,
    beside a ``worker`` job that carries it (wired with ``worker_pairs``, or not at all)."""
    obj = runtime(name, recipe_bound=True)
    jobs = obj["spec"]["template"]["spec"]["replicatedJobs"]
    (node,) = (j for j in jobs if j["name"] == "node")
    worker = copy.deepcopy(node)
    node["template"].setdefault("metadata", {})["labels"] = {"team": "decoy"}
    worker["name"] = "worker"
    worker["template"].setdefault("metadata", {})["labels"] = dict(ANCESTOR)
    annotations = worker["template"]["spec"]["template"]["metadata"]["annotations"]
    if worker_pairs is None:
        annotations.clear()
    else:
        annotations[INTERFACES] = interfaces(worker_pairs)
    jobs.append(worker)
    return obj


@pytest.mark.parametrize(
    ("worker_pairs", "code", "fragment"),
    [
        pytest.param(
            None,
            "InterfacesAnnotationMissing",
            "worker job: recipe-bound, but the worker pod template has no "
            "networking.gke.io/interfaces annotation",
            id="unwired",
        ),
        pytest.param(
            with_pairs(RECIPE_PAIRS, (2, 3)),
            "MappingDivergesFromRecipe",
            "worker job: at position eth3 the object maps eth4->gpu-nic-3",
            id="drifted",
        ),
    ],
)
def test_a_decoy_node_job_does_not_hide_the_labelled_one(
    stack: Stack, worker_pairs: list[tuple[str, str]] | None, code: str, fragment: str
) -> None:
    name = unique("tcpxo-decoy")
    expect.denied(
        stack.apply(_decoy(name, worker_pairs)), f"ClusterTrainingRuntime/{name}", code, fragment
    )


def test_a_trainjob_patch_of_the_labelled_job_is_judged(stack: Stack, namespace: str) -> None:
    name = unique("tcpxo-labelled")
    admitted = _decoy(name, list(RECIPE_PAIRS))
    expect.allowed(stack.apply(admitted), f"clustertrainingruntime.trainer.kubeflow.org/{name}")
    job = trainjob(unique("job"), namespace, name)
    override = node_override(
        stack.trainer, {INTERFACES: interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))}
    )
    for patch in override.get("runtimePatches", []):
        patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "worker"
    for entry in override.get(POD_TEMPLATE_OVERRIDES, []):
        entry["targetJobs"] = [{"name": "worker"}]
    job["spec"] |= override
    # nicguard's cache learns the runtime by watch: apply until it judges the TrainJob on it.
    run = eventually(lambda: stack.apply(job, dry_run=True), lambda run: run.returncode != 0)
    expect.denied(
        run,
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "MappingDivergesFromRecipe",
        "worker job: at position eth3 the object maps eth4->gpu-nic-3",
    )


def test_a_job_a_trainjob_patch_labels_as_the_trainer_is_judged(trainer_v2_3_stack: Stack) -> None:
    """Trainer reads the ancestor label after merging ``runtimePatches`` (v2.2+ only): a patch
    that labels the runtime's unwired ``worker`` job makes it run the trainer, unwired."""
    stack = trainer_v2_3_stack
    namespace = unique("e2e")
    create_namespace(stack.plane, namespace)
    name = unique("tcpxo-worker")
    obj = _decoy(name, None)
    worker = obj["spec"]["template"]["spec"]["replicatedJobs"][-1]
    worker["template"]["metadata"]["labels"] = {"team": "x"}  # not the trainer: admitted
    expect.allowed(stack.apply(obj), f"clustertrainingruntime.trainer.kubeflow.org/{name}")
    job = trainjob(unique("job"), namespace, name)
    labelled = {"name": "worker", "template": {"metadata": {"labels": dict(ANCESTOR)}}}
    spec = {"replicatedJobs": [labelled]}
    job["spec"]["runtimePatches"] = [
        {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": spec}}}
    ]
    run = eventually(lambda: stack.apply(job, dry_run=True), lambda run: run.returncode != 0)
    expect.denied(
        run,
        f"TrainJob/{namespace}/{job['metadata']['name']}",
        "InterfacesAnnotationMissing",
        "worker job: recipe-bound, but the worker pod template has no",
    )
