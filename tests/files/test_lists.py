"""A state file that is one JSON ``kind: List`` (app.files.lists): recognised in either key
order, its kind and apiVersion read, its items streamed; anything else left to the YAML reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.files.lists import JsonList, json_list, json_list_items

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
NET = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}}


def _is_list(kind: str) -> bool:
    return kind.endswith("List")


@pytest.mark.parametrize(
    ("document", "listed", "items"),
    [
        pytest.param(
            {"apiVersion": "v1", "items": [CM, NET], "kind": "List"},
            JsonList("List", None),
            [CM, NET],
            id="kubectl-list-items-first",
        ),
        pytest.param(
            {"kind": "NetworkList", "apiVersion": "networking.gke.io/v1", "items": [NET]},
            JsonList("NetworkList", "networking.gke.io/v1"),
            [NET],
            id="typed-list",
        ),
        pytest.param({"kind": "List", "items": []}, JsonList("List", None), [], id="empty"),
    ],
)
def test_a_json_list_is_recognised_and_streamed(
    tmp_path: Path, document: object, listed: JsonList, items: list[object]
) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(document))
    assert json_list(path, _is_list) == listed
    assert list(json_list_items(path)) == items


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(json.dumps(CM), id="one-object"),
        pytest.param(f"{json.dumps(CM)}\n---\n{json.dumps(NET)}", id="two-documents"),
        pytest.param('{"kind": "List", "items": [', id="invalid-json"),
        pytest.param("kind: List\nitems: []\n", id="yaml"),
        pytest.param('{"kind": "List", "kind": "List", "items": []}', id="kind-twice"),
    ],
)
def test_anything_else_is_left_to_the_yaml_reader(tmp_path: Path, text: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text)
    assert json_list(path, _is_list) is None
