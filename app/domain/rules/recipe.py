"""Recipe binding: which objects the recipe binds, the mapping it holds them to, and divergence.

Recipe -> object leg (AICR gkenet ``VerifyMappingMatchesRecipe``): the secondary entries must
equal the recipe's list, ordered and element-wise; ethN is the Nth GPU NIC.
"""

from __future__ import annotations

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterView, Unverifiable
from app.domain.fields import JsonMap, map_at, str_at
from app.domain.kinds import Kind
from app.domain.policy import RECIPE_BOUND_LABEL, Policy
from app.domain.recipe import RecipeMissing
from app.domain.rules import cannot_decide
from app.domain.template import PodTemplateMissing
from app.domain.verdict import Code, VerdictBuilder, Violation
from app.domain.wiring import Wiring


def recipe_divergence(
    wiring: Wiring,
    secondaries: tuple[InterfaceRef, ...],
    recorded: tuple[InterfaceRef, ...],
    *,
    recipe_ref: str,
) -> Violation | None:
    """A MappingDivergesFromRecipe violation naming the first differing position, or None."""
    if secondaries == recorded:
        return None
    pairs = zip(secondaries, recorded, strict=False)
    shorter = min(len(secondaries), len(recorded))
    position = next((i for i, (mine, theirs) in enumerate(pairs) if mine != theirs), shorter)
    slot = f"eth{position + 1}"
    if position >= len(secondaries):
        detail = (
            f"the object maps {len(secondaries)} secondary interfaces but the recipe records "
            f"{len(recorded)}; at position {slot} the recipe records {recorded[position].pair()}"
        )
    elif position >= len(recorded):
        detail = (
            f"the object maps {len(secondaries)} secondary interfaces but the recipe records "
            f"{len(recorded)}; position {slot} maps {secondaries[position].pair()}, "
            "which the recipe does not record"
        )
    else:
        detail = (
            f"at position {slot} the object maps {secondaries[position].pair()} "
            f"but the recipe records {recorded[position].pair()}"
        )
        if _multiset(secondaries) == _multiset(recorded):
            detail += "; the same pairs appear in a different order (order is part of the contract)"
    # Past the end of the object's list, point at the annotation itself.
    field = (
        wiring.entry_path(position + 1) if position < len(secondaries) else wiring.interfaces_path()
    )
    return Violation(
        code=Code.MAPPING_DIVERGES_FROM_RECIPE,
        field=field,
        message=f"{detail} (recipe {recipe_ref})",
    )


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
    """Recipe-bound by name (CTRs only) or label; binding also needs a delivering recipe."""
    labelled = str_at(map_at(runtime, "metadata", "labels"), RECIPE_BOUND_LABEL) == "true"
    named = str_at(runtime, "metadata", "name") in policy.recipe_runtimes
    return labelled or (kind is Kind.CLUSTER_TRAINING_RUNTIME and named)


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


def unwired(job: str, wiring: Wiring, missing: PodTemplateMissing | None) -> Violation:
    """A recipe-bound template without the interfaces annotation, or without a pod template."""
    if missing is not None:
        return Violation(
            code=Code.NODE_JOB_MISSING,
            field=str(missing.path),
            message=f"recipe-bound, but {missing.reason}, so its pods cannot be wired",
        )
    return Violation(
        code=Code.INTERFACES_ANNOTATION_MISSING,
        field=wiring.interfaces_path(),
        message=f"recipe-bound, but the {job} pod template has no "
        "networking.gke.io/interfaces annotation; its pods would get only eth0",
    )
