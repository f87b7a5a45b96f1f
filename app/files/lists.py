"""A state file that is one JSON ``kind: List`` (what ``kubectl get -o json`` saves), item by item.

Decoding the whole document first costs ten to twenty times its size in Python objects at once
(100,000 objects: gigabytes); streamed, only one item is whole at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import ijson

_PEEK: Final = 4096


@dataclass(frozen=True, slots=True)
class JsonList:
    """A file's top-level list: its ``kind`` and ``apiVersion`` (typed lists lend both to items)."""

    kind: str
    api_version: object


def json_list(file: Path, is_list_kind: Callable[[str], bool]) -> JsonList | None:
    """The file's top-level list when it is one valid JSON document whose ``kind`` says so;
    None for anything else (YAML, several documents, a single object, invalid JSON), which the
    caller reads whole as before.

    A pass of the C tokenizer building only the top-level ``kind`` (and, for a typed list, one
    more for ``apiVersion``); it also proves the whole file is valid JSON, so streaming it later
    cannot fail halfway.
    """
    if not _starts_an_object(file):
        return None
    try:
        kinds = _top_level(file, "kind")
        if len(kinds) != 1 or not isinstance(kinds[0], str) or not is_list_kind(kinds[0]):
            return None
        # kubectl's List needs nothing more; a typed list lends its apiVersion to its items.
        versions = [] if kinds[0] == "List" else _top_level(file, "apiVersion")
    except (ijson.JSONError, ValueError, OSError):
        return None
    return JsonList(kind=kinds[0], api_version=versions[-1] if versions else None)


def json_list_items(file: Path) -> Iterator[object]:
    """The items of a file ``json_list`` accepted, one decoded value at a time."""
    with file.open("rb") as stream:
        yield from ijson.items(stream, "items.item", use_float=True)


def _top_level(file: Path, key: str) -> list[object]:
    with file.open("rb") as stream:
        return list(ijson.items(stream, key, use_float=True))


def _starts_an_object(file: Path) -> bool:
    with file.open("rb") as stream:
        head = stream.read(_PEEK).lstrip()
    return head.startswith(b"{")
