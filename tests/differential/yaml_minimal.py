"""The smallest runtime holding each construct the YAML readers read differently: the corpus's
"minimal" group, and the reproductions the findings of the YAML differential list."""

from __future__ import annotations

from typing import Final

from tests.support.claimed_snapshots import TAMPERED

_NODE: Final = """\
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          spec:
            template:
"""
_MINIMAL: Final = f"""\
kind: ClusterTrainingRuntime
metadata: {{name: rt}}
{_NODE}\
              metadata:
                annotations:
                  networking.gke.io/interfaces: good
"""
_ANNOTATION: Final = "                  networking.gke.io/interfaces: good\n"
_MERGE_BAD: Final = "                  <<: {networking.gke.io/interfaces: bad}\n"
_LAUNCHER: Final = "spec:\n  mlPolicy: {mpi: {runLauncherAsNode: FLAG}}\n"


_CLAIMED: Final = f"""\
metadata: {{name: rt, labels: {{nicguard.dev/profile: a4-dranet}}}}
{_NODE}\
              spec:
                resourceClaims:
                - name: rdma
                  resourceClaimTemplateName: default-rdma
                containers:
                - name: node
                  resources:
                    claims:
                    - name: rdma
"""
_TEMPLATE: Final = "                  resourceClaimTemplateName: default-rdma\n"


def _claimed(*edits: tuple[str, str]) -> str:
    return _edited(*edits, text=_CLAIMED)


def _edited(*edits: tuple[str, str], text: str = _MINIMAL) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _launcher(flag: str) -> str:
    return _edited(("spec:\n", _LAUNCHER.replace("FLAG", flag)), ("name: node", "name: launcher"))


def _default_interface(value: str) -> str:
    return _edited(
        (_ANNOTATION, f"{_ANNOTATION[:18]}networking.gke.io/default-interface: {value}\n")
    )


MINIMAL: Final = (
    ("merge key after the explicit key", _edited((_ANNOTATION, _ANNOTATION + _MERGE_BAD))),
    ("merge key before the explicit key", _edited((_ANNOTATION, _MERGE_BAD + _ANNOTATION))),
    (
        "merge list, the other map first",
        _edited(
            (
                _ANNOTATION,
                f"{_ANNOTATION[:18]}<<: [{{networking.gke.io/interfaces: bad}}, "
                "{networking.gke.io/interfaces: good}]\n",
            )
        ),
    ),
    (
        "merge from an alias",
        "x: &m {networking.gke.io/interfaces: bad}\n"
        + _edited((_ANNOTATION, f"{_ANNOTATION}{_ANNOTATION[:18]}<<: *m\n")),
    ),
    (
        "case-folded field after the real one",
        _edited(("      replicatedJobs:\n", "      replicatedjobs: []\n      replicatedJobs:\n")),
    ),
    (
        "case-folded field before the real one",
        _edited(("      replicatedJobs:\n", "      replicatedJobs: []\n      replicatedjobs:\n")),
    ),
    ("field in capitals", _edited(("              metadata:", "              METADATA:"))),
    ("U+017F long s in a field", _edited(("annotations:", "annotation\u017f:"))),
    (
        "U+212A Kelvin sign in a field",
        _edited(("kind: Cluster", "\u212aind: "), ("{name: rt}", "{name: rt, namespace: team}")),
    ),
    ("runLauncherAsNode: y", _launcher("y")),
    ("runLauncherAsNode: on", _launcher("on")),
    ("runLauncherAsNode: 'true', a string", _launcher("'true'")),
    ("a value y where a string is read", _default_interface("y")),
    ("a value 0x10 where a string is read", _default_interface("0x10")),
    ("a value 1:20 where a string is read", _default_interface("1:20")),
    ("a value 010 where a string is read", _default_interface("010")),
    ("a value 1_000 where a string is read", _default_interface("1_000")),
    ("a timestamp where a string is read", _default_interface("2002-12-14")),
    ("a !!binary value", _edited(("interfaces: good", "interfaces: !!binary Z29vZA=="))),
    ("a null annotation", _edited(("interfaces: good", "interfaces: null"))),
    ("job name yes", _edited(("name: node", "name: yes"))),
    ("kind null", _edited(("kind: ClusterTrainingRuntime", "kind: null"))),
    ("a second document", f"{_MINIMAL}---\nkind: Other\n"),
    ("a --- x separator", f"--- x\n{_MINIMAL}"),
    (
        "a custom tag on a map",
        _edited(("              metadata:", "              metadata: !custom")),
    ),
    *((label, _claimed(edit)) for label, edit in TAMPERED.items()),
    (
        "a second resourceClaims list",
        _claimed((_TEMPLATE, _TEMPLATE + "                resourceClaims: [{name: rdma}]\n")),
    ),
    (
        "a merge key under a claim",
        _claimed((_TEMPLATE, _TEMPLATE + "                  <<: {resourceClaimTemplateName: x}\n")),
    ),
    ("a claim template named y", _claimed(("Name: default-rdma", "Name: y"))),
    (
        "a container claim Name",
        _claimed(("                    - name: rdma\n", "                    - Name: rdma\n")),
    ),
)
"""Each construct alone, in the smallest runtime: what the findings list."""
