"""Judging a request about what the wiring depends on: a Network's or GKENetworkParamSet's
deletion, a write or deletion of the recipe ConfigMap (the rules: app/domain/rules/protect.py),
the creation of a ResourceClaimTemplate (app/domain/rules/claim_templates.py)."""

from __future__ import annotations

from app.domain.cluster import ClusterView
from app.domain.fields import JsonMap, map_at
from app.domain.kinds import Protected
from app.domain.policy import Policy, Protect
from app.domain.review import Operation, Review
from app.domain.rules.claim_templates import claim_template_creation
from app.domain.rules.protect import (
    network_deletion,
    param_set_deletion,
    recipe_deletion,
    recipe_write,
)
from app.domain.template_conflicts import template_conflicts
from app.domain.verdict import Verdict, VerdictBuilder


def judge_protected(kind: Protected, review: Review, view: ClusterView, policy: Policy) -> Verdict:
    """What the wiring depends on (docs/rules.md: NetworkInUse, ParamSetInUse, RecipeInUse; the
    templates DRA-bound runtimes name: docs/dra.md), for a request in scope."""
    if policy.protect is Protect.OFF:
        return Verdict()
    out = VerdictBuilder()
    if kind is Protected.NETWORK:
        network_deletion(review.name, view, policy, out)
    elif kind is Protected.PARAM_SET:
        param_set_deletion(review.name, view, policy, out)
    elif kind is Protected.CLAIM_TEMPLATE:
        # A CREATE always carries its object.
        claim_template_creation(review.obj or {}, review.namespace, view, policy, out)
        template_conflicts(review.obj or {}, review.namespace, view, policy, out)
    elif review.operation is Operation.DELETE:
        recipe_deletion(view, policy, out)
    elif review.written_recipe is not None:
        recipe_write(
            review.written_recipe,
            view,
            policy,
            out,
            old=review.old_recipe,
            owners=(_owners(review.obj), _owners(review.old_obj)),
        )
    return out.build()


def _owners(obj: JsonMap | None) -> tuple[JsonMap, ...]:
    found = map_at(obj, "metadata")
    items = found.get("ownerReferences") if found is not None else None
    if not isinstance(items, list):
        return ()
    return tuple(item for item in items if isinstance(item, dict))
