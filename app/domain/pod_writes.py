"""Writes through a Pod's subresources that change its wiring (docs/rules.md, the workload
doors): a status write keeps the request's annotations, and a Binding's annotations are copied
onto the Pod it binds (kube-apiserver's pod strategy and ``setPodNodeAndMetadata``)."""

from __future__ import annotations

from typing import Final

from app.domain.fields import JsonMap, map_at, str_at
from app.domain.review import Operation

STATUS: Final = "status"
BINDING: Final = "binding"
BINDING_KIND: Final = "Binding"
# The subresources of a Pod whose writes can rewire it, and the one operation of each.
JUDGED_SUBRESOURCES: Final = {STATUS: Operation.UPDATE, BINDING: Operation.CREATE}


def pod_of_binding(binding: JsonMap, namespace: str) -> JsonMap:
    """The Pod a Binding binds, as far as its wiring goes: the Binding's annotations are written
    onto it, each key over the Pod's own (what the rules judge as the Pod's new wiring); a key
    the Binding does not carry keeps the Pod's value, which nicguard does not read."""
    metadata: dict[str, object] = {
        "name": str_at(binding, "metadata", "name") or "",
        "namespace": namespace,
    }
    annotations = map_at(binding, "metadata", "annotations")
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
