"""AdmissionReview v1 <-> core translation; pure functions, no I/O (see docs/rules.md).

Only the fields nicguard reads are looked at; the reviewed object stays a plain dict.
"""

from __future__ import annotations

from typing import Final

from app.documents import load_yaml
from app.domain.claims import RESOURCE_API
from app.domain.cluster import ObjectName, recipe_of
from app.domain.fields import JsonMap, str_at
from app.domain.kinds import Copy, Protected, Role, Workload, kind_of, workload_of
from app.domain.network import NETWORK_GROUP
from app.domain.pod_writes import BINDING, BINDING_KIND, pod_of_binding
from app.domain.review import WRITES, Operation, Review
from app.domain.runtime_snapshot import read_snapshot, snapshot_owner
from app.domain.value_type import value_type
from app.kubeyaml import load_snapshot_yaml

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
_OPERATIONS: Final = {operation.value: operation for operation in Operation}
_EMPTY: Final[JsonMap] = {}
CLAIM_TEMPLATE_GROUP: Final = RESOURCE_API.partition("/")[0]
# Read per review, so by module name (an enum member costs more on 3.11: docs/request-cost.md).
_RECIPE_ROLE: Final = Protected.RECIPE


class MalformedReviewError(ValueError):
    """The body is not a usable AdmissionReview v1; the text is a short reason for the 4xx."""


@value_type
class AdmissionRequest:
    """One parsed admission request: the core's Review, plus what the response and log need."""

    uid: str
    review: Review
    kind: str
    group: str
    name: str
    username: str
    dry_run: bool


def request_from_body(body: object, recipe: ObjectName | None = None) -> AdmissionRequest:
    """Parse a request body decoded from JSON; raises MalformedReviewError. ``recipe`` names the
    recipe ConfigMap: a request for it is judged (docs/rules.md), and so is a write of a runtime
    snapshot ConfigMap (its ``data.runtime`` decoded here); any other ConfigMap is not."""
    envelope = _json_map(body)
    if envelope is None or envelope.get("kind") != KIND:
        raise MalformedReviewError("body is not an AdmissionReview")
    if envelope.get("apiVersion") != API_VERSION:
        raise MalformedReviewError(f"only {API_VERSION} AdmissionReview is supported")
    request = _json_map(envelope.get("request"))
    if request is None:
        raise MalformedReviewError("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReviewError("request.uid is missing")
    operation = _operation(request.get("operation"))
    obj, old_obj = _optional_map(request, "object"), _optional_map(request, "oldObject")
    if operation in WRITES and obj is None:
        raise MalformedReviewError(f"request.object is required for {operation}")
    # Each map is narrowed once and its keys read directly, not walked by str_at field by field:
    # this runs on every request.
    request_kind = _json_map(request.get("kind")) or _EMPTY
    group, kind = _text(request_kind.get("group")), _text(request_kind.get("kind"))
    namespace = _text(request.get("namespace"))
    name = _text(request.get("name")) or str_at(obj, "metadata", "name") or ""
    username = _text((_json_map(request.get("userInfo")) or _EMPTY).get("username"))
    judged: Role | None = (
        kind_of(group, kind)
        or workload_of(group, kind)
        or _protected(group, kind, ObjectName(namespace, name), recipe)
    )
    written = old_recipe = snapshot = old_snapshot = None
    subresource = _text(request.get("subResource"))
    if group == "" and kind == BINDING_KIND and obj is not None:
        # pods/binding, or the older bindings resource: the Binding's annotations are what the
        # apiserver writes onto the Pod, judged as that Pod's wiring.
        judged, obj, subresource = Workload.POD, pod_of_binding(obj, namespace), BINDING
    elif judged is _RECIPE_ROLE and recipe is not None:
        written = None if obj is None else recipe_of(obj, recipe, load_yaml)
        old_recipe = None if old_obj is None else recipe_of(old_obj, recipe, load_yaml)
    elif group == "" and kind == _RECIPE_ROLE and obj is not None:
        owner = snapshot_owner(obj)
        if owner is not None:
            judged = Copy.RUNTIME_SNAPSHOT
            snapshot = read_snapshot(obj, owner, load_snapshot_yaml)
            old_owner = snapshot_owner(old_obj)
            if old_obj is not None and old_owner is not None:
                old_snapshot = read_snapshot(old_obj, old_owner, load_snapshot_yaml)
    return AdmissionRequest(
        uid=uid,
        review=Review(
            operation=operation,
            kind=judged,
            namespace=namespace,
            obj=obj,
            old_obj=old_obj,
            subresource=subresource,
            name=name,
            username=username,
            written_recipe=written,
            old_recipe=old_recipe,
            snapshot=snapshot,
            old_snapshot=old_snapshot,
        ),
        kind=kind,
        group=group,
        name=name,
        username=username,
        dry_run=request.get("dryRun") is True,
    )


def decodes_yaml(body: object) -> bool:
    """Whether ``request_from_body`` may decode YAML for this body (a ConfigMap's: the recipe, a
    runtime snapshot): work the webhook keeps off its event loop."""
    request = _json_map((_json_map(body) or _EMPTY).get("request")) or _EMPTY
    request_kind = _json_map(request.get("kind")) or _EMPTY
    return request_kind.get("group") == "" and request_kind.get("kind") == _RECIPE_ROLE


def _protected(
    group: str, kind: str, named: ObjectName, recipe: ObjectName | None
) -> Protected | None:
    """Networks and GKENetworkParamSets, ResourceClaimTemplates, and the recipe ConfigMap (no
    other ConfigMap)."""
    if group == NETWORK_GROUP and kind in (Protected.NETWORK, Protected.PARAM_SET):
        return Protected(kind)
    if group == CLAIM_TEMPLATE_GROUP and kind == Protected.CLAIM_TEMPLATE:
        return Protected.CLAIM_TEMPLATE
    if group == "" and kind == Protected.RECIPE and named == recipe:
        return Protected.RECIPE
    return None


def _operation(value: object) -> Operation:
    operation = _OPERATIONS.get(value) if isinstance(value, str) else None
    if operation is None:
        raise MalformedReviewError("request.operation is not one of " + ", ".join(Operation))
    return operation


def _text(value: object) -> str:
    """A JSON string, or "" for anything else (absent, null, a number, a map)."""
    return value if isinstance(value, str) else ""


def _json_map(value: object) -> JsonMap | None:
    """A JSON object of the decoded body, or None. ``as_map`` would check that every key is a
    string: a JSON object's keys are, as the body's decoders (orjson, json) build them."""
    return value if isinstance(value, dict) else None


def _optional_map(request: JsonMap, key: str) -> JsonMap | None:
    value = request.get(key)
    if value is None:
        return None
    mapping = _json_map(value)
    if mapping is None:
        raise MalformedReviewError(f"request.{key} is not an object")
    return mapping
