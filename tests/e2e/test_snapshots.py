"""Trainer's runtime snapshots, terminating TrainJobs and the recipe switched off, through a real
kube-apiserver serving the Trainer v2.3.0 CRDs and the shipped webhook configuration.

Snapshots are written as Trainer v2.3.0's controller writes them (pkg/runtime/core/snapshot.go):
server-side apply with field manager ``trainer``, the TrainJob (its real UID) as controller
owner, ``data.runtime`` the runtime as sigs.k8s.io/yaml writes it (keys sorted), without
apiVersion/kind as v2.3.0 does and with them as the fixed release does.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pytest
import yaml

from tests.harness import expect
from tests.harness.objects import (
    INTERFACES,
    RECIPE_PAIRS,
    as_list,
    interfaces,
    load,
    node_annotations,
    node_override,
    trainjob,
    unique,
    with_pairs,
)
from tests.harness.stack import Stack, wait_for_recipe
from tests.harness.state import RECIPE, checked

pytestmark = pytest.mark.e2e

SNAPSHOT_WEBHOOK: Final = "snapshot.nicguard.dev"
TCPXO: Final = "torch-distributed-tcpxo"
TRAINER_MANAGER: Final = ["--server-side", "--field-manager=trainer", "--force-conflicts"]
CONFIGMAP_EDITOR: Final[list[dict[str, Any]]] = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "configmap-editor"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "list", "create", "update", "patch", "delete"],
            }
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "configmap-editor"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "configmap-editor",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}
        ],
    },
]


def _get(stack: Stack, *what: str, namespace: str = "") -> dict[str, Any]:
    where = ["-n", namespace] if namespace else []
    run = checked(stack.kubectl("get", *what, *where, "-o", "json", who="admin"), f"get {what}")
    found: dict[str, Any] = json.loads(run.stdout)
    return found


@pytest.fixture
def job(stack: Stack, namespace: str) -> dict[str, Any]:
    """A TrainJob on the recipe-bound ``torch-distributed-tcpxo``, as the API server holds it;
    namespace users may edit ConfigMaps in its namespace."""
    roles = [{**o, "metadata": {**o["metadata"], "namespace": namespace}} for o in CONFIGMAP_EDITOR]
    checked(stack.apply(*roles, who="admin"), "granting ConfigMap edit rights")
    obj = trainjob(unique("tj"), namespace, TCPXO)
    checked(stack.apply(obj), "creating the TrainJob")
    return _get(stack, "trainjob", obj["metadata"]["name"], namespace=namespace)


def snapshot_of(job: dict[str, Any], runtime: dict[str, Any], *, typed: bool) -> dict[str, Any]:
    """The ConfigMap Trainer's createRuntimeSnapshot applies for ``job``."""
    copied = dict(runtime)
    if not typed:  # v2.3.0 copies the cached object, whose apiVersion/kind are empty
        copied.pop("apiVersion")
        copied.pop("kind")
    metadata = job["metadata"]
    owner = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{metadata['name']}-runtime-snapshot",
            "namespace": metadata["namespace"],
            "ownerReferences": [owner],
        },
        "data": {"runtime": yaml.safe_dump(copied, sort_keys=True)},
    }


def apply_as_trainer(stack: Stack, configmap: dict[str, Any]) -> Any:
    return stack.plane.kubectl(
        "admin", "apply", *TRAINER_MANAGER, "-f", "-", input=as_list([configmap])
    )


