"""Reading objects from files: documents, ``kind: List`` and typed lists however nested."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.domain.claims import ClaimRequest, ClaimTemplate
from app.domain.cluster import ClaimTemplates
from app.domain.fields import str_at
from app.files.lists import json_list
from app.files.state import MAX_LIST_DEPTH, StateFileError, load_objects, state_snapshot
from tests.builders import RECIPE_NAME, claim_template

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
NET = {"apiVersion": "networking.gke.io/v1", "kind": "Network", "metadata": {"name": "n"}}


def _found(tmp_path: Path, *documents: object) -> list[tuple[str, str, str, str]]:
    found = _read(tmp_path / "state.yaml", "\n---\n".join(json.dumps(d) for d in documents))
    if len(documents) == 1:
        # One JSON document (a list: read item by item) must read exactly as the same in YAML.
        as_json = _read(tmp_path / "state.json", json.dumps(documents[0], indent=1))
        assert [(a, k, n, w.replace("state.json", "state.yaml")) for a, k, n, w in as_json] == found
    return found


def _read(path: Path, text: str) -> list[tuple[str, str, str, str]]:
    path.write_text(text)
    return [
        (
            str_at(o.obj, "apiVersion") or "",
            str_at(o.obj, "kind") or "",
            str_at(o.obj, "metadata", "name") or "",
            o.where,
        )
        for o in load_objects([path])
    ]


@pytest.mark.parametrize(
    ("documents", "expected"),
    [
        pytest.param(
            [CM, NET],
            [
                ("v1", "ConfigMap", "a", "document 1"),
                ("networking.gke.io/v1", "Network", "n", "document 2"),
            ],
            id="documents",
        ),
        pytest.param(
            [{"apiVersion": "v1", "kind": "List", "items": [CM, NET]}],
            [
                ("v1", "ConfigMap", "a", "document 1, items[0]"),
                ("networking.gke.io/v1", "Network", "n", "document 1, items[1]"),
            ],
            id="kubectl-get-list",
        ),
        pytest.param(
            # The raw API's typed list: items carry no apiVersion or kind.
            [
                {
                    "apiVersion": "networking.gke.io/v1",
                    "kind": "NetworkList",
                    "metadata": {"resourceVersion": "7"},
                    "items": [{"metadata": {"name": "x"}}, {"metadata": {"name": "y"}}],
                }
            ],
            [
                ("networking.gke.io/v1", "Network", "x", "document 1, items[0]"),
                ("networking.gke.io/v1", "Network", "y", "document 1, items[1]"),
            ],
            id="raw-typed-list",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": [
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMapList",
                            "items": [{"metadata": {"name": "c"}}],
                        },
                        NET,
                    ],
                }
            ],
            [
                ("v1", "ConfigMap", "c", "document 1, items[0].items[0]"),
                ("networking.gke.io/v1", "Network", "n", "document 1, items[1]"),
            ],
            id="nested",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMapList",
                    "items": [{"kind": "Other", "metadata": {"name": "o"}}],
                }
            ],
            [("v1", "Other", "o", "document 1, items[0]")],
            id="an-item-keeps-its-own-kind",
        ),
        pytest.param(
            [{"apiVersion": "v1", "kind": "ConfigMapList", "items": None}, CM],
            [("v1", "ConfigMap", "a", "document 2")],
            id="empty-typed-list",
        ),
        pytest.param(
            [{"apiVersion": "x/v1", "kind": "BucketList", "metadata": {"name": "b"}}],
            [("x/v1", "BucketList", "b", "document 1")],
            id="a-kind-ending-in-list-without-items-is-an-object",
        ),
    ],
)
def test_lists_are_read_as_the_api_and_kubectl_write_them(
    tmp_path: Path, documents: list[object], expected: list[tuple[str, str, str, str]]
) -> None:
    assert [
        (a, k, n, w.split(": ", 1)[1]) for a, k, n, w in _found(tmp_path, *documents)
    ] == expected


@pytest.mark.parametrize(
    ("document", "where"),
    [
        pytest.param(
            {"kind": "List", "items": [CM, "text"]}, "document 1, items[1]", id="scalar-item"
        ),
        pytest.param(
            {"kind": "List", "items": [{"metadata": {}}]}, "document 1, items[0]", id="no-kind"
        ),
        pytest.param({"kind": "List", "items": {"a": CM}}, "document 1", id="items-not-a-list"),
        pytest.param(
            {"kind": "List", "items": [{"kind": "List", "items": [7]}]},
            "document 1, items[0].items[0]",
            id="nested-scalar",
        ),
    ],
)
def test_an_item_that_is_not_an_object_is_an_error_naming_it(
    tmp_path: Path, document: object, where: str
) -> None:
    for name in ("state.yaml", "state.json"):
        with pytest.raises(StateFileError) as raised:
            _read(tmp_path / name, json.dumps(document))
        assert str(raised.value).endswith(f"{name}: {where} is not a Kubernetes object")


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            # kubectl get -o json: keys sorted, so the items come before the kind.
            json.dumps({"apiVersion": "v1", "items": [CM, NET], "kind": "List"}),
            id="kubectl-key-order",
        ),
        pytest.param(
            json.dumps(
                {"kind": "NetworkList", "apiVersion": "networking.gke.io/v1", "items": [NET]}
            ).replace('"kind": "Network", ', ""),
            id="raw-api-key-order",
        ),
    ],
)
def test_a_json_list_is_read_item_by_item(tmp_path: Path, text: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text)
    listed = json_list(path, lambda kind: kind.endswith("List"))
    assert listed is not None
    assert [str_at(o.obj, "kind") for o in load_objects([path])][-1] == "Network"
    assert [o.where.split(": ", 1)[1] for o in load_objects([path])][-1].endswith("]")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        pytest.param(json.dumps(CM), ["a"], id="one-object"),
        pytest.param(f"{json.dumps(CM)}\n---\n{json.dumps(NET)}", ["a", "n"], id="two-documents"),
        pytest.param(
            '{"kind": "List", "items": [{kind: ConfigMap, metadata: {name: a}},]}',
            ["a"],
            id="yaml-flow-style",
        ),
        pytest.param(f"# saved\n{json.dumps(CM)}", ["a"], id="yaml-comment-first"),
    ],
)
def test_a_json_file_that_is_not_one_json_list_is_read_as_yaml(
    tmp_path: Path, text: str, names: list[str]
) -> None:
    path = tmp_path / "state.json"
    path.write_text(text)
    assert json_list(path, lambda kind: kind.endswith("List")) is None
    assert [str_at(o.obj, "metadata", "name") for o in load_objects([path])] == names


def _nested_lists(depth: int, typed: bool = False) -> str:
    """A ConfigMap inside ``depth`` lists, as JSON text (written out: too deep to dump)."""
    kind = '"kind":"ConfigMapList","apiVersion":"v1"' if typed else '"kind":"List"'
    return f'{{{kind},"items":[' * depth + json.dumps(CM) + "]}" * depth


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("name", ["state.json", "state.yaml"])
def test_lists_nested_up_to_the_limit_are_read(tmp_path: Path, name: str, typed: bool) -> None:
    path = tmp_path / name
    path.write_text(_nested_lists(MAX_LIST_DEPTH, typed))
    (found,) = load_objects([path])
    assert found.where.endswith(".items[0]" * (MAX_LIST_DEPTH - 1))


def _nested_flow_lists(depth: int) -> str:
    """The same in YAML flow style, which only the YAML parser reads."""
    return "{kind: List, items: [" * depth + "{kind: ConfigMap, metadata: {name: a}}" + "]}" * depth


@pytest.mark.parametrize("depth", [MAX_LIST_DEPTH + 1, 3000])
@pytest.mark.parametrize("name", ["state.json", "state.yaml"])
def test_lists_nested_deeper_are_one_error_line(tmp_path: Path, name: str, depth: int) -> None:
    path = tmp_path / name
    path.write_text(_nested_lists(depth))
    with pytest.raises(StateFileError) as raised:
        load_objects([path])
    assert str(raised.value) == f"{path}: document 1: lists nested more than {MAX_LIST_DEPTH} deep"


@pytest.mark.parametrize(
    ("depth", "reason"),
    [
        pytest.param(MAX_LIST_DEPTH, None, id="at-the-limit"),
        pytest.param(
            MAX_LIST_DEPTH + 1,
            f"document 1: lists nested more than {MAX_LIST_DEPTH} deep",
            id="over",
        ),
        # Deeper than the YAML reader's own bound (app.kubeyaml), it is refused before.
        pytest.param(3000, "document 1: nesting deeper than 100", id="reader-limit"),
    ],
)
def test_yaml_lists_nested_deeper_are_one_error_line(
    tmp_path: Path, depth: int, reason: str | None
) -> None:
    path = tmp_path / "state.yaml"
    path.write_text(_nested_flow_lists(depth))
    if reason is None:
        assert len(load_objects([path])) == 1
        return
    with pytest.raises(StateFileError) as raised:
        load_objects([path])
    assert str(raised.value).startswith(f"{path}: {reason}")
    assert "\n" not in str(raised.value)


def test_resource_claim_templates_are_read_from_typed_lists_as_the_api_stores_them(
    tmp_path: Path,
) -> None:
    # The raw API's typed list: items without apiVersion and kind, the first without a
    # namespace, allocationMode or count (the defaults the apiserver would have stored).
    items = [
        {
            "metadata": {"name": "a"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "r", "exactly": {"deviceClassName": "mrdma.google.com"}}
                        ]
                    }
                }
            },
        },
        claim_template("b", namespace="team"),
    ]
    listed = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplateList",
        "items": items,
    }
    (tmp_path / "templates.json").write_text(json.dumps(listed))
    view = state_snapshot(tmp_path, RECIPE_NAME, lambda _: None)
    templates = view.claim_templates()
    assert isinstance(templates, ClaimTemplates)
    assert templates.served
    assert templates.get("default", "a") == ClaimTemplate(
        "default", "a", (ClaimRequest("r", "mrdma.google.com"),)
    )
    assert templates.get("team", "b") == ClaimTemplate(
        "team", "b", (ClaimRequest("rdma", "mrdma.google.com", allocation_mode="All"),)
    )
    assert templates.get("team", "a") is None
