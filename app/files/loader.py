"""Reading Kubernetes objects from a file or a directory tree of YAML/JSON files.

Multi-document files and ``kind: List`` items are expanded; errors name the file and document.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from app.documents import DocumentError, load_all_yaml
from app.domain.fields import JsonMap, as_list, as_map

SUFFIXES: Final = (".yaml", ".yml", ".json")


class StateFileError(Exception):
    """A file that cannot be used; ``str()`` is a single line naming file and document."""


@dataclass(frozen=True, slots=True)
class SourcedObject:
    """An object and where it came from (``file`` and 1-based document number)."""

    obj: JsonMap
    file: Path
    document: int


def load_objects(paths: list[Path]) -> list[SourcedObject]:
    """All objects under the given files/directories, in a stable order; raises StateFileError."""
    return list(iter_objects(paths))


def iter_objects(paths: list[Path]) -> Iterator[SourcedObject]:
    """``load_objects`` one file at a time: a consumer that keeps little holds one file's worth."""
    for path in paths:
        for file in _files(path):
            yield from _objects_in(file)


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    elif path.is_file():
        yield path
    else:
        raise StateFileError(f"{path}: no such file or directory")


def _objects_in(file: Path) -> Iterator[SourcedObject]:
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise StateFileError(f"{file}: cannot read: {reason}") from None
    try:
        documents = load_all_yaml(text)
    except DocumentError as error:
        raise StateFileError(f"{file}: invalid YAML/JSON: {error}") from None
    for number, document in enumerate(documents, start=1):
        for obj in _expand(document):
            mapping = as_map(obj)
            if mapping is None or "kind" not in mapping:
                raise StateFileError(f"{file}: document {number} is not a Kubernetes object")
            yield SourcedObject(obj=mapping, file=file, document=number)


def _expand(document: object) -> list[object]:
    mapping = as_map(document)
    if mapping is not None and mapping.get("kind") == "List":
        return list(as_list(mapping.get("items")) or ())
    return [document]
