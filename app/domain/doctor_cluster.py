"""``nicguard doctor``'s checks of what the wiring depends on: the recipe and its Networks, who
holds the break-glass group, and what the audit reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from app.domain.cluster import Networks
from app.domain.doctor import Line, Mark
from app.domain.fields import JsonMap, as_list, as_map, str_at
from app.domain.recipe import Recipe, RecipeMissing

BREAK_GLASS_GROUP: Final = "nicguard:break-glass"
# Subjects that stand for everyone (or every workload): holding break-glass through them is
# holding it by default.
BROAD: Final = frozenset(
    {"system:authenticated", "system:unauthenticated", "system:serviceaccounts", "*"}
)
_SHOWN: Final = 5


def _listed(names: Sequence[str]) -> str:
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def recipe_lines(recipe: Recipe | RecipeMissing, networks: Networks) -> list[Line]:
    """The recipe readable and delivering, then every Network it names present and usable."""
    check = "recipe"
    if isinstance(recipe, RecipeMissing):
        fix = f"apply the recipe AICR wrote as ConfigMap {recipe.ref} (docs/recipe.md)"
        return [Line(Mark.FAIL, check, f"ConfigMap {recipe.ref} not found", fix)]
    if recipe.problem is not None:
        fix = "correct the ConfigMap as docs/recipe.md describes"
        return [Line(Mark.FAIL, check, f"{recipe.ref} is invalid: {recipe.problem}", fix)]
    if recipe.mapping is None:
        found = f"{recipe.ref} delivers no mapping: no runtime is recipe-bound"
        return [Line(Mark.WARN, check, found, "docs/recipe.md says what delivers")]
    lines = [Line(Mark.OK, check, f"{recipe.ref} delivers {len(recipe.mapping)} interfaces")]
    pairs = [(ref.interface_name, ref.network or "") for ref in recipe.mapping]
    check = "recipe Networks"
    if not networks.served:
        found = "networks.networking.gke.io is not served"
        return [*lines, Line(Mark.FAIL, check, found, "enable GKE multi-networking")]
    missing = [f"{network} ({eth})" for eth, network in pairs if network not in networks.by_name]
    unusable = [
        f"{network} ({eth}): {networks.problem(present)}"
        for eth, network in pairs
        if (present := networks.by_name.get(network)) is not None and not networks.usable(present)
    ]
    if missing:
        fix = "create them (or restore them from the cluster's setup) before any job runs"
        lines.append(Line(Mark.FAIL, check, f"not found: {_listed(missing)}", fix))
    if unusable:
        fix = "kubectl describe network NAME; GKE's multi-networking docs say how to repair it"
        lines.append(Line(Mark.FAIL, check, f"not ready: {'; '.join(unusable)}", fix))
    if not missing and not unusable:
        lines.append(Line(Mark.OK, check, f"all {len(pairs)} present and ready"))
    return lines


@dataclass(frozen=True, slots=True)
class Holder:
    """A subject of a (Cluster)RoleBinding: ``kind`` User, Group or ServiceAccount, the binding it
    is in (``ClusterRoleBinding x`` or ``RoleBinding ns/x``), and whether the role bound lets it
    impersonate the break-glass group (else the binding names the group itself)."""

    kind: str
    name: str
    binding: str
    impersonates: bool

    @property
    def shown(self) -> str:
        return f"{self.kind} {self.name} ({self.binding})"


def break_glass_line(holders: Sequence[Holder]) -> Line:
    """Who holds ``BREAK_GLASS_GROUP``: the bindings that grant it rights, and who may
    impersonate it; ! when everyone (a broad subject) does."""
    check = f"break-glass group {BREAK_GLASS_GROUP}"
    if not holders:
        found = "no binding names it and no role lets anyone impersonate it"
        return Line(Mark.OK, check, f"{found} (system:masters always may)")
    parts = []
    granted = [h.binding for h in holders if not h.impersonates]
    if granted:
        parts.append(f"rights through {_listed(sorted(set(granted)))}")
    impersonators = [h.shown for h in holders if h.impersonates]
    if impersonators:
        parts.append(f"may be impersonated by {_listed(sorted(impersonators))}")
    found = "; ".join(parts)
    broad = sorted({h.shown for h in holders if h.impersonates and h.name in BROAD})
    if broad:
        fix = f"bind impersonation of the group to on-call engineers only, not {_listed(broad)}"
        return Line(Mark.WARN, check, found, fix)
    return Line(Mark.OK, check, found)


@dataclass(frozen=True, slots=True)
class Audited:
    """The audit's count of judged objects and the names of those that fail."""

    what: str
    total: int
    failing: tuple[str, ...]


def audit_line(audited: Audited) -> Line:
    check = f"audit: {audited.what}"
    if not audited.failing:
        return Line(Mark.OK, check, f"{audited.total} judged, none fails")
    found = f"{len(audited.failing)} of {audited.total} fail: {_listed(audited.failing)}"
    return Line(Mark.FAIL, check, found, "nicguard audit --include-workloads says why each fails")


RoleKey = tuple[str, str, str]
"""``(kind, namespace, name)`` of a ClusterRole (namespace "") or Role."""


def break_glass_holders(
    cluster_bindings: Sequence[JsonMap],
    bindings: Sequence[JsonMap],
    roles: Mapping[RoleKey, JsonMap],
) -> list[Holder]:
    """The subjects of the ClusterRoleBindings and RoleBindings that name the group, or are bound
    to a role whose rules let them impersonate it. Only rules that name ``groups`` count: every
    role with ``*`` (cluster-admin) may impersonate anyone, and saying so tells nothing."""
    holders = []
    for kind, items in (("ClusterRoleBinding", cluster_bindings), ("RoleBinding", bindings)):
        for binding in items:
            namespace = str_at(binding, "metadata", "namespace") or ""
            name = str_at(binding, "metadata", "name") or ""
            where = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
            role_kind = str_at(binding, "roleRef", "kind") or ""
            role_namespace = namespace if role_kind == "Role" else ""
            role = roles.get((role_kind, role_namespace, str_at(binding, "roleRef", "name") or ""))
            impersonates = role is not None and _impersonates(role)
            for raw in as_list(binding.get("subjects")) or ():
                subject = as_map(raw) or {}
                subject_kind, subject_name = str_at(subject, "kind"), str_at(subject, "name")
                if not subject_kind or not subject_name:
                    continue
                if subject_kind == "Group" and subject_name == BREAK_GLASS_GROUP:
                    holders.append(Holder(subject_kind, subject_name, where, impersonates=False))
                elif impersonates:
                    holders.append(Holder(subject_kind, subject_name, where, impersonates=True))
    return holders


def _impersonates(role: JsonMap) -> bool:
    for raw in as_list(role.get("rules")) or ():
        rule = as_map(raw) or {}
        verbs, groups, resources, names = (
            {str(v) for v in as_list(rule.get(key)) or ()}
            for key in ("verbs", "apiGroups", "resources", "resourceNames")
        )
        if (
            verbs & {"impersonate", "*"}
            and groups & {"", "*"}
            and "groups" in resources
            and (not names or BREAK_GLASS_GROUP in names)
        ):
            return True
    return False
