"""Write the generated files of manifests/overlays/monitoring/ from the chart's rules and dashboard.

Kustomize reads no file outside an overlay, so the overlay carries copies; tests/monitoring fails
when they are stale. Run from the repository root: ``python -m scripts.monitoring_manifests``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Final

import yaml

ROOT: Final = Path(__file__).resolve().parents[1]
RULES: Final = ROOT / "charts" / "nicguard" / "files" / "prometheus-rules.yaml"
DASHBOARD: Final = ROOT / "charts" / "nicguard" / "files" / "grafana-dashboard.json"
OVERLAY: Final = ROOT / "manifests" / "overlays" / "monitoring"
NAMESPACE: Final = "nicguard-system"
REGENERATE: Final = "python -m scripts.monitoring_manifests"


def _header(source: Path) -> str:
    return (
        f"# GENERATED from {source.relative_to(ROOT)}: edit that file, then run\n"
        f"#   {REGENERATE}\n"
        "# (tests/monitoring fails while this copy differs from what it writes).\n"
    )


def _indented(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "".join(pad + line if line.strip() else line for line in text.splitlines(keepends=True))


def prometheus_rule() -> str:
    """A PrometheusRule whose spec is the rule file from its `groups:` on, comments included."""
    text = RULES.read_text()
    start = text.find("\ngroups:\n")
    parsed = yaml.safe_load(text)
    if start < 0 or not isinstance(parsed, dict) or set(parsed) != {"groups"}:
        raise SystemExit(f"{RULES}: expected a rule file whose only top-level key is groups:")
    return (
        _header(RULES)
        + "apiVersion: monitoring.coreos.com/v1\n"
        + "kind: PrometheusRule\n"
        + "metadata:\n"
        + "  name: nicguard\n"
        + f"  namespace: {NAMESPACE}\n"
        + "  labels:\n"
        + "    app.kubernetes.io/name: nicguard\n"
        + "spec:\n"
        + _indented(text[start + 1 :], 2)
    )


def dashboard_configmap() -> str:
    """The dashboard as a ConfigMap Grafana's dashboard sidecar loads (label grafana_dashboard)."""
    dashboard = json.loads(DASHBOARD.read_text())  # fails here, not in Grafana, if it is broken
    body = json.dumps(dashboard, indent=2) + "\n"
    return (
        _header(DASHBOARD)
        + "apiVersion: v1\n"
        + "kind: ConfigMap\n"
        + "metadata:\n"
        + "  name: nicguard-grafana-dashboard\n"
        + f"  namespace: {NAMESPACE}\n"
        + "  labels:\n"
        + "    app.kubernetes.io/name: nicguard\n"
        + '    grafana_dashboard: "1"\n'
        + "data:\n"
        + "  nicguard.json: |\n"
        + _indented(body, 4)
    )


def generated() -> dict[Path, str]:
    """Each generated file of the overlay and the text it must hold."""
    return {
        OVERLAY / "prometheusrule.yaml": prometheus_rule(),
        OVERLAY / "grafana-dashboard.yaml": dashboard_configmap(),
    }


def main() -> int:
    for path, text in generated().items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            sys.stdout.write(f"wrote {path.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
