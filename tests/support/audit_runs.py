"""``nicguard audit`` run through ``app.cli.main``, on a file state or on a local API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from tests.support.apiserver import FakeApiServer, Reply, routes, serving


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``nicguard audit ARGS``: the exit status, stdout and stderr."""
    code = main(["audit", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def live(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    table: dict[str, Reply],
    *args: str,
) -> tuple[int, str, str, FakeApiServer]:
    """``audit`` against a local API server answering ``table`` by path, as the kubeconfig's."""
    with serving(routes(table)) as server:
        monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path)))
        code, out, err = audit(capsys, *args)
    return code, out, err, server
