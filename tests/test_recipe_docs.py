"""docs/recipe.md: every worked example is a ConfigMap that delivers the mapping it says, one per
accepted key, read by the same code nicguard runs."""

from __future__ import annotations

import re
from typing import Any, Final

import pytest
import yaml

from app.domain.annotation import InterfaceRef
from app.domain.recipe import RECIPE_KEYS, recipe_from_configmap
from tests.support.paths import ROOT

PAGE: Final = ROOT / "docs" / "recipe.md"
BLOCK: Final = re.compile(r"^```yaml\n(.*?)^```$", re.MULTILINE | re.DOTALL)
MAPPING: Final = tuple(InterfaceRef(f"eth{i}", f"gpu-nic-{i - 1}") for i in range(1, 9))
# Under ``interfaces``, the Network names of Google's own GKE documentation.
VPC_MAPPING: Final = tuple(InterfaceRef(f"eth{i}", f"vpc{i}") for i in range(1, 9))


def examples() -> list[dict[str, Any]]:
    documents = [yaml.safe_load(block) for block in BLOCK.findall(PAGE.read_text("utf-8"))]
    return [doc for doc in documents if isinstance(doc, dict) and doc.get("kind") == "ConfigMap"]


def test_one_example_per_accepted_key() -> None:
    keys = [key for doc in examples() for key in doc["data"]]
    assert sorted(keys) == sorted(RECIPE_KEYS)


@pytest.mark.parametrize("example", examples(), ids=lambda doc: next(iter(doc["data"])))
def test_the_example_delivers_the_mapping(example: dict[str, Any]) -> None:
    recipe = recipe_from_configmap(example["data"], ref="doc", load_yaml=yaml.safe_load)
    assert recipe.problem is None
    assert recipe.mapping == (VPC_MAPPING if "interfaces" in example["data"] else MAPPING)