@pytest.mark.parametrize("typed", [False, True], ids=["v2.3.0-copy", "fixed-release-copy"])
def test_trainers_own_snapshot_is_admitted_and_a_tampered_one_refused(
    stack: Stack, job: dict[str, Any], typed: bool
) -> None:
    runtime = _get(stack, "clustertrainingruntime", TCPXO)
    snapshot = snapshot_of(job, runtime, typed=typed)
    name, namespace = snapshot["metadata"]["name"], snapshot["metadata"]["namespace"]
    before = stack.nicguard.judged_requests()
    run = apply_as_trainer(stack, snapshot)
    expect.allowed(run, f"configmap/{name} serverside-applied")
    assert stack.nicguard.judged_requests() == before + 1
    decision = [d for d in stack.nicguard.decisions() if d["resource_name"] == name][-1]
    assert (decision["resource_kind"], decision["decision"]) == ("ConfigMap", "allowed")

    swapped = json.loads(json.dumps(runtime))
    node_annotations(swapped)[INTERFACES] = interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))
    tampered = snapshot_of(job, swapped, typed=typed)
    patch = json.dumps({"data": tampered["data"]})
    edit = stack.kubectl("patch", "configmap", name, "-n", namespace, "--type=merge", "-p", patch)
    expect.denied(
        edit,
        f"ConfigMap/{namespace}/{name}",
        "MappingDivergesFromRecipe",
        f"ConfigMap {namespace}/{name} (runtime snapshot of TrainJob "
        f"{namespace}/{job['metadata']['name']}: ClusterTrainingRuntime {TCPXO}): "
        "at position eth3",
        webhook=SNAPSHOT_WEBHOOK,
    )
    # The copy in the cluster is still Trainer's.
    held = _get(stack, "configmap", name, namespace=namespace)
    assert held["data"] == snapshot["data"]


@pytest.mark.parametrize(
    "respelled",
    [
        pytest.param({"kind": "trainjob"}, id="kind-in-lower-case"),
        pytest.param({"apiVersion": "example.com/v1"}, id="another-group"),
    ],
)
def test_a_tampered_snapshot_whose_owner_is_spelled_otherwise_is_refused(
    stack: Stack, job: dict[str, Any], respelled: dict[str, str]
) -> None:
    """Trainer (getRuntimeSnapshot) checks only the controller's UID: a copy whose owner keeps
    the TrainJob's UID under another spelling is used, so a user who may edit ConfigMaps cannot
    slip a wiring in that way."""
    runtime = _get(stack, "clustertrainingruntime", TCPXO)
    swapped = json.loads(json.dumps(runtime))
    node_annotations(swapped)[INTERFACES] = interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))
    tampered = snapshot_of(job, swapped, typed=False)
    tampered["metadata"]["ownerReferences"][0].update(respelled)
    name, namespace = tampered["metadata"]["name"], tampered["metadata"]["namespace"]
    expect.denied(
        stack.apply(tampered),
        f"ConfigMap/{namespace}/{name}",
        "MappingDivergesFromRecipe",
        f"(runtime snapshot of TrainJob {namespace}/{job['metadata']['name']}: "
        f"ClusterTrainingRuntime {TCPXO}): at position eth3",
        webhook=SNAPSHOT_WEBHOOK,
    )


def test_configmaps_that_are_not_snapshots_never_reach_nicguard(
    stack: Stack, job: dict[str, Any]
) -> None:
    """No controller owner, another name, or a controller not spelled as Trainer writes it on
    a ConfigMap without a runtime key (a dashboard's ``grafana-runtime-snapshot``)."""
    namespace = job["metadata"]["namespace"]
    runtime = _get(stack, "clustertrainingruntime", TCPXO)
    owned = snapshot_of(job, runtime, typed=True)
    owner = owned["metadata"]["ownerReferences"][0]
    dashboard_owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "grafana",
        "uid": "5c3f9a2e-1b7d-4e8a-9f60-2d4c8b1a7e35",
        "controller": True,
    }
    look_alikes = [
        {**owned, "metadata": {"name": "x-runtime-snapshot", "namespace": namespace}},
        {**owned, "metadata": {**owned["metadata"], "name": "x-snapshot"}},
        {
            **owned,
            "metadata": {
                **owned["metadata"],
                "name": "y-runtime-snapshot",
                "ownerReferences": [{**owner, "controller": False}],
            },
        },
        {**owned, "metadata": {"name": "plain", "namespace": namespace}, "data": {"k": "v"}},
        {
            **owned,
            "metadata": {
                "name": "grafana-runtime-snapshot",
                "namespace": namespace,
                "ownerReferences": [dashboard_owner],
            },
            "data": {"dashboard.json": "{}"},
        },
        {
            **owned,
            "metadata": {
                **owned["metadata"],
                "name": "z-runtime-snapshot",
                "ownerReferences": [{**owner, "kind": "trainjob"}],
            },
            "data": {"notes": "no runtime here"},
        },
    ]
    before = stack.nicguard.judged_requests()
    checked(stack.apply(*look_alikes), "writing ConfigMaps that are not snapshots")
    assert stack.nicguard.judged_requests() == before


