"""Trainer's reading of a runtime snapshot against nicguard's (docs/rules.md,
RuntimeSnapshotInvalid; SPEC §14).

For every text of the generated YAML corpus (tests/differential/yaml_corpus.py), put in a snapshot
ConfigMap's ``data.runtime``, the Go oracle decodes it as Trainer v2.3.0's ``getRuntimeSnapshot``
does (``sigs.k8s.io/yaml.Unmarshal`` into the typed runtime: goyaml.v2, YAML 1.1 scalars, merge
keys in goyaml.v2's order, struct fields matched case-insensitively with Unicode folding, the last
in sorted key order winning, numbers and booleans coerced where a string is expected). The
property, for each text:

- nicguard refuses the copy (``read_snapshot`` sets a problem: ``RuntimeSnapshotInvalid``), or
- Trainer cannot decode it (its reconcile fails: nothing runs), or
- nicguard reads what Trainer reads — apiVersion, kind, name, namespace, labels,
  ``runLauncherAsNode``, the wired jobs and their pod annotations, every replicatedJob's name,
  labels, annotations and DRA claims (the pod's ``resourceClaims``, each container's and init
  container's ``resources.claims``), types included (``y`` is not ``"y"``, ``true`` not
  ``"true"``) — and its verdict on the copy is its verdict on a copy holding Trainer's decoded
  runtime (the same door, the pods in the same namespace, with its ResourceClaimTemplates).

Anything else is a FAIL-OPEN, listed with the text. Pinned upstream (tests/oracle/go.mod, go.sum):
github.com/kubeflow/trainer/v2 v2.3.0, sigs.k8s.io/yaml v1.6.0 and go.yaml.in/yaml/v2 v2.4.3 (the
versions Trainer v2.3.0's go.mod pins). To move a pin: as tests/differential/
test_effective_differential.py says, and re-read ``getRuntimeSnapshot`` in the new tag's
pkg/runtime/core/snapshot.go against ``snapshot`` in tests/oracle/yaml.go.
"""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from app.kubeyaml import load_snapshot_yaml
from tests.differential.oracle import Oracle
from tests.differential.yaml_corpus import BASES, snapshot_corpus, snapshot_fixture_text
from tests.differential.yaml_reading import excerpt, judge_snapshot, sampled


@pytest.mark.parametrize("base", BASES)
def test_nicguard_reads_a_snapshot_as_trainer_does_or_refuses_it(oracle: Oracle, base: str) -> None:
    seen: Counter[str] = Counter()
    failures: list[str] = []
    cases = sampled(snapshot_corpus(base))
    for case in cases:
        outcome, shown = judge_snapshot(oracle, case.text, load_snapshot_yaml)
        seen[outcome] += 1
        if outcome.startswith("FAIL-OPEN"):
            failures.append(f"{case.label}: {outcome}\n{shown}\n--- text:\n{excerpt(case.text)}")
    print(f"\nsnapshot YAML differential ({base}, {len(cases)} texts): {dict(seen)}")  # noqa: T201
    if failures:
        shown = "\n\n".join(failures[:10])
        pytest.fail(
            f"{len(failures)} fail-opens in {dict(seen)}; the first 10:\n\n{shown}", pytrace=False
        )
    # Both sides of the property are exercised: copies read alike, allowed and denied, and
    # constructs refused.
    assert seen["agreed, allowed"] >= len(cases) // 20, seen
    assert seen["agreed, denied"] >= len(cases) // 50, seen
    assert seen["refused"] >= len(cases) // 20, seen


def test_the_snapshot_base_is_the_text_trainer_writes(oracle: Oracle) -> None:
    """The corpus's ``trainer-snapshot`` base is byte for byte what Trainer's
    ``createRuntimeSnapshot`` (``sigs.k8s.io/yaml.Marshal``) writes for the runtime it holds."""
    text = snapshot_fixture_text()
    assert oracle.marshal(yaml.safe_load(text)) == text
