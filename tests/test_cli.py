"""The ``nicguard`` command line through its real entry point (``python -m app``): exit codes,
flags over environment, usage and input errors on one line, and what ``--log-level`` silences."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from tests.support.paths import (
    ROOT as ROOT,  # re-exported: tests/commands/test_check.py imports it here
)

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


def test_log_level_warning_leaves_out_the_notes_of_check(tmp_path: Path) -> None:
    other = tmp_path / "network.yaml"
    other.write_text("apiVersion: networking.gke.io/v1\nkind: Network\nmetadata: {name: net}\n")
    noted = nicguard("check", "--state", STATE, str(other))
    lead = f"nicguard: {other}: document 1: networking.gke.io/v1 Network net"
    assert noted.stderr.startswith(lead)
    quiet = nicguard("check", "--state", STATE, "--log-level", "warning", str(other))
    assert (quiet.returncode, quiet.stderr) == (0, "")


@pytest.mark.parametrize(
    ("argv", "status", "out", "err"),
    [
        pytest.param(
            ["check", "--state", STATE, "examples/objects/drifted-runtime.yaml"],
            1,
            "DENIED  ClusterTrainingRuntime torch-distributed-tcpxo",
            "",
            id="denied",
        ),
        pytest.param(
            ["check", "--state", STATE, "--output", "json", "examples/objects/good-trainjob.yaml"],
            0,
            '"allowed": true',
            "",
            id="allowed-json",
        ),
        pytest.param(
            ["check", "--state", "nowhere", "examples/objects"],
            2,
            "",
            "nicguard: nowhere: no such file or directory",
            id="input-error",
        ),
        pytest.param(
            ["serve", "--state", STATE, "--not-ready", "maybe"],
            2,
            "",
            "nicguard: invalid not-ready 'maybe' (from --not-ready): expected one of deny, warn",
            id="serve-setting-error",
        ),
    ],
)
def test_main_in_process_returns_the_exit_status_and_prints_once(
    argv: list[str],
    status: int,
    out: str,
    err: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(argv) == status
    captured = capsys.readouterr()
    assert out in captured.out
    assert captured.err.startswith(err)


def test_version_prints_the_installed_version_and_exits_zero() -> None:
    import tomllib
    from importlib.metadata import version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert version("nicguard") == project["version"]
    run = nicguard("--version")
    assert (run.returncode, run.stdout, run.stderr) == (0, f"nicguard {project['version']}\n", "")


def test_check_help_states_the_exit_codes() -> None:
    run = nicguard("check", "--help")
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "Exit status: 0 when every object is allowed (warnings included)" in text
    assert "1 when any object is denied" in text
    assert "2 on a usage or input error" in text
