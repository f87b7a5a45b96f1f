"""Field paths and the narrowing of decoded JSON values (app.domain.fields)."""

from __future__ import annotations

import pytest

from app.domain.fields import FieldPath, as_list, as_map, map_at, str_at, value_at


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(FieldPath(), "", id="empty"),
        pytest.param(FieldPath().child("spec"), "spec", id="first-child-has-no-dot"),
        pytest.param(FieldPath("spec").child("runtimeRef"), "spec.runtimeRef", id="child"),
        pytest.param(FieldPath("jobs").index(3), "jobs[3]", id="index"),
        pytest.param(
            FieldPath("metadata.annotations").key("networking.gke.io/interfaces"),
            "metadata.annotations[networking.gke.io/interfaces]",
            id="dotted-key-in-brackets",
        ),
        pytest.param(
            FieldPath("a").key("k").index(1).child("network"), "a[k][1].network", id="chained"
        ),
    ],
)
def test_field_paths_render_as_kubernetes_json_paths(path: FieldPath, expected: str) -> None:
    assert str(path) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"a": 1}, {"a": 1}, id="string-keyed-map"),
        pytest.param({}, {}, id="empty-map"),
        pytest.param({1: "a"}, None, id="non-string-key"),
        pytest.param(["a"], None, id="list"),
        pytest.param("a", None, id="string"),
        pytest.param(None, None, id="none"),
    ],
)
def test_as_map_accepts_only_string_keyed_mappings(value: object, expected: object) -> None:
    assert as_map(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param([1, 2], [1, 2], id="list"),
        pytest.param((1,), (1,), id="tuple"),
        pytest.param("ab", None, id="string-is-not-a-list"),
        pytest.param({"a": 1}, None, id="map"),
        pytest.param(None, None, id="none"),
    ],
)
def test_as_list_accepts_lists_and_tuples_but_not_strings(value: object, expected: object) -> None:
    assert as_list(value) == expected


@pytest.mark.parametrize(
    ("obj", "names", "expected"),
    [
        pytest.param({"a": {"b": "c"}}, ("a", "b"), "c", id="nested"),
        pytest.param({"a": {"b": "c"}}, (), {"a": {"b": "c"}}, id="no-names-is-the-object"),
        pytest.param({"a": {}}, ("a", "b"), None, id="missing-key"),
        pytest.param({"a": "x"}, ("a", "b"), None, id="step-through-a-string"),
        pytest.param(None, ("a",), None, id="none-object"),
        pytest.param({"a": {1: "x", "b": "c"}}, ("a", "b"), "c", id="a-step-looks-a-string-up"),
    ],
)
def test_value_at_walks_mappings_and_stops_at_anything_else(
    obj: object, names: tuple[str, ...], expected: object
) -> None:
    assert value_at(obj, *names) == expected


def test_map_at_and_str_at_narrow_the_value_found() -> None:
    obj = {"a": {"m": {"k": "v"}, "s": "text", "n": 1}}
    assert map_at(obj, "a", "m") == {"k": "v"}
    assert map_at(obj, "a", "s") is None
    assert str_at(obj, "a", "s") == "text"
    assert str_at(obj, "a", "n") is None
