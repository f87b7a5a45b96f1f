"""Run helm (``$NICGUARD_HELM``, from ``make helm``) and kubectl kustomize; parse what they print.

Objects are keyed by apiVersion, kind, namespace and name; the labels Helm adds are dropped.
The repository's chart and kustomizations are rendered once per session (they do not change).
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests.harness.procs import tool
from tests.support.paths import ROOT

CHART: Final = ROOT / "charts" / "nicguard"
NAMESPACE: Final = "nicguard-system"
# Set by Helm (or by the chart from Helm's data), never by manifests/: not part of the comparison.
HELM_LABELS: Final = frozenset(
    {
        "helm.sh/chart",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
    }
)

Key = tuple[str, str, str | None, str]
# libyaml's safe loader when PyYAML has it (its wheels do): the same objects, ten times faster.
SAFE_LOADER: Final[type[yaml.SafeLoader] | type[yaml.CSafeLoader]] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)


@functools.cache
def helm_path() -> str:
    """``$NICGUARD_HELM``, else the helm ``make helm`` built; a failure (never a skip) naming
    ``make helm`` when there is none."""
    path = os.environ.get("NICGUARD_HELM", "")
    if not path:
        found = subprocess.run(
            [str(ROOT / "scripts" / "helm-bin.sh")],
            capture_output=True,
            text=True,
            env={**os.environ, "NICGUARD_NO_BUILD": "1"},
            check=False,
        )
        path = found.stdout.strip()
    if not path or not os.access(path, os.X_OK):
        pytest.fail(
            f"no executable helm (NICGUARD_HELM={path!r}): `make helm` builds it into "
            "~/.cache/nicguard (the Makefile passes it as NICGUARD_HELM)"
        )
    return path


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm args...`` (never raises on a non-zero exit status)."""
    return subprocess.run(
        [helm_path(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def template_run(
    *args: str, chart: Path = CHART, namespace: str = NAMESPACE
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of ``chart``; the repository's chart is rendered once per argument list
    (a test's copy, which it may change between renderings, every time)."""
    if chart == CHART:
        return _template_of_the_chart(args, namespace)
    return helm("template", "nicguard", str(chart), "--namespace", namespace, *args)


@functools.cache
def _template_of_the_chart(
    args: tuple[str, ...], namespace: str
) -> subprocess.CompletedProcess[str]:
    return helm("template", "nicguard", str(CHART), "--namespace", namespace, *args)


def template(*args: str, chart: Path = CHART, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The objects ``helm template`` renders with ``args`` (``--set``, ``-f``...)."""
    run = template_run(*args, chart=chart, namespace=namespace)
    assert run.returncode == 0, run.stderr
    return documents(run.stdout)


def kustomize(path: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize path``: a kustomization of the repository is built once per session."""
    run = _kustomize_of_the_repository(path) if path.is_relative_to(ROOT) else _kustomize(path)
    assert run.returncode == 0, run.stderr
    return documents(run.stdout)


def _kustomize(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tool("kubectl")), "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


_kustomize_of_the_repository = functools.cache(_kustomize)


def documents(text: str) -> list[dict[str, Any]]:
    """The objects of a YAML stream, each parsed anew (callers may change them)."""
    return [doc for doc in yaml.load_all(text, Loader=SAFE_LOADER) if isinstance(doc, dict)]


def key(doc: dict[str, Any]) -> Key:
    meta = doc["metadata"]
    return (str(doc["apiVersion"]), str(doc["kind"]), meta.get("namespace"), str(meta["name"]))


def comparable(docs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Each object by its key, without the labels Helm adds (everything else kept)."""
    keyed: dict[Key, dict[str, Any]] = {}
    for doc in docs:
        meta = doc["metadata"]
        labels = {k: v for k, v in meta.get("labels", {}).items() if k not in HELM_LABELS}
        shown = {**doc, "metadata": {**meta, "labels": labels}}
        if not labels:
            del shown["metadata"]["labels"]
        assert key(doc) not in keyed, f"rendered twice: {key(doc)}"
        keyed[key(doc)] = shown
    return keyed


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The only object of ``kind`` (named ``name`` if given)."""
    (found,) = (
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    )
    return found


def env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The nicguard container's environment: name -> value (or valueFrom)."""
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
