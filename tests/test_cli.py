"""``nicguard check`` through the real entry point (``python -m app``): exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STATE = "examples/cluster"


def nicguard(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_allowed_objects_exit_zero() -> None:
    run = nicguard("check", "--state", STATE, "examples/objects/good-trainjob.yaml")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ALLOWED TrainJob team-a/llama-pretrain")
    assert run.stdout.rstrip().endswith("1 checked, 1 allowed, 0 denied")


def test_a_denied_object_exits_one_with_verdict_first_then_codes() -> None:
    run = nicguard("check", "--state", STATE, "examples/objects/drifted-runtime.yaml")
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0] == "DENIED  ClusterTrainingRuntime torch-distributed-tcpxo"
    assert lines[1].startswith("  [MappingDivergesFromRecipe] at position eth3")
    assert "annotations[networking.gke.io/interfaces][3]" in lines[2]


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
            },
            id="structural examples",
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
    ],
)
def test_every_example_produces_its_codes(state: str, files: list[str], codes: set[str]) -> None:
    run = nicguard("check", "--state", state, "--output", "json", *files)
    assert run.returncode == 1
    found = {v["code"] for r in json.loads(run.stdout)["results"] for v in r["violations"]}
    assert found == codes


def test_policy_flags_and_environment_change_verdicts() -> None:
    unready = "examples/objects/unready-network-runtime.yaml"
    warned = nicguard("check", "--state", STATE, "--not-ready", "warn", unready)
    assert warned.returncode == 0
    assert "warning: [NetworkNotReady]" in warned.stdout
    by_env = nicguard("check", "--state", STATE, unready, env={"NICGUARD_NOT_READY": "warn"})
    assert by_env.returncode == 0
    flag_wins = nicguard(
        "check",
        "--state",
        STATE,
        "--not-ready",
        "deny",
        unready,
        env={"NICGUARD_NOT_READY": "warn"},
    )
    assert flag_wins.returncode == 1
    no_recipe = nicguard(
        "check",
        "--state",
        "examples/cluster/networks.yaml",
        "--recipe-required",
        "false",
        "examples/cluster/torch-distributed-tcpxo.yaml",
    )
    assert no_recipe.returncode == 0
    assert "warning: [RecipeUnavailable]" in no_recipe.stdout


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        pytest.param(
            ["--state", STATE, "missing.yaml"], {}, "missing.yaml: no such file", id="missing file"
        ),
        pytest.param(["--state", "nowhere", "examples/objects"], {}, "nowhere", id="missing state"),
        pytest.param(
            ["--state", STATE, "examples/objects"],
            {"NICGUARD_NOT_READY": "sometimes"},
            "invalid not-ready 'sometimes' (from NICGUARD_NOT_READY)",
            id="bad environment value",
        ),
        pytest.param(
            ["--state", STATE, "--recipe-configmap", "no-slash", "examples/objects"],
            {},
            "invalid recipe-configmap 'no-slash' (from --recipe-configmap)",
            id="bad flag value",
        ),
    ],
)
def test_input_errors_exit_two_with_one_line(
    args: list[str], env: dict[str, str], message: str
) -> None:
    run = nicguard("check", *args, env=env)
    assert run.returncode == 2
    assert message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("a: [unclosed\n", id="invalid YAML"),
        pytest.param("a: !!bool foo\n", id="badly tagged scalar"),
        pytest.param("- just\n- a list\n", id="not an object"),
        pytest.param(b"\xff\xfe\x00".decode("latin-1"), id="not UTF-8"),
    ],
)
def test_unusable_files_exit_two_naming_the_file(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content.encode("latin-1"))
    run = nicguard("check", "--state", STATE, str(bad))
    assert run.returncode == 2
    assert str(bad) in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "Traceback" not in run.stderr


def test_usage_errors_exit_two() -> None:
    assert nicguard("check", "examples/objects").returncode == 2
    assert nicguard("frobnicate").returncode == 2


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
        assert "[NetworkNotFound] no Network object exists for eth1->gpu-nic-0" in run.stdout


def test_objects_in_files_that_are_not_judged_are_named_on_stderr(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    bucket = {"apiVersion": "trainer.kubeflow.org/v1beta9", "kind": "BucketList", "items": [{}]}
    network = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}}
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [bucket, network]}))
    run = nicguard("check", "--state", STATE, str(listed))
    assert run.returncode == 0
    assert run.stdout.strip() == "no ClusterTrainingRuntime, TrainingRuntime or TrainJob found"
    assert run.stderr.splitlines() == [
        f"nicguard: {listed}: document 1, items[0].items[0]: trainer.kubeflow.org/v1beta9 Bucket "
        "is not a ClusterTrainingRuntime, TrainingRuntime or TrainJob; not checked",
        f"nicguard: {listed}: document 1, items[1]: networking.gke.io/v1 Network n "
        "is not a ClusterTrainingRuntime, TrainingRuntime or TrainJob; not checked",
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


def test_log_level_warning_leaves_out_the_notes_of_check(tmp_path: Path) -> None:
    other = tmp_path / "network.yaml"
    other.write_text("apiVersion: networking.gke.io/v1\nkind: Network\nmetadata: {name: n}\n")
    noted = nicguard("check", "--state", STATE, str(other))
    assert noted.stderr.startswith(f"nicguard: {other}: document 1: networking.gke.io/v1 Network n")
    quiet = nicguard("check", "--state", STATE, "--log-level", "warning", str(other))
    assert (quiet.returncode, quiet.stderr) == (0, "")
