"""``nicguard doctor`` against a real control plane (docs/doctor.md).

A stack of its own: the shipped configuration registered at nicguard's URL (its certificates from
its cert dir, the controller off, so a replaced caBundle stays replaced), the example cluster, the
Deployment applied with a status written as its controller would. The doctor runs as a
ServiceAccount bound only to the shipped doctor roles (manifests/doctor/). A healthy install is all
✓; each breakage gives its ✗ with the fix and exit 1, and is undone before the next.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest

from app.certificates.builder import authority
from app.domain.doctor import TESTED_MINORS
from tests.harness import expect
from tests.harness.controlplane import KUBECTL_TIMEOUT, ROOT, ControlPlane, Served
from tests.harness.objects import as_list
from tests.harness.procs import free_ports, run_nicguard
from tests.harness.stack import Stack, populate, running
from tests.harness.state import (
    Run,
    apply_networks,
    checked,
    create_namespace,
    delete_past_nicguard,
    set_status,
)
from tests.harness.webhook import rendered_manifests, wait_effective, webhook_names
from tests.support.apiserver import kubeconfig

pytestmark = pytest.mark.e2e

INSTALLED: Final = "nicguard-system"
OPERATOR_NAMESPACE: Final = "doctor-e2e"
OPERATOR: Final = "operator"
CONFIGURATION: Final = "validatingwebhookconfiguration/nicguard"
READY: Final = {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}
DELETED_NETWORK: Final = "gpu-nic-3"  # eth4 of the example recipe


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("doctor")
    with running(workdir, jobset=True, nicguard_args=["--cert-controller=false"]) as started:
        populate(started)
        plane = started.plane
        (deployment,) = (d for d in rendered_manifests(plane) if d["kind"] == "Deployment")
        checked(plane.kubectl("admin", "apply", "-f", "-", input=as_list([deployment])), "deploy")
        set_status(plane, "deployment", "nicguard", READY, namespace=INSTALLED)
        yield started


@pytest.fixture(scope="module")
def operator(stack: Stack) -> Path:
    """The kubeconfig of a ServiceAccount holding the doctor roles and nothing else."""
    plane = stack.plane
    roles = plane.kubectl("admin", "apply", "-k", str(ROOT / "manifests" / "doctor"))
    checked(roles, "applying manifests/doctor")
    create_namespace(plane, OPERATOR_NAMESPACE)
    account = f"{OPERATOR_NAMESPACE}:{OPERATOR}"
    for args in (
        ["create", "serviceaccount", OPERATOR, "-n", OPERATOR_NAMESPACE],
        ["create", "clusterrolebinding", "doctor", "--clusterrole=nicguard-doctor"],
        ["create", "rolebinding", "doctor", "-n", INSTALLED, "--role=nicguard-doctor-namespace"],
        ["create", "rolebinding", "doctor", "-n", OPERATOR_NAMESPACE],
    ):
        if args[1] == "rolebinding" and args[-1] == OPERATOR_NAMESPACE:
            args.append("--clusterrole=nicguard-doctor-dry-run")
        if "binding" in args[1]:
            args.append(f"--serviceaccount={account}")
        checked(plane.kubectl("admin", *args), " ".join(args))
    return plane.service_account_kubeconfig(OPERATOR_NAMESPACE, OPERATOR)


def doctor(kubeconfig: Path, *args: str) -> Run:
    """``nicguard doctor --namespace doctor-e2e ARGS``, with no NICGUARD_* setting."""
    namespace = ("--namespace", OPERATOR_NAMESPACE)
    return run_nicguard(kubeconfig, "doctor", *namespace, *args, timeout=KUBECTL_TIMEOUT)


def checks(run: Run) -> dict[str, dict[str, str]]:
    """The JSON output's checks by name."""
    return {check["check"]: check for check in json.loads(run.stdout)["checks"]}


def failed(run: Run) -> dict[str, dict[str, str]]:
    assert run.returncode == 1, expect.shown(run)
    return {name: c for name, c in checks(run).items() if c["status"] == "fail"}


