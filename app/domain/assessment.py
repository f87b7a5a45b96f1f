"""Which requests the rules judge, and what a judged request needs from the cluster view: the
skips (operations, subresources but a Pod's rewiring ones, exempt identities, finalizer removal)
and a TrainJob's runtime.
Made once per request (``assess``)."""

from __future__ import annotations

from typing import Final

from app.domain.annotation import WIRING_KEYS
from app.domain.cluster import RuntimeKey, runtime_key
from app.domain.fields import JsonMap, map_at, value_at
from app.domain.kinds import POD, TRAIN_JOB, Copy, Protected, Workload, runtime_ref_of
from app.domain.pod_writes import JUDGED_SUBRESOURCES
from app.domain.review import UPDATE, WRITES, Operation, Review
from app.domain.value_type import value_type

# Deleting a namespace or cascading deletes must never deadlock on what nicguard guards: the
# namespace controller and the garbage collector, under their own service accounts or, when the
# controller manager runs without per-controller credentials, under its identity.
EXEMPT_USERS: Final = frozenset(
    {
        "system:serviceaccount:kube-system:namespace-controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:kube-controller-manager",
    }
)
_PROTECTED_OPERATIONS: Final[dict[Protected | Copy, frozenset[Operation]]] = {
    Protected.NETWORK: frozenset({Operation.DELETE}),
    Protected.PARAM_SET: frozenset({Operation.DELETE}),
    Protected.RECIPE: frozenset({Operation.CREATE, Operation.UPDATE, Operation.DELETE}),
    # Its spec is immutable: what it requests is written once.
    Protected.CLAIM_TEMPLATE: frozenset({Operation.CREATE}),
    Copy.RUNTIME_SNAPSHOT: frozenset({Operation.CREATE, Operation.UPDATE}),
}
# A Pod's UPDATE counts too: one without a sandbox yet (gated, pending) gets the NICs its
# annotation names when the sandbox is created, not the ones its CREATE was judged on.
_WORKLOAD_OPERATIONS: Final = WRITES


def skip_reason(review: Review) -> str | None:
    """Why a request is allowed without evaluation, or None when it must be judged."""
    kind = review.kind
    if isinstance(kind, Protected | Copy):
        return _protected_skip_reason(kind, review)
    if isinstance(kind, Workload) and review.operation not in _WORKLOAD_OPERATIONS:
        return f"{review.operation} of a {kind.value} is not checked"
    if review.operation not in WRITES:
        return f"{review.operation} is not checked"
    if review.subresource and not _rewires_pod(review):
        return f"subresource {review.subresource} is not checked"
    if kind is None:
        return "not a kind nicguard judges"
    return _terminating_reason(review) or _pod_wiring_kept(review)


def _rewires_pod(review: Review) -> bool:
    """A Pod's status UPDATE or binding CREATE: writes that can change its wiring."""
    return (
        review.kind is Workload.POD
        and JUDGED_SUBRESOURCES.get(review.subresource) is review.operation
    )


def _terminating_reason(review: Review) -> str | None:
    """An UPDATE of an object being deleted that changes nothing outside ``metadata`` (finalizer
    removal) is never blocked; one that changes more is judged, as Trainer still acts on it."""
    # Almost no object is being deleted: its timestamp is looked up before its metadata is read.
    deleting = value_at(review.obj, "metadata", "deletionTimestamp")
    if not deleting or map_at(review.obj, "metadata") is None:
        return None
    if review.operation is not UPDATE or review.obj is None or review.old_obj is None:
        return None
    if _beyond_metadata(review.obj) != _beyond_metadata(review.old_obj):
        return None
    return "object is being deleted and the update changes nothing outside metadata"


def _pod_wiring_kept(review: Review) -> str | None:
    """A Pod UPDATE that leaves both wiring annotations as they were (absent counts as a value)
    changes none of its NICs: not judged, as the shipped ``matchConditions`` never send it."""
    if review.kind is not POD or review.operation is not UPDATE:
        return None
    if review.old_obj is None or _pod_wiring(review.obj) != _pod_wiring(review.old_obj):
        return None
    return "the update leaves the Pod's wiring annotations as they were"


def _pod_wiring(pod: JsonMap | None) -> tuple[object, ...]:
    annotations = map_at(pod, "metadata", "annotations") or {}
    return tuple(annotations.get(key) for key in WIRING_KEYS)


def _beyond_metadata(obj: JsonMap) -> dict[str, object]:
    return {key: value for key, value in obj.items() if key != "metadata"}


def _protected_skip_reason(kind: Protected | Copy, review: Review) -> str | None:
    if review.operation not in _PROTECTED_OPERATIONS[kind]:
        return f"{review.operation} of a {kind.value} is not checked"
    if review.subresource:
        return f"subresource {review.subresource} is not checked"
    if review.username in EXEMPT_USERS:
        return f"{review.username} is never blocked (namespace deletion, garbage collection)"
    return _terminating_reason(review)


@value_type
class Assessment:
    """Why a request is allowed without evaluation (None: it is judged), and the runtime a
    judged TrainJob is judged against (None for every other request)."""

    skip: str | None
    runtime: RuntimeKey | None


def assess(review: Review) -> Assessment:
    """Whether the request is judged and what it needs, its skip reason computed once."""
    skip = skip_reason(review)
    return Assessment(skip, None if skip is not None else _runtime_of(review))


def _runtime_of(review: Review) -> RuntimeKey | None:
    if review.kind is not TRAIN_JOB or review.obj is None:
        return None
    ref = runtime_ref_of(review.obj)
    kind = None if ref is None else ref.runtime_kind()
    if ref is None or kind is None:
        return None
    return runtime_key(kind, review.namespace, ref.name)
