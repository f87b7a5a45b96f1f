"""Recipe -> object leg: the secondary entries must equal the recipe's list, ordered, element-wise.

AICR gkenet ``VerifyMappingMatchesRecipe``: order is part of the contract, ethN is the Nth GPU NIC.
"""

from __future__ import annotations

from app.domain.annotation import InterfaceRef
from app.domain.violations import Code, Violation
from app.domain.wiring import Wiring


def compare_with_recipe(
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
