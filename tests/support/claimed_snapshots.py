"""Runtime snapshots of the DRA-wired example runtime (examples/dranet): Trainer's copy, and the
tampered copies whose DRA claims Trainer's case-folding typed decoding reads otherwise than their
exact keys say (docs/rules.md, RuntimeSnapshotInvalid)."""

from __future__ import annotations

from typing import Any, Final

import yaml

from tests.builders import TRAINJOB_OWNER, bare
from tests.support.paths import ROOT

DRANET_STATE: Final = ROOT / "examples/dranet/cluster"
_RUNTIME: Final = DRANET_STATE / "torch-distributed-dranet.yaml"
_POD_SPEC: Final = "              spec:\n"
_CLAIMS: Final = "                resourceClaims:\n"
_TEMPLATE: Final = "                  resourceClaimTemplateName: default-rdma\n"
_ONE_NIC: Final = (
    "                - name: rdma\n                  resourceClaimTemplateName: rdma-one-nic\n"
)
TAMPERED: Final = {
    "a second resourceclaims list": (
        _CLAIMS,
        "                resourceclaims:\n" + _ONE_NIC + _CLAIMS,
    ),
    "resourceclaimtemplatename beside the real key": (
        _TEMPLATE,
        _TEMPLATE + "                  resourceclaimtemplatename: rdma-one-nic\n",
    ),
    "a second pod spec spelled with U+017F": (
        _POD_SPEC,
        "              \u017fpec:\n" + _CLAIMS + _ONE_NIC + _POD_SPEC,
    ),
}
"""Each tampering as an edit of the copy's text: what it replaces, and with what. Trainer v2.3.0
reads ``rdma-one-nic`` from each (Go matches field names ignoring case, the last in sorted key
order winning); the exact keys say ``default-rdma``."""
FOLDED: Final = {
    "a second resourceclaims list": "spec.resourceclaims",
    "resourceclaimtemplatename beside the real key": "resourceClaims[0].resourceclaimtemplatename",
    "a second pod spec spelled with U+017F": "template.\u017fpec",
}
"""The key each tampering's refusal names, at the end of its path in the copy."""


def claimed_copy(edit: tuple[str, str] | None = None) -> dict[str, Any]:
    """The snapshot ConfigMap team-a/tj-runtime-snapshot of TrainJob team-a/tj holding the
    example ClusterTrainingRuntime torch-distributed-dranet as Trainer v2.3.0 copies it (without
    apiVersion and kind), its text changed by ``edit``."""
    runtime = yaml.safe_load(_RUNTIME.read_text(encoding="utf-8"))
    text = yaml.safe_dump(bare(runtime), sort_keys=False)
    if edit is not None:
        old, new = edit
        assert text.count(old) == 1, (old, text)
        text = text.replace(old, new)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "tj-runtime-snapshot",
            "namespace": "team-a",
            "ownerReferences": [{**TRAINJOB_OWNER, "name": "tj"}],
        },
        "data": {"runtime": text},
    }