def test_a_terminating_trainjobs_spec_change_is_refused_and_its_finalizer_removal_allowed(
    stack: Stack, namespace: str
) -> None:
    obj = trainjob(unique("held"), namespace, TCPXO)
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    name = obj["metadata"]["name"]
    checked(stack.apply(obj), "creating a TrainJob held by a finalizer")
    deleting = stack.kubectl("delete", "trainjob", name, "-n", namespace, "--wait=false")
    expect.allowed(deleting, f'trainjob.trainer.kubeflow.org "{name}" deleted')
    drifted = interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))
    patch = json.dumps(
        {"spec": {**node_override(stack.trainer, {INTERFACES: drifted}), "suspend": False}}
    )
    run = stack.kubectl("patch", "trainjob", name, "-n", namespace, "--type=merge", "-p", patch)
    expect.denied(run, f"TrainJob/{namespace}/{name}", "MappingDivergesFromRecipe")
    release = json.dumps([{"op": "remove", "path": "/metadata/finalizers"}])
    run = stack.kubectl("patch", "trainjob", name, "-n", namespace, "--type=json", "-p", release)
    expect.allowed(run, f"trainjob.trainer.kubeflow.org/{name} patched")


def _recipe(**change: Any) -> dict[str, Any]:
    (recipe,) = load("cluster/recipe-configmap.yaml")
    result = yaml.safe_load(recipe["data"]["recipe.yaml"])
    trainer = next(c for c in result["componentRefs"] if c["name"] == "kubeflow-trainer")
    trainer["overrides"].update(change)
    recipe["data"]["recipe.yaml"] = yaml.safe_dump(result)
    return recipe


def test_switching_the_recipe_off_by_kubectl_apply_is_refused(stack: Stack) -> None:
    for dry_run in (True, False):
        run = stack.apply(_recipe(enabled=False), who="admin", dry_run=dry_run)
        expect.denied(
            run,
            f"ConfigMap/{RECIPE[0]}/{RECIPE[1]}",
            "RecipeInUse",
            # The shared control plane holds other tests' bound runtimes too: the message names
            # the first ten by name, so only the start is the same in every order of the tier.
            f"the recipe {RECIPE[0]}/{RECIPE[1]} binds ClusterTrainingRuntime ",
            "deliver no mapping",
        )
    wait_for_recipe(stack)


def test_an_owner_added_to_the_recipe_is_refused(stack: Stack) -> None:
    recipe = _recipe()
    owner = {"apiVersion": "v1", "kind": "Namespace", "name": "kubeflow", "uid": "a1b2c3"}
    recipe["metadata"]["ownerReferences"] = [owner]
    run = stack.apply(recipe, who="admin", dry_run=True)
    expect.denied(
        run,
        f"ConfigMap/{RECIPE[0]}/{RECIPE[1]}",
        "RecipeInvalid",
        "must not get an owner (Namespace kubeflow)",
    )


def test_a_label_never_unbinds_the_runtime_the_settings_bind_by_name(stack: Stack) -> None:
    """``torch-distributed-tcpxo`` relabelled ``nicguard.dev/profile: ""`` with eth3/eth4
    swapped: still recipe-bound, denied, the label named as ignored."""
    (shipped,) = load("cluster/torch-distributed-tcpxo.yaml")
    node_annotations(shipped)[INTERFACES] = interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))
    shipped["metadata"].setdefault("labels", {})["nicguard.dev/profile"] = ""
    run = stack.apply(shipped, who="admin", dry_run=True)
    expect.denied(run, f"ClusterTrainingRuntime/{TCPXO}", "MappingDivergesFromRecipe")
    assert 'Warning: label nicguard.dev/profile: "" ignored: ClusterTrainingRuntime' in run.stderr
    assert "binds it" not in run.stderr


