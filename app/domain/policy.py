"""The settings that change verdicts (docs/configuration.md), as one immutable value."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

DEFAULT_RECIPE_RUNTIMES: Final = frozenset({"torch-distributed-tcpxo"})
DEFAULT_RDMA_RUNTIMES: Final = frozenset({"torch-distributed-rdma"})
RECIPE_BOUND_LABEL: Final = "nicguard.dev/recipe-bound"
PROFILE_LABEL: Final = "nicguard.dev/profile"


class NotReady(StrEnum):
    """What a Network that exists but is not usable does to a verdict."""

    DENY = "deny"
    WARN = "warn"


class OnUnverifiable(StrEnum):
    """What nicguard does when it cannot decide (ClusterStateUnavailable)."""

    DENY = "deny"
    ALLOW = "allow"


class Protect(StrEnum):
    """What a write that breaks what the wiring depends on gets (NetworkInUse and its kin)."""

    DENY = "deny"
    WARN = "warn"
    OFF = "off"


class Placement(StrEnum):
    """What an unbound template that puts a recipe's Network on another interface gets
    (NetworkMisplaced)."""

    DENY = "deny"
    WARN = "warn"
    OFF = "off"


class Enforcement(StrEnum):
    """What a denial becomes: ``warn`` allows it with its lines as warnings (the rollout mode,
    docs/rollout.md)."""

    DENY = "deny"
    WARN = "warn"


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Verdict-shaping settings; defaults are documented in docs/configuration.md."""

    recipe_runtimes: frozenset[str] = field(default=DEFAULT_RECIPE_RUNTIMES)
    rdma_runtimes: frozenset[str] = field(default=DEFAULT_RDMA_RUNTIMES)
    a3_ultra_dranet_runtimes: frozenset[str] = frozenset()
    a4_dranet_runtimes: frozenset[str] = frozenset()
    a4x_dranet_runtimes: frozenset[str] = frozenset()
    a4x_max_dranet_runtimes: frozenset[str] = frozenset()
    not_ready: NotReady = NotReady.DENY
    recipe_required: bool = True
    on_unverifiable: OnUnverifiable = OnUnverifiable.DENY
    protect: Protect = Protect.DENY
    placement: Placement = Placement.DENY
    enforcement: Enforcement = Enforcement.DENY
