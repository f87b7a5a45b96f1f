"""``nicguard audit`` (app.commands.audit) through ``app.cli.main``: a file state's runtimes in
text, JSON and report objects, one namespace, exit codes; and once live, against a local API
server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from app.cli import main
from app.domain.cluster import PARAM_SETS_SKIPPED
from app.domain.kinds import Kind
from tests.builders import (
    GPU_NICS,
    claim_template,
    configmap,
    exactly,
    network,
    plain_recipe,
    runtime,
    wired,
    with_metadata,
)
from tests.support.apiserver import listed, status
from tests.support.audit_runs import audit, live
from tests.support.claimed_snapshots import claimed_copy
from tests.support.cluster import ALL_CONFIGMAPS, CLUSTER, CTRS, OPENREPORTS, WGPOLICYK8S
from tests.support.paths import ROOT

NOT_FOUND_AT: Final = (
    "spec.template.spec.replicatedJobs[0].template.spec.template.metadata"
    ".annotations[networking.gke.io/interfaces][1].network"
)


def team_runtime(namespace: str, name: str, network_name: str | None = None) -> dict[str, object]:
    pairs = wired() if network_name is None else wired([("eth1", network_name)])
    return runtime(name, kind=Kind.TRAINING_RUNTIME, namespace=namespace, annotations=pairs)


OBJECTS: Final = [
    *(network(name) for name in GPU_NICS),
    network("slow-nic", ready=False),
    configmap(plain_recipe()),
    with_metadata(runtime(annotations=wired()), uid="u-ctr"),
    with_metadata(team_runtime("team-a", "a-good"), uid="u-a"),
    team_runtime("team-a", "a-lost", "gone-nic"),
    team_runtime("team-b", "b-slow", "slow-nic"),
]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A CTR and a TR that pass, a TR naming no Network, a TR naming an unready one."""
    directory = tmp_path / "state"
    directory.mkdir()
    (directory / "networks.yaml").write_text(yaml.safe_dump_all(OBJECTS[: len(GPU_NICS) + 1]))
    (directory / "rest.yaml").write_text(yaml.safe_dump_all(OBJECTS[len(GPU_NICS) + 1 :]))
    return directory