@pytest.mark.parametrize(
    ("network", "count", "code", "counted", "codes"),
    [
        # As many entries as nicguard reads (64 with eth0), each a violation.
        pytest.param(
            "absent-{i}", 63, "NetworkNotFound", "and 51 more", ["NetworkNotFound"], id="missing"
        ),
        # gpu-nic-0 belongs on eth1 (the recipe places it): on eth2.. it is misplaced too
        pytest.param(
            "gpu-nic-0",
            63,
            "NetworkDuplicated",
            "more (see details.causes)",
            ["NetworkDuplicated", "NetworkMisplaced"],
            id="duplicated",
        ),
        # A list no machine attaches: refused from its length, unparsed.
        pytest.param(
            "absent-{i}",
            6000,
            "InterfacesAnnotationMalformed",
            "characters long; no machine GKE runs attaches more than 18 interfaces",
            ["InterfacesAnnotationMalformed"],
            id="longer-than-any-machine-attaches",
        ),
    ],
)
def test_a_denial_naming_many_networks_stays_bounded(
    stack: Stack,
    namespace: str,
    network: str,
    count: int,
    code: str,
    counted: str,
    codes: list[str],
) -> None:
    """One write, one bounded answer and one decision line under 16 KiB."""
    (shipped,) = load("cluster/torch-distributed-tcpxo.yaml")
    name = unique("many-nics")
    shipped["kind"] = "TrainingRuntime"
    shipped["metadata"] = {"name": name, "namespace": namespace}
    pairs = [(f"eth{i}", network.format(i=i)) for i in range(1, count + 1)]
    node_annotations(shipped)[INTERFACES] = interfaces(pairs)
    # create, not apply: a last-applied-configuration annotation this large would be refused.
    run = stack.plane.kubectl("alice", "create", "-f", "-", input=as_list([shipped]))
    message = expect.denied(run, f"TrainingRuntime/{namespace}/{name}", code)
    assert len(message.encode()) <= 1024 + 64  # the message, plus kubectl's line end
    assert counted in message
    (line,) = [d for d in stack.nicguard.decisions() if d["resource_name"] == name]
    assert len(json.dumps(line).encode()) <= 16 * 1024
    assert line["violation_codes"] == codes


def _merged_over(text: str, value: str) -> str:
    """``text`` with a merge key after the interfaces key that sets it to ``value`` again."""
    lines = text.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.lstrip().startswith(f"{INTERFACES}:")]
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at + 1, f"{indent}<<: {{{INTERFACES}: {json.dumps(value)}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("tampering", ["folded-jobs", "long-s-annotations", "merge-key"])
def test_a_copy_trainer_reads_otherwise_than_it_looks_is_refused(
    stack: Stack, job: dict[str, Any], tampering: str
) -> None:
    """The bypass review's reproductions: each copy keeps the recipe's wiring where an exact
    reader looks and hands Trainer (sigs.k8s.io/yaml, Go's case-folding decoder) a swapped one."""
    runtime = _get(stack, "clustertrainingruntime", TCPXO)
    snapshot = snapshot_of(job, runtime, typed=False)
    name, namespace = snapshot["metadata"]["name"], snapshot["metadata"]["namespace"]
    expect.allowed(apply_as_trainer(stack, snapshot), f"configmap/{name} serverside-applied")
    copied = {k: v for k, v in runtime.items() if k not in ("apiVersion", "kind")}
    swapped = interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))
    bad = json.loads(json.dumps(copied))
    node_annotations(bad)[INTERFACES] = swapped
    if tampering == "folded-jobs":
        copied["spec"]["template"]["spec"]["replicatedjobs"] = bad["spec"]["template"]["spec"][
            "replicatedJobs"
        ]
        text, code = yaml.safe_dump(copied, sort_keys=True), "RuntimeSnapshotInvalid"
    elif tampering == "long-s-annotations":
        (node,) = copied["spec"]["template"]["spec"]["replicatedJobs"]
        node["template"]["spec"]["template"]["metadata"]["annotation\u017f"] = {INTERFACES: swapped}
        text, code = yaml.safe_dump(copied, sort_keys=True), "RuntimeSnapshotInvalid"
    else:
        text = _merged_over(yaml.safe_dump(copied, sort_keys=True, width=1 << 20), swapped)
        code = "MappingDivergesFromRecipe"
    patch = json.dumps({"data": {"runtime": text}})
    edit = stack.kubectl("patch", "configmap", name, "-n", namespace, "--type=merge", "-p", patch)
    expect.denied(edit, f"ConfigMap/{namespace}/{name}", code, webhook=SNAPSHOT_WEBHOOK)
    assert _get(stack, "configmap", name, namespace=namespace)["data"] == snapshot["data"]
