"""``nicguard doctor``'s own parts (app.commands.doctor, app.commands.doctor_tls): the probe Pods
as nicguard judges them, each entry's caBundle against a served certificate, the output, and the
command line. The live run is the e2e tier's (tests/e2e/test_doctor.py)."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from app.certificates.builder import authority, leaf
from app.certificates.pem import KeyPair
from app.cli import main
from app.commands.doctor import ABSENT_NETWORK, probe_pod, render, shipped_entries
from app.commands.doctor_tls import bundles
from app.domain.doctor import Line, Mark
from tests.harness.procs import free_ports
from tests.support.apiserver import kubeconfig
from tests.support.paths import ROOT

NOW: Final = datetime.now(tz=UTC)
STATE: Final = ROOT / "examples" / "cluster"


def test_the_shipped_entries_are_the_seven_doors() -> None:
    assert [entry["name"] for entry in shipped_entries()] == [
        "validate.nicguard.dev",
        "protect.nicguard.dev",
        "recipe.nicguard.dev",
        "snapshot.nicguard.dev",
        "claimtemplates.nicguard.dev",
        "workloads.nicguard.dev",
        "pods.nicguard.dev",
    ]


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], *, drifted: bool) -> dict[str, Any]:
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(probe_pod("team-a", drifted=drifted)))
    code = main(["check", "--state", str(STATE), "--output", "json", str(pod)])
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert code == (1 if drifted else 0)
    assert isinstance(result, dict)
    return result


def test_the_drifted_probe_pod_is_refused_for_its_absent_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = check(tmp_path, capsys, drifted=True)
    assert [v["code"] for v in result["violations"]] == ["NetworkNotFound"]
    assert ABSENT_NETWORK in result["violations"][0]["message"]


def test_the_good_probe_pod_is_admitted_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = check(tmp_path, capsys, drifted=False)
    assert (result["allowed"], result["violations"], result["warnings"]) == (True, [], [])


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return authority("doctor-test", timedelta(days=1), NOW)


@pytest.fixture(scope="module")
def served(ca: KeyPair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A TLS server on 127.0.0.1 presenting a leaf ``ca`` signed; yields its URL."""
    pair = leaf(ca, ["127.0.0.1"], lifetime=timedelta(days=1), now=NOW)
    directory = tmp_path_factory.mktemp("served")
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            connection, _ = listener.accept()
            try:
                with context.wrap_socket(connection, server_side=True):
                    pass
            except OSError:
                connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}/validate"
    finally:
        stop.set()
        socket.create_connection(("127.0.0.1", port)).close()  # wakes the accept() to see it
        thread.join()
        listener.close()


def entry(name: str, bundle: bytes, **client: str) -> dict[str, object]:
    encoded = base64.b64encode(bundle).decode("ascii")
    return {"name": name, "clientConfig": {"caBundle": encoded, **client}}


def test_each_bundle_is_judged_against_what_its_url_serves(ca: KeyPair, served: str) -> None:
    other = authority("someone-else", timedelta(days=1), NOW)
    (closed,) = free_ports(1)
    configuration: dict[str, object] = {
        "webhooks": [
            entry("right", ca.cert_pem, url=served),
            entry("wrong", other.cert_pem, url=served),
            entry("empty", b""),
            entry("not-base64", b"", url=served)
            | {"clientConfig": {"caBundle": "%%", "url": served}},
            entry("unreachable", ca.cert_pem, url=f"https://127.0.0.1:{closed}/validate"),
            entry("service", ca.cert_pem, service="nicguard"),
        ]
    }
    found = bundles(configuration, NOW)
    assert {name: bundle.mark for name, bundle in found.items()} == {
        "right": Mark.OK,
        "wrong": Mark.FAIL,
        "empty": Mark.FAIL,
        "not-base64": Mark.FAIL,
        "unreachable": Mark.WARN,
        "service": Mark.OK,
    }
    assert found["right"].found == f"caBundle verifies the certificate served at {served}"
    assert found["wrong"].found == f"caBundle does not verify the certificate served at {served}"
    assert found["empty"].found == "caBundle holds no certificate"
    assert found["unreachable"].found.startswith("cannot fetch the certificate served at")
    assert found["service"].found == (
        "caBundle of 1 CA; the API server's call in the doors check verifies it"
    )


def test_output_as_text_and_as_json() -> None:
    lines = [Line(Mark.OK, "a", "fine ✓"), Line(Mark.FAIL, "b", "broken", "mend")]
    assert render("text", lines).splitlines()[0] == "✓ a: fine ✓"
    assert json.loads(render("json", lines)) == {
        "checks": [
            {"status": "ok", "check": "a", "found": "fine ✓"},
            {"status": "fail", "check": "b", "found": "broken", "fix": "mend"},
        ]
    }


@pytest.mark.parametrize(
    "server",
    [pytest.param(None, id="no-credentials"), pytest.param("closed", id="nothing-listening")],
)
def test_a_cluster_that_cannot_be_read_exits_2_with_one_line(
    server: str | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "kubeconfig"  # absent: no credentials at all
    if server is not None:
        (port,) = free_ports(1)
        path = kubeconfig(tmp_path, f"https://127.0.0.1:{port}")
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert main(["doctor"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("nicguard: ")


def test_a_blank_webhook_configuration_is_refused_before_the_cluster_is_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "--webhook-configuration", " "]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "nicguard: invalid webhook-configuration ' ' (from --webhook-configuration): "
        "expected a name"
    )