def test_text_gives_each_runtime_its_result_findings_and_a_summary(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = audit(capsys, "--state", str(state))
    assert (code, err) == (1, f"nicguard: {PARAM_SETS_SKIPPED}\n")  # the state holds none
    blocks = out.rstrip("\n").split("\n\n")
    assert [block.splitlines()[0] for block in blocks[:-1]] == [
        "PASS ClusterTrainingRuntime torch-distributed-tcpxo",
        "PASS TrainingRuntime team-a/a-good",
        "FAIL TrainingRuntime team-a/a-lost",
        "FAIL TrainingRuntime team-b/b-slow",
    ]
    lost = blocks[2].splitlines()
    assert lost[1].startswith("  [NetworkNotFound] no Network object exists for eth1->gone-nic")
    assert lost[2] == f"      at {NOT_FOUND_AT}"
    assert blocks[3].splitlines()[1].startswith("  [NetworkNotReady] ")
    assert blocks[-1] == "4 audited, 2 pass, 0 warn, 2 fail"


def test_a_waived_finding_warns_and_one_namespace_exits_by_its_own_results(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = audit(capsys, "--state", str(state), "--not-ready", "warn")
    assert code == 1  # team-a/a-lost still fails
    assert "WARN TrainingRuntime team-b/b-slow\n  [NetworkNotReady] " in out
    assert out.rstrip().endswith("4 audited, 2 pass, 1 warn, 1 fail")
    code, out, _ = audit(
        capsys, "--state", str(state), "--namespace", "team-b", "--not-ready", "warn"
    )
    assert code == 0
    assert out.startswith("WARN TrainingRuntime team-b/b-slow\n")
    assert out.rstrip().endswith("1 audited, 0 pass, 1 warn, 0 fail")


def test_an_annotated_job_fails_its_runtime(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``examples/objects/annotated-evaluator-runtime.yaml`` in the state: its evaluator job,
    which no rule binds, names a Network the state lacks."""
    example = (ROOT / "examples/objects/annotated-evaluator-runtime.yaml").read_text()
    (state / "evaluator.yaml").write_text(example)
    code, out, _ = audit(capsys, "--state", str(state), "--namespace", "team-a")
    assert code == 1
    block = next(b for b in out.split("\n\n") if "torch-tcpxo-eval" in b).splitlines()
    assert block[0] == "FAIL TrainingRuntime team-a/torch-tcpxo-eval"
    assert block[1].startswith(
        "  [NetworkNotFound] evaluator job: no Network object exists for eth1->does-not-exist"
    )
    assert block[2].startswith("      at spec.template.spec.replicatedJobs[1].template")


def test_one_namespace_judges_only_its_training_runtimes(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = audit(capsys, "--state", str(state), "--namespace", "team-a", "--output", "json")
    assert code == 1
    results = json.loads(out)["results"]
    assert [(r["kind"], r["namespace"], r["name"]) for r in results] == [
        ("TrainingRuntime", "team-a", "a-good"),
        ("TrainingRuntime", "team-a", "a-lost"),
    ]
    code, out, _ = audit(capsys, "--state", str(state), "--namespace", "elsewhere")
    assert (code, out) == (0, "no TrainingRuntime found in namespace elsewhere\n")


def test_json_has_the_spec_shape_with_findings_as_violations(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = audit(capsys, "--state", str(state), "--output", "json")
    assert code == 1
    results = json.loads(out)["results"]
    assert {tuple(sorted(r)) for r in results} == {
        ("apiVersion", "kind", "name", "namespace", "result", "violations")
    }
    assert [(r["name"], r["result"]) for r in results] == [
        ("torch-distributed-tcpxo", "pass"),
        ("a-good", "pass"),
        ("a-lost", "fail"),
        ("b-slow", "fail"),
    ]
    assert results[0]["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert results[0]["namespace"] == ""
    (violation,) = results[2]["violations"]
    assert violation["code"] == "NetworkNotFound"
    assert violation["field"] == NOT_FOUND_AT
    assert "eth1->gone-nic" in violation["message"]


def reports(out: str) -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all(out))
    assert all(isinstance(d, dict) for d in documents)
    return documents


def kinds(documents: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(d["apiVersion"], d["kind"], d["metadata"].get("namespace", "")) for d in documents]


@pytest.mark.parametrize(
    ("setting", "api", "cluster_kind", "namespaced_kind"),
    [
        ("auto", "openreports.io/v1alpha1", "ClusterReport", "Report"),
        ("off", "openreports.io/v1alpha1", "ClusterReport", "Report"),
        ("openreports", "openreports.io/v1alpha1", "ClusterReport", "Report"),
        ("wgpolicyk8s", "wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport", "PolicyReport"),
    ],
)
def test_reports_are_one_per_namespace_and_the_cluster_report_in_the_setting_api(
    state: Path,
    capsys: pytest.CaptureFixture[str],
    setting: str,
    api: str,
    cluster_kind: str,
    namespaced_kind: str,
) -> None:
    code, out, _ = audit(capsys, "--state", str(state), "--output", "reports", "--reports", setting)
    assert code == 1
    documents = reports(out)
    assert kinds(documents) == [
        (api, cluster_kind, ""),
        (api, namespaced_kind, "team-a"),
        (api, namespaced_kind, "team-b"),
    ]
    cluster, team_a, _ = documents
    assert {d["metadata"]["name"] for d in documents} == {"nicguard"}
    assert team_a["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "nicguard"}
    assert team_a["summary"] == {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    good, lost = team_a["results"]
    assert good["resources"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "name": "a-good",
            "namespace": "team-a",
        }
    ]
    assert (good["rule"], good["result"]) == ("wiring", "pass")
    assert (lost["rule"], lost["result"]) == ("NetworkNotFound", "fail")
    assert lost["properties"] == {"field": NOT_FOUND_AT}
    assert "uid" not in cluster["results"][0]["resources"][0]  # the cached copies keep none


def test_reports_of_one_namespace_leave_out_the_cluster_report(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("--state", str(state), "--output", "reports", "--namespace")
    code, out, _ = audit(capsys, *args, "team-b", "--reports", "wgpolicyk8s")
    assert code == 1
    assert kinds(reports(out)) == [("wgpolicyk8s.io/v1alpha2", "PolicyReport", "team-b")]
    # A namespace without runtimes gets its report still: applying it clears what it held.
    code, out, _ = audit(capsys, *args, "elsewhere")
    assert code == 0
    (empty,) = reports(out)
    assert kinds([empty]) == [("openreports.io/v1alpha1", "Report", "elsewhere")]
    assert (empty["results"], empty["summary"]["pass"]) == ([], 0)


def test_a_state_without_runtimes_passes_with_an_empty_cluster_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "networks.yaml").write_text(yaml.safe_dump(network("gpu-nic-0")))
    code, out, _ = audit(capsys, "--state", str(tmp_path))
    assert (code, out) == (0, "no ClusterTrainingRuntime or TrainingRuntime found\n")
    code, out, _ = audit(capsys, "--state", str(tmp_path), "--output", "reports")
    assert code == 0
    (cluster,) = reports(out)
    assert kinds([cluster]) == [("openreports.io/v1alpha1", "ClusterReport", "")]
    assert cluster["results"] == []


def test_the_example_cluster_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit(capsys, "--state", str(ROOT / "examples" / "cluster"))
    assert code == 0
    assert out.rstrip().endswith("2 audited, 2 pass, 0 warn, 0 fail")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--state", "{tmp}/missing"], "nicguard: {tmp}/missing: no such file or directory"
        ),
        pytest.param(
            ["--state", "{tmp}", "--reports", "sideways"],
            "nicguard: invalid reports 'sideways' (from --reports): "
            "expected one of auto, openreports, wgpolicyk8s, off",
        ),
        pytest.param(
            ["--state", "{tmp}/bad.yaml"], "nicguard: {tmp}/bad.yaml: invalid YAML/JSON: "
        ),
        pytest.param(
            ["--state", "{tmp}/deep.json"],
            "nicguard: {tmp}/deep.json: document 1: lists nested more than 32 deep",
            id="list-nested-thousands-deep",
        ),
    ],
)
def test_input_errors_exit_two_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "bad.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "deep.json").write_text('{"kind":"List","items":[' * 3000 + "{}" + "]}" * 3000)
    code, out, err = audit(capsys, *(a.format(tmp=tmp_path) for a in args))
    assert (code, out) == (2, "")
    assert err.startswith(message.format(tmp=tmp_path))
    assert err.count("\n") == 1


def test_live_audit_lists_the_cluster_from_the_kubeconfig(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, out, err, server = live(capsys, monkeypatch, tmp_path, CLUSTER)
    assert (code, err) == (0, "")
    assert out.rstrip().endswith("3 audited, 3 pass, 0 warn, 0 fail")
    assert OPENREPORTS not in server.paths  # discovery only for --output reports
    code, out, _, server = live(
        capsys, monkeypatch, tmp_path, CLUSTER, "--namespace", "team-a", "--output", "json"
    )
    assert code == 0
    assert [r["name"] for r in json.loads(out)["results"]] == ["a"]
    assert CTRS not in server.paths


@pytest.mark.parametrize(
    ("served", "setting", "api"),
    [
        ((OPENREPORTS, WGPOLICYK8S), "auto", "openreports.io/v1alpha1"),
        ((WGPOLICYK8S,), "auto", "wgpolicyk8s.io/v1alpha2"),
        ((WGPOLICYK8S,), "off", "wgpolicyk8s.io/v1alpha2"),
        ((), "auto", "openreports.io/v1alpha1"),
        ((OPENREPORTS,), "wgpolicyk8s", "wgpolicyk8s.io/v1alpha2"),
    ],
)
def test_live_reports_are_in_the_api_the_cluster_serves_unless_the_setting_names_one(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    served: tuple[str, ...],
    setting: str,
    api: str,
) -> None:
    table = {k: v for k, v in CLUSTER.items() if k not in (OPENREPORTS, WGPOLICYK8S)}
    table |= {path: CLUSTER[path] for path in served}
    args = ("--output", "reports", "--reports", setting)
    code, out, _, _ = live(capsys, monkeypatch, tmp_path, table, *args)
    assert code == 0
    assert [(a, ns) for a, _, ns in kinds(reports(out))] == [
        (api, ""),
        (api, "team-a"),
        (api, "team-b"),
    ]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param(
            CTRS,
            "nicguard: cannot list clustertrainingruntimes.trainer.kubeflow.org: "
            "forbidden (RBAC): no\n",
            id="a list",
        ),
        pytest.param(
            OPENREPORTS,
            "nicguard: cannot read the discovery documents of the policy report APIs: "
            "forbidden (RBAC): no\n",
            id="discovery",
        ),
    ],
)
def test_a_cluster_that_cannot_be_read_exits_two_naming_what_failed(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    path: str,
    message: str,
) -> None:
    table = {**CLUSTER, path: status(403, "Forbidden", "no")}
    code, out, err, _ = live(capsys, monkeypatch, tmp_path, table, "--output", "reports")
    assert (code, out, err) == (2, "", message)


def test_unusable_credentials_exit_two(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    code, out, err = audit(capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"nicguard: cannot use KUBECONFIG={tmp_path / 'absent'}: ")


def test_an_empty_namespace_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["audit", "--namespace", " "])
    assert raised.value.code == 2
    assert "argument --namespace: expected a namespace" in capsys.readouterr().err


def test_the_dranet_state_judges_its_training_runtimes_with_their_templates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/dranet/cluster with the one-NIC and netdev runtimes of team-a in it: their
    templates are the state's; the ClusterTrainingRuntime alone claims, and passes."""
    dranet = ROOT / "examples" / "dranet"
    for path in (*(dranet / "cluster").iterdir(), dranet / "objects" / "one-nic-runtime.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "netdev.yaml").write_text((dranet / "objects" / "netdev-runtime.yaml").read_text())
    code, out, err = audit(capsys, "--state", str(tmp_path))
    assert (code, err) == (1, "")
    blocks = out.rstrip("\n").split("\n\n")
    assert [block.splitlines()[:2] for block in blocks[:-1]] == [
        ["PASS ClusterTrainingRuntime torch-distributed-dranet"],
        [
            "FAIL TrainingRuntime team-a/torch-netdev",
            "  [RdmaClaimMissing] bound to profile a4-dranet (8 RDMA NICs per node), but no "
            "ResourceClaimTemplate it names requests mrdma.google.com devices: its pods would "
            "run NCCL on the gVNIC",
        ],
        [
            "FAIL TrainingRuntime team-a/torch-one-nic",
            "  [RdmaClaimMismatch] bound to profile a4-dranet (8 RDMA NICs per node), but "
            "ResourceClaimTemplate team-a/rdma-one-nic requests 1 mrdma.google.com device: "
            "request exactly one mrdma.google.com, allocationMode All or ExactCount count 8",
        ],
    ]
    assert blocks[-1] == "3 audited, 1 pass, 0 warn, 2 fail"


def test_a_bound_cluster_runtime_fails_naming_the_namespace_of_a_template_that_narrows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/dranet/cluster with team-b's default-rdma, created under break-glass with a
    selector: the ClusterTrainingRuntime that names default-rdma fails, naming team-b."""
    dranet = ROOT / "examples" / "dranet"
    for path in (*(dranet / "cluster").iterdir(), dranet / "objects" / "narrowed-template.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    code, out, err = audit(capsys, "--state", str(tmp_path))
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "FAIL ClusterTrainingRuntime torch-distributed-dranet",
        "  [RdmaClaimMismatch] bound to profile a4-dranet (8 RDMA NICs per node), but "
        "ResourceClaimTemplate default-rdma does not claim them all in namespace team-b "
        "(requests all mrdma.google.com devices with selectors): request exactly one "
        "mrdma.google.com, allocationMode All or ExactCount count 8, without selectors, "
        "adminAccess, or constraints or config naming it",
        "      at spec.template.spec.replicatedJobs[0].template.spec.template.spec."
        "resourceClaims[0]",
        "",
        "1 audited, 0 pass, 0 warn, 1 fail",
    ]


RENAMED_CLAIM: Final = (
    "resourceClaimTemplateName: default-rdma",
    "resourceClaimTemplateName: my-rdma",
)
MY_RDMA_ONE_NIC: Final = claim_template(
    "my-rdma", exactly(mode="ExactCount", count=1), namespace="team-a"
)
COPY_HEADING: Final = (
    "ConfigMap team-a/{name} (runtime snapshot of TrainJob team-a/{job}: ClusterTrainingRuntime "
    "torch-distributed-dranet)"
)


def _copies() -> list[dict[str, Any]]:
    """TrainJob tj's copy as Trainer wrote it, and TrainJob edited's, edited to claim my-rdma."""
    renamed = claimed_copy(RENAMED_CLAIM)
    renamed["metadata"] = {
        **renamed["metadata"],
        "name": "edited-runtime-snapshot",
        "ownerReferences": [{**renamed["metadata"]["ownerReferences"][0], "name": "edited"}],
    }
    return [claimed_copy(), renamed]


def test_the_audit_judges_runtime_snapshots_with_the_templates_they_claim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The copy Trainer builds a TrainJob's pods from can claim a template its runtime does not:
    my-rdma, since created again with one NIC, fails the edited copy; the untouched one passes."""
    for path in (ROOT / "examples" / "dranet" / "cluster").iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "copies.yaml").write_text(yaml.safe_dump_all([*_copies(), MY_RDMA_ONE_NIC]))
    code, out, err = audit(capsys, "--state", str(tmp_path))
    assert (code, err) == (1, "")
    blocks = out.rstrip("\n").split("\n\n")
    assert [block.splitlines()[:2] for block in blocks[:-1]] == [
        ["PASS ClusterTrainingRuntime torch-distributed-dranet"],
        [
            "FAIL " + COPY_HEADING.format(name="edited-runtime-snapshot", job="edited"),
            "  [RdmaClaimMismatch] "
            + COPY_HEADING.format(name="edited-runtime-snapshot", job="edited")
            + ": bound to profile a4-dranet (8 RDMA NICs per node), but ResourceClaimTemplate "
            "team-a/my-rdma requests 1 mrdma.google.com device: request exactly one "
            "mrdma.google.com, allocationMode All or ExactCount count 8",
        ],
        ["PASS " + COPY_HEADING.format(name="tj-runtime-snapshot", job="tj")],
    ]
    assert blocks[-1] == "3 audited, 2 pass, 0 warn, 1 fail"
    code, out, _ = audit(capsys, "--state", str(tmp_path), "--namespace", "team-b")
    assert (code, out.rstrip()) == (0, "no TrainingRuntime found in namespace team-b")


def test_a_live_audit_lists_the_configmaps_once_keeping_the_snapshots(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One paginated LIST of ConfigMaps; a list's items carry no kind, a copy is still one."""
    listed_copies = [
        {k: v for k, v in c.items() if k not in ("apiVersion", "kind")} for c in _copies()
    ]
    table = {
        **CLUSTER,
        ALL_CONFIGMAPS: listed(configmap(plain_recipe()), *listed_copies),
        "/apis/resource.k8s.io/v1/resourceclaimtemplates": listed(
            claim_template("default-rdma", namespace="team-a"), MY_RDMA_ONE_NIC
        ),
    }
    code, out, err, server = live(capsys, monkeypatch, tmp_path, table, "--output", "json")
    assert (code, err) == (1, "")
    copies = [r for r in json.loads(out)["results"] if r["kind"] == "ConfigMap"]
    assert [(r["name"], r["result"]) for r in copies] == [
        ("edited-runtime-snapshot", "fail"),
        ("tj-runtime-snapshot", "pass"),
    ]
    assert [v["code"] for v in copies[0]["violations"]] == ["RdmaClaimMismatch"]
    queries = [query for path, query in server.queries if path == ALL_CONFIGMAPS]
    assert len(queries) == 1
    assert queries[0].get("limit")