def warned_on(served: Served) -> set[str]:
    """The checks a healthy install shows as ``!`` on this minor: the minor outside the tested
    window, and ``resource.k8s.io/v1`` where it is not served (before 1.34)."""
    low, high = TESTED_MINORS
    found = set() if low <= served.minor <= high else {"Kubernetes"}
    return found if served.dra_v1 else found | {"API resource.k8s.io/v1"}


def test_a_healthy_install_is_all_checks_passed(stack: Stack, operator: Path) -> None:
    """All ✓, but for what the minor itself calls for (docs/compatibility.md)."""
    served = stack.plane.served()
    run = doctor(operator)
    assert run.returncode == 0, expect.shown(run)
    lines = run.stdout.splitlines()
    warned = warned_on(served)
    assert lines[-1].endswith(f", {len(warned)} !, 0 ✗"), expect.shown(run)
    marks = [line for line in lines[:-1] if not line.startswith("    fix: ")]
    assert all(line.startswith(("✓ ", "! ")) for line in marks), expect.shown(run)
    assert {line[2:].split(":")[0] for line in marks if line.startswith("! ")} == warned
    dra = "✓ API resource.k8s.io/v1: serves resourceclaimtemplates"
    for expected in (
        f"{'!' if 'Kubernetes' in warned else '✓'} Kubernetes: v1.{served.minor}.",
        "✓ API trainer.kubeflow.org/v1alpha1: serves",
        dra if served.dra_v1 else "! API resource.k8s.io/v1: not served",
        f"✓ Deployment {INSTALLED}/nicguard: 3 of 3 replicas ready",
        "✓ doors enforce (pods.nicguard.dev): a drifted Pod is refused, a good one admitted",
        "✓ recipe Networks: all 8 present and ready",
        "✓ break-glass group nicguard:break-glass: no binding names it",
        "✓ audit: runtimes:",
    ):
        assert any(line.startswith(expected) for line in lines), (expected, expect.shown(run))
    for entry in webhook_names(stack.webhook_config):
        shown = f"✓ webhook {entry}: failurePolicy Fail"
        assert any(line.startswith(shown) for line in lines), (entry, expect.shown(run))
        assert "caBundle verifies the certificate served at https://127.0.0.1" in run.stdout


def test_json_output_says_the_same(stack: Stack, operator: Path) -> None:
    run = doctor(operator, "--output", "json")
    assert run.returncode == 0, expect.shown(run)
    found = checks(run)
    warned = {name for name, c in found.items() if c["status"] != "ok"}
    assert warned == warned_on(stack.plane.served()), expect.shown(run)
    assert {found[name]["status"] for name in warned} <= {"warn"}
    assert "webhook pods.nicguard.dev" in found


@contextlib.contextmanager
def configuration_edited(stack: Stack, edit: Any) -> Iterator[None]:
    """The live configuration changed by ``edit`` (a function of its JSON); restored after, and
    in effect again (the sentinel denied) before the next test."""
    plane = stack.plane
    get = plane.kubectl("admin", "get", CONFIGURATION, "-o", "json")
    original = json.loads(checked(get, "reading the configuration").stdout)
    for field in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        original["metadata"].pop(field, None)
    changed = edit(json.loads(json.dumps(original)))
    checked(plane.kubectl("admin", "replace", "-f", "-", input=json.dumps(changed)), "editing")
    try:
        yield
    finally:
        restored = plane.kubectl("admin", "replace", "-f", "-", input=json.dumps(original))
        checked(restored, "restoring the configuration")
        wait_effective(plane, stack.nicguard, webhook_names(stack.webhook_config)[0])


def test_a_deleted_webhook_entry_fails_with_the_fix(stack: Stack, operator: Path) -> None:
    def without_protect(config: dict[str, Any]) -> dict[str, Any]:
        config["webhooks"] = [w for w in config["webhooks"] if w["name"] != "protect.nicguard.dev"]
        return config

    with configuration_edited(stack, without_protect):
        run = doctor(operator, "--output", "json")
    (line,) = failed(run).values()
    assert line["check"] == "webhook protect.nicguard.dev", expect.shown(run)
    assert line["found"] == "missing: what it guards is not judged"
    assert "kubectl apply -k manifests/" in line["fix"]


