"""``nicguard serve`` with ``NICGUARD_ENFORCEMENT=warn`` over real TLS (file mode): a request it
would deny is allowed with the lines as warnings, ``decision: warned`` in the annotations and in
the request metric (docs/rollout.md)."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from tests.e2e.procs import free_ports, wait_until

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def restored_process_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """serve() configures the root logger, freezes the heap: undo both for the tests after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    flags = (logging.logThreads, logging.logProcesses, logging.logMultiprocessing)
    monkeypatch.setenv("NICGUARD_ENFORCEMENT", "warn")
    yield
    root.handlers[:], root.level = handlers, level
    logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags
    gc.unfreeze()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310 - loopback http
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def post_review(url: str, context: ssl.SSLContext, name: str) -> dict[str, Any]:
    body = (ROOT / "examples" / "reviews" / f"{name}.json").read_bytes()
    request = urllib.request.Request(  # noqa: S310 - a loopback https URL
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5, context=context) as reply:  # noqa: S310
        answer: dict[str, Any] = json.loads(reply.read())
    return answer["response"]  # type: ignore[no-any-return]


def test_serve_with_enforcement_warn_allows_what_it_would_deny_over_tls(
    tmp_path: Path, restored_process_state: None
) -> None:
    port, probe_port = free_ports(2)
    seen: dict[str, Any] = {}

    def client() -> None:
        probes = f"http://127.0.0.1:{probe_port}"
        try:
            wait_until(
                lambda: get(f"{probes}/readyz")[0] == 200 or None,
                timeout=30,
                what="nicguard serve to be ready",
            )
            context = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
            url = f"https://127.0.0.1:{port}/validate"
            seen["drifted"] = post_review(url, context, "drifted-runtime")
            seen["metrics"] = get(f"{probes}/metrics")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # serve()'s handler: drain and return

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    status = main(
        [
            "serve",
            "--state",
            str(ROOT / "examples" / "cluster"),
            "--cert-dir",
            str(tmp_path / "certs"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--probe-port",
            str(probe_port),
        ]
    )
    thread.join(timeout=10)
    assert status == 0
    drifted = seen["drifted"]
    assert drifted["allowed"] is True
    assert "status" not in drifted
    assert drifted["warnings"][0].startswith("[MappingDivergesFromRecipe] at position eth3 ")
    assert drifted["auditAnnotations"]["decision"] == "warned"
    assert drifted["auditAnnotations"]["violations"] == "MappingDivergesFromRecipe"
    _, metrics = seen["metrics"]
    assert 'nicguard_admission_requests_total{decision="warned"' in metrics
    # The audit still reports what deny would deny (nothing here: the example state is clean).
    assert 'nicguard_audit_runtimes{result="fail"} 0.0' in metrics
