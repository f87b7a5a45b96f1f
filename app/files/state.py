"""Cluster state and objects from files: objects read from a file or a tree.

Multi-document files, ``kind: List`` and typed lists (``NetworkList``, as the raw API writes them)
are expanded, nested or not; every failure is one line naming the file, the document and the item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from app.documents import DocumentError, load_yaml
from app.domain.cluster import (
    PARAM_SETS_SKIPPED,
    ClusterSnapshot,
    ObjectName,
    describes_param_sets,
    snapshot_of,
)
from app.domain.fields import JsonMap, as_list, as_map
from app.files.lists import JsonList, json_list, json_list_items
from app.kubeyaml import TooCostlyError, UnsureReadingError, iter_kube_yaml_documents
from app.kubeyaml.claimants import claimant_in

SUFFIXES: Final = (".yaml", ".yml", ".json")


class StateFileError(Exception):
    """A file that cannot be used; ``str()`` is a single line naming file and document."""


@dataclass(frozen=True, slots=True)
class SourcedObject:
    """An object and where it came from: ``file``, 1-based document number, list item path."""

    obj: JsonMap
    file: Path
    document: int
    item: str = ""
    """``items[3]`` (or ``items[0].items[2]``) for an object inside a list, else empty."""

    @property
    def where(self) -> str:
        """``path: document 2`` or ``path: document 2, items[3]``."""
        return f"{self.file}: document {self.document}" + (f", {self.item}" if self.item else "")


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
        listed = json_list(file, _is_list_kind)
        if listed is not None:
            streamed = _objects_of(file, 1, _listed(listed, json_list_items(file), ""))
            first = next(streamed, None)
            if first is not None:
                yield first
                yield from streamed
                return
            # No items (none, null, or not a list): read whole, as any other file.
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise StateFileError(f"{file}: cannot read: {reason}") from None
    # YAML read as kubectl reads it (app.kubeyaml): what is judged is what the cluster would get.
    try:
        for number, document in enumerate(iter_kube_yaml_documents(text), start=1):
            yield from _objects_of(file, number, _expand(document, ""))
    except (UnsureReadingError, TooCostlyError) as error:
        raise StateFileError(f"{file}: {error}") from None
    except DocumentError as error:
        raise StateFileError(f"{file}: invalid YAML/JSON: {error}") from None


def _objects_of(
    file: Path, number: int, found: Iterator[tuple[str, object]]
) -> Iterator[SourcedObject]:
    try:
        for item, obj in found:
            mapping = as_map(obj)
            if mapping is None or not isinstance(mapping.get("kind"), str):
                where = f"document {number}" + (f", {item}" if item else "")
                raise StateFileError(f"{file}: {where} is not a Kubernetes object")
            yield SourcedObject(obj=mapping, file=file, document=number, item=item)
    except _NestingError:
        raise StateFileError(
            f"{file}: document {number}: lists nested more than {MAX_LIST_DEPTH} deep"
        ) from None


# kubectl nests a List in a List at most once; a deeper one is no state anyone saved, and
# reading it whole would take one stack frame per level.
MAX_LIST_DEPTH: Final = 32


class _NestingError(Exception):
    """A list nested in lists more than MAX_LIST_DEPTH deep."""


def _expand(document: object, item: str, depth: int = 0) -> Iterator[tuple[str, object]]:
    """Every object in a document, each with its item path; lists are read nested up to
    MAX_LIST_DEPTH deep."""
    mapping = as_map(document)
    kind = None if mapping is None else mapping.get("kind")
    if mapping is None or not isinstance(kind, str) or not _is_list(mapping, kind):
        yield item, document
        return
    items = mapping.get("items")
    entries = () if items is None else as_list(items)
    if entries is None:
        yield item, None  # reported as "not a Kubernetes object" at the list itself
        return
    yield from _listed(JsonList(kind, mapping.get("apiVersion")), entries, item, depth + 1)


def _listed(
    listed: JsonList, entries: Iterable[object], item: str, depth: int = 1
) -> Iterator[tuple[str, object]]:
    if depth > MAX_LIST_DEPTH:
        raise _NestingError
    # The raw API leaves apiVersion and kind off the items of a typed list (a ConfigMapList's
    # ConfigMaps): they are the list's, without "List".
    kind = listed.kind
    inherited = {} if kind == "List" else {"apiVersion": listed.api_version, "kind": kind[:-4]}
    for position, entry in enumerate(entries):
        path = f"{item}.items[{position}]" if item else f"items[{position}]"
        found = as_map(entry)
        if found is not None and inherited and not all(key in found for key in inherited):
            found = {**inherited, **found}
        yield from _expand(entry if found is None else found, path, depth)


def _is_list(mapping: JsonMap, kind: str) -> bool:
    return kind == "List" or (_is_list_kind(kind) and "items" in mapping)


def _is_list_kind(kind: str) -> bool:
    return kind == "List" or (kind.endswith("List") and len(kind) > 4)


def state_snapshot(
    state: Path, recipe_name: ObjectName, note: Callable[[str], None]
) -> ClusterSnapshot:
    """The cluster a file state describes (``check``, ``audit``, file-mode ``serve``); ``note``
    hears once what it leaves unchecked. Raises ``StateFileError`` on unusable files."""
    snapshot = snapshot_of(
        (o.obj for o in iter_objects([state])),
        recipe_name=recipe_name,
        load_yaml=load_yaml,
        claimant_of=claimant_in,
    )
    if not describes_param_sets(snapshot):
        note(PARAM_SETS_SKIPPED)
    return snapshot
