"""The alert rules under promtool: valid, unit-tested alert by alert (rules_test.yaml), documented;
and every query of the Grafana dashboard is PromQL promtool accepts."""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.monitoring.promql import RULES, alerts, dashboard, panel_queries, promtool
from tests.support.paths import ROOT

RULES_TEST: Final = Path(__file__).with_name("rules_test.yaml")
MONITORING_DOC: Final = ROOT / "docs" / "monitoring.md"
SEVERITIES: Final = {"critical", "warning", "info"}
# What the dashboard's variables stand for when promtool parses its queries.
VARIABLES: Final = {"$__rate_interval": "5m", "$__interval": "1m", "$namespace": ".*"}


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def test_promtool_checks_the_rule_file() -> None:
    result = run(promtool(), "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass() -> None:
    result = run(promtool(), "test", "rules", str(RULES_TEST))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_unit_tests_read_the_chart_rule_file() -> None:
    rule_files = yaml.safe_load(RULES_TEST.read_text())["rule_files"]
    assert [(RULES_TEST.parent / f).resolve() for f in rule_files] == [RULES.resolve()]


def test_every_alert_is_tested_firing_and_quiet() -> None:
    cases: dict[str, set[bool]] = defaultdict(set)
    for test in yaml.safe_load(RULES_TEST.read_text())["tests"]:
        for case in test.get("alert_rule_test", ()):
            cases[case["alertname"]].add(bool(case.get("exp_alerts")))
    names = {alert["alert"] for alert in alerts()}
    assert set(cases) == names, "rules_test.yaml tests an alert the rule file lacks, or misses one"
    for name in sorted(names):
        assert cases[name] == {True, False}, (
            f"{name}: needs a case where it fires and one where not"
        )


@pytest.mark.parametrize("alert", alerts(), ids=lambda alert: str(alert["alert"]))
def test_every_alert_is_named_labelled_and_has_a_runbook(alert: dict[str, Any]) -> None:
    name = alert["alert"]
    assert re.fullmatch(r"Nicguard[A-Z]\w+", name)
    assert alert["labels"]["severity"] in SEVERITIES
    annotations = alert["annotations"]
    assert annotations["summary"]
    assert annotations["description"]
    assert annotations["runbook_url"] == f"docs/monitoring.md#{name.lower()}"
    headings = re.findall(r"^### (\S+)$", MONITORING_DOC.read_text(), re.MULTILINE)
    assert name in headings, f"docs/monitoring.md has no '### {name}' section (its runbook)"


def test_the_runbooks_are_the_alerts() -> None:
    text = MONITORING_DOC.read_text()
    runbooks = set(re.findall(r"^### (Nicguard\w+)$", text, re.MULTILINE))
    assert runbooks == {alert["alert"] for alert in alerts()}


def test_every_dashboard_query_is_promql(tmp_path: Path) -> None:
    recorded = []
    for number, query in enumerate(panel_queries()):
        expr = query.expr
        for variable, value in VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{query.where}: a variable the test does not know: {expr}"
        recorded.append({"record": f"dashboard:query_{number}", "expr": expr})
    checked = tmp_path / "dashboard-rules.yaml"
    checked.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))
    result = run(promtool(), "check", "rules", str(checked))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_is_set_up_for_any_prometheus_data_source() -> None:
    board = dashboard()
    assert board["uid"] == "nicguard"
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        for target in panel.get("targets", ()):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
