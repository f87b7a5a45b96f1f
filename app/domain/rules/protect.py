"""Protecting what the wiring depends on: deleting a Network or its GKENetworkParamSet, and
writing or deleting the recipe (docs/rules.md). Judged from the view's snapshot, no API call.

A Network stays while the recipe or a cached runtime names it; its param set while such a
Network references it; the recipe while it binds a cached runtime. A valid recipe write is
allowed with warnings that give its blast radius.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from app.domain.annotation import (
    INTERFACES_ANNOTATION,
    AnnotationSyntaxError,
    InterfaceRef,
    parse_interfaces,
)
from app.domain.cluster import ClusterView, Networks, RuntimeKey, Unverifiable, runtime_name
from app.domain.fields import JsonMap
from app.domain.policy import Policy, Protect
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.rules import cannot_decide
from app.domain.rules.binding import recipe_candidate
from app.domain.rules.structure import is_secondary_network
from app.domain.template import interfaces_annotations
from app.domain.verdict import Code, VerdictBuilder, Violation, shown

LISTED_MAX: Final = 10
"""Dependents a message names; the rest are counted."""
_BLAST_NAMED: Final = 3
_FIELD: Final = "metadata.name"
_OWNERS_FIELD: Final = "metadata.ownerReferences"


@dataclass(frozen=True, slots=True)
class Dependent:
    """An object that names a Network, and the interfaces it maps to it."""

    what: str
    interfaces: tuple[str, ...]

    def describe(self) -> str:
        if not self.interfaces:
            return self.what
        return f"{self.what} ({', '.join(self.interfaces)})"


def network_deletion(name: str, view: ClusterView, policy: Policy, out: VerdictBuilder) -> None:
    """NetworkInUse when the delivered recipe or a cached runtime names the Network."""
    dependents = _dependents_of(name, view, policy, out)
    _refuse_in_use(
        out,
        policy,
        Code.NETWORK_IN_USE,
        f"Network {shown(name)} is in use by",
        dependents or [],
        "deleting it would leave their pods without these interfaces",
    )


def param_set_deletion(name: str, view: ClusterView, policy: Policy, out: VerdictBuilder) -> None:
    """ParamSetInUse when a Network in use references the GKENetworkParamSet."""
    networks = view.networks()
    if isinstance(networks, Unverifiable):
        cannot_decide(out, policy, _FIELD, f"Networks cannot be listed: {networks.reason}")
        return
    backed = sorted(n.name for n in networks.by_name.values() if n.param_set == name)
    in_use: list[Dependent] = []
    for network in backed:
        dependents = _dependents_of(network, view, policy, out)
        if dependents is None:
            return
        if dependents:
            users = _listing([d.describe() for d in dependents], 2)
            in_use.append(Dependent(f"Network {shown(network)}, used by {users}", ()))
    _refuse_in_use(
        out,
        policy,
        Code.PARAM_SET_IN_USE,
        f"GKENetworkParamSet {shown(name)} backs",
        in_use,
        "deleting it would make these Networks unusable",
    )


def recipe_deletion(view: ClusterView, policy: Policy, out: VerdictBuilder) -> None:
    """RecipeInUse when the recipe delivers a mapping and binds a cached runtime."""
    known = _recipe_and_runtimes(view, policy, out)
    if known is None:
        return
    recipe, runtimes = known
    if not isinstance(recipe, Recipe) or recipe.mapping is None:
        return
    _refuse_in_use(
        out,
        policy,
        Code.RECIPE_IN_USE,
        f"the recipe {_recipe_name(recipe)} binds",
        [Dependent(runtime_name(key), ()) for key, _ in _bound(runtimes, policy)],
        "without it they could not be checked (RecipeUnavailable)",
    )


Owners = tuple[JsonMap, ...]
"""``metadata.ownerReferences`` entries of a ConfigMap."""


def recipe_write(
    written: Recipe,
    view: ClusterView,
    policy: Policy,
    out: VerdictBuilder,
    *,
    old: Recipe | None = None,
    owners: tuple[Owners, Owners] = ((), ()),
) -> None:
    """RecipeInvalid for an invalid recipe or an owner added to it; RecipeInUse for an update
    that switches a delivering recipe off while runtimes are bound to it; a valid one is allowed
    with its blast radius. ``old`` is the recipe an UPDATE replaces, ``owners`` the new and old
    owner references."""
    _owned(written, owners, policy, out)
    if written.problem is not None:
        _refuse(
            out,
            policy,
            Violation(
                code=Code.RECIPE_INVALID,
                field="data",
                message=f"the recipe ConfigMap {_recipe_name(written)} is invalid: "
                f"{written.problem}",
            ),
        )
        return
    if written.mapping is None:
        if old is not None and old.mapping is not None:
            _switched_off(written, view, policy, out)
        return
    runtimes = view.runtimes()
    if not isinstance(runtimes, Unverifiable):
        _diverging(written.mapping, runtimes, policy, out)
    networks = view.networks()
    if isinstance(networks, Networks):
        _unusable(written.mapping, networks, out)


def _owned(
    written: Recipe, owners: tuple[Owners, Owners], policy: Policy, out: VerdictBuilder
) -> None:
    """An owner reference hands the recipe's deletion to the garbage collector, which nicguard
    never holds: adding one is RecipeInvalid; the ones it had are named in a warning."""
    new, old = owners
    had = {_owner_identity(owner) for owner in old}
    added = [owner for owner in new if _owner_identity(owner) not in had]
    kept = [owner for owner in new if _owner_identity(owner) in had]
    if kept:
        out.note(
            f"[{Code.RECIPE_INVALID}] the recipe ConfigMap {_recipe_name(written)} has owners "
            f"({_listing([_owner_name(o) for o in kept], _BLAST_NAMED)}): the garbage collector "
            "deletes it with them"
        )
    if added:
        _refuse(
            out,
            policy,
            Violation(
                code=Code.RECIPE_INVALID,
                field=_OWNERS_FIELD,
                message=f"the recipe ConfigMap {_recipe_name(written)} must not get an owner "
                f"({_listing([_owner_name(o) for o in added], _BLAST_NAMED)}): the garbage "
                "collector, which nicguard never holds, would delete the recipe with it",
            ),
        )


def _owner_identity(owner: JsonMap) -> tuple[object, ...]:
    uid = owner.get("uid")
    if isinstance(uid, str) and uid:
        return (uid,)
    return (owner.get("apiVersion"), owner.get("kind"), owner.get("name"))


def _owner_name(owner: JsonMap) -> str:
    kind, name = owner.get("kind"), owner.get("name")
    kind_text = shown(kind) if isinstance(kind, str) else "owner"
    return f"{kind_text} {shown(name) if isinstance(name, str) else '(unnamed)'}"


def _switched_off(written: Recipe, view: ClusterView, policy: Policy, out: VerdictBuilder) -> None:
    """RecipeInUse: the update makes a delivering recipe deliver nothing while runtimes are
    bound to it, which unbinds them all at once (deleting it by other means)."""
    runtimes = view.runtimes()
    if isinstance(runtimes, Unverifiable):
        cannot_decide(out, policy, _FIELD, f"runtimes cannot be read: {runtimes.reason}")
        return
    _refuse_in_use(
        out,
        policy,
        Code.RECIPE_IN_USE,
        f"the recipe {_recipe_name(written)} binds",
        [Dependent(runtime_name(key), ()) for key, _ in _bound(runtimes, policy)],
        "this update makes it deliver no mapping (the kubeflow-trainer component disabled or "
        "without the TCPXO runtime), which would unbind them all",
        field="data",
    )


def _diverging(
    mapping: tuple[InterfaceRef, ...],
    runtimes: Iterable[tuple[RuntimeKey, JsonMap]],
    policy: Policy,
    out: VerdictBuilder,
) -> None:
    diverging = [
        runtime_name(key)
        for key, obj in _bound(runtimes, policy)
        if any(entries[1:] != mapping for entries in _entries(obj))
    ]
    _blast(out, Code.MAPPING_DIVERGES_FROM_RECIPE, "would diverge from this recipe", diverging)


def _unusable(mapping: tuple[InterfaceRef, ...], networks: Networks, out: VerdictBuilder) -> None:
    missing, unusable = [], []
    for entry in mapping:
        found = networks.by_name.get(entry.network or "")
        if found is None:
            missing.append(entry.pair())
        elif not networks.usable(found):
            unusable.append(entry.pair())
    _blast(out, Code.NETWORK_NOT_FOUND, "names a missing Network", missing)
    _blast(out, Code.NETWORK_NOT_READY, "names a Network that is not usable", unusable)


def _blast(out: VerdictBuilder, code: Code, what: str, items: list[str]) -> None:
    """One warning per item, the first few, each short enough for kubectl to show whole."""
    for item in items[:_BLAST_NAMED]:
        out.note(f"[{code}] {what}: {item}")
    if len(items) > _BLAST_NAMED:
        out.note(f"[{code}] ... and {len(items) - _BLAST_NAMED} more")


def _dependents_of(
    name: str, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> list[Dependent] | None:
    """Who names Network ``name``: the delivering recipe, then runtimes; None if unknowable."""
    known = _recipe_and_runtimes(view, policy, out)
    if known is None:
        return None
    recipe, runtimes = known
    found: list[Dependent] = []
    if isinstance(recipe, Recipe) and recipe.mapping is not None:
        named = tuple(e.interface_name for e in recipe.mapping if e.network == name)
        if named:
            found.append(Dependent(f"recipe {_recipe_name(recipe)}", named))
    for key, obj in sorted(runtimes, key=lambda item: item[0]):
        named = tuple(
            dict.fromkeys(
                e.interface_name
                for entries in _entries(obj)
                for e in entries
                # Any entry but the pod network's: an unbound list need not start with eth0.
                if e.network == name and is_secondary_network(e)
            )
        )
        if named:
            found.append(Dependent(runtime_name(key), named))
    return found


def _recipe_and_runtimes(
    view: ClusterView, policy: Policy, out: VerdictBuilder
) -> tuple[Recipe | RecipeMissing, Iterable[tuple[RuntimeKey, JsonMap]]] | None:
    """The recipe and the cached runtimes, or None after saying which cannot be read."""
    recipe, runtimes = view.recipe(), view.runtimes()
    if isinstance(recipe, Unverifiable):
        cannot_decide(out, policy, _FIELD, f"the recipe ConfigMap cannot be read: {recipe.reason}")
        return None
    if isinstance(runtimes, Unverifiable):
        cannot_decide(out, policy, _FIELD, f"runtimes cannot be read: {runtimes.reason}")
        return None
    return recipe, runtimes


def _entries(runtime: JsonMap) -> Iterable[tuple[InterfaceRef, ...]]:
    """The entries of each wired or annotated template whose annotation parses: an evaluator's
    pods lose their interfaces with the Network as the trainer's do."""
    for carried in interfaces_annotations(runtime):
        value = carried[INTERFACES_ANNOTATION]
        if not isinstance(value, str):
            continue
        try:
            yield parse_interfaces(value)
        except AnnotationSyntaxError:
            continue


