"""``nicguard check`` (app.commands.check) judging files against a file-mode state, through
``python -m app``: the text and JSON output, every example's codes, typed lists, objects not
judged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import INTERFACES, annotation, runtime_patch, trainjob
from tests.support.claimed_snapshots import FOLDED, TAMPERED, claimed_copy
from tests.support.paths import UPSTREAM
from tests.test_cli import ROOT, STATE, nicguard

JUDGED = (
    "ClusterTrainingRuntime, TrainingRuntime, TrainJob, JobSet, Job, Pod, runtime snapshot "
    "ConfigMap or ResourceClaimTemplate"
)


def test_json_output_has_the_spec_shape() -> None:
    run = nicguard("check", "--state", STATE, "--output", "json", "examples/objects")
    assert run.returncode == 1
    results = json.loads(run.stdout)["results"]
    assert {tuple(sorted(r)) for r in results} == {
        ("allowed", "apiVersion", "kind", "name", "namespace", "violations", "warnings")
    }
    drifted = next(r for r in results if r["name"] == "llama-finetune")
    assert drifted["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert drifted["namespace"] == "team-a"
    assert drifted["allowed"] is False
    (violation,) = drifted["violations"]
    assert sorted(violation) == ["code", "field", "message"]
    assert violation["code"] == "MappingDivergesFromRecipe"


@pytest.mark.parametrize(
    ("state", "files", "codes"),
    [
        pytest.param(
            "examples/cluster/networks.yaml",
            ["examples/cluster/torch-distributed-tcpxo.yaml"],
            {"RecipeUnavailable"},
            id="no recipe in the state",
        ),
        pytest.param(
            "examples/states/invalid-recipe.yaml",
            ["examples/cluster/torch-distributed-tcpxo.yaml"],
            {"RecipeInvalid", "NetworkNotFound"},
            id="invalid recipe",
        ),
        pytest.param(
            STATE,
            [
                "examples/objects/malformed-runtimes.yaml",
                "examples/objects/recipe-bound-runtimes.yaml",
            ],
            {
                "InterfacesAnnotationMalformed",
                "PrimaryInterfaceInvalid",
                "DefaultInterfaceInvalid",
                "InterfaceNameInvalid",
                "InterfaceDuplicated",
                "NetworkDuplicated",
                "NetworkReserved",
                "InterfacesAnnotationMissing",
                "NodeJobMissing",
                # hand-typed is recipe-bound, and its list is not the recipe's.
                "MappingDivergesFromRecipe",
            },
            id="structural examples",
        ),
        pytest.param(
            STATE,
            ["examples/objects/misplaced-network-runtime.yaml"],
            {"NetworkMisplaced"},
            id="misplaced network",
        ),
        pytest.param(
            STATE,
            ["examples/objects/missing-network-runtime.yaml"],
            {"NetworkNotFound"},
            id="missing network",
        ),
        pytest.param(
            STATE,
            ["examples/objects/unready-network-runtime.yaml"],
            {"NetworkNotReady"},
            id="unready network",
        ),
        pytest.param(
            STATE,
            ["examples/objects/mpi-launcher-runtime.yaml"],
            {"MappingDivergesFromRecipe"},
            id="mpi launcher drifted",
        ),
        pytest.param(
            STATE,
            ["examples/objects/annotated-evaluator-runtime.yaml"],
            {"NetworkNotFound"},
            id="annotated evaluator",
        ),
        pytest.param(
            STATE, ["examples/objects/wired-pods.yaml"], {"NetworkMisplaced"}, id="wired pods"
        ),
        pytest.param(
            STATE, ["examples/objects/queued-jobset.yaml"], {"NetworkNotFound"}, id="jobset"
        ),
    ],
)
def test_every_example_produces_its_codes(state: str, files: list[str], codes: set[str]) -> None:
    run = nicguard("check", "--state", state, "--output", "json", *files)
    assert run.returncode == 1
    found = {v["code"] for r in json.loads(run.stdout)["results"] for v in r["violations"]}
    assert found == codes


def test_a_misplaced_network_names_the_pair_where_the_recipe_places_it() -> None:
    run = nicguard("check", "--state", STATE, "examples/objects/misplaced-network-runtime.yaml")
    assert run.returncode == 1, run.stdout + run.stderr
    denied, finding, field = run.stdout.splitlines()[:3]
    assert denied == "DENIED  TrainingRuntime team-a/torch-two-nics"
    assert finding.startswith(
        "  [NetworkMisplaced] Networks on another interface than the recipe gives them: "
        "eth2->gpu-nic-5 (the recipe places gpu-nic-5 on eth6) (recipe nicguard-system/"
    )
    assert field == (
        "      at spec.template.spec.replicatedJobs[0].template.spec.template.metadata."
        "annotations[networking.gke.io/interfaces]"
    )
    warned = nicguard(
        "check",
        "--state",
        STATE,
        "--placement",
        "warn",
        "examples/objects/misplaced-network-runtime.yaml",
    )
    assert warned.returncode == 0, warned.stdout + warned.stderr
    assert "[NetworkMisplaced] " in warned.stdout


def test_an_annotated_job_is_named_in_the_message_and_the_field() -> None:
    run = nicguard("check", "--state", STATE, "examples/objects/annotated-evaluator-runtime.yaml")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines()[:3] == [
        "DENIED  TrainingRuntime team-a/torch-tcpxo-eval",
        "  [NetworkNotFound] evaluator job: no Network object exists for eth1->does-not-exist "
        "(cluster has: gpu-nic-0, gpu-nic-1, gpu-nic-2, gpu-nic-3, gpu-nic-4, gpu-nic-5, "
        "gpu-nic-6, gpu-nic-7, gpu-nic-spare)",
        "      at spec.template.spec.replicatedJobs[1].template.spec.template.metadata"
        ".annotations[networking.gke.io/interfaces][1].network",
    ]


def test_a_trainjob_patch_to_an_annotated_job_is_judged(tmp_path: Path) -> None:
    """The TrainJob's own patch repairs the evaluator's Network: allowed."""
    repaired = {INTERFACES: annotation([("eth1", "gpu-nic-0")])}
    job = trainjob("torch-tcpxo-eval", namespace="team-a")
    job["spec"] = {
        "runtimeRef": {"name": "torch-tcpxo-eval", "kind": "TrainingRuntime"},
        "runtimePatches": [runtime_patch(repaired, "evaluator")],
    }
    (tmp_path / "trainjob.yaml").write_text(yaml.safe_dump(job))
    runtime = "examples/objects/annotated-evaluator-runtime.yaml"
    run = nicguard("check", "--state", STATE, runtime, str(tmp_path / "trainjob.yaml"))
    assert "ALLOWED TrainJob team-a/job" in run.stdout, run.stdout + run.stderr


WIRED_PODS = "examples/objects/wired-pods.yaml"
MISPLACED_POD = (
    "  [NetworkMisplaced] Pod team-a/llama-node-0-1-x2k9p (of Job team-a/llama-node-0): Networks "
    "on another interface than the recipe gives them: eth1->gpu-nic-1 (the recipe places "
    "gpu-nic-1 on eth2), eth2->gpu-nic-0 (the recipe places gpu-nic-0 on eth1) (recipe "
    "nicguard-system/nicguard-recipe@48213)"
)


def test_the_wired_pods_of_kubectl_get_pods_are_judged_naming_their_job(tmp_path: Path) -> None:
    listed = yaml.safe_load((ROOT / WIRED_PODS).read_text())
    unwired = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "coredns", "namespace": "s"}}
    listed["items"].append(unwired)
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump(listed))
    run = nicguard("check", "--state", STATE, str(pods))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "ALLOWED Pod team-a/llama-node-0-0-7fq4d",
        "",
        "DENIED  Pod team-a/llama-node-0-1-x2k9p",
        MISPLACED_POD,
        "      at metadata.annotations[networking.gke.io/interfaces]",
        "",
        "2 checked, 1 allowed, 1 denied",
    ]
    assert run.stderr.splitlines() == [
        f"nicguard: {pods}: document 1, items[2]: v1 Pod coredns is not wired; not checked"
    ]


def test_a_raw_pod_list_as_json_is_judged_item_by_item(tmp_path: Path) -> None:
    """``kubectl get --raw /api/v1/pods``: a typed PodList whose items carry no kind."""
    (listed,) = [o for o in yaml.safe_load_all((ROOT / WIRED_PODS).read_text()) if o]
    items = [
        {k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in listed["items"]
    ]
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "items": items}))
    run = nicguard("check", "--state", STATE, "--output", "json", str(pods))
    assert run.returncode == 1, run.stdout + run.stderr
    results = json.loads(run.stdout)["results"]
    assert [(r["kind"], r["name"], r["allowed"]) for r in results] == [
        ("Pod", "llama-node-0-0-7fq4d", True),
        ("Pod", "llama-node-0-1-x2k9p", False),
    ]


@pytest.mark.parametrize(
    ("setting", "status", "expected"),
    [
        pytest.param("deny", 1, "DENIED  Pod team-a/llama-node-0-1-x2k9p", id="deny"),
        pytest.param("warn", 0, f"  warning: {MISPLACED_POD.strip()}", id="warn"),
        pytest.param("off", 0, "ALLOWED Pod team-a/llama-node-0-1-x2k9p", id="off"),
    ],
)
def test_the_setting_workloads_applies_to_check(setting: str, status: int, expected: str) -> None:
    run = nicguard("check", "--state", STATE, "--workloads", setting, WIRED_PODS)
    assert run.returncode == status, run.stdout + run.stderr
    assert expected in run.stdout.splitlines()
    if setting == "off":
        assert "NetworkMisplaced" not in run.stdout


def test_a_queued_jobset_names_the_job_whose_network_is_missing() -> None:
    run = nicguard("check", "--state", STATE, "examples/objects/queued-jobset.yaml")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines()[:3] == [
        "DENIED  JobSet team-a/llama",
        "  [NetworkNotFound] JobSet team-a/llama: evaluator job: no Network object exists for "
        "eth1->gpu-nic-9 (cluster has: gpu-nic-0, gpu-nic-1, gpu-nic-2, gpu-nic-3, gpu-nic-4, "
        "gpu-nic-5, gpu-nic-6, gpu-nic-7, gpu-nic-spare)",
        "      at spec.replicatedJobs[2].template.spec.template.metadata"
        ".annotations[networking.gke.io/interfaces][1].network",
    ]


def _as_raw_list(source: str, kind: str) -> dict[str, object]:
    """The objects of an example file as the raw API lists them: a typed list, bare items."""
    objects = [o for o in yaml.safe_load_all((ROOT / source).read_text()) if o]
    items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in objects]
    api = objects[0]["apiVersion"]
    return {"apiVersion": api, "kind": kind, "metadata": {"resourceVersion": "9"}, "items": items}


def test_a_drifted_runtime_inside_a_typed_list_is_judged(tmp_path: Path) -> None:
    listed = tmp_path / "ctrs.json"
    raw = _as_raw_list("examples/objects/drifted-runtime.yaml", "ClusterTrainingRuntimeList")
    listed.write_text(json.dumps(raw))
    run = nicguard("check", "--state", STATE, str(listed))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith("DENIED  ClusterTrainingRuntime torch-distributed-tcpxo")
    assert "[MappingDivergesFromRecipe] at position eth3" in run.stdout


@pytest.mark.parametrize("networks", [True, False])
def test_a_state_holding_typed_lists_describes_the_cluster(tmp_path: Path, networks: bool) -> None:
    listed = _as_raw_list("examples/cluster/networks.yaml", "NetworkList")
    if not networks:
        listed["items"] = []
    (tmp_path / "networks.json").write_text(json.dumps(listed))
    runtimes = _as_raw_list(f"{STATE}/torch-distributed-tcpxo.yaml", "ClusterTrainingRuntimeList")
    (tmp_path / "runtimes.json").write_text(json.dumps(runtimes))
    (tmp_path / "recipe.yaml").write_text((ROOT / STATE / "recipe-configmap.yaml").read_text())
    run = nicguard("check", "--state", str(tmp_path), "examples/objects/good-trainjob.yaml")
    if networks:
        assert run.returncode == 0, run.stdout + run.stderr
        assert "warning" not in run.stdout
    else:
        assert run.returncode == 1
        assert (
            "[NetworkNotFound] inherited unchanged from ClusterTrainingRuntime/"
            "torch-distributed-tcpxo, the object to fix: no Network object exists for "
            "eth1->gpu-nic-0" in run.stdout
        )


def test_objects_in_files_that_are_not_judged_are_named_on_stderr(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    bucket = {"apiVersion": "trainer.kubeflow.org/v1beta9", "kind": "BucketList", "items": [{}]}
    network = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}}
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [bucket, network]}))
    run = nicguard("check", "--state", STATE, str(listed))
    assert run.returncode == 0
    assert run.stdout.strip() == f"no {JUDGED} found"
    assert run.stderr.splitlines() == [
        f"nicguard: {listed}: document 1, items[0].items[0]: trainer.kubeflow.org/v1beta9 Bucket "
        f"is not a {JUDGED}; not checked",
        f"nicguard: {listed}: document 1, items[1]: networking.gke.io/v1 Network n "
        f"is not a {JUDGED}; not checked",
    ]


def test_the_mpi_launcher_example_is_denied_naming_the_launcher_job() -> None:
    run = nicguard("check", "--state", STATE, "examples/objects/mpi-launcher-runtime.yaml")
    assert run.returncode == 1
    assert run.stdout.splitlines()[:3] == [
        "DENIED  ClusterTrainingRuntime deepspeed-tcpxo",
        "  [MappingDivergesFromRecipe] launcher job: at position eth3 the object maps "
        "eth3->gpu-nic-3 but the recipe records eth3->gpu-nic-2 "
        "(recipe nicguard-system/nicguard-recipe@48213)",
        "      at spec.template.spec.replicatedJobs[1].template.spec.template.metadata"
        ".annotations[networking.gke.io/interfaces][3]",
    ]


def test_the_rdma_layouts_gke_documents_are_allowed_on_a_gb200_cluster() -> None:
    run = nicguard(
        "check", "--state", "examples/gb200/cluster", "examples/gb200/rdma-runtimes.yaml"
    )
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines() == [
        "ALLOWED ClusterTrainingRuntime torch-distributed-rdma",
        "",
        "ALLOWED TrainingRuntime team-a/torch-rdma-gib",
        "",
        "2 checked, 2 allowed, 0 denied",
    ]


@pytest.mark.parametrize("command", ["check", "audit"])
def test_a_state_without_param_sets_skips_their_checks_and_says_so_once(
    tmp_path: Path, command: str
) -> None:
    docs = [
        d
        for d in yaml.safe_load_all((ROOT / STATE / "networks.yaml").read_text())
        if isinstance(d, dict) and d.get("kind") != "GKENetworkParamSet"
    ]
    (tmp_path / "networks.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "recipe.yaml").write_text((ROOT / STATE / "recipe-configmap.yaml").read_text())
    runtime = f"{STATE}/torch-distributed-tcpxo.yaml"
    args = [command, "--state", str(tmp_path)] + ([runtime] if command == "check" else [])
    run = nicguard(*args)
    skipped = "nicguard: the state holds no GKENetworkParamSet: the param-set checks"
    assert run.returncode == 0, run.stdout + run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith(skipped)] != []
    assert len(run.stderr.splitlines()) == 1
    described = nicguard(command, "--state", STATE, *([runtime] if command == "check" else []))
    assert described.returncode == 0, described.stdout
    assert described.stderr == ""


@pytest.mark.parametrize("as_state", [False, True], ids=["file", "state"])
def test_a_list_nested_thousands_deep_exits_two_with_one_line(
    tmp_path: Path, as_state: bool
) -> None:
    deep = tmp_path / "deep.json"
    config_map = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}'
    deep.write_text('{"kind":"List","items":[' * 3000 + config_map + "]}" * 3000)
    args = ("--state", str(deep), "examples/objects/good-trainjob.yaml")
    run = nicguard("check", *(args if as_state else ("--state", STATE, str(deep))))
    assert run.returncode == 2, run.stderr
    assert run.stderr == f"nicguard: {deep}: document 1: lists nested more than 32 deep\n"
    assert run.stdout == ""


SNAPSHOT_FIXTURE = UPSTREAM / "trainer-v2.3.0/snapshots"


def test_a_tampered_runtime_snapshot_among_the_files_is_denied(tmp_path: Path) -> None:
    """Trainer v2.3.0's own copy (no apiVersion/kind) is allowed; the same copy with eth3 and
    eth4 swapped is denied naming the ConfigMap, its TrainJob and the runtime."""
    text = (SNAPSHOT_FIXTURE / "tj-runtime-snapshot-v2.3.0.yaml").read_text()
    swapped = text.replace('"gpu-nic-2"', '"gpu-nic-X"').replace('"gpu-nic-3"', '"gpu-nic-2"')
    tampered = tmp_path / "tampered.yaml"
    tampered.write_text(swapped.replace('"gpu-nic-X"', '"gpu-nic-3"'))
    untouched = nicguard("check", "--state", STATE, str(SNAPSHOT_FIXTURE))
    assert untouched.returncode == 0, untouched.stdout + untouched.stderr
    assert "ALLOWED ConfigMap team-a/tj-runtime-snapshot" in untouched.stdout
    run = nicguard("check", "--state", STATE, "--output", "json", str(tampered))
    assert run.returncode == 1, run.stderr
    (result,) = json.loads(run.stdout)["results"]
    assert (result["kind"], result["namespace"], result["name"]) == (
        "ConfigMap",
        "team-a",
        "tj-runtime-snapshot",
    )
    (violation,) = result["violations"]
    assert violation["code"] == "MappingDivergesFromRecipe"
    assert violation["message"].startswith(
        "ConfigMap team-a/tj-runtime-snapshot (runtime snapshot of TrainJob team-a/tj: "
        "ClusterTrainingRuntime torch-distributed-tcpxo): at position eth3"
    )
    assert violation["field"].startswith("data.runtime: spec.template.spec.replicatedJobs[0]")


def _unnamespaced(path: Path) -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for document in documents:
        document["metadata"].pop("namespace")
    return documents


@pytest.mark.parametrize("namespace", [None, "team-x"])
def test_objects_without_a_namespace_take_the_namespace_option(
    tmp_path: Path, namespace: str | None
) -> None:
    """As ``kubectl apply -n``: a TrainingRuntime, a TrainJob on it and a runtime snapshot
    without ``metadata.namespace`` are in ``--namespace`` (else ``default``); a TrainJob that
    has one keeps it, and does not find the runtime there."""
    (runtime,) = _unnamespaced(ROOT / "examples/objects/missing-network-runtime.yaml")
    (copy,) = _unnamespaced(SNAPSHOT_FIXTURE / "tj-runtime-snapshot-v2.3.0.yaml")
    ref = {"name": "torch-tcpxo", "kind": "TrainingRuntime"}
    jobs = [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, **where},
            "spec": {"runtimeRef": ref},
        }
        for name, where in (("here", {}), ("elsewhere", {"namespace": "team-y"}))
    ]
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all([runtime, *jobs, copy]))
    chosen = [] if namespace is None else ["--namespace", namespace]
    run = nicguard("check", "--state", STATE, "--output", "json", *chosen, str(objects))
    assert run.returncode == 1, run.stderr
    results = json.loads(run.stdout)["results"]
    ns = namespace or "default"
    assert [(r["kind"], r["namespace"], r["name"], r["allowed"]) for r in results] == [
        ("TrainingRuntime", ns, "torch-tcpxo", False),
        ("TrainJob", ns, "here", False),
        ("TrainJob", "team-y", "elsewhere", True),
        ("ConfigMap", ns, "tj-runtime-snapshot", True),
    ]
    inherited = results[1]["violations"][0]
    assert inherited["code"] == "NetworkNotFound"
    assert f"TrainingRuntime/{ns}/torch-tcpxo" in inherited["message"]
    assert results[2]["warnings"] == [
        "runtime TrainingRuntime/torch-tcpxo not found; wiring not checked"
    ]


def test_the_namespace_option_names_one() -> None:
    run = nicguard("check", "--state", STATE, "--namespace", " ", "examples/objects")
    assert run.returncode == 2
    assert "expected a namespace" in run.stderr


def test_a_snapshot_whose_owner_is_spelled_otherwise_is_judged_unless_it_holds_no_runtime(
    tmp_path: Path,
) -> None:
    text = (SNAPSHOT_FIXTURE / "tj-runtime-snapshot-v2.3.0.yaml").read_text()
    (copy,) = [d for d in yaml.safe_load_all(text) if d]
    (owner,) = copy["metadata"]["ownerReferences"]
    owner["kind"] = "trainjob"
    copy["data"]["runtime"] = copy["data"]["runtime"].replace('"gpu-nic-7"', '"gpu-nic-X"')
    dashboard = json.loads(json.dumps(copy))
    dashboard["metadata"]["name"] = "grafana-runtime-snapshot"
    dashboard["data"] = {"dashboard.json": "{}"}
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all([copy, dashboard]))
    run = nicguard("check", "--state", STATE, "--log-level", "info", str(objects))
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("DENIED  ConfigMap team-a/tj-runtime-snapshot")
    assert "(runtime snapshot of TrainJob team-a/tj: ClusterTrainingRuntime" in run.stdout
    assert run.stdout.rstrip().endswith("1 checked, 0 allowed, 1 denied")
    assert "v1 ConfigMap grafana-runtime-snapshot is not a" in run.stderr


def _swapped(value: str) -> str:
    return (
        value.replace("gpu-nic-2", "gpu-nic-X")
        .replace("gpu-nic-3", "gpu-nic-2")
        .replace("gpu-nic-X", "gpu-nic-3")
    )


def test_a_merge_key_overriding_the_wiring_is_judged_as_kubectl_sends_it(tmp_path: Path) -> None:
    """goyaml.v2 applies ``<<`` in document order: the swapped value after the good key wins."""
    lines = (ROOT / STATE / "torch-distributed-tcpxo.yaml").read_text().splitlines()
    (at,) = [i for i, line in enumerate(lines) if "networking.gke.io/interfaces:" in line]
    indent, value = lines[at].split("networking.gke.io/interfaces: ")
    lines.insert(at + 1, f"{indent}<<: {{networking.gke.io/interfaces: {_swapped(value)}}}")
    merged = tmp_path / "merged.yaml"
    merged.write_text("\n".join(lines) + "\n")
    run = nicguard("check", "--state", STATE, str(merged))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[MappingDivergesFromRecipe]" in run.stdout


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
def test_run_launcher_as_node_y_is_true_as_kubectl_sends_it(tmp_path: Path, kind: str) -> None:
    """Without the trainer-ancestor label only the flag makes the launcher a wired template:
    goyaml.v2 reads ``y`` as true (PyYAML read the string "y" and left the launcher unjudged)."""
    text = (ROOT / "examples/objects/mpi-launcher-runtime.yaml").read_text()
    assert "runLauncherAsNode: true" in text
    text = text.replace("runLauncherAsNode: true", "runLauncherAsNode: y").replace(
        "trainer.kubeflow.org/trainjob-ancestor-step: trainer", "example.com/role: launcher"
    )
    if kind == "TrainingRuntime":
        text = text.replace("kind: ClusterTrainingRuntime", "kind: TrainingRuntime").replace(
            "  name: deepspeed-tcpxo\n", "  name: deepspeed-tcpxo\n  namespace: team-a\n"
        )
    launcher = tmp_path / "launcher.yaml"
    launcher.write_text(text)
    run = nicguard("check", "--state", STATE, str(launcher))
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith(f"DENIED  {kind} ")
    assert "launcher job: at position eth3" in run.stdout


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(
            "kind: ConfigMap\n---\nkind: !!str ClusterTrainingRuntime\n",
            "document 2: the tag `!!str` at line 3, column 7: nicguard cannot be sure to read it "
            "as Trainer and kubectl do",
            id="tag",
        ),
        pytest.param(
            "kind: ClusterTrainingRuntime\nspec: {args: [a?b]}\n",
            "document 1: a plain scalar with `?` in a flow collection at line 2, column 15",
            id="flow-question-mark",
        ),
    ],
)
def test_a_construct_kubectl_may_read_otherwise_exits_two_naming_file_and_document(
    tmp_path: Path, text: str, reason: str
) -> None:
    unsure = tmp_path / "unsure.yaml"
    unsure.write_text(text)
    run = nicguard("check", "--state", STATE, str(unsure))
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.startswith(f"nicguard: {unsure}: {reason}")
    assert len(run.stderr.splitlines()) == 1


DRANET = "examples/dranet/cluster"


@pytest.mark.parametrize(
    ("example", "codes"),
    [
        pytest.param("good-trainjob.yaml", set[str](), id="good"),
        pytest.param("netdev-runtime.yaml", {"RdmaClaimMissing"}, id="netdev"),
        pytest.param("one-nic-runtime.yaml", {"RdmaClaimMismatch"}, id="one-nic"),
        pytest.param(
            "other-namespace-trainjob.yaml", {"ResourceClaimTemplateNotFound"}, id="team-b"
        ),
        pytest.param("annotated-and-claimed-runtime.yaml", {"WiringModeConflict"}, id="both"),
        pytest.param("narrowed-template.yaml", {"RdmaClaimMismatch"}, id="narrowed-template"),
    ],
)
def test_every_dranet_example_produces_its_code(example: str, codes: set[str]) -> None:
    run = nicguard(
        "check", "--state", DRANET, "--output", "json", f"examples/dranet/objects/{example}"
    )
    assert run.returncode == (1 if codes else 0), run.stdout
    found = {v["code"] for r in json.loads(run.stdout)["results"] for v in r["violations"]}
    assert found == codes
    assert run.stderr == ""


def test_a_template_is_judged_against_the_runtimes_that_name_it() -> None:
    """The state's own templates are allowed again (torch-distributed-dranet names only
    default-rdma, which claims every NIC); the narrowed one names its runtime."""
    run = nicguard(
        "check",
        "--state",
        DRANET,
        f"{DRANET}/resource-claim-templates.yaml",
        "examples/dranet/objects/narrowed-template.yaml",
    )
    assert run.returncode == 1, run.stdout
    lines = run.stdout.splitlines()
    assert [line for line in lines if line.startswith(("ALLOWED", "DENIED"))] == [
        "ALLOWED ResourceClaimTemplate team-a/default-rdma",
        "ALLOWED ResourceClaimTemplate team-a/rdma-one-nic",
        "ALLOWED ResourceClaimTemplate team-a/default-netdev",
        "DENIED  ResourceClaimTemplate team-b/default-rdma",
    ]
    assert (
        "  [RdmaClaimMismatch] ResourceClaimTemplate team-b/default-rdma requests all "
        "mrdma.google.com devices with selectors, but ClusterTrainingRuntime "
        "torch-distributed-dranet, bound to profile a4-dranet (8 RDMA NICs per node), names it"
    ) in run.stdout
    assert "      at spec.spec.devices.requests[0].exactly.selectors" in lines


def test_the_dranet_cluster_runtime_alone_is_allowed() -> None:
    run = nicguard("check", "--state", DRANET, f"{DRANET}/torch-distributed-dranet.yaml")
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines()[0] == "ALLOWED ClusterTrainingRuntime torch-distributed-dranet"


@pytest.mark.parametrize("tampering", list(TAMPERED))
def test_a_snapshot_whose_claims_trainer_reads_by_folding_is_runtime_snapshot_invalid(
    tmp_path: Path, tampering: str
) -> None:
    """Trainer v2.3.0 reads rdma-one-nic from the tampered copy, whose exact keys say
    default-rdma: refused naming the folded key; Trainer's own copy is allowed."""
    copies = tmp_path / "copies.yaml"
    copies.write_text(yaml.safe_dump_all([claimed_copy(), claimed_copy(TAMPERED[tampering])]))
    run = nicguard("check", "--state", DRANET, "--output", "json", str(copies))
    assert run.returncode == 1, run.stdout + run.stderr
    untouched, tampered = json.loads(run.stdout)["results"]
    assert (untouched["allowed"], untouched["violations"]) == (True, [])
    assert tampered["allowed"] is False
    (violation,) = tampered["violations"]
    assert (violation["code"], violation["field"]) == ("RuntimeSnapshotInvalid", "data.runtime")
    assert violation["message"].startswith(
        "ConfigMap team-a/tj-runtime-snapshot (runtime snapshot of TrainJob team-a/tj): the copy "
        "in data.runtime cannot be read as Trainer reads it: `spec.template.spec.replicatedJobs"
    )
    assert f"{FOLDED[tampering]}` may be read by Trainer as" in violation["message"]


