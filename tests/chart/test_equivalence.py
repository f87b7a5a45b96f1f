"""With default values the chart renders what ``kubectl kustomize manifests/`` does, field by field;
with ``certificates.mode=cert-manager`` what the cert-manager overlay does."""

from __future__ import annotations

import difflib
import tomllib
from typing import Any

import pytest
import yaml

from tests.chart.render import CHART, ROOT, Key, comparable, helm, kustomize, template


def differences(expected: dict[Key, dict[str, Any]], got: dict[Key, dict[str, Any]]) -> str:
    lines = [f"only in manifests: {k}" for k in sorted(expected.keys() - got.keys(), key=str)]
    lines += [f"only in the chart: {k}" for k in sorted(got.keys() - expected.keys(), key=str)]
    for k in sorted(expected.keys() & got.keys(), key=str):
        if expected[k] != got[k]:
            a = yaml.safe_dump(expected[k]).splitlines()
            b = yaml.safe_dump(got[k]).splitlines()
            diff = difflib.unified_diff(a, b, "manifests", "chart", lineterm="")
            lines += [str(k), *diff]
    return "\n".join(lines)


def test_helm_lint_strict_passes() -> None:
    run = helm("lint", "--strict", str(CHART))
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("kustomization", "args"),
    [
        ("manifests", ()),
        ("manifests/overlays/cert-manager", ("--set", "certificates.mode=cert-manager")),
    ],
    ids=["self-managed", "cert-manager"],
)
def test_the_chart_renders_the_objects_of_the_kustomization(
    kustomization: str, args: tuple[str, ...]
) -> None:
    expected = comparable(kustomize(ROOT / kustomization))
    got = comparable(template(*args))
    assert expected == got, differences(expected, got)


def test_the_chart_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
