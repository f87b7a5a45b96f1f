"""NICs by DRA claim (docs/dra.md): ResourceClaimTemplates as the apiserver stores them, and the
``spec.resourceClaims`` of a pod template that name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Final, NamedTuple

from app.domain.fields import FieldPath, as_list, as_map, str_at, value_at

RESOURCE_API: Final = "resource.k8s.io/v1"
CLAIM_TEMPLATE_KIND: Final = "ResourceClaimTemplate"
RDMA_CLASS: Final = "mrdma.google.com"
"""The DeviceClass of the RDMA NICs GKE's managed DRANET driver publishes."""
EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
DEFAULT_NAMESPACE: Final = "default"
SELECTORS: Final = "selectors"
ADMIN_ACCESS: Final = "adminAccess"
CONSTRAINTS: Final = "constraints"
CONFIG: Final = "config"
_NARROWING: Final = (SELECTORS, ADMIN_ACCESS, CONSTRAINTS, CONFIG)
"""The fields that can make a request of ``All`` devices get fewer of them, or other than its
own: ``selectors`` (a CEL filter), ``adminAccess`` (devices in use by others, for monitoring),
and ``constraints`` or ``config`` entries that name the request."""
_SAID: Final = {
    SELECTORS: "selectors",
    ADMIN_ACCESS: "adminAccess: true",
    CONSTRAINTS: "constraints naming it",
    CONFIG: "config naming it",
}


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
    narrowed: tuple[str, ...] = ()
    """Which of ``_NARROWING`` the request carries or is named by (one tuple per combination,
    shared: caches hold a template per namespace)."""

    def requests(self, device_class: str) -> bool:
        """Whether any device this request may get is of ``device_class``."""
        return self.device_class == device_class or device_class in self.classes

    def describe(self) -> str:
        if self.first_available:
            return f"a firstAvailable list of {', '.join(self.classes) or 'nothing'}"
        if self.allocation_mode == ALL:
            asked = f"all {self.device_class} devices"
        elif self.allocation_mode == EXACT_COUNT:
            asked = f"{self.count} {self.device_class} device{'' if self.count == 1 else 's'}"
        else:
            asked = f"{self.device_class} devices by allocationMode {self.allocation_mode}"
        if not self.narrowed:
            return asked
        return f"{asked} with {', '.join(_SAID[field] for field in self.narrowed)}"


@dataclass(frozen=True, slots=True)
class ClaimTemplate:
    """A ResourceClaimTemplate: where it lives and what each of its requests asks for."""

    namespace: str
    name: str
    requests: tuple[ClaimRequest, ...]

    def requesting(self, device_class: str) -> tuple[ClaimRequest, ...]:
        return tuple(r for r in self.requests if r.requests(device_class))

    def asks(self, device_class: str) -> str:
        """What it requests of ``device_class``: its one request, or how many it has."""
        requests = self.requesting(device_class)
        if len(requests) == 1:
            return requests[0].describe()
        return f"{len(requests)} requests of {device_class}"

    def narrows(self, device_class: str) -> bool:
        """Whether something narrows a request of ``device_class``."""
        return any(r.narrowed for r in self.requesting(device_class))

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
    devices = value_at(obj, "spec", "spec", "devices")
    requests = as_list(value_at(devices, "requests")) or ()
    naming = (_Naming.of(value_at(devices, CONSTRAINTS)), _Naming.of(value_at(devices, CONFIG)))
    return ClaimTemplate(
        namespace=str_at(obj, "metadata", "namespace") or DEFAULT_NAMESPACE,
        name=name,
        requests=tuple(_request(r, naming) for r in requests if as_map(r) is not None),
    )


@dataclass(frozen=True, slots=True)
class _Naming:
    """The requests the entries of ``constraints`` or ``config`` name: an entry without
    ``requests`` (or with an empty list) names every request; ``main/sub`` names ``main``."""

    every: bool = False
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, value: object) -> _Naming:
        every, names = False, set[str]()
        for entry in as_list(value) or ():
            if as_map(entry) is None:
                continue
            named = as_list(value_at(entry, "requests"))
            if not named:
                every = True
            names.update(n.partition("/")[0] for n in named or () if isinstance(n, str))
        return cls(every, frozenset(names))

    def __call__(self, request: str) -> bool:
        return self.every or request in self.names


