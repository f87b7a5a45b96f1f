"""The Helm chart against a real apiserver: every values variant passes a server-side dry run, and
``helm install`` of the chart (nicguard running outside, as in webhook.py) denies a drifted
runtime until ``helm uninstall``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.chart.render import CHART, NAMESPACE, documents, helm_path, template_run
from tests.harness import expect
from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.objects import example
from tests.harness.state import (
    CRDS,
    ESTABLISH_TIMEOUT,
    apply_networks,
    apply_recipe,
    checked,
    create_namespace,
    eventually,
    install_crds,
)
from tests.harness.webhook import Nicguard, wait_effective

pytestmark = pytest.mark.e2e

# What the optional parts of the chart need served: cert-manager's and the Prometheus Operator's.
OPTIONAL_CRDS: Final = ("cert-manager", "prometheus-operator")
VARIANTS: Final = {
    "defaults": (),
    "cert-manager": ("--set", "certificates.mode=cert-manager"),
    "monitoring": (
        "--set", "monitoring.serviceMonitor.enabled=true",
        "--set", "monitoring.prometheusRule.enabled=true",
        "--set", "monitoring.dashboard.enabled=true",
    ),
    "protect-warn": ("--set", "settings.protect=warn"),
    "opt-in pieces": (
        "--set", "namespace.create=true",
        "--set", "exampleRecipe.create=true",
        "--set", "rbac.breakGlassEditorBinding=true",
        "--set", "rbac.doctorRoles=true",
    ),
    "two-replicas": ("--set", "replicas=2"),
}  # fmt: skip
INSTALL_TIMEOUT: Final = 120.0


def install_optional_crds(plane: ControlPlane) -> None:
    files = [f for name in OPTIONAL_CRDS for f in sorted((CRDS / name).glob("*.yaml"))]
    assert len(files) == 4, files
    args = [arg for f in files for arg in ("-f", str(f))]
    checked(plane.kubectl("admin", "create", *args), "creating the optional CRDs")
    wait = ["wait", "--for=condition=Established", f"--timeout={ESTABLISH_TIMEOUT}", "crd", "--all"]
    checked(plane.kubectl("admin", *wait), "waiting for the CRDs")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    started = ControlPlane(tmp_path_factory.mktemp("helm"))
    try:
        started.start()
        install_crds(started)
        install_optional_crds(started)
        # A dry run creates nothing, so the namespaced objects need their namespace for real
        # (--save-config: kubectl apply of the chart's opt-in Namespace then warns about nothing).
        create = ["create", "namespace", NAMESPACE, "--save-config"]
        checked(started.kubectl("admin", *create), "creating the namespace")
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("args", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_object_the_chart_renders_passes_a_server_side_dry_run(
    plane: ControlPlane, args: tuple[str, ...]
) -> None:
    rendered = template_run(*args)
    assert rendered.returncode == 0, rendered.stderr
    docs = documents(rendered.stdout)
    run = plane.kubectl("admin", "apply", "--dry-run=server", "-f", "-", input=rendered.stdout)
    expect.allowed(run)  # exit 0 and no warning (a Pod Security warning would show here)
    assert run.stdout.count("(server dry run)") == len(docs), expect.shown(run)


def helm(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    """``helm`` as admin of ``plane``, from the repository root (the post-renderer's module)."""
    argv = [helm_path(), f"--kubeconfig={plane.kubeconfig('admin')}", *args]
    return subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )


@pytest.fixture
def installed(tmp_path: Path) -> Iterator[tuple[ControlPlane, Nicguard]]:
    """A fresh control plane with the chart installed as the chart README says, its webhooks
    pointed at a nicguard running outside as its ServiceAccount; stopped after."""
    cluster = ControlPlane(tmp_path)
    nicguard = Nicguard(cluster, tmp_path)
    try:
        cluster.start()
        install_crds(cluster)
        # As the chart README says: Helm keeps its release in the namespace, so the namespace comes
        # first (the release does not own it: namespace.create=false, the default), and the
        # recipe is AICR's, written before nicguard is installed.
        create_namespace(cluster, NAMESPACE)
        apply_recipe(cluster)
        post_render = ["--post-renderer", sys.executable]
        post_render += [
            f"--post-renderer-args={a}" for a in ("-m", "tests.harness.helm_url", nicguard.url)
        ]
        run = helm(
            cluster, "install", "nicguard", str(CHART), "--namespace", NAMESPACE, *post_render,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        nicguard.start()  # ready once its certificate controller has written the caBundle
        wait_effective(cluster, nicguard, "validate.nicguard.dev")
        yield cluster, nicguard
    finally:
        try:
            nicguard.stop()
        finally:
            cluster.stop()


def test_helm_install_denies_a_drifted_runtime_until_uninstall(
    installed: tuple[ControlPlane, Nicguard],
) -> None:
    cluster, _ = installed
    apply_networks(cluster)
    create_namespace(cluster, "team-a")
    body = example("objects/missing-network-runtime.yaml")
    bad = Path(ROOT / "examples" / "objects" / "missing-network-runtime.yaml")
    apply = ["apply", "--dry-run=server", "-f", str(bad)]
    run = eventually(
        lambda: cluster.kubectl("admin", *apply),
        lambda run: "eth8->gpu-nic-8 (cluster has: gpu-nic-0" in run.stderr,
    )
    subject = f"TrainingRuntime/team-a/{body['metadata']['name']}"
    expect.denied(run, subject, "NetworkNotFound", "no Network object exists for eth8->gpu-nic-8")
    # The real apply, as a user would run it, is denied the same way.
    expect.denied(cluster.kubectl("admin", "apply", "-f", str(bad)), subject, "NetworkNotFound")

    uninstalled = helm(cluster, "uninstall", "nicguard", "--namespace", NAMESPACE)
    assert uninstalled.returncode == 0, uninstalled.stderr
    gone = cluster.kubectl("admin", "get", "validatingwebhookconfigurations", "-o", "name")
    assert "nicguard" not in gone.stdout, expect.shown(gone)
    # The release owned neither the namespace nor the recipe AICR wrote there: both stay.
    phase = cluster.kubectl("admin", "get", "namespace", NAMESPACE, "-o=jsonpath={.status.phase}")
    assert phase.stdout == "Active", expect.shown(phase)
    recipe = cluster.kubectl("admin", "get", "configmap", "nicguard-recipe", "-n", NAMESPACE)
    expect.allowed(recipe, "nicguard-recipe")
    # With the webhook configuration gone, nothing judges the runtime any more.
    expect.allowed(cluster.kubectl("admin", *apply), "created (server dry run)")
