"""GKE ``Network`` objects (``networks.networking.gke.io/v1``), their GKENetworkParamSets, and when
a Network is usable. Usable = condition Ready True, condition ParamsReady True, and
spec.parametersRef.kind is GKENetworkParamSet: AICR gkenet's ``Bound()``, "the single definition of
usable by a workload"; and (docs/rules.md; as AICR's GB200 health check reads them) that param set
exists and is Ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.domain.fields import as_list, as_map, map_at, str_at

NETWORK_GROUP: Final = "networking.gke.io"
NETWORK_VERSION: Final = "v1"
PARAM_SET_KIND: Final = "GKENetworkParamSet"
DEVICE_TYPE: Final = "Device"
"""``spec.type`` of a Network that hands a node NIC to the Pod (gke-networking-api
``DeviceNetworkType``); ``L3`` and ``L2`` Networks route through the node's interface."""
_CONDITIONS: Final = ("Ready", "ParamsReady")


@dataclass(frozen=True, slots=True)
class Network:
    """A Network's name and, when it is not usable, why (empty ``problem`` means usable)."""

    name: str
    problem: str = ""
    param_set: str = ""
    """The GKENetworkParamSet ``spec.parametersRef`` names, or "" when it names none."""
    device: bool = False
    """``spec.type`` is ``Device``: the Network hands the Pod a whole node NIC, as GKE's DRANET
    driver does (docs/dra.md). A bool, not the type's text: one shared object per Network."""

    @property
    def usable(self) -> bool:
        return not self.problem


@dataclass(frozen=True, slots=True)
class ParamSet:
    """A GKENetworkParamSet: its name, why it is not Ready ("" when it is), its device mode."""

    name: str
    problem: str = ""
    device_mode: str = ""
    """``spec.deviceMode`` (``NetDevice``, ``RDMA``, ``DPDK-VFIO``), "" when unset."""


def param_set_from_object(obj: object) -> ParamSet | None:
    """Convert a GKENetworkParamSet object; None when it has no name."""
    name = str_at(obj, "metadata", "name")
    if not name:
        return None
    ready = _latest(obj, ("Ready",)).get("Ready")
    return ParamSet(
        name=name,
        problem=_condition_problem("Ready", ready),
        device_mode=str_at(obj, "spec", "deviceMode") or "",
    )


def network_from_object(obj: object) -> Network | None:
    """Convert a Network object; None when it has no name."""
    name = str_at(obj, "metadata", "name")
    if not name:
        return None
    ref = map_at(obj, "spec", "parametersRef")
    param_set = str_at(ref, "name") if str_at(ref, "kind") == PARAM_SET_KIND else None
    return Network(
        name=name,
        problem="; ".join(_problems(obj)),
        param_set=param_set or "",
        device=str_at(obj, "spec", "type") == DEVICE_TYPE,
    )


def _latest(obj: object, kinds: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """The last condition of each of ``kinds`` in ``status.conditions`` (later duplicates win)."""
    latest: dict[str, dict[str, object]] = {}
    for item in as_list((map_at(obj, "status") or {}).get("conditions")) or ():
        condition = as_map(item)
        if condition is not None and condition.get("type") in kinds:
            latest[str(condition["type"])] = dict(condition)
    return latest


def _problems(obj: object) -> list[str]:
    problems = []
    if not as_list((map_at(obj, "status") or {}).get("conditions")):
        problems.append("no status.conditions reported")
    else:
        latest = _latest(obj, _CONDITIONS)
        problems.extend(_condition_problem(kind, latest.get(kind)) for kind in _CONDITIONS)
    if str_at(obj, "spec", "parametersRef", "kind") != PARAM_SET_KIND:
        problems.append(f"spec.parametersRef does not name a {PARAM_SET_KIND}")
    return [problem for problem in problems if problem]


def _condition_problem(kind: str, condition: dict[str, object] | None) -> str:
    if condition is None:
        return f"no {kind} condition reported"
    if condition.get("status") == "True":
        return ""
    reason, message = condition.get("reason"), condition.get("message")
    if isinstance(reason, str) and reason:
        if isinstance(message, str) and message:
            return f"{kind}={reason}: {message[:120]}"
        return f"{kind}={reason}"
    return f"{kind} is not True"
