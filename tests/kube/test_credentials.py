"""Why the API client could not be set up (app.kube.credentials): the error ``load_api_client``
raises for each way credentials are unusable, the one line ``nicguard audit`` makes of it (exit
2), and importing it, as ``nicguard check`` does, loads no Kubernetes client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import EXIT_INPUT, main
from app.kube.client import load_api_client
from app.kube.credentials import ClientConfigError
from tests.support.apiserver import routes, serving
from tests.support.paths import ROOT


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(None, "Invalid kube-config file. No configuration found.", id="absent"),
        pytest.param("", "Invalid kube-config. {path} file is empty", id="empty"),
        pytest.param(
            "kind: Config\n",
            "Invalid kube-config file. Expected key current-context in {path}",
            id="no-current-context",
        ),
        pytest.param(
            "current-context: x\ncontexts: []\n",
            "Invalid kube-config file. Expected object with name x in {path}/contexts list",
            id="context-not-listed",
        ),
    ],
)
def test_an_unusable_kubeconfig_is_named_with_its_reason(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    reason: str,
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    message = f"cannot use KUBECONFIG={path}: {reason.format(path=path)}"
    with pytest.raises(ClientConfigError) as raised:
        load_api_client({"KUBECONFIG": str(path)})
    assert str(raised.value) == message
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert main(["audit"]) == EXIT_INPUT
    assert capsys.readouterr() == ("", f"nicguard: {message}\n")


def test_usable_credentials_raise_nothing(tmp_path: Path) -> None:
    with serving(routes({})) as server:
        api_client = load_api_client({"KUBECONFIG": str(server.kubeconfig(tmp_path))})
        try:
            configuration = api_client.configuration
            assert configuration.host == server.url
            assert configuration.api_key == {"BearerToken": "Bearer t0ken"}
        finally:
            api_client.rest_client.close()


def test_no_credentials_at_all_name_both_places_looked_in(tmp_path: Path) -> None:
    # A process of its own: the Kubernetes client reads KUBECONFIG and the service host from the
    # environment it was imported in, and HOME for ~/.kube/config.
    clean = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "app", "audit"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (run.returncode, run.stdout, run.stderr) == (
        EXIT_INPUT,
        "",
        "nicguard: no Kubernetes credentials: in-cluster: Service host/port is not set.; "
        "kubeconfig: Invalid kube-config file. No configuration found.\n",
    )


def test_importing_it_loads_no_kubernetes_client() -> None:
    # What the module is for: app.cli catches the error without paying for the client's import.
    code = (
        "import sys, app.kube.credentials, app.cli; "
        "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'kubernetes'))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert run.stdout == "[]\n"
