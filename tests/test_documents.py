"""YAML and JSON documents (app.documents): decoded safely, every failure one line with its
position, empty documents of a stream dropped."""

from __future__ import annotations

import pytest

from app.documents import DocumentError, iter_yaml_documents, load_all_yaml, load_yaml


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param('{"a": [1, 2]}', {"a": [1, 2]}, id="json"),
        pytest.param("a:\n  - 1\n  - b\n", {"a": [1, "b"]}, id="yaml"),
        pytest.param("", None, id="empty"),
    ],
)
def test_one_document_is_decoded(text: str, value: object) -> None:
    assert load_yaml(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param("a: [1, 2", "did not find expected ',' or ']' at line 2, column 1", id="eof"),
        pytest.param("!!python/object:os.system {}", "could not determine a constructor", id="tag"),
        pytest.param("!!int x", "invalid literal for int", id="bad-int"),
    ],
)
def test_a_bad_document_is_one_line_naming_why(text: str, reason: str) -> None:
    with pytest.raises(DocumentError) as raised:
        load_yaml(text)
    assert reason in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_stream_drops_empty_documents_and_reads_one_at_a_time() -> None:
    text = "a: 1\n---\n---\nb: 2\n---\n: [\n"
    documents = iter_yaml_documents(text)
    assert next(documents) == {"a": 1}
    assert next(documents) == {"b": 2}
    with pytest.raises(DocumentError):
        next(documents)
    assert load_all_yaml("a: 1\n---\n") == [{"a": 1}]