@pytest.mark.parametrize(
    ("setting", "status", "warned"), [("warn", 0, True), ("off", 0, False), ("deny", 1, False)]
)
def test_protect_governs_the_templates_check_judges(
    setting: str, status: int, warned: bool
) -> None:
    run = nicguard(
        "check",
        "--state",
        DRANET,
        "--protect",
        setting,
        "examples/dranet/objects/narrowed-template.yaml",
    )
    assert run.returncode == status, run.stdout
    assert ("warning: [RdmaClaimMismatch]" in run.stdout) is warned


def _gateway_pod(name: str, default: str | None) -> dict[str, Any]:
    """A gateway Deployment's Pod: eth0 on the pod network, gpu-nic-0 on eth1."""
    annotations = {
        INTERFACES: '[{"interfaceName":"eth0","network":"default"},'
        '{"interfaceName":"eth1","network":"gpu-nic-0"}]'
    }
    if default is not None:
        annotations["networking.gke.io/default-interface"] = default
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "gw",
        "uid": "1",
        "controller": True,
    }
    metadata = {
        "name": name,
        "namespace": "team-a",
        "ownerReferences": [owner],
        "annotations": annotations,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": []}}


def test_check_holds_a_pod_to_gke_not_to_aicrs_eth0(tmp_path: Path) -> None:
    """Google's multiple-host-NICs pattern (default route on eth1) and a Pod without the key
    are allowed; a key naming no interface of the list is refused (docs/rules.md)."""
    pods = tmp_path / "pods.yaml"
    documents = [_gateway_pod("gw-eth1", "eth1"), _gateway_pod("gw-none", None)]
    documents.append(_gateway_pod("gw-eth2", "eth2"))
    pods.write_text(yaml.safe_dump_all(documents))
    run = nicguard("check", "--state", STATE, "--output", "json", str(pods))
    assert run.returncode == 1, run.stdout + run.stderr
    results = json.loads(run.stdout)["results"]
    assert [(r["name"], r["allowed"]) for r in results] == [
        ("gw-eth1", True),
        ("gw-none", True),
        ("gw-eth2", False),
    ]
    assert [v["code"] for v in results[2]["violations"]] == ["DefaultInterfaceInvalid"]


DRANET_STATE = ROOT / "examples" / "dranet" / "cluster"


def _device_wired_pod(claimed: str) -> dict[str, Any]:
    """A Pod of team-a mapping eth1 to rdma-0 (a Device-type Network of the DRANET example) and
    claiming ResourceClaimTemplate ``claimed``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "worker-0",
            "namespace": "team-a",
            "annotations": {INTERFACES: annotation([("eth1", "rdma-0")])},
        },
        "spec": {
            "containers": [{"name": "w", "image": "w:1", "resources": {"claims": [{"name": "r"}]}}],
            "resourceClaims": [{"name": "r", "resourceClaimTemplateName": claimed}],
        },
    }


def _rdma_template(name: str) -> dict[str, Any]:
    request = {"name": "rdma", "exactly": {"deviceClassName": "mrdma.google.com"}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


@pytest.mark.parametrize("template_first", [False, True], ids=["pod-first", "template-first"])
def test_a_pod_and_the_template_it_names_are_judged_together_in_either_order(
    tmp_path: Path, template_first: bool
) -> None:
    """The template is new (not in the state): judged with the FILEs, the Pod's Device-type
    Network beside the RDMA claim it names is WiringModeConflict whichever file comes first."""
    pod, template = tmp_path / "pod.yaml", tmp_path / "template.yaml"
    pod.write_text(yaml.safe_dump(_device_wired_pod("my-rdma")))
    template.write_text(yaml.safe_dump(_rdma_template("my-rdma")))
    files = [template, pod] if template_first else [pod, template]
    run = nicguard("check", "--state", str(DRANET_STATE), "--output", "json", *map(str, files))
    assert run.returncode == 1, run.stdout + run.stderr
    verdicts = {
        result["kind"]: [v["code"] for v in result["violations"]]
        for result in json.loads(run.stdout)["results"]
    }
    # Each is refused: the cluster refuses whichever of the two comes second.
    assert verdicts == {
        "Pod": ["WiringModeConflict"],
        "ResourceClaimTemplate": ["WiringModeConflict"],
    }


RENAMED_CLAIM = ("resourceClaimTemplateName: default-rdma", "resourceClaimTemplateName: my-rdma")


@pytest.mark.parametrize("where", ["state", "files"])
def test_a_template_a_bound_snapshot_claims_is_held_to_its_profile(
    tmp_path: Path, where: str
) -> None:
    """TrainJob team-a/tj's snapshot, edited to claim my-rdma (which requested all NICs then,
    and was deleted): my-rdma created again with one NIC is refused, naming the snapshot,
    whether the snapshot is in the state or among the FILEs."""
    state = tmp_path / "state"
    shutil.copytree(DRANET_STATE, state)
    copy = yaml.safe_dump(claimed_copy(RENAMED_CLAIM))
    (state if where == "state" else tmp_path).joinpath("copy.yaml").write_text(copy)
    one_nic = _rdma_template("my-rdma")
    one_nic["spec"]["spec"]["devices"]["requests"][0]["exactly"] |= {
        "allocationMode": "ExactCount",
        "count": 1,
    }
    template = tmp_path / "template.yaml"
    template.write_text(yaml.safe_dump(one_nic))
    files = [str(template)] + ([str(tmp_path / "copy.yaml")] if where == "files" else [])
    run = nicguard("check", "--state", str(state), "--output", "json", *files)
    assert run.returncode == 1, run.stdout + run.stderr
    results = {r["kind"]: r for r in json.loads(run.stdout)["results"]}
    (violation,) = results["ResourceClaimTemplate"]["violations"]
    assert violation["code"] == "RdmaClaimMismatch"
    assert violation["message"].startswith(
        "ResourceClaimTemplate team-a/my-rdma would be used by ConfigMap team-a/tj-runtime-snapshot"
        " (runtime snapshot of TrainJob team-a/tj: ClusterTrainingRuntime torch-distributed-dranet)"
    )
    assert "requests 1 mrdma.google.com device: request exactly one" in violation["message"]
