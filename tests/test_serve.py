"""``nicguard serve`` in this process (file mode): the composition root builds both listeners,
judges over TLS, answers the probes, and stops on SIGTERM. Nothing is replaced by a fake."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import ssl
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from tests.harness.procs import free_ports, wait_until
from tests.support.paths import ROOT


@pytest.fixture
def restored_process_state() -> Iterator[None]:
    """serve() configures the root logger, freezes the heap: undo both for the tests after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    flags = (logging.logThreads, logging.logProcesses, logging.logMultiprocessing)
    yield
    root.handlers[:], root.level = handlers, level
    logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags
    gc.unfreeze()


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as reply:  # noqa: S310
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def _post_review(url: str, context: ssl.SSLContext, name: str) -> dict[str, Any]:
    return _post(url, context, (ROOT / "examples" / "reviews" / f"{name}.json").read_bytes())


def _post(url: str, context: ssl.SSLContext, body: bytes) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - a loopback https URL
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5, context=context) as reply:  # noqa: S310
        answer: dict[str, Any] = json.loads(reply.read())
    return answer["response"]  # type: ignore[no-any-return]


def _serve_while(
    tmp_path: Path,
    visit: Callable[[str, str, ssl.SSLContext], dict[str, Any]],
    state: Path = ROOT / "examples" / "cluster",
) -> dict[str, Any]:
    """``nicguard serve`` on the example state (or ``state``) in this process while
    ``visit(webhook URL, probes URL, TLS context)`` runs in a thread once it is ready; SIGTERM
    then; what ``visit`` saw."""
    port, probe_port = free_ports(2)
    seen: dict[str, Any] = {}

    def client() -> None:
        probes = f"http://127.0.0.1:{probe_port}"
        try:
            wait_until(
                lambda: _get(f"{probes}/readyz")[0] == 200 or None,
                timeout=30,
                what="nicguard serve to be ready",
            )
            context = ssl.create_default_context(cafile=str(tmp_path / "certs" / "ca.crt"))
            seen.update(visit(f"https://127.0.0.1:{port}/validate", probes, context))
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # serve()'s handler: drain and return

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    status = main(
        [
            "serve",
            "--state",
            str(state),
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
    return seen


def test_serve_in_file_mode_judges_over_tls_answers_probes_and_stops_on_sigterm(
    tmp_path: Path, restored_process_state: None
) -> None:
    def visit(url: str, probes: str, context: ssl.SSLContext) -> dict[str, Any]:
        return {
            "drifted": _post_review(url, context, "drifted-runtime"),
            "good": _post_review(url, context, "good-runtime"),
            "healthz": _get(f"{probes}/healthz"),
            # The static state is judged once, on the audit's thread: answering did not wait.
            "metrics": wait_until(
                lambda: _audited(_get(f"{probes}/metrics")),
                timeout=30,
                what="the audit of the example state",
            ),
        }

    seen = _serve_while(tmp_path, visit)
    assert seen["drifted"]["allowed"] is False
    assert (
        seen["drifted"]["status"]["details"]["causes"][0]["reason"] == "MappingDivergesFromRecipe"
    )
    assert seen["good"]["allowed"] is True
    assert seen["healthz"] == (200, '{"alive": true}')
    metrics_status, metrics = seen["metrics"]
    assert metrics_status == 200
    assert 'nicguard_admission_requests_total{decision="denied"' in metrics
    assert 'nicguard_cache_synced{cache="files"} 1.0' in metrics
    # File mode judges its static state once at start: the audit says what `nicguard audit` says.
    assert 'nicguard_audit_runtimes{result="pass"} 2.0' in metrics
    assert 'nicguard_audit_runtimes{result="fail"} 0.0' in metrics
    assert "nicguard_audit_last_change_timestamp_seconds " in metrics


def test_serve_with_enforcement_warn_allows_what_it_would_deny_over_tls(
    tmp_path: Path, restored_process_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NICGUARD_ENFORCEMENT", "warn")

    def visit(url: str, probes: str, context: ssl.SSLContext) -> dict[str, Any]:
        return {
            "drifted": _post_review(url, context, "drifted-runtime"),
            "metrics": wait_until(
                lambda: _audited(_get(f"{probes}/metrics")),
                timeout=30,
                what="the audit of the example state",
            ),
        }

    seen = _serve_while(tmp_path, visit)
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


def test_serve_in_file_mode_judges_wired_pods_and_queued_jobsets_over_tls(
    tmp_path: Path, restored_process_state: None
) -> None:
    def visit(url: str, probes: str, context: ssl.SSLContext) -> dict[str, Any]:
        return {
            "pod": _post_review(url, context, "misplaced-pod"),
            "jobset": _post_review(url, context, "queued-jobset-patch"),
            "gated": _post_review(url, context, "swapped-gated-pod"),
            "unwired": _post_review(url, context, "unwired-jobset-patch"),
        }

    seen = _serve_while(tmp_path, visit)
    pod, jobset = seen["pod"], seen["jobset"]
    # An UPDATE of a gated Pod's wiring is judged as its CREATE; a JobSet losing it is refused.
    assert seen["gated"]["status"]["message"] == pod["status"]["message"]
    assert seen["unwired"]["auditAnnotations"]["violations"] == "InterfacesAnnotationMissing"
    assert pod["allowed"] is False
    assert pod["status"]["message"].startswith(
        "Pod/team-a/llama-node-0-1-x2k9p: [NetworkMisplaced] Pod team-a/llama-node-0-1-x2k9p "
        "(of Job team-a/llama-node-0): Networks on another interface than the recipe gives them"
    )
    assert jobset["allowed"] is False
    assert jobset["status"]["details"]["causes"][0]["field"] == (
        "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
        "[networking.gke.io/interfaces]"
    )


def _audited(scraped: tuple[int, str]) -> tuple[int, str] | None:
    """The scrape once the audit has judged the example state's runtimes, else None."""
    return scraped if 'nicguard_audit_runtimes{result="pass"} 2.0' in scraped[1] else None


DRANET = ROOT / "examples" / "dranet"


def _review_of(path: Path) -> bytes:
    """A CREATE AdmissionReview of the object in ``path`` (a Trainer object, a
    ResourceClaimTemplate), as the apiserver sends it."""
    obj = yaml.safe_load(path.read_text())
    review = json.loads((ROOT / "examples" / "reviews" / "drifted-runtime.json").read_text())
    request = review["request"]
    kind, metadata = obj["kind"], obj["metadata"]
    group, _, version = obj["apiVersion"].rpartition("/")
    request["kind"] = request["requestKind"] = {"group": group, "version": version, "kind": kind}
    plural = f"{kind.lower()}s"
    resource = {"group": group, "version": version, "resource": plural}
    request["resource"] = request["requestResource"] = resource
    request["name"], request["namespace"] = metadata["name"], metadata.get("namespace", "")
    request["object"] = obj
    return json.dumps(review).encode()


def test_serve_in_file_mode_judges_dra_claims_with_the_states_templates(
    tmp_path: Path, restored_process_state: None
) -> None:
    objects = sorted((DRANET / "objects").glob("*.yaml"))

    def visit(url: str, _probes: str, context: ssl.SSLContext) -> dict[str, Any]:
        return {path.name: _post(url, context, _review_of(path)) for path in objects}

    seen = _serve_while(tmp_path, visit, DRANET / "cluster")
    causes = {
        name: [c["reason"] for c in response.get("status", {}).get("details", {}).get("causes", [])]
        for name, response in seen.items()
    }
    assert causes == {
        "annotated-and-claimed-runtime.yaml": ["WiringModeConflict"],
        "good-trainjob.yaml": [],
        "narrowed-template.yaml": ["RdmaClaimMismatch"],
        "netdev-runtime.yaml": ["RdmaClaimMissing"],
        "one-nic-runtime.yaml": ["RdmaClaimMismatch"],
        "other-namespace-trainjob.yaml": ["ResourceClaimTemplateNotFound"],
    }
    assert seen["good-trainjob.yaml"]["allowed"] is True
