"""The NetworkPolicy of the chart (networkPolicy.*) and of manifests/overlays/network-policy/."""

from __future__ import annotations

import pytest

from tests.chart.render import kustomize, one, template, template_run
from tests.support.paths import ROOT

ON = ("--set", "networkPolicy.enabled=true")
RANGES = ("--set", "networkPolicy.controlPlaneCIDRs={172.16.0.0/28,fd00::/64}")


def test_there_is_no_network_policy_by_default() -> None:
    assert not [d for d in template() if d["kind"] == "NetworkPolicy"]


def test_the_webhook_port_only_from_the_control_plane_the_probes_from_nodes_and_monitoring() -> (
    None
):
    docs = template(*ON, *RANGES, "--set", "networkPolicy.nodeCIDRs={10.128.0.0/20}")
    policy = one(docs, "NetworkPolicy")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    webhook, probes = policy["spec"]["ingress"]
    assert webhook["from"] == [
        {"ipBlock": {"cidr": "172.16.0.0/28"}},
        {"ipBlock": {"cidr": "fd00::/64"}},
    ]
    assert webhook["ports"] == [{"port": "webhook", "protocol": "TCP"}]
    assert probes["from"] == [
        {"ipBlock": {"cidr": "10.128.0.0/20"}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
    ]
    assert probes["ports"] == [{"port": "probes", "protocol": "TCP"}]
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {p["name"] for p in container["ports"]} == {"webhook", "probes"}


def test_the_monitoring_namespace_is_a_value() -> None:
    docs = template(
        *ON, *RANGES,
        "--set", "networkPolicy.monitoringNamespaceSelector.matchLabels.team=observability",
    )  # fmt: skip
    _, probes = one(docs, "NetworkPolicy")["spec"]["ingress"]
    selector = probes["from"][-1]["namespaceSelector"]["matchLabels"]
    assert selector["team"] == "observability"


def test_enabled_without_the_control_plane_range_fails_clearly() -> None:
    run = template_run(*ON)
    assert run.returncode == 1
    assert "networkPolicy.controlPlaneCIDRs is required" in run.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--set", "networkPolicy.controlPlaneCIDRs=172.16.0.0/28"),  # a string, not a list
        ("--set", "networkPolicy.controlPlaneCIDRs={172.16.0.0}"),  # no prefix length
        ("--set", "networkPolicy.nodeCIDRs={nodes}"),
        ("--set", "networkPolicy.enabled=yes"),
        ("--set", "networkPolicy.controlPlane={172.16.0.0/28}"),
    ],
)
def test_the_schema_refuses_bad_ranges(args: tuple[str, ...]) -> None:
    run = template_run(*ON, *args)
    assert run.returncode == 1
    assert "values don't meet the specifications of the schema" in run.stderr, run.stderr
    assert "/networkPolicy" in run.stderr


def test_the_overlay_is_the_base_plus_the_same_policy_with_placeholders() -> None:
    overlay = kustomize(ROOT / "manifests" / "overlays" / "network-policy")
    base = kustomize(ROOT / "manifests" / "base")
    assert len(overlay) == len(base) + 1
    policy = one(overlay, "NetworkPolicy")
    charted = one(template(*ON, *RANGES), "NetworkPolicy")
    assert policy["spec"]["podSelector"] == charted["spec"]["podSelector"]
    assert [rule["ports"] for rule in policy["spec"]["ingress"]] == [
        rule["ports"] for rule in charted["spec"]["ingress"]
    ]
    text = (ROOT / "manifests" / "overlays" / "network-policy" / "networkpolicy.yaml").read_text()
    assert text.count("PLACEHOLDER") >= 3
