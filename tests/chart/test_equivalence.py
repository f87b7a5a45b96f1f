"""With default values the chart renders what ``kubectl kustomize manifests/`` does, field by field;
with ``certificates.mode=cert-manager`` what the cert-manager overlay does."""

from __future__ import annotations

import difflib
import tomllib
from typing import Any, Final

import pytest
import yaml

from tests.chart.render import CHART, Key, comparable, helm, kustomize, template
from tests.support.paths import ROOT


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


# The opt-in pieces beside the base, and the chart values that render the same objects.
OPT_IN: Final = (
    "manifests/namespace",
    "manifests/recipe-example",
    "manifests/break-glass",
    "manifests/doctor",
)
OPT_IN_VALUES: Final = (
    "--set", "namespace.create=true",
    "--set", "exampleRecipe.create=true",
    "--set", "rbac.breakGlassEditorBinding=true",
    "--set", "rbac.doctorRoles=true",
)  # fmt: skip


@pytest.mark.parametrize(
    ("kustomizations", "args"),
    [
        (("manifests",), ()),
        (("manifests/overlays/cert-manager",), ("--set", "certificates.mode=cert-manager")),
        (("manifests", *OPT_IN), OPT_IN_VALUES),
    ],
    ids=["self-managed", "cert-manager", "opt-in pieces"],
)
def test_the_chart_renders_the_objects_of_the_kustomization(
    kustomizations: tuple[str, ...], args: tuple[str, ...]
) -> None:
    expected = comparable([doc for k in kustomizations for doc in kustomize(ROOT / k)])
    got = comparable(template(*args))
    assert expected == got, differences(expected, got)


def test_the_base_owns_no_namespace_no_recipe_and_binds_no_group() -> None:
    """`kubectl delete -k manifests/` (and `helm uninstall` with defaults) takes no data with it:
    not the namespace, not a recipe AICR wrote; and nothing grants rights to a group."""
    for docs in (kustomize(ROOT / "manifests"), template()):
        kinds = {doc["kind"] for doc in docs}
        assert "Namespace" not in kinds
        assert "ConfigMap" not in kinds
        for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
            assert {s["kind"] for s in binding["subjects"]} == {"ServiceAccount"}, binding
        names = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
        assert ("ClusterRole", "nicguard-break-glass-editor") in names


def test_the_chart_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
