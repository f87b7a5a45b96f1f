"""NICs by DRA claim (docs/dra.md): a template bound to a DRA profile claims all its node's RDMA
NICs through a ResourceClaimTemplate of the namespace its pods run in (RdmaClaimMissing,
RdmaClaimMismatch, ResourceClaimTemplateNotFound), and no template both claims them and maps
an interface to a Device-type Network (WiringModeConflict), bound or not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.domain.annotation import InterfaceRef
from app.domain.claims import (
    ALL,
    EXACT_COUNT,
    RDMA_CLASS,
    RESOURCE_API,
    ClaimTemplate,
    PodClaim,
    PodClaims,
)
from app.domain.cluster import ClaimTemplates, ClusterView, Networks, Unverifiable
from app.domain.policy import Policy
from app.domain.profiles import Profile
from app.domain.rules import cannot_decide
from app.domain.rules.structure import is_secondary_network
from app.domain.verdict import Code, VerdictBuilder, Violation, shown
from app.domain.wiring import Wiring

_CONFLICT = (
    "GKE's DRANET driver and Device-type Networks must not manage the same NICs: wire them one way"
)


@dataclass(slots=True)
class Templates:
    """The view's ResourceClaimTemplates, read once per judged object when a rule needs them;
    when they cannot be had, that is said once (ClusterStateUnavailable)."""

    view: ClusterView
    policy: Policy
    out: VerdictBuilder
    at: PodClaims
    """The claims whose field a ClusterStateUnavailable names."""
    read: ClaimTemplates | Unverifiable | None = field(default=None, init=False)

    def state(self) -> ClaimTemplates | None:
        read = self.read
        if read is None:
            read = self.read = self.view.claim_templates()
            if isinstance(read, Unverifiable):
                cannot_decide(
                    self.out,
                    self.policy,
                    self.at.field,
                    f"the ResourceClaimTemplates cannot be read: {read.reason}",
                )
        return None if isinstance(read, Unverifiable) else read


def satisfies(template: ClaimTemplate, nics: int) -> bool:
    """Exactly one request of RDMA NICs, for all of them, that nothing narrows."""
    (requested, *more) = template.requesting(RDMA_CLASS) or (None,)
    if requested is None or more or requested.first_available or requested.narrowed:
        return False
    return requested.allocation_mode == ALL or (
        requested.allocation_mode == EXACT_COUNT and requested.count == nics
    )


def claim_findings(
    claims: PodClaims,
    profile: Profile,
    namespace: str | None,
    templates: Callable[[], ClaimTemplates | None],
    out: VerdictBuilder,
) -> None:
    """What a wired template bound to the DRA ``profile`` claims, judged where its pods run
    (``namespace``; None for a ClusterTrainingRuntime alone, judged with each TrainJob)."""
    bound = f"bound to profile {profile.name} ({profile.rdma_nics} RDMA NICs per node)"
    if not claims.entries:
        out.deny(_missing(claims.field, f"{bound}, but the pod template has no resourceClaims"))
        return
    named = claims.templates
    if namespace is None:
        return
    if not named:
        _unclaimed(claims, bound, out)
        return
    state = templates()
    if state is None:
        return
    if not state.served:
        why = f"the cluster does not serve {RESOURCE_API}, so no ResourceClaimTemplate it names"
        out.deny(_not_found(named[0], f"{bound}, but {why} ({_names(named)}) can exist"))
        return
    found = [(e, state.get(namespace, e.template or "")) for e in named]
    if any(t is not None and satisfies(t, profile.rdma_nics) for _, t in found):
        return
    absent = [e for e, t in found if t is None]
    if absent:
        where = f"does not exist in namespace {shown(namespace)}"
        out.deny(
            _not_found(
                absent[0],
                f"{bound}, but ResourceClaimTemplate {_names(absent)} {where}, and no template "
                "it names claims the NICs",
            )
        )
    present = [(e, t) for e, t in found if t is not None]
    # A present template asking for the wrong NICs is wrong whatever the missing ones hold
    # (an IMEX channel template is created after the pods' runtime): say so beside them.
    if not _mismatches(bound, present, profile.rdma_nics, out) and not absent:
        _unclaimed(claims, bound, out)


def _mismatches(
    bound: str, present: list[tuple[PodClaim, ClaimTemplate]], nics: int, out: VerdictBuilder
) -> bool:
    """What each present template that requests RDMA NICs asks instead of all of them; whether
    any does."""
    asking = [(e, t) for e, t in present if t.requesting(RDMA_CLASS)]
    for entry, template in asking:
        out.deny(
            Violation(
                code=Code.RDMA_CLAIM_MISMATCH,
                field=entry.field,
                message=f"{bound}, but {shown(template.describe())} requests "
                f"{template.asks(RDMA_CLASS)}: "
                f"{claim_expected(nics, narrowed=template.narrows(RDMA_CLASS))}",
            )
        )
    return bool(asking)


def claim_expected(nics: int, *, narrowed: bool = False) -> str:
    """What a template must request instead; what it must not carry, when it carries some."""
    expected = f"request exactly one {RDMA_CLASS}, allocationMode All or ExactCount count {nics}"
    if not narrowed:
        return expected
    return f"{expected}, without selectors, adminAccess, or constraints or config naming it"


def _unclaimed(claims: PodClaims, bound: str, out: VerdictBuilder) -> None:
    """No template requests the NICs: a shared claim, or nothing of the class at all."""
    shared = claims.shared
    if shared:
        out.deny(
            Violation(
                code=Code.RDMA_CLAIM_MISMATCH,
                field=shared[0].field,
                message=f"{bound}, but it claims only ResourceClaim {shown(shared[0].claim or '')}"
                ", shared by every pod naming it: a node's NICs are its own pod's; name a "
                "ResourceClaimTemplate",
            )
        )
        return
    out.deny(
        _missing(
            claims.field,
            f"{bound}, but no ResourceClaimTemplate it names requests {RDMA_CLASS} devices",
        )
    )


def _not_found(entry: PodClaim, message: str) -> Violation:
    return Violation(
        code=Code.RESOURCE_CLAIM_TEMPLATE_NOT_FOUND, field=entry.field, message=message
    )


def _missing(field: str, message: str) -> Violation:
    return Violation(
        code=Code.RDMA_CLAIM_MISSING,
        field=field,
        message=f"{message}: its pods would run NCCL on the gVNIC",
    )


def _names(entries: list[PodClaim] | tuple[PodClaim, ...]) -> str:
    return ", ".join(shown(e.template or "") for e in entries)


def bound_conflict(
    wiring: Wiring, entries: tuple[InterfaceRef, ...], networks: Networks, profile: Profile
) -> Violation | None:
    """A template bound to a DRA profile maps an interface to a Device-type Network."""
    found = _device_entry(entries, networks)
    if found is None:
        return None
    position, entry = found
    return Violation(
        code=Code.WIRING_MODE_CONFLICT,
        field=wiring.entry_path(position),
        message=f"bound to profile {profile.name}, whose NICs are claimed by DRA, but the "
        f"interfaces annotation maps {entry.pair()}, a Device-type Network, too; {_CONFLICT}",
    )


def claimed_conflict(
    wiring: Wiring,
    entries: tuple[InterfaceRef, ...],
    networks: Networks,
    claims: PodClaims,
    namespace: str | None,
    templates: Callable[[], ClaimTemplates | None],
) -> Violation | None:
    """An unbound template that maps an interface to a Device-type Network and claims RDMA NICs
    by a ResourceClaimTemplate of the namespace its pods run in."""
    named = claims.templates
    if not named or namespace is None:
        return None
    found = _device_entry(entries, networks)
    if found is None:
        return None
    state = templates()
    if state is None:
        return None
    position, entry = found
    for claim in named:
        template = state.get(namespace, claim.template or "")
        if template is not None and template.requesting(RDMA_CLASS):
            return Violation(
                code=Code.WIRING_MODE_CONFLICT,
                field=wiring.entry_path(position),
                message=f"the interfaces annotation maps {entry.pair()}, a Device-type Network, "
                f"and the pod claims {RDMA_CLASS} devices by {shown(template.describe())}; "
                f"{_CONFLICT}",
            )
    return None


def _device_entry(
    entries: tuple[InterfaceRef, ...], networks: Networks
) -> tuple[int, InterfaceRef] | None:
    """The first entry naming a Network of ``spec.type: Device``, with its position. An L3 or
    L2 Network (the second gVNIC) shares no NIC with the driver; a Network that does not exist
    is NetworkNotFound's."""
    by_name = networks.by_name
    for position, entry in enumerate(entries):
        network = by_name.get(entry.network or "") if is_secondary_network(entry) else None
        if network is not None and network.device:
            return position, entry
    return None
