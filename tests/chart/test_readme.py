"""The chart README's values table lists every value of values.yaml with its default, no more."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tests.chart.render import CHART

ROW = re.compile(r"^\| `(?P<key>[^`]+)` \| (?P<type>[^|]+) \| `(?P<default>[^`]*)` \| ")


def leaves(values: Any, schema: dict[str, Any], path: str = "") -> dict[str, Any]:
    """Dotted path -> default; a value is a leaf where the schema stops naming properties."""
    if isinstance(values, dict) and values and "properties" in schema:
        found: dict[str, Any] = {}
        for name, child in values.items():
            found |= leaves(child, schema["properties"][name], f"{path}{name}.")
        return found
    return {path.rstrip("."): values}


def documented() -> dict[str, Any]:
    text = (CHART / "README.md").read_text()
    section = text.split("\n## Values\n", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines() if line.startswith("| `")]
    assert all(rows), [line for line in section.splitlines() if line.startswith("| `")]
    return {row["key"]: json.loads(row["default"]) for row in rows if row}


def test_every_value_is_in_the_readme_table_with_its_default_and_no_other() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert documented() == leaves(values, schema)


def test_every_value_is_typed_by_the_schema() -> None:
    """A value the schema does not describe could not be set at all (additionalProperties)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    for path in leaves(values, schema):
        node = schema
        for name in path.split("."):
            node = node["properties"][name]
        assert node.get("type") or node.get("enum") or node.get("anyOf"), path
