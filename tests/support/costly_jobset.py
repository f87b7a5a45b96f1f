"""The costliest review any JobSet writer can make the apiserver send (SPEC §15): an UPDATE of a
JobSet whose ~2,000 replicatedJobs each carry a wired pod template, in ``object`` and in
``oldObject``, just under the 3 MiB body limit. Shared by the live test of a serving process and
``bench.costly_review``."""

from __future__ import annotations

import json
from enum import Enum
from typing import Final

from app.web.body import MAX_BODY_BYTES
from tests.builders import DEFAULT_INTERFACE, INTERFACES, PAIRS, annotation

TEMPLATES: Final = 2_000
# Every secondary interface on one Network examples/cluster lacks: per template, NetworkNotFound
# and seven NetworkDuplicated, the costliest wiring measured per byte.
_BROKEN: Final = tuple((name, "gpu-nic-9") for name, _ in PAIRS)


class Edit(Enum):
    """What the UPDATE does to the wiring, and so what nicguard must answer."""

    CLEAN = "clean"
    """Every template wired as the recipe says, old and new: allowed."""
    GRANDFATHERED = "grandfathered"
    """Every template wired to a missing Network, old and new alike: allowed, each violation
    grandfathered (a warning)."""
    BROKEN = "broken"
    """The old object wired as the recipe says, every new template wired to a missing Network:
    denied."""


def _job(position: int, pairs: tuple[tuple[str, str], ...]) -> dict[str, object]:
    """One replicatedJob of a multi-slice training JobSet, wired with ``pairs``."""
    name = f"slice-{position:04d}"
    return {
        "name": name,
        "replicas": 1,
        "template": {
            "spec": {
                "template": {
                    "metadata": {
                        "annotations": {
                            DEFAULT_INTERFACE: "eth0",
                            INTERFACES: annotation(pairs),
                        },
                    },
                    "spec": {
                        "containers": [
                            {
                                "name": "node",
                                "image": "trainer:v1",
                            }
                        ],
                    },
                }
            }
        },
    }


def _job_set(pairs: tuple[tuple[str, str], ...], templates: int) -> dict[str, object]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llama", "namespace": "team-a", "resourceVersion": "81234"},
        "spec": {
            "suspend": True,
            "replicatedJobs": [_job(position, pairs) for position in range(templates)],
        },
    }


def costly_jobset_update(edit: Edit, *, templates: int = TEMPLATES, uid: str = "u") -> bytes:
    """The AdmissionReview body: a JobSet UPDATE with ``templates`` wired templates, old and new."""
    new, old = {
        Edit.CLEAN: (PAIRS, PAIRS),
        Edit.GRANDFATHERED: (_BROKEN, _BROKEN),
        Edit.BROKEN: (_BROKEN, PAIRS),
    }[edit]
    kind = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
    request = {
        "uid": uid,
        "kind": kind,
        "resource": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "resource": "jobsets"},
        "namespace": "team-a",
        "name": "llama",
        "operation": "UPDATE",
        "userInfo": {"username": "system:serviceaccount:kueue-system:kueue-controller-manager"},
        "object": _job_set(new, templates),
        "oldObject": _job_set(old, templates),
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    body = json.dumps(review, separators=(",", ":")).encode()
    assert len(body) <= MAX_BODY_BYTES, len(body)
    return body
