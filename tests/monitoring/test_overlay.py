"""manifests/overlays/monitoring: its generated copies are current and it builds the base plus a
ServiceMonitor that scrapes the Service's metrics port, the rules and the dashboard."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Final

import pytest
import yaml

from scripts.monitoring_manifests import OVERLAY, REGENERATE, generated
from tests.harness.procs import tool
from tests.monitoring.promql import DASHBOARD, RULES
from tests.support.paths import ROOT

KUBECTL: Final = tool("kubectl")


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(OVERLAY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("path", sorted(generated()), ids=lambda path: path.name)
def test_the_generated_copy_is_current(path: Any) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: run `{REGENERATE}`"
    assert path.read_text() == generated()[path], (
        f"{path.relative_to(ROOT)} is stale: run `{REGENERATE}`"
    )


def test_the_prometheus_rule_holds_exactly_the_rule_file_groups(
    built: list[dict[str, Any]],
) -> None:
    rule = one(built, "PrometheusRule", "nicguard")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "nicguard-system"
    assert rule["spec"] == yaml.safe_load(RULES.read_text())


def test_the_dashboard_config_map_holds_the_dashboard(built: list[dict[str, Any]]) -> None:
    config_map = one(built, "ConfigMap", "nicguard-grafana-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["nicguard.json"]) == json.loads(DASHBOARD.read_text())


def test_the_overlay_is_the_base_plus_monitoring(built: list[dict[str, Any]]) -> None:
    base = subprocess.run(
        [str(KUBECTL), "kustomize", str(ROOT / "manifests" / "base")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    base_objects = {(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(base.stdout)}
    added = {(o["kind"], o["metadata"]["name"]) for o in built} - base_objects
    assert added == {
        ("ServiceMonitor", "nicguard"),
        ("PrometheusRule", "nicguard"),
        ("ConfigMap", "nicguard-grafana-dashboard"),
    }


def test_the_service_monitor_scrapes_the_metrics_port_as_job_nicguard(
    built: list[dict[str, Any]],
) -> None:
    monitor, service = one(built, "ServiceMonitor", "nicguard"), one(built, "Service", "nicguard")
    spec, labels = monitor["spec"], service["metadata"]["labels"]
    assert service["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    (endpoint,) = spec["endpoints"]
    assert ports[endpoint["port"]]["targetPort"] == "probes"  # plain HTTP /metrics
    assert endpoint["path"] == "/metrics"
    # The rules select job="nicguard" and read the endpoint's readiness as `ready`.
    assert labels[spec["jobLabel"]] == "nicguard"
    assert {r["targetLabel"] for r in endpoint["relabelings"]} == {"ready"}
    assert 'up{job="nicguard", ready="false"}' in RULES.read_text()
