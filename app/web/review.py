"""AdmissionReview v1 <-> core translation (SPEC section 5); pure functions, no I/O.

Only the fields nicguard reads are looked at; the reviewed object stays a plain dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.domain.evaluation import Operation, Review
from app.domain.fields import JsonMap, as_map, str_at
from app.domain.kinds import kind_of

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"


class MalformedReviewError(ValueError):
    """The body is not a usable AdmissionReview v1; the text is a short reason for the 4xx."""


@dataclass(frozen=True, slots=True)
class Admission:
    """One parsed admission request: the core's Review plus what the response and audit need."""

    uid: str
    review: Review
    kind: str
    group: str
    name: str
    username: str
    dry_run: bool


def admission_from_body(body: object) -> Admission:
    """Parse a decoded request body; raises MalformedReviewError."""
    envelope = as_map(body)
    if envelope is None or envelope.get("kind") != KIND:
        raise MalformedReviewError("body is not an AdmissionReview")
    if envelope.get("apiVersion") != API_VERSION:
        raise MalformedReviewError(f"only {API_VERSION} AdmissionReview is supported")
    request = as_map(envelope.get("request"))
    if request is None:
        raise MalformedReviewError("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReviewError("request.uid is missing")
    try:
        operation = Operation(str(request.get("operation")))
    except ValueError:
        raise MalformedReviewError(
            "request.operation is not one of " + ", ".join(Operation)
        ) from None
    obj, old_obj = _optional_map(request, "object"), _optional_map(request, "oldObject")
    if operation in (Operation.CREATE, Operation.UPDATE) and obj is None:
        raise MalformedReviewError(f"request.object is required for {operation}")
    # ``request`` is known to be a string-keyed map: read its keys directly, not from the root.
    request_kind = request.get("kind")
    group = str_at(request_kind, "group") or ""
    kind = str_at(request_kind, "kind") or ""
    return Admission(
        uid=uid,
        review=Review(
            operation=operation,
            kind=kind_of(group, kind),
            namespace=str_at(request, "namespace") or "",
            obj=obj,
            old_obj=old_obj,
            subresource=str_at(request, "subResource") or "",
        ),
        kind=kind,
        group=group,
        name=str_at(request, "name") or str_at(obj, "metadata", "name") or "",
        username=str_at(request.get("userInfo"), "username") or "",
        dry_run=request.get("dryRun") is True,
    )


def _optional_map(request: JsonMap, key: str) -> JsonMap | None:
    value = request.get(key)
    if value is None:
        return None
    mapping = as_map(value)
    if mapping is None:
        raise MalformedReviewError(f"request.{key} is not an object")
    return mapping
