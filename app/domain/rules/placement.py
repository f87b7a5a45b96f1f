"""Placement (docs/rules.md, NetworkMisplaced): the delivered recipe gives each of its Networks an
interface; an unbound wired template may use any of them, each on the interface it is given.
Pairs are placed, not the order of the list: GKE attaches each entry by its name."""

from __future__ import annotations

from collections.abc import Mapping

from app.domain.annotation import InterfaceRef
from app.domain.cluster import Unverifiable
from app.domain.policy import Placement, Policy
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.rules import LISTED_MAX, cannot_decide, counted
from app.domain.rules.structure import is_secondary_network
from app.domain.value_type import value_type
from app.domain.verdict import Code, VerdictBuilder, Violation, shown
from app.domain.wiring import Wiring


@value_type
class Placing:
    """Where the delivered recipe ``ref`` puts each of its Networks: network -> interface."""

    ref: str
    interfaces: Mapping[str, str]


def placing_of(
    recipe: Recipe | RecipeMissing | Unverifiable, policy: Policy
) -> Placing | Unverifiable | None:
    """What places Networks under ``policy``: only a valid, delivered recipe does; why that cannot
    be known; or None (placement off, no recipe, or one that places nothing)."""
    if policy.placement is Placement.OFF or isinstance(recipe, RecipeMissing):
        return None
    if isinstance(recipe, Unverifiable):
        return recipe
    if recipe.mapping is None or recipe.problem is not None:
        return None
    return Placing(
        recipe.ref,
        {e.network: e.interface_name for e in recipe.mapping if e.network is not None},
    )


def placed_networks(
    recipe: Recipe | RecipeMissing | Unverifiable | None, policy: Policy
) -> frozenset[str]:
    """The Networks ``recipe`` places under ``policy`` (none when it cannot be read)."""
    placing = None if recipe is None else placing_of(recipe, policy)
    return frozenset(placing.interfaces) if isinstance(placing, Placing) else frozenset()


Placeable = tuple[Wiring, tuple[InterfaceRef, ...], VerdictBuilder]
"""An unbound template's wiring, its entries, and the builder its findings go to."""


def place(
    placeable: list[Placeable],
    recipe: Recipe | RecipeMissing | Unverifiable,
    policy: Policy,
    out: VerdictBuilder,
    *,
    said: bool,
) -> None:
    """Placement of every unbound template of one object. A recipe that cannot be read is
    ClusterStateUnavailable once for the object (unless its binding ``said`` so already), and
    only when a template names a Network."""
    placing = placing_of(recipe, policy)
    if placing is None:
        return
    if isinstance(placing, Unverifiable):
        named = [w for w, entries, _ in placeable if any(map(is_secondary_network, entries))]
        if named and not said:
            reason = f"the recipe ConfigMap cannot be read: {placing.reason}"
            cannot_decide(out, policy, named[0].interfaces_path(), reason)
        return
    for wiring, entries, scoped in placeable:
        judge_placement(wiring, entries, placing, policy, scoped)


def judge_placement(
    wiring: Wiring,
    entries: tuple[InterfaceRef, ...],
    placing: Placing,
    policy: Policy,
    out: VerdictBuilder,
) -> None:
    """One NetworkMisplaced listing every misplaced pair (the first few, counting the rest),
    denied or (``placement=warn``) a warning led by its code."""
    where = placing.interfaces
    # (entry, its Network, the interface the recipe gives that Network)
    misplaced = [
        (entry, entry.network, where[entry.network])
        for entry in entries
        if entry.network is not None
        and entry.network in where
        and where[entry.network] != entry.interface_name
    ]
    if not misplaced:
        return
    out.recipe = placing.ref
    out.judge(
        Violation(
            code=Code.NETWORK_MISPLACED,
            field=wiring.interfaces_path(),
            message="Networks on another interface than the recipe gives them: "
            f"{_listed(misplaced)} (recipe {placing.ref})",
        ),
        enforce=policy.placement is Placement.DENY,
    )


def _listed(misplaced: list[tuple[InterfaceRef, str, str]]) -> str:
    """The first few misplaced pairs, each with where the recipe places its Network."""
    pairs = [
        f"{entry.pair()} (the recipe places {shown(network)} on {interface})"
        for entry, network, interface in misplaced[:LISTED_MAX]
    ]
    return counted(pairs, total=len(misplaced))
