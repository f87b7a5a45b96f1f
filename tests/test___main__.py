"""``python -m app`` (app/__main__.py): runs the nicguard command line and exits with its status,
as the image's entry point and the test harness start it."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.support.paths import ROOT

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.parametrize(
    ("args", "status", "stdout", "stderr"),
    [
        pytest.param(("--version",), 0, f"nicguard {VERSION}\n", "", id="version"),
        pytest.param(
            ("check", "--state", "examples/cluster", "examples/objects/drifted-runtime.yaml"),
            1,
            "DENIED  ClusterTrainingRuntime torch-distributed-tcpxo\n",
            "",
            id="denied",
        ),
        pytest.param(
            (),
            2,
            "",
            "usage: nicguard [-h] [--version] {check,audit,doctor,serve} ...\n"
            "nicguard: error: the following arguments are required: command\n",
            id="usage-error",
        ),
    ],
)
def test_python_m_app_runs_the_command_line_and_exits_with_its_status(
    args: tuple[str, ...], status: int, stdout: str, stderr: str
) -> None:
    """``stdout`` is how the output starts; ``stderr`` is all of it."""
    run = subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == status, run.stderr
    assert run.stdout.startswith(stdout)
    assert run.stderr == stderr
