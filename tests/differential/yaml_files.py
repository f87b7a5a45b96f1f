"""The file texts of the kubectl YAML differential: the snapshot corpus's texts as files, and
documents around every kind of separator, JSON streams, empty, comment-only and null documents."""

from __future__ import annotations

import json
from functools import cache
from typing import Final

from tests.differential.yaml_corpus import BASES, Case, bases, snapshot_corpus
from tests.differential.yaml_text import text_of

_SMALL: Final = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: team}\ndata: {a: b}\n"
)
SEPARATORS: Final = (
    *("---\n", "--- # next\n", "---   \n", "---\t# t\n", "\n---\n", "...\n---\n", "--- x\n"),
    *("----\n", "  ---\n", "--- |\n", "---\r\n", "--- >\n", "--- {}\n", "---#\n", "--- null\n"),
)
"""Between two documents: separators kubectl takes, and lines it refuses or reads as content."""
_INT64_EDGES: Final = (
    *("9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809"),
    *("18446744073709551615", "18446744073709551616", "100000000000000000000000", "1e400"),
)
"""Integers around int64 and uint64 (goyaml.v2 reads them as int64, uint64 or float64; kubectl's
unstructured decoder keeps int64 and reads any other number as float64)."""
STREAMS: Final = (
    "",
    "\n",
    "---\n",
    "---\n---\n",
    "# only a comment\n",
    "~\n",
    "null\n",
    "5\n",
    "- a\n- b\n",
    "'text'\n",
    f"{_SMALL}...\n",
    "{}\n",
    "[]\n",
    '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}',
    '  \n\t{"kind":"ConfigMap","data":{"a":1.0,"b":1e3,"c":12345678901234567890}}',
    '{"kind":"A"}\n{"kind":"B"}\n',
    '{"kind":"A"}\n{"kind":"B"}\n{"kind":"C"}\n',
    '{"kind":"A"}\n---\nkind: B\n',
    '{"kind":"A"} trailing\n',
    '{"kind":"A","kind":"B"}',
    '{"kind":"A","Kind":"B"}',
    "kind: A\nkind: B\n",
    "{kind: A}\n",
    "[{kind: A}]\n",
    *(f"a: {n}\n" for n in _INT64_EDGES),
    *(f'{{"a": {n}}}' for n in _INT64_EDGES),
)
"""Whole files: empty and comment-only documents, JSON streams, scalars and lists."""


FILE_GROUPS: Final = (*(base for base in BASES if base != "dra-ctr"), "documents")
"""The snapshot bases but the DRA one: kubectl's reading knows no field names, and that base's
constructs are the others' under other keys (it is the snapshot differential's)."""


@cache
def file_corpus(group: str) -> tuple[Case, ...]:
    """Every file text kubectl's reading is compared on: a base's snapshot corpus as files, or
    (``documents``) pairs of documents around each separator and the ``STREAMS``."""
    if group != "documents":
        return tuple(Case(f"file {case.label}", case.text) for case in snapshot_corpus(group))
    found = []
    runtime = text_of(bases()["mpi-ctr"])
    for separator in SEPARATORS:
        shown = json.dumps(separator)
        found.append(Case(f"file: small {shown} runtime", _SMALL + separator + runtime))
        found.append(Case(f"file: runtime {shown} small", runtime + separator + _SMALL))
        found.append(Case(f"file: {shown} small", separator + _SMALL))
    for stream in STREAMS:
        found.append(Case(f"file: stream {json.dumps(stream)}", stream))
        found.append(
            Case(f"file: small then stream {json.dumps(stream)}", f"{_SMALL}---\n{stream}")
        )
    return tuple(found)
