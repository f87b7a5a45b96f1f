"""kubectl's reading of a file against nicguard's (docs/commands.md, ``check``; SPEC §7).

For every text of the generated YAML corpus (tests/differential/yaml_corpus.py: the snapshot
corpus's texts as files, documents around every kind of separator, JSON streams, empty,
comment-only and null documents), the Go oracle computes the JSON documents kubectl sends: the
path of cli-runtime's ``StreamVisitor`` (``k8s.io/apimachinery/pkg/util/yaml``
``NewYAMLOrJSONDecoder``, ``YAMLReader`` splitting, ``sigs.k8s.io/yaml`` YAML→JSON per document,
empty and ``null`` documents dropped, values read as its unstructured decoder reads them). The
property, for each text:

- ``iter_kube_yaml_documents`` raises (``check`` refuses the file), or
- it yields exactly kubectl's documents, values and their types alike (``1``, ``1.0``, ``true``
  and ``"true"`` differ), or
- kubectl stops on an error and nicguard yields at least the documents kubectl sent before it.

Anything else is a FAIL-OPEN, listed with the text. Pinned upstream: k8s.io/apimachinery v0.36.2,
sigs.k8s.io/yaml v1.6.0, go.yaml.in/yaml/v2 v2.4.3 (tests/oracle/go.mod, go.sum; Trainer
v2.3.0's pins, and the apimachinery of kubectl v1.36).
"""

from __future__ import annotations

from collections import Counter

import pytest

from app.kubeyaml import iter_kube_yaml_documents
from tests.differential.oracle import Oracle
from tests.differential.yaml_files import FILE_GROUPS, file_corpus
from tests.differential.yaml_reading import excerpt, judge_file, sampled


@pytest.mark.parametrize("group", FILE_GROUPS)
def test_nicguard_reads_a_file_as_kubectl_does_or_refuses_it(oracle: Oracle, group: str) -> None:
    seen: Counter[str] = Counter()
    failures: list[str] = []
    cases = sampled(file_corpus(group))
    for case in cases:
        outcome, shown = judge_file(oracle, case.text, iter_kube_yaml_documents)
        seen[outcome] += 1
        if outcome.startswith("FAIL-OPEN"):
            failures.append(f"{case.label}: {outcome}\n{shown}\n--- text:\n{excerpt(case.text)}")
    print(f"\nkubectl YAML differential ({group}, {len(cases)} texts): {dict(seen)}")  # noqa: T201
    if failures:
        shown = "\n\n".join(failures[:10])
        pytest.fail(
            f"{len(failures)} fail-opens in {dict(seen)}; the first 10:\n\n{shown}", pytrace=False
        )
    assert seen["agreed"] >= len(cases) // 5, seen
    assert seen["refused"] + seen["kubectl stops on it"] >= len(cases) // 50, seen