def test_a_replaced_ca_bundle_fails_with_the_fix(stack: Stack, operator: Path) -> None:
    now = datetime.now(tz=UTC)
    other = authority("someone-else", timedelta(days=1), now).cert_pem
    bundle = base64.b64encode(other).decode("ascii")

    def replaced(config: dict[str, Any]) -> dict[str, Any]:
        for hook in config["webhooks"]:
            hook["clientConfig"]["caBundle"] = bundle
        return config

    with configuration_edited(stack, replaced):
        run = doctor(operator, "--output", "json")
    found = failed(run)
    for entry in webhook_names(stack.webhook_config):
        line = found[f"webhook {entry}"]
        assert "caBundle does not verify the certificate served at" in line["found"]
        assert "caBundle" in line["fix"]
    doors = found["doors enforce (pods.nicguard.dev)"]
    assert "failed" in doors["found"], expect.shown(run)
    assert "caBundle" in doors["fix"]


def test_doors_set_to_warn_fail_with_the_fix(stack: Stack, operator: Path) -> None:
    nicguard = stack.nicguard
    original = list(nicguard.args)
    nicguard.stop()
    nicguard.args = [*original, "--enforcement=warn"]
    try:
        nicguard.start()
        run = doctor(operator, "--output", "json")
    finally:
        nicguard.stop()
        nicguard.args = original
        nicguard.start()
    (line,) = failed(run).values()
    assert line["check"] == "doors enforce (pods.nicguard.dev)", expect.shown(run)
    assert line["found"].startswith("a drifted Pod is admitted with a warning: [NetworkNotFound]")
    assert "enforcement=deny" in line["fix"]


def test_a_deleted_recipe_network_fails_with_the_fix(stack: Stack, operator: Path) -> None:
    delete_past_nicguard(stack.plane, "network", DELETED_NETWORK)
    try:
        run = doctor(operator, "--output", "json")
    finally:
        apply_networks(stack.plane)
    found = failed(run)
    line = found["recipe Networks"]
    assert line["found"] == f"not found: {DELETED_NETWORK} (eth4)", expect.shown(run)
    assert line["fix"]
    # The recipe-bound runtimes name it too: the audit says so.
    assert "torch-distributed-tcpxo" in found["audit: runtimes"]["found"]
    assert set(found) == {"recipe Networks", "audit: runtimes"}, expect.shown(run)


def test_a_deployment_scaled_to_zero_fails_with_the_fix(stack: Stack, operator: Path) -> None:
    scale = ["scale", "deployment", "nicguard", "-n", INSTALLED]
    checked(stack.kubectl(*scale, "--replicas=0", who="admin"), "scaling to 0")
    try:
        run = doctor(operator, "--output", "json")
    finally:
        checked(stack.kubectl(*scale, "--replicas=3", who="admin"), "scaling back")
    (line,) = failed(run).values()
    assert line["check"] == f"Deployment {INSTALLED}/nicguard", expect.shown(run)
    assert line["found"].startswith("scaled to 0 replicas")
    assert line["fix"] == f"kubectl -n {INSTALLED} scale deployment nicguard --replicas=3"


def test_a_cluster_that_cannot_be_read_exits_2(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    gone = kubeconfig(tmp_path, f"https://127.0.0.1:{port}")  # nothing listens there
    run = doctor(gone)
    assert run.returncode == 2, expect.shown(run)
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith("nicguard: cannot read the server version: "), expect.shown(run)


def test_the_shipped_doctor_roles_are_what_it_uses(stack: Stack, operator: Path) -> None:
    """No right beyond the doctor's own: the ServiceAccount may not write what it dry-runs
    outside its namespace, nor read Secrets."""
    plane: ControlPlane = stack.plane
    as_operator = f"--as=system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR}"
    for verb, what, namespace, expected in (
        ("create", "pods", OPERATOR_NAMESPACE, "yes"),
        ("create", "pods", INSTALLED, "no"),
        ("get", "secrets/nicguard-tls", INSTALLED, "no"),
        ("patch", CONFIGURATION.replace("/", ".admissionregistration.k8s.io/"), "", "no"),
    ):
        args = ["auth", "can-i", verb, what, as_operator, *(["-n", namespace] if namespace else [])]
        run = plane.kubectl("admin", *args)
        assert run.stdout.strip() == expected, (verb, what, expect.shown(run))
