"""YAML read exactly as kubectl and Trainer read it (sigs.k8s.io/yaml over goyaml.v2, documents
split as k8s.io/apimachinery's YAMLReader splits them), or refused with the construct and its
position when nicguard cannot be sure of that reading; every read bounded in cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from app.kubeyaml.decode import decode_document
from app.kubeyaml.errors import KubeYamlError, TooCostlyError, UnsureReadingError
from app.kubeyaml.nodes import Limits, compose
from app.kubeyaml.streams import json_values, looks_like_json, yaml_chunks

__all__ = [
    "FILE_LIMITS",
    "SNAPSHOT_LIMITS",
    "KubeYamlError",
    "Limits",
    "TooCostlyError",
    "UnsureReadingError",
    "iter_kube_yaml_documents",
    "load_kube_yaml",
    "load_snapshot_yaml",
]

# A runtime snapshot (data.runtime, at most 256 KiB): Trainer's copies of real runtimes hold a few
# hundred nodes (370 for torch-distributed-tcpxo); these bound the worst accepted text to well
# under 50 ms of CPU (RELIABILITY.md).
SNAPSHOT_LIMITS: Final = Limits(nodes=5_000, decodes=10_000, depth=64)
# One document of a file ``nicguard check`` or file-mode ``serve`` reads: an operator's, and a
# state's ``kind: List`` may hold 100,000 objects. goyaml.v2's own aliasing bound still applies.
FILE_LIMITS: Final = Limits(nodes=100_000_000, decodes=200_000_000, depth=100)


def load_kube_yaml(text: str, limits: Limits = FILE_LIMITS) -> object:
    """One YAML text as sigs.k8s.io/yaml.YAMLToJSON reads it (goyaml.v2 reads only the first
    document: a second one is refused); raises KubeYamlError (a DocumentError)."""
    return decode_document(compose(text, limits), limits)


def load_snapshot_yaml(text: str) -> object:
    """``load_kube_yaml`` within a runtime snapshot's budget."""
    return load_kube_yaml(text, SNAPSHOT_LIMITS)


def iter_kube_yaml_documents(text: str, limits: Limits = FILE_LIMITS) -> Iterator[object]:
    """Each object of a file as kubectl reads it (apimachinery's YAMLOrJSONDecoder): a JSON stream
    when the text starts with ``{``, else YAML documents split at ``---`` lines; null documents
    are skipped. Raises KubeYamlError naming the document (numbered as yielded, from 1) at the
    first it cannot read.
    """
    number, start = 1, 0
    if looks_like_json(text):
        rest = yield from json_values(text)
        if rest is None:
            return
        yielded, start = rest
        number += yielded
    for first_line, chunk in yaml_chunks(text[start:], text.count("\n", 0, start)):
        try:
            value = decode_document(compose(chunk, limits, first_line), limits)
        except KubeYamlError as error:
            error.args = (f"document {number}: {error}",)
            raise
        if value is not None:
            number += 1
            yield value
