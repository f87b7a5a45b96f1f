"""NICs by DRA claim (docs/dra.md): ResourceClaimTemplates as the apiserver stores them, and the
``spec.resourceClaims`` of a pod template that name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from app.domain.fields import FieldPath, as_list, as_map, str_at, value_at

RESOURCE_API: Final = "resource.k8s.io/v1"
CLAIM_TEMPLATE_KIND: Final = "ResourceClaimTemplate"
RDMA_CLASS: Final = "mrdma.google.com"
"""The DeviceClass of the RDMA NICs GKE's managed DRANET driver publishes."""
EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
DEFAULT_NAMESPACE: Final = "default"


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """One request of a template: ``exactly`` one class, or a ``firstAvailable`` list of them."""

    name: str
    device_class: str | None
    """None for a ``firstAvailable`` request (its classes are in ``classes``)."""
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    first_available: bool = False
    classes: tuple[str, ...] = ()
    """The ``deviceClassName`` of each ``firstAvailable`` sub-request; empty otherwise."""

    def requests(self, device_class: str) -> bool:
        """Whether any device this request may get is of ``device_class``."""
        return self.device_class == device_class or device_class in self.classes

    def describe(self) -> str:
        if self.first_available:
            return f"a firstAvailable list of {', '.join(self.classes) or 'nothing'}"
        if self.allocation_mode == ALL:
            return f"all {self.device_class} devices"
        if self.allocation_mode == EXACT_COUNT:
            return f"{self.count} {self.device_class} device{'' if self.count == 1 else 's'}"
        return f"{self.device_class} devices by allocationMode {self.allocation_mode}"


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    """A ResourceClaimTemplate: where it lives and what each of its requests asks for."""

    namespace: str
    name: str
    requests: tuple[ClaimRequest, ...]

    def requesting(self, device_class: str) -> tuple[ClaimRequest, ...]:
        return tuple(r for r in self.requests if r.requests(device_class))

    def describe(self) -> str:
        return f"ResourceClaimTemplate {self.namespace}/{self.name}"


def is_claim_template(obj: object) -> bool:
    return str_at(obj, "apiVersion") == RESOURCE_API and str_at(obj, "kind") == CLAIM_TEMPLATE_KIND


def claim_template_of(obj: object) -> ClaimTemplate | None:
    """The template with the apiserver's defaults (``allocationMode`` ExactCount, ``count`` 1,
    namespace ``default``); None when it is not a named ResourceClaimTemplate."""
    name = str_at(obj, "metadata", "name")
    if not is_claim_template(obj) or not name:
        return None
    requests = as_list(value_at(obj, "spec", "spec", "devices", "requests")) or ()
    return ClaimTemplate(
        namespace=str_at(obj, "metadata", "namespace") or DEFAULT_NAMESPACE,
        name=name,
        requests=tuple(_request(r) for r in requests if as_map(r) is not None),
    )


def _request(request: object) -> ClaimRequest:
    name = str_at(request, "name") or ""
    alternatives = as_list(value_at(request, "firstAvailable"))
    if alternatives is not None:
        classes = (str_at(a, "deviceClassName") for a in alternatives)
        return ClaimRequest(
            name, None, first_available=True, classes=tuple(c for c in classes if c)
        )
    exactly = value_at(request, "exactly")
    count = value_at(exactly, "count")
    return ClaimRequest(
        name,
        str_at(exactly, "deviceClassName"),
        allocation_mode=str_at(exactly, "allocationMode") or EXACT_COUNT,
        # The apiserver stores an integer; anything else in a file asks for no device.
        count=1 if count is None else count if type(count) is int else 0,
    )


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry: a template that makes each pod its own claim, or a
    ResourceClaim shared by every pod; ``field`` locates it in the judged object."""

    name: str | None
    template: str | None
    claim: str | None
    field: str


@dataclass(frozen=True, slots=True)
class PodClaims:
    """A pod template's ``spec.resourceClaims``, and where it is (or would be)."""

    entries: tuple[PodClaim, ...] = ()
    field: str = ""

    @property
    def templates(self) -> tuple[PodClaim, ...]:
        return tuple(e for e in self.entries if e.template is not None)

    @property
    def shared(self) -> tuple[PodClaim, ...]:
        return tuple(e for e in self.entries if e.claim is not None)

    def fingerprint(self) -> tuple[object, ...]:
        return tuple((e.name, e.template, e.claim) for e in self.entries)


NO_CLAIMS: Final = PodClaims()


def pod_claims(value: object, path: FieldPath, *, inherited: str | None = None) -> PodClaims:
    """The entries of a ``spec.resourceClaims`` value at ``path``; each located at ``inherited``
    instead when the judged object does not hold them (a TrainJob's come from its runtime)."""
    entries: Sequence[object] = as_list(value) or ()
    return PodClaims(
        entries=tuple(
            PodClaim(
                name=str_at(entry, "name"),
                template=str_at(entry, "resourceClaimTemplateName"),
                claim=str_at(entry, "resourceClaimName"),
                field=inherited or str(path.index(position)),
            )
            for position, entry in enumerate(entries)
            if as_map(entry) is not None
        ),
        field=inherited or str(path),
    )
