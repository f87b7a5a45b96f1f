"""``nicguard audit --include-workloads`` through ``app.cli.main``: the wired JobSets, Jobs and
Pods of a file state and of a live cluster (a local API server), each named with its
controller; the unwired ones never judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from app.cli import main
from tests.builders import (
    GPU_NICS,
    PAIRS,
    batch_job,
    configmap,
    controller,
    job_set,
    network,
    node_job,
    plain_recipe,
    pod,
    wired,
    with_metadata,
)
from tests.support.apiserver import Reply, listed, status
from tests.support.audit_runs import audit, live
from tests.support.cluster import CLUSTER

JOB_SETS: Final = "/apis/jobset.x-k8s.io/v1alpha2/jobsets"
JOBS: Final = "/apis/batch/v1/jobs"
PODS: Final = "/api/v1/pods"
SWAPPED: Final = [PAIRS[1], PAIRS[0], *PAIRS[2:]]  # eth1->gpu-nic-1, eth2->gpu-nic-0
LOST: Final = [("eth1", "gone-nic")]

GOOD_JOB_SET: Final = job_set(node_job(wired()), name="llama")
MISPLACED_JOB: Final = batch_job(
    wired([("eth1", "gpu-nic-1"), ("eth2", "gpu-nic-0")]),
    name="llama-node-0",
    owners=[controller("JobSet", "llama", "jobset.x-k8s.io/v1alpha2")],
)
LOST_POD: Final = pod(
    wired(LOST), name="llama-node-0-0-x2k", owners=[controller("Job", "llama-node-0")]
)
PLAIN_POD: Final = pod(None, name="web-0")
OTHER_TEAM_POD: Final = with_metadata(pod(wired(LOST), name="b-0"), namespace="team-b")
# Notes (what a state leaves unchecked) are not what these tests read.
QUIET: Final = ("--log-level", "warning")
LIVE_ARGS: Final = (*QUIET, "--include-workloads")
STATE: Final = [
    *(network(name) for name in GPU_NICS),
    configmap(plain_recipe()),
]


def bare(obj: dict[str, Any]) -> dict[str, Any]:
    """As the raw API lists it: no apiVersion or kind on the items."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """Networks and recipe; a good JobSet, a Job with two Networks swapped, Pods as
    ``kubectl get pods -A -o yaml`` writes them (a List): one naming a lost Network, one
    without the annotation, one of team-b."""
    directory = tmp_path / "state"
    directory.mkdir()
    (directory / "cluster.yaml").write_text(yaml.safe_dump_all(STATE))
    (directory / "workloads.yaml").write_text(yaml.safe_dump_all([GOOD_JOB_SET, MISPLACED_JOB]))
    pods = {"apiVersion": "v1", "kind": "List", "items": [LOST_POD, PLAIN_POD, OTHER_TEAM_POD]}
    (directory / "pods.yaml").write_text(yaml.safe_dump(pods))
    return directory


def headings(out: str) -> list[str]:
    return [block.splitlines()[0] for block in out.rstrip("\n").split("\n\n")[:-1]]


def test_a_file_state_judges_each_wired_workload_naming_its_controller(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = audit(capsys, *QUIET, "--state", str(state), "--include-workloads")
    assert (code, err) == (1, "")
    assert headings(out) == [
        "PASS JobSet team-a/llama",
        "FAIL Job team-a/llama-node-0 (of JobSet team-a/llama)",
        "FAIL Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0)",
        "FAIL Pod team-b/b-0",
    ]
    blocks = out.split("\n\n")
    job, lost = blocks[1].splitlines(), blocks[2].splitlines()
    assert job[1].startswith("  [NetworkMisplaced] Job team-a/llama-node-0 (of JobSet ")
    assert job[-1].startswith("      at spec.template.metadata.annotations")
    assert lost[1].startswith(
        "  [NetworkNotFound] Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0): "
    )
    assert "gone-nic" in lost[1]
    assert out.rstrip().endswith("4 audited, 1 pass, 0 warn, 3 fail")


def test_without_the_flag_no_workload_is_judged(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = audit(capsys, *QUIET, "--state", str(state))
    assert (code, out) == (0, "no ClusterTrainingRuntime or TrainingRuntime found\n")


def test_one_namespace_and_json_give_the_spec_shape(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("--state", str(state), "--include-workloads", "--namespace", "team-b")
    code, out, _ = audit(capsys, *QUIET, *args, "--output", "json")
    assert code == 1
    (result,) = json.loads(out)["results"]
    assert {k: v for k, v in result.items() if k != "violations"} == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "team-b",
        "name": "b-0",
        "result": "fail",
    }
    assert [v["code"] for v in result["violations"]] == ["NetworkNotFound"]


@pytest.mark.parametrize(
    ("setting", "code", "summary"),
    [("warn", 0, "4 audited, 1 pass, 3 warn, 0 fail"), ("off", 0, "4 audited, 4 pass")],
)
def test_the_workloads_setting_waives_or_skips_the_findings(
    state: Path, capsys: pytest.CaptureFixture[str], setting: str, code: int, summary: str
) -> None:
    args = ("--state", str(state), "--include-workloads", "--workloads", setting)
    found, out, _ = audit(capsys, *QUIET, *args)
    assert found == code
    assert summary in out.rstrip().splitlines()[-1]


def test_reports_cannot_hold_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["audit", "--include-workloads", "--output", "reports"])
    assert raised.value.code == 2
    assert "--include-workloads prints text or json, not reports" in capsys.readouterr().err


LIVE: Final[dict[str, Reply]] = {
    **CLUSTER,
    JOB_SETS: listed(bare(GOOD_JOB_SET)),
    JOBS: listed(bare(MISPLACED_JOB), bare(batch_job(None, name="plain"))),
    PODS: listed(bare(LOST_POD), bare(PLAIN_POD)),
    "/api/v1/namespaces/team-a/pods": listed(bare(LOST_POD)),
    "/apis/batch/v1/namespaces/team-a/jobs": listed(),
    "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets": listed(),
}


def test_a_live_cluster_is_listed_once_per_workload_in_pages(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, out, err, server = live(capsys, monkeypatch, tmp_path, LIVE, *LIVE_ARGS)
    assert (code, err) == (1, "")
    assert headings(out)[-3:] == [
        "PASS JobSet team-a/llama",
        "FAIL Job team-a/llama-node-0 (of JobSet team-a/llama)",
        "FAIL Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0)",
    ]
    assert out.rstrip().endswith("6 audited, 4 pass, 0 warn, 2 fail")  # 3 runtimes too
    listed_paths = [(path, query) for path, query in server.queries if path in (JOBS, PODS)]
    assert [path for path, _ in listed_paths] == [JOBS, PODS]
    assert all(query.get("limit") for _, query in listed_paths)
    code, out, _, server = live(
        capsys, monkeypatch, tmp_path, LIVE, *LIVE_ARGS, "--namespace", "team-a"
    )
    assert headings(out)[-1] == "FAIL Pod team-a/llama-node-0-0-x2k (of Job team-a/llama-node-0)"
    assert PODS not in server.paths


def test_a_cluster_without_jobsets_lists_the_rest(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    table = {k: v for k, v in LIVE.items() if k != JOB_SETS}  # 404: JobSet's API not served
    code, out, err, _ = live(capsys, monkeypatch, tmp_path, table, *LIVE_ARGS)
    assert (code, err) == (1, "")
    assert [h.split()[1] for h in headings(out)][-2:] == ["Job", "Pod"]
    assert out.rstrip().endswith("5 audited, 3 pass, 0 warn, 2 fail")


def test_pods_that_cannot_be_listed_exit_two_naming_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    table = {**LIVE, PODS: status(403, "Forbidden", "no")}
    code, out, err, _ = live(capsys, monkeypatch, tmp_path, table, *LIVE_ARGS)
    assert (code, out, err) == (2, "", "nicguard: cannot list pods: forbidden (RBAC): no\n")
