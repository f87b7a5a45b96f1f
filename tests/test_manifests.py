"""The kustomize packages build with kubectl alone, and the overlays the docs show do what they
say: the recipe where AICR writes it (manifests/overlays/aicr-recipe), the image of your registry
(an `images:` overlay, manifests/README.md), the opt-in pieces beside the base."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

import pytest

from app.commands.doctor import shipped_entries
from tests.chart.render import kustomize
from tests.support.paths import ROOT

MANIFESTS: Final = ROOT / "manifests"


built: Final = kustomize


def keyed(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")): d for d in docs}


def env(docs: list[dict[str, Any]]) -> dict[str, str]:
    (deployment,) = (d for d in docs if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.mark.parametrize(
    ("piece", "kinds"),
    [
        ("namespace", {("Namespace", "nicguard-system")}),
        ("recipe-example", {("ConfigMap", "nicguard-recipe")}),
        ("break-glass", {("ClusterRoleBinding", "nicguard-break-glass-editor")}),
        (
            "doctor",
            {
                ("ClusterRole", "nicguard-doctor"),
                ("Role", "nicguard-doctor-namespace"),
                ("ClusterRole", "nicguard-doctor-dry-run"),
            },
        ),
    ],
)
def test_each_opt_in_piece_holds_its_one_object(piece: str, kinds: set[tuple[str, str]]) -> None:
    assert {(d["kind"], d["metadata"]["name"]) for d in built(MANIFESTS / piece)} == kinds


def test_the_aicr_recipe_overlay_moves_the_recipe_in_all_four_places_and_nothing_else() -> None:
    base, overlay = keyed(built(MANIFESTS)), keyed(built(MANIFESTS / "overlays" / "aicr-recipe"))
    moved = {("Role", "nicguard"), ("RoleBinding", "nicguard")}
    assert {k[:2] for k in base} == {k[:2] for k in overlay}
    assert {k for k in overlay if k[:2] in moved} == {(*k, "aicr") for k in moved}
    role = overlay[("Role", "nicguard", "aicr")]
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["training-recipe"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = overlay[("RoleBinding", "nicguard", "aicr")]
    assert binding["subjects"] == base[("RoleBinding", "nicguard", "nicguard-system")]["subjects"]
    assert env(list(overlay.values()))["NICGUARD_RECIPE_CONFIGMAP"] == "aicr/training-recipe"
    hooks = overlay[("ValidatingWebhookConfiguration", "nicguard", None)]["webhooks"]
    (recipe_hook,) = (h for h in hooks if h["name"] == "recipe.nicguard.dev")
    assert recipe_hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["aicr"]
    assert recipe_hook["matchConditions"][0] == {
        "name": "the-recipe",
        "expression": "(object != null ? object : oldObject).metadata.name == 'training-recipe'",
    }
    # Everything else is the base's.
    for key, doc in base.items():
        if key[:2] not in moved | {
            ("Deployment", "nicguard"),
            ("ValidatingWebhookConfiguration", "nicguard"),
        }:
            assert overlay[key] == doc, key
    base_hooks = base[("ValidatingWebhookConfiguration", "nicguard", None)]["webhooks"]
    assert [h for h in hooks if h is not recipe_hook] == [
        h for h in base_hooks if h["name"] != "recipe.nicguard.dev"
    ]


def test_the_docs_show_the_shipped_aicr_recipe_overlay() -> None:
    shipped = (MANIFESTS / "overlays" / "aicr-recipe" / "kustomization.yaml").read_text()
    body = shipped[shipped.index("apiVersion:") :]
    assert body in (ROOT / "docs" / "recipe.md").read_text(encoding="utf-8")


# The overlay manifests/README.md shows for setting the image with kubectl alone.
IMAGE_OVERLAY: Final = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../nicguard/manifests          # or ../nicguard/manifests/overlays/cert-manager
images:
- name: nicguard
  newName: registry.example.com/platform/nicguard
  newTag: 0.1.0
"""


def test_the_image_overlay_of_the_readme_sets_the_image(tmp_path: Path) -> None:
    assert IMAGE_OVERLAY in (MANIFESTS / "README.md").read_text(encoding="utf-8")
    overlay = tmp_path / "my-nicguard"
    overlay.mkdir()
    relative = os.path.relpath(MANIFESTS, overlay)
    text = IMAGE_OVERLAY.replace("../nicguard/manifests ", f"{relative} ")
    (overlay / "kustomization.yaml").write_text(text)
    (deployment,) = (d for d in built(overlay) if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/platform/nicguard:0.1.0"


def test_the_doctor_compares_with_the_entries_the_base_ships() -> None:
    """``nicguard doctor`` holds the shipped entries as package data (the image carries no
    manifests/): exactly what the base renders, field for field (the chart renders the same,
    tests/chart/test_equivalence.py)."""
    (configuration,) = (
        d for d in built(MANIFESTS) if d["kind"] == "ValidatingWebhookConfiguration"
    )
    fields = ("name", "failurePolicy", "rules", "matchConditions")
    shipped = [{k: entry[k] for k in fields if k in entry} for entry in configuration["webhooks"]]
    assert shipped_entries() == shipped, (
        "regenerate app/commands/shipped_webhooks.json from manifests/base/webhook.yaml:\n"
        + json.dumps(shipped, indent=1)
    )
