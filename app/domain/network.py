"""GKE ``Network`` objects (``networks.networking.gke.io/v1``) and when one is usable.

Usable = condition Ready True, condition ParamsReady True, and spec.parametersRef.kind is
GKENetworkParamSet: AICR gkenet's ``Bound()``, "the single definition of usable by a workload".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.domain.fields import as_list, as_map, map_at, str_at

NETWORK_GROUP: Final = "networking.gke.io"
NETWORK_VERSION: Final = "v1"
PARAM_SET_KIND: Final = "GKENetworkParamSet"
_CONDITIONS: Final = ("Ready", "ParamsReady")


@dataclass(frozen=True, slots=True)
class Network:
    """A Network's name and, when it is not usable, why (empty ``problem`` means usable)."""

    name: str
    problem: str = ""
    param_set: str = ""
    """The GKENetworkParamSet ``spec.parametersRef`` names, or "" when it names none."""

    @property
    def usable(self) -> bool:
        return not self.problem


def network_from_object(obj: object) -> Network | None:
    """Convert a Network object; None when it has no name."""
    name = str_at(obj, "metadata", "name")
    if not name:
        return None
    ref = map_at(obj, "spec", "parametersRef")
    param_set = str_at(ref, "name") if str_at(ref, "kind") == PARAM_SET_KIND else None
    return Network(name=name, problem="; ".join(_problems(obj)), param_set=param_set or "")


def _problems(obj: object) -> list[str]:
    problems = []
    conditions = as_list((map_at(obj, "status") or {}).get("conditions"))
    if not conditions:
        problems.append("no status.conditions reported")
    else:
        latest: dict[str, dict[str, object]] = {}
        for item in conditions:
            condition = as_map(item)
            if condition is not None and condition.get("type") in _CONDITIONS:
                latest[str(condition["type"])] = dict(condition)  # later duplicates win
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