def _bound(
    runtimes: Iterable[tuple[RuntimeKey, JsonMap]], policy: Policy
) -> list[tuple[RuntimeKey, JsonMap]]:
    return sorted(
        ((key, obj) for key, obj in runtimes if recipe_candidate(key[0], obj, policy)),
        key=lambda item: item[0],
    )


def _refuse_in_use(
    out: VerdictBuilder,
    policy: Policy,
    code: Code,
    lead: str,
    dependents: list[Dependent],
    consequence: str,
    *,
    field: str = _FIELD,
) -> None:
    """One violation naming the first ``LISTED_MAX`` dependents, a cause for each; none without
    dependents."""
    if not dependents:
        return
    _refuse(
        out,
        policy,
        Violation(
            code=code,
            field=field,
            message=f"{lead} {_listing([d.describe() for d in dependents], LISTED_MAX)}; "
            f"{consequence}",
            causes=tuple((field, d.describe()) for d in dependents[:LISTED_MAX]),
        ),
    )


def _refuse(out: VerdictBuilder, policy: Policy, violation: Violation) -> None:
    """Denied under ``protect=deny``, a warning under ``warn`` (``off`` never gets here)."""
    out.judge(violation, enforce=policy.protect is Protect.DENY)


def _listing(items: list[str], most: int) -> str:
    shown_items = ", ".join(items[:most])
    extra = len(items) - most
    return f"{shown_items} and {extra} more" if extra > 0 else shown_items


def _recipe_name(recipe: Recipe) -> str:
    return recipe.ref.partition("@")[0]
