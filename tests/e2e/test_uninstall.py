"""Install and uninstall as manifests/README.md says, against a real apiserver: the namespace from
its opt-in piece, the recipe as AICR writes it (or the opt-in example), the base with
``kubectl apply -k manifests/``; then ``kubectl delete -k manifests/`` removes every object of the
base and leaves the namespace and the recipe in place, untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import pytest
import yaml

from tests.harness import expect
from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.objects import as_list, load
from tests.harness.state import RECIPE, checked, install_crds
from tests.harness.webhook import rendered_manifests

pytestmark = pytest.mark.e2e

NAMESPACE: Final = "nicguard-system"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    started = ControlPlane(tmp_path_factory.mktemp("uninstall"))
    try:
        started.start()
        install_crds(started)  # `kubectl auth can-i` needs the Trainer resources served
        yield started
    finally:
        started.stop()


def recipe_as_aicr_writes_it(plane: ControlPlane) -> None:
    """examples/cluster/recipe-configmap.yaml: the RecipeResult `aicr validate` writes."""
    recipe = as_list(load("cluster/recipe-configmap.yaml"))
    checked(plane.kubectl("admin", "apply", "-f", "-", input=recipe), "writing the recipe")


def recipe_example(plane: ControlPlane) -> None:
    example = ["apply", "-k", str(ROOT / "manifests" / "recipe-example")]
    checked(plane.kubectl("admin", *example), "applying manifests/recipe-example")


def the_recipe(plane: ControlPlane) -> dict[str, Any]:
    namespace, name = RECIPE
    get = ["get", "configmap", name, "-n", namespace, "-o", "yaml"]
    found: dict[str, Any] = yaml.safe_load(checked(plane.kubectl("admin", *get), "get").stdout)
    return found


def qualified(doc: dict[str, Any]) -> list[str]:
    """``kubectl get`` arguments naming ``doc``: ``kind.group/name`` and its namespace."""
    api_version, kind = str(doc["apiVersion"]), str(doc["kind"]).lower()
    group = api_version.partition("/")[0] if "/" in api_version else ""
    name = (
        f"{kind}.{group}/{doc['metadata']['name']}"
        if group
        else f"{kind}/{doc['metadata']['name']}"
    )
    namespace = doc["metadata"].get("namespace")
    return [name, *(["-n", namespace] if namespace else [])]


@pytest.mark.parametrize(
    "write_recipe",
    [recipe_as_aicr_writes_it, recipe_example],
    ids=["recipe written by aicr", "manifests/recipe-example"],
)
def test_delete_k_manifests_leaves_the_namespace_and_the_recipe(
    plane: ControlPlane, write_recipe: Any
) -> None:
    expect.allowed(plane.kubectl("admin", "apply", "-k", str(ROOT / "manifests" / "namespace")))
    write_recipe(plane)
    before = the_recipe(plane)
    installed = plane.kubectl("admin", "apply", "-k", str(ROOT / "manifests"))
    expect.allowed(installed)  # exit 0, no warning (Pod Security "restricted" included)
    assert "configmap/" not in installed.stdout, expect.shown(installed)
    assert "namespace/" not in installed.stdout, expect.shown(installed)

    deleted = plane.kubectl("admin", "delete", "-k", str(ROOT / "manifests"))
    expect.allowed(deleted)
    assert "configmap/" not in deleted.stdout, expect.shown(deleted)
    assert "namespace/" not in deleted.stdout, expect.shown(deleted)

    # Everything the base installed is gone ...
    for doc in rendered_manifests(plane):
        gone = plane.kubectl("admin", "get", *qualified(doc))
        assert gone.returncode == 1, expect.shown(gone)
        assert "NotFound" in gone.stderr, expect.shown(gone)
    # ... the namespace and the recipe stay, the recipe exactly as it was written.
    phase = ["get", "namespace", NAMESPACE, "-o", "jsonpath={.status.phase}"]
    assert checked(plane.kubectl("admin", *phase), "namespace").stdout == "Active"
    after = the_recipe(plane)
    assert after["data"] == before["data"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "deletionTimestamp" not in after["metadata"]
    # Clean for the next variant: the recipe is the operator's to delete.
    checked(plane.kubectl("admin", "delete", "configmap", RECIPE[1], "-n", NAMESPACE), "cleanup")


def test_no_binding_of_the_base_grants_anything_to_a_group(plane: ControlPlane) -> None:
    """The break-glass editor role ships unbound: a member of nicguard:break-glass may write no
    Trainer object until manifests/break-glass/ (or a binding of your own) is applied."""
    expect.allowed(plane.kubectl("admin", "apply", "-k", str(ROOT / "manifests" / "namespace")))
    expect.allowed(plane.kubectl("admin", "apply", "-k", str(ROOT / "manifests")))
    glass = ["--as=someone", "--as-group=nicguard:break-glass"]
    can = ["auth", "can-i", "create", "clustertrainingruntimes.trainer.kubeflow.org"]
    before = plane.kubectl("admin", *glass, *can)
    assert (before.returncode, before.stdout.strip()) == (1, "no"), expect.shown(before)
    piece = str(ROOT / "manifests" / "break-glass")
    expect.allowed(plane.kubectl("admin", "apply", "-k", piece))
    after = plane.kubectl("admin", *glass, *can)
    assert (after.returncode, after.stdout.strip()) == (0, "yes"), expect.shown(after)
    expect.allowed(plane.kubectl("admin", "delete", "-k", piece))
    expect.allowed(plane.kubectl("admin", "delete", "-k", str(ROOT / "manifests")))
