"""The NetworkPolicy of manifests/overlays/network-policy/ and of the chart (networkPolicy.*)
passes the real apiserver's validation: a server-side dry run of each, and a policy with a bad
range is refused (the dry run does validate)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import pytest

from tests.chart.render import NAMESPACE, documents, template_run
from tests.harness import expect
from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.state import checked

pytestmark = pytest.mark.e2e

POLICY: Final = ROOT / "manifests" / "overlays" / "network-policy" / "networkpolicy.yaml"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    started = ControlPlane(tmp_path_factory.mktemp("network-policy"))
    try:
        started.start()
        checked(started.kubectl("admin", "create", "namespace", NAMESPACE), "the namespace")
        yield started
    finally:
        started.stop()


def dry_run(plane: ControlPlane, text: str) -> None:
    run = plane.kubectl("admin", "apply", "--dry-run=server", "-f", "-", input=text)
    expect.allowed(run)
    assert run.stdout.count("(server dry run)") == len(documents(text)), expect.shown(run)
    assert "networkpolicy.networking.k8s.io/nicguard" in run.stdout, expect.shown(run)


def test_the_overlays_policy_passes_a_server_side_dry_run(plane: ControlPlane) -> None:
    dry_run(plane, POLICY.read_text())


def test_the_charts_policy_passes_a_server_side_dry_run(plane: ControlPlane) -> None:
    rendered = template_run(
        "--set", "networkPolicy.enabled=true",
        "--set", "networkPolicy.controlPlaneCIDRs={172.16.0.0/28,fd00::/120}",
        "--set", "networkPolicy.nodeCIDRs={10.128.0.0/20}",
        "--show-only", "templates/networkpolicy.yaml",
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    dry_run(plane, rendered.stdout)


def test_a_policy_with_a_bad_range_is_refused(plane: ControlPlane) -> None:
    broken = POLICY.read_text().replace("172.16.0.0/28", "172.16.0.0/33")
    run = plane.kubectl("admin", "apply", "--dry-run=server", "-f", "-", input=broken)
    assert run.returncode != 0
    assert "172.16.0.0/33" in run.stderr, run.stderr
