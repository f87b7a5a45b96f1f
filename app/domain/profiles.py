"""Hardware profiles (docs/rules.md): which runtimes a GPU machine's wiring binds and what they are
held to: a mapping (the recipe's, or a fixed list) with the GKENetworkParamSet ``deviceMode`` each
Network needs, or, for NICs wired by DRA (docs/dra.md), a claim of all the node's RDMA NICs. Data,
not branches: another profile is one more entry in ``PROFILES``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final, TypeGuard

from app.domain.annotation import InterfaceRef, interface_ref
from app.domain.fields import JsonMap
from app.domain.kinds import CLUSTER_TRAINING_RUNTIME, Kind
from app.domain.policy import PROFILE_LABEL, RECIPE_BOUND_LABEL, Policy
from app.domain.verdict import shown


@dataclass(frozen=True, slots=True)
class Profile:
    """One machine type's wiring.

    ``mapping`` None means the recipe records it (§4), and the profile binds only while the
    recipe delivers one, unless ``rdma_nics`` says the NICs are claimed by DRA instead.
    ``device_modes`` are (Network name pattern, required ``deviceMode``), the first matching
    pattern deciding.
    """

    name: str
    runtimes: Callable[[Policy], frozenset[str]]
    """The ClusterTrainingRuntime names the profile binds, from the settings."""
    mapping: tuple[InterfaceRef, ...] | None
    device_modes: tuple[tuple[str, str], ...]
    setting: str = ""
    """The setting ``runtimes`` reads."""
    rdma_nics: int = 0
    """A DRA profile's RDMA NICs per node, all of which a wired template must claim; 0: the
    profile expects a mapping."""
    machine: str = ""

    @property
    def from_recipe(self) -> bool:
        return self.mapping is None and not self.rdma_nics

    @property
    def by_claim(self) -> bool:
        """The NICs are wired by a DRA claim, not by the interfaces annotation."""
        return self.rdma_nics > 0

    def required_mode(self, network: str) -> str | None:
        """The ``deviceMode`` the profile needs behind ``network``, or None for no need."""
        return next(
            (mode for pattern, mode in self.device_modes if fnmatchcase(network, pattern)), None
        )

    def describe(self) -> str:
        return f"profile {self.name}"


def _fixed(*pairs: tuple[str, str]) -> tuple[InterfaceRef, ...]:
    return tuple(interface_ref(interface, network) for interface, network in pairs)


A3_MEGA_TCPXO: Final = Profile(
    name="a3-mega-tcpxo",
    runtimes=lambda policy: policy.recipe_runtimes,
    setting="recipe-runtimes",
    mapping=None,
    device_modes=(("*", "NetDevice"),),
)
# AICR's torch-distributed-rdma (tests/fixtures/upstream/): gvnic-1 and rdma-0 through rdma-3 are
# fixed object names on every GB200/GKE cluster; its GB200 health check requires these modes.
A4X_GB200_RDMA: Final = Profile(
    name="a4x-gb200-rdma",
    runtimes=lambda policy: policy.rdma_runtimes,
    setting="rdma-runtimes",
    mapping=_fixed(
        ("eth1", "gvnic-1"),
        ("eth2", "rdma-0"),
        ("eth3", "rdma-1"),
        ("eth4", "rdma-2"),
        ("eth5", "rdma-3"),
    ),
    device_modes=(("gvnic-*", "NetDevice"), ("rdma-*", "RDMA")),
)


def _dranet(
    name: str, machine: str, nics: int, runtimes: Callable[[Policy], frozenset[str]]
) -> Profile:
    return Profile(
        name=name,
        runtimes=runtimes,
        setting=f"{name}-runtimes",
        mapping=None,
        device_modes=(),
        rdma_nics=nics,
        machine=machine,
    )


# GKE's managed DRANET machines (docs/dra.md): the RDMA NICs a node publishes as mrdma.google.com.
DRANET_PROFILES: Final = (
    _dranet("a3-ultra-dranet", "a3-ultragpu-8g", 8, lambda p: p.a3_ultra_dranet_runtimes),
    _dranet("a4-dranet", "a4-highgpu-8g", 8, lambda p: p.a4_dranet_runtimes),
    _dranet("a4x-dranet", "a4x-highgpu-4g", 4, lambda p: p.a4x_dranet_runtimes),
    _dranet("a4x-max-dranet", "a4x-maxgpu-4g-metal", 8, lambda p: p.a4x_max_dranet_runtimes),
)
PROFILES: Final = (A3_MEGA_TCPXO, A4X_GB200_RDMA, *DRANET_PROFILES)


@dataclass(frozen=True, slots=True)
class Binding:
    """The profile a runtime is bound to (None: unbound), and a warning when its label names
    no known profile."""

    profile: Profile | None = None
    warning: str = ""


UNBOUND: Final = Binding()


def binding_of(kind: Kind, runtime: JsonMap, policy: Policy) -> Binding:
    """By name in a profile's setting (ClusterTrainingRuntimes only), which outranks every
    label; else by label (``nicguard.dev/profile``, or ``nicguard.dev/recipe-bound: "true"``
    for a3-mega-tcpxo). Labels add a binding, never remove one the settings made."""
    # On every request: plain lookups (a key that is not a string matches no label nor name, so
    # the maps need no narrowing), and Binding values made once (_BOUND).
    metadata = runtime.get("metadata")
    if not _is_map(metadata):
        return UNBOUND
    labels = metadata.get("labels")
    labels = labels if _is_map(labels) else None
    name = metadata.get("name")
    if kind is CLUSTER_TRAINING_RUNTIME and isinstance(name, str):
        for profile in PROFILES:
            if name in profile.runtimes(policy):
                return _by_name(profile, name, labels)
    if not labels:
        return UNBOUND
    named = labels.get(PROFILE_LABEL)
    if isinstance(named, str):
        found = _BOUND.get(named)
        if found is not None:
            return found
        if labels.get(RECIPE_BOUND_LABEL) == "true":
            return Binding(A3_MEGA_TCPXO, _unknown(named).warning)
        return _unknown(named)
    if labels.get(RECIPE_BOUND_LABEL) == "true":
        return _BOUND[A3_MEGA_TCPXO.name]
    return UNBOUND


def _by_name(profile: Profile, name: str, labels: Mapping[object, object] | None) -> Binding:
    """A name binding, with a warning for each label that says otherwise (ignored)."""
    if not labels:
        return _BOUND[profile.name]
    ignored = []
    named = labels.get(PROFILE_LABEL)
    if named is not None and named != profile.name:
        ignored.append(f"{PROFILE_LABEL}: {_quoted(named)}")
    recipe_bound = labels.get(RECIPE_BOUND_LABEL)
    if recipe_bound is not None and (recipe_bound != "true" or profile is not A3_MEGA_TCPXO):
        ignored.append(f"{RECIPE_BOUND_LABEL}: {_quoted(recipe_bound)}")
    if not ignored:
        return _BOUND[profile.name]
    return Binding(
        profile,
        f"label {' and '.join(ignored)} ignored: ClusterTrainingRuntime {shown(name)} is bound "
        f"to {profile.describe()} by name (setting {profile.setting}), which labels never undo",
    )


def _quoted(value: object) -> str:
    return f'"{shown(value)}"' if isinstance(value, str) else "(not a string)"


def _is_map(value: object) -> TypeGuard[Mapping[object, object]]:
    # dict first: decoded JSON is plain dicts, and the ABC check is several times slower.
    return isinstance(value, dict) or isinstance(value, Mapping)  # noqa: SIM101


_BOUND: Final = {profile.name: Binding(profile) for profile in PROFILES}


def _unknown(named: str) -> Binding:
    known = ", ".join(p.name for p in PROFILES)
    return Binding(
        warning=f"label {PROFILE_LABEL}: {shown(named)} names no known profile "
        f"(known: {known}); the wiring is checked without a profile"
    )
