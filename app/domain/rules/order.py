"""The order warning: an unbound template whose Networks are exactly the delivered recipe's, in
another order, is allowed with a warning naming the label that would bind it (docs/rules.md,
MappingDivergesFromRecipe)."""

from __future__ import annotations

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClusterView
from app.domain.policy import RECIPE_BOUND_LABEL
from app.domain.recipe import Recipe
from app.domain.rules.binding import recipe_divergence, recipe_expected
from app.domain.verdict import VerdictBuilder
from app.domain.wiring import Wiring


def order_warning(
    wiring: Wiring,
    secondaries: tuple[InterfaceRef, ...],
    view: ClusterView,
    out: VerdictBuilder,
    job: str,
    origin: str,
) -> None:
    """An unbound template whose Networks are exactly the delivered recipe's, in another order:
    allowed, with a warning that names the label that would bind it (docs/rules.md)."""
    recipe = view.recipe()
    if not isinstance(recipe, Recipe) or recipe.mapping is None or recipe.problem is not None:
        return
    recorded = recipe.mapping
    if len(secondaries) != len(recorded) or sorted(e.network or "" for e in secondaries) != sorted(
        e.network or "" for e in recorded
    ):
        return
    divergence = recipe_divergence(wiring, secondaries, recipe_expected(recorded, recipe.ref))
    if divergence is None:
        return
    out.recipe = recipe.ref
    assert wiring.interfaces is not None  # noqa: S101 - secondaries come from a wired template
    inherited = f"inherited unchanged from {origin}: " if wiring.interfaces.inherited else ""
    # Led by its code, before the job's name: a warning cut to 120 characters still says it.
    out.note(
        f"[{divergence.code}] {job}{inherited}not recipe-bound (label {RECIPE_BOUND_LABEL}=true "
        f"binds it): {divergence.message}"
    )
