"""Binding: the mapping a bound object is held to (the recipe's, or its profile's fixed list),
divergence from it, and an unwired bound template.

Recipe -> object leg (AICR gkenet ``VerifyMappingMatchesRecipe``): the secondary entries must
equal the recorded list, ordered and element-wise; ethN is the Nth GPU NIC. Profiles with a fixed
list (docs/rules.md, hardware profiles) are held to it the same way, with their own code.
"""

from __future__ import annotations

from typing import Final

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterView, Unverifiable
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.profiles import Profile, binding_of
from app.domain.recipe import RecipeMissing
from app.domain.rules import cannot_decide
from app.domain.template import PodTemplateMissing
from app.domain.value_type import value_type
from app.domain.verdict import Code, VerdictBuilder, Violation
from app.domain.wiring import Wiring


@value_type
class Expected:
    """The mapping a bound object is held to, and who records it (for the message)."""

    mapping: tuple[InterfaceRef, ...]
    code: Code
    recorder: str
    """``recipe`` or ``profile``."""
    ref: str
    """``ns/name@resourceVersion`` of the recipe, or the profile's name."""


# Read per review, so by module names (an enum member costs more on 3.11: docs/request-cost.md).
_DIVERGES_FROM_RECIPE: Final = Code.MAPPING_DIVERGES_FROM_RECIPE


def recipe_expected(mapping: tuple[InterfaceRef, ...], recipe_ref: str) -> Expected:
    return Expected(mapping, _DIVERGES_FROM_RECIPE, "recipe", recipe_ref)


def recipe_divergence(
    wiring: Wiring, secondaries: tuple[InterfaceRef, ...], expected: Expected
) -> Violation | None:
    """A violation of ``expected.code`` naming the first differing position, or None."""
    recorded, recorder = expected.mapping, expected.recorder
    if secondaries == recorded:
        return None
    position = _first_difference(secondaries, recorded)
    slot = f"eth{position + 1}"
    if position >= len(secondaries):
        detail = (
            f"the object maps {len(secondaries)} secondary interfaces but the {recorder} records "
            f"{len(recorded)}; at position {slot} the {recorder} records "
            f"{recorded[position].pair()}"
        )
    elif position >= len(recorded):
        detail = (
            f"the object maps {len(secondaries)} secondary interfaces but the {recorder} records "
            f"{len(recorded)}; position {slot} maps {secondaries[position].pair()}, "
            f"which the {recorder} does not record"
        )
    else:
        detail = (
            f"at position {slot} the object maps {secondaries[position].pair()} "
            f"but the {recorder} records {recorded[position].pair()}"
        )
        if _same_entries(secondaries[position:], recorded[position:]):
            detail += "; the same pairs appear in a different order (order is part of the contract)"
    # Past the end of the object's list, point at the annotation itself.
    field = (
        wiring.entry_path(position + 1) if position < len(secondaries) else wiring.interfaces_path()
    )
    return Violation(
        code=expected.code, field=field, message=f"{detail} ({recorder} {expected.ref})"
    )


def _first_difference(mine: tuple[InterfaceRef, ...], theirs: tuple[InterfaceRef, ...]) -> int:
    """The first position where the lists differ (the shorter one's length when one is the
    other's start). Equal entries are mostly one object (``interface_ref``): identity first."""
    position = 0
    for entry, other in zip(mine, theirs, strict=False):
        if entry is not other and entry != other:
            return position
        position += 1
    return position


def _same_entries(mine: tuple[InterfaceRef, ...], theirs: tuple[InterfaceRef, ...]) -> bool:
    """Whether both lists hold the same entries, each as often, in any order. Equal entries
    are mostly one object: the same objects answer it; equal ones that are not (an entry
    interned again after it was let go) are counted."""
    if len(mine) != len(theirs):
        return False
    if sorted(map(id, mine)) == sorted(map(id, theirs)):
        return True
    return _multiset(mine) == _multiset(theirs)


def _multiset(entries: tuple[InterfaceRef, ...]) -> dict[tuple[str, str | None, str | None], int]:
    """How often each entry occurs, keyed by the fields InterfaceRef equality is defined on.

    Equal to comparing ``collections.Counter(entries)``, several times cheaper.
    """
    counts: dict[tuple[str, str | None, str | None], int] = {}
    for entry in entries:
        key = (entry.interface_name, entry.network, entry.interface)
        counts[key] = counts.get(key, 0) + 1
    return counts


def recipe_candidate(kind: Kind, runtime: JsonMap, policy: Policy) -> bool:
    """Bound to a profile whose mapping the recipe records (by name, CTRs only, or label);
    binding also needs a delivering recipe."""
    profile = binding_of(kind, runtime, policy).profile
    return profile is not None and profile.from_recipe


def expected_mapping(
    profile: Profile, wiring: Wiring, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> Expected | None:
    """What a template bound to ``profile`` is held to, or None (reporting why it cannot be
    had, or because the recipe delivers nothing: the profile then binds nothing)."""
    if profile.mapping is not None:
        return Expected(
            profile.mapping, Code.MAPPING_DIVERGES_FROM_PROFILE, "profile", profile.name
        )
    recorded = recorded_mapping(wiring, view, policy, out)
    return None if recorded is None else recipe_expected(recorded, out.recipe)


def recorded_mapping(
    wiring: Wiring, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> tuple[InterfaceRef, ...] | None:
    """The mapping this candidate is bound to, or None (reporting why it cannot be had)."""
    recipe = view.recipe()
    field = wiring.interfaces_path()
    if isinstance(recipe, Unverifiable):
        cannot_decide(out, policy, field, f"the recipe ConfigMap cannot be read: {recipe.reason}")
        return None
    out.recipe = recipe.ref
    if isinstance(recipe, RecipeMissing):
        out.judge(
            Violation(
                code=Code.RECIPE_UNAVAILABLE,
                field=field,
                message=f"recipe-bound, but the recipe ConfigMap {recipe.ref} does not exist, "
                "so the mapping cannot be checked against it",
            ),
            enforce=policy.recipe_required,
        )
        return None
    if recipe.problem is not None:
        out.deny(
            Violation(
                code=Code.RECIPE_INVALID,
                field=field,
                message=f"recipe-bound, but the recipe ConfigMap {recipe.ref} is invalid: "
                f"{recipe.problem}",
            )
        )
    return recipe.mapping


def unwired(
    job: str, wiring: Wiring, missing: PodTemplateMissing | None, expected: Expected
) -> Violation:
    """A bound template without the interfaces annotation, or without a pod template."""
    bound = "recipe-bound" if expected.recorder == "recipe" else f"bound to profile {expected.ref}"
    if missing is not None:
        return Violation(
            code=Code.NODE_JOB_MISSING,
            field=str(missing.path),
            message=f"{bound}, but {missing.reason}, so its pods cannot be wired",
        )
    return Violation(
        code=Code.INTERFACES_ANNOTATION_MISSING,
        field=wiring.interfaces_path(),
        message=f"{bound}, but the {job} pod template has no "
        "networking.gke.io/interfaces annotation; its pods would get only eth0",
    )
