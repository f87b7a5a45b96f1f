"""One admission request judged per SPEC section 1: what is evaluated; UPDATE grandfathering."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from app.domain.assessment import assess
from app.domain.cluster import ClusterView, RuntimeKey, runtime_key
from app.domain.fields import JsonMap, map_at
from app.domain.kinds import Kind, runtime_ref_of
from app.domain.policy import Policy
from app.domain.verdict import Verdict


class Operation(StrEnum):
    """AdmissionReview operations."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    """The parts of an admission request the rules need.

    ``kind`` is None for objects nicguard does not judge; ``obj`` is required for CREATE/UPDATE.
    """

    operation: Operation
    kind: Kind | None
    namespace: str = ""
    obj: JsonMap | None = None
    old_obj: JsonMap | None = None
    subresource: str = ""


def skip_reason(review: Review) -> str | None:
    """Why a request is allowed without evaluation, or None when it must be judged."""
    if review.operation not in (Operation.CREATE, Operation.UPDATE):
        return f"{review.operation} is not checked"
    if review.subresource:
        return f"subresource {review.subresource} is not checked"
    if review.kind is None:
        return "not a Trainer runtime or TrainJob"
    metadata = map_at(review.obj, "metadata")
    if metadata is not None and metadata.get("deletionTimestamp"):
        return "object is being deleted"
    return None


def runtime_needed(review: Review) -> RuntimeKey | None:
    """The runtime a TrainJob request is judged against, or None for every other request."""
    if review.kind is not Kind.TRAIN_JOB or review.obj is None or skip_reason(review):
        return None
    ref = runtime_ref_of(review.obj)
    kind = None if ref is None else ref.runtime_kind()
    if ref is None or kind is None:
        return None
    return runtime_key(kind, review.namespace, ref.name)


def evaluate(review: Review, view: ClusterView, policy: Policy) -> Verdict:
    """The verdict for one request; never raises for any input."""
    if skip_reason(review) is not None or review.kind is None or review.obj is None:
        return Verdict()
    current = assess(review.kind, review.obj, review.namespace, view, policy)
    verdict = current.verdict
    if review.operation is not Operation.UPDATE or verdict.allowed or review.old_obj is None:
        return verdict
    previous = assess(review.kind, review.old_obj, review.namespace, view, policy)
    if previous.fingerprint != current.fingerprint:
        return verdict  # the update changes the wiring: full verdict
    return _grandfather(verdict, previous.verdict)


def _grandfather(verdict: Verdict, previous: Verdict) -> Verdict:
    """Downgrade violations the old object already had to warnings."""
    had = {violation.code for violation in (*previous.violations, *previous.waived)}
    kept = tuple(v for v in verdict.violations if v.code not in had)
    inherited = tuple(v for v in verdict.violations if v.code in had)
    return replace(
        verdict,
        violations=kept,
        waived=verdict.waived + inherited,
        warnings=verdict.warnings
        + tuple(f"pre-existing, wiring unchanged: {v.render()}" for v in inherited),
    )
