"""Networks: every Network an object names must exist and be usable, and the API be served.

AICR gkenet ``VerifyNetworksExist``: a set comparison on names, never positional.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterView, Networks, Unverifiable
from app.domain.network import NETWORK_GROUP, NETWORK_VERSION
from app.domain.policy import NotReady, Policy
from app.domain.profiles import Profile
from app.domain.rules import LISTED_MAX, cannot_decide, counted
from app.domain.rules.structure import Structure, is_secondary_network
from app.domain.verdict import Code, VerdictBuilder, Violation, shown
from app.domain.wiring import Wiring

Target = tuple[int, InterfaceRef, str]


def network_targets(entries: tuple[InterfaceRef, ...]) -> list[Target]:
    """Entries to look up as Networks, with position and network name: every secondary one
    (the pod network is no Network object)."""
    return [
        (position, entry, entry.network or "")
        for position, entry in enumerate(entries)
        if is_secondary_network(entry)
    ]


def api_not_served(wiring: Wiring) -> Violation:
    return Violation(
        code=Code.NETWORK_API_NOT_SERVED,
        field=wiring.interfaces_path(),
        message=f"the cluster does not serve networks.{NETWORK_GROUP}/{NETWORK_VERSION}, so no "
        "Network can back these interfaces (multi-networking must be enabled when the cluster "
        "is created: --enable-multi-networking)",
    )


def missing_networks(wiring: Wiring, targets: list[Target], networks: Networks) -> Violation | None:
    missing = [target for target in targets if target[2] not in networks.by_name]
    if not missing:
        return None
    known = _listing(networks.names)
    return Violation(
        code=Code.NETWORK_NOT_FOUND,
        field=wiring.entry_path(missing[0][0], "network"),
        message=f"no Network object exists for {counted([e.pair() for _, e, _ in missing])} "
        f"(cluster has: {known or 'no Network objects'})",
    )


def unusable_networks(
    wiring: Wiring, targets: list[Target], networks: Networks
) -> Violation | None:
    by_name = networks.by_name
    unusable = [
        (position, entry, networks.problem(by_name[name]))
        for position, entry, name in targets
        if name in by_name and not networks.usable(by_name[name])
    ]
    if not unusable:
        return None
    usable = _listing(networks.usable_names)
    listed = counted([f"{entry.pair()} ({problem})" for _, entry, problem in unusable], "; ")
    return Violation(
        code=Code.NETWORK_NOT_READY,
        field=wiring.entry_path(unusable[0][0], "network"),
        message=f"Networks exist but are not Ready/bound: {listed} "
        f"(usable on cluster: {usable or 'none'})",
    )


def device_mode_mismatch(
    wiring: Wiring, structure: Structure, networks: Networks, profile: Profile
) -> Violation | None:
    """DeviceModeMismatch: a Network whose GKENetworkParamSet is not in the mode ``profile``
    needs for it. Nothing when the view does not describe param sets, nor for a param set that
    is missing (NetworkNotReady says so)."""
    sets = networks.param_sets
    if sets is None:
        return None
    if structure.networks <= networks.modes_met(profile.name, profile.required_mode):
        return None  # the common case
    entries = structure.entries or ()
    # A mode is wrong, or an entry names a Network the cluster lacks (NotFound says so).
    by_name, required_mode = networks.by_name, profile.required_mode
    wrong = []
    for position, entry, name in network_targets(entries):
        network = by_name.get(name)
        found = None if network is None else sets.get(network.param_set)
        if found is None:  # missing: NetworkNotReady/NotFound say so
            continue
        required = required_mode(name)
        if required is None or found.device_mode == required:
            continue
        mode = f"deviceMode {shown(found.device_mode)}" if found.device_mode else "no deviceMode"
        wrong.append(
            (
                position,
                f"{entry.pair()}: GKENetworkParamSet {shown(found.name)} has {mode}, "
                f"{profile.describe()} requires {required}",
            )
        )
    if not wrong:
        return None
    return Violation(
        code=Code.DEVICE_MODE_MISMATCH,
        field=wiring.entry_path(wrong[0][0], "network"),
        message=counted([text for _, text in wrong], "; "),
    )


def _listing(names: Sequence[str]) -> str:
    return counted([shown(name) for name in names[:LISTED_MAX]], total=len(names))


def network_view(
    wiring: Wiring, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> Networks | None:
    """The Network view, or None after reporting why Networks cannot be checked."""
    # Any wired object needs the Network API served (NetworkInterface references too), so the
    # Network view is consulted even when no entry names a Network.
    networks = view.networks()
    if isinstance(networks, Unverifiable):
        cannot_decide(
            out, policy, wiring.interfaces_path(), f"Networks cannot be listed: {networks.reason}"
        )
        return None
    if not networks.served:
        out.deny(api_not_served(wiring))
        return None
    return networks


def network_findings(
    wiring: Wiring,
    structure: Structure,
    networks: Networks,
    policy: Policy,
    out: VerdictBuilder,
) -> None:
    """NetworkNotFound and NetworkNotReady (denied, or a warning under ``not-ready=warn``)."""
    if structure.networks <= networks.usable_set:
        return  # the common case: every Network exists and is usable
    targets = network_targets(structure.entries or ())
    missing = missing_networks(wiring, targets, networks)
    if missing is not None:
        out.deny(missing)
    unusable = unusable_networks(wiring, targets, networks)
    if unusable is not None:
        out.judge(unusable, enforce=policy.not_ready is NotReady.DENY)