def _request(request: object, naming: tuple[_Naming, _Naming]) -> ClaimRequest:
    name = str_at(request, "name") or ""
    constrained, configured = (named(name) for named in naming)
    alternatives = as_list(value_at(request, "firstAvailable"))
    if alternatives is not None:
        classes = (str_at(a, "deviceClassName") for a in alternatives)
        return ClaimRequest(
            name,
            None,
            first_available=True,
            classes=tuple(c for c in classes if c),
            narrowed=_NARROWINGS[False, False, constrained, configured],
        )
    exactly = value_at(request, "exactly")
    count = value_at(exactly, "count")
    # An empty list selects nothing out; anything else a file holds is taken to narrow.
    selectors = value_at(exactly, SELECTORS) not in (None, [])
    admin = value_at(exactly, ADMIN_ACCESS) not in (None, False)
    return ClaimRequest(
        name,
        str_at(exactly, "deviceClassName"),
        allocation_mode=str_at(exactly, "allocationMode") or EXACT_COUNT,
        # The apiserver stores an integer; anything else in a file asks for no device.
        count=1 if count is None else count if type(count) is int else 0,
        narrowed=_NARROWINGS[selectors, admin, constrained, configured],
    )


_Carried = tuple[bool, bool, bool, bool]
_NARROWINGS: Final[dict[_Carried, tuple[str, ...]]] = {
    carried: tuple(field for field, on in zip(_NARROWING, carried, strict=True) if on)
    for carried in product((False, True), (False, True), (False, True), (False, True))
}
"""One tuple per combination, for every request that carries it."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry: a template that makes each pod its own claim, or a
    ResourceClaim shared by every pod; ``field`` locates it in the judged object."""

    name: str | None
    template: str | None
    claim: str | None
    field: str


_BARE_POD: Final = FieldPath()


class PodClaims(NamedTuple):
    """A pod template's ``spec.resourceClaims``, and where they are (or would be); a tuple:
    built for every judged template, where a dataclass costs more."""

    entries: tuple[PodClaim, ...] = ()
    pod: FieldPath = _BARE_POD
    """The pod template that holds them (a bare Pod: the empty path)."""
    inherited: str | None = None
    """Where the judged object names them when it does not hold them (a TrainJob's runtime)."""

    @property
    def field(self) -> str:
        """Where ``spec.resourceClaims`` is, or would be (located when a rule asks: most
        templates claim nothing and no rule needs their path)."""
        return self.inherited or str(self.pod.child(_CLAIMS))

    @property
    def templates(self) -> tuple[PodClaim, ...]:
        return tuple(e for e in self.entries if e.template is not None)

    @property
    def shared(self) -> tuple[PodClaim, ...]:
        return tuple(e for e in self.entries if e.claim is not None)

    def fingerprint(self) -> tuple[object, ...]:
        return tuple((e.name, e.template, e.claim) for e in self.entries)


NO_CLAIMS: Final = PodClaims()
_CLAIMS: Final = "spec.resourceClaims"


def pod_claims(value: object, pod: FieldPath, *, inherited: str | None = None) -> PodClaims:
    """The entries of the ``spec.resourceClaims`` value of the pod template at ``pod``; each
    located at ``inherited`` instead when the judged object does not hold them (a TrainJob's
    come from its runtime)."""
    entries: Sequence[object] | None = as_list(value)
    if not entries:
        return PodClaims((), pod, inherited)
    path = pod.child(_CLAIMS)
    return PodClaims(
        tuple(
            PodClaim(
                name=str_at(entry, "name"),
                template=str_at(entry, "resourceClaimTemplateName"),
                claim=str_at(entry, "resourceClaimName"),
                field=inherited or str(path.index(position)),
            )
            for position, entry in enumerate(entries)
            if as_map(entry) is not None
        ),
        pod,
        inherited,
    )
