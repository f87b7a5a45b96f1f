"""Object -> cluster leg: every Network the object names must exist and be usable.

AICR gkenet ``VerifyNetworksExist``: a set comparison on names, never positional.
"""

from __future__ import annotations

from typing import Final

from app.domain.annotation import InterfaceRef
from app.domain.cluster import Networks
from app.domain.network import NETWORK_GROUP, NETWORK_VERSION
from app.domain.structure import RESERVED_NETWORKS
from app.domain.violations import Code, Violation, shown
from app.domain.wiring import Wiring

_LISTED_MAX: Final = 12


Target = tuple[int, InterfaceRef, str]


def network_targets(secondaries: tuple[InterfaceRef, ...]) -> list[Target]:
    """Entries to look up as Networks, with position and network name; reserved ones excluded."""
    return [
        (position, entry, entry.network)
        for position, entry in enumerate(secondaries, start=1)
        if entry.network is not None and entry.network not in RESERVED_NETWORKS
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
    known = _listing(sorted(networks.by_name))
    return Violation(
        code=Code.NETWORK_NOT_FOUND,
        field=wiring.entry_path(missing[0][0], "network"),
        message=f"no Network object exists for {', '.join(e.pair() for _, e, _ in missing)} "
        f"(cluster has: {known or 'no Network objects'})",
    )


def unusable_networks(
    wiring: Wiring, targets: list[Target], networks: Networks
) -> Violation | None:
    unusable = [
        (position, entry, networks.by_name[name])
        for position, entry, name in targets
        if name in networks.by_name and not networks.by_name[name].usable
    ]
    if not unusable:
        return None
    usable = _listing(sorted(n.name for n in networks.by_name.values() if n.usable))
    listed = "; ".join(f"{entry.pair()} ({network.problem})" for _, entry, network in unusable)
    return Violation(
        code=Code.NETWORK_NOT_READY,
        field=wiring.entry_path(unusable[0][0], "network"),
        message=f"Networks exist but are not Ready/bound: {listed} "
        f"(usable on cluster: {usable or 'none'})",
    )


def _listing(names: list[str]) -> str:
    shown_names = ", ".join(shown(name) for name in names[:_LISTED_MAX])
    extra = len(names) - _LISTED_MAX
    return f"{shown_names} and {extra} more" if extra > 0 else shown_names
