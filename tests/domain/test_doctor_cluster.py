"""The recipe and its Networks, the break-glass group's holders and the audit's counts, as
``nicguard doctor`` says them (app.domain.doctor_cluster)."""

from __future__ import annotations

from typing import Any, Final

import pytest

from app.domain.annotation import InterfaceRef
from app.domain.cluster import Networks
from app.domain.doctor import Mark
from app.domain.doctor_cluster import (
    BREAK_GLASS_GROUP,
    Audited,
    Holder,
    RoleKey,
    audit_line,
    break_glass_holders,
    break_glass_line,
    recipe_lines,
)
from app.domain.network import Network, ParamSet
from app.domain.recipe import Recipe, RecipeMissing

MAPPING: Final = (InterfaceRef("eth1", "gpu-nic-0"), InterfaceRef("eth2", "gpu-nic-1"))
DELIVERS: Final = Recipe(ref="ns/recipe@1", mapping=MAPPING)
READY: Final = Networks(
    by_name={n: Network(n, param_set=n) for n in ("gpu-nic-0", "gpu-nic-1")},
    param_sets={n: ParamSet(n) for n in ("gpu-nic-0", "gpu-nic-1")},
)


def test_a_delivering_recipe_with_every_network_ready_is_two_ok_lines() -> None:
    lines = recipe_lines(DELIVERS, READY)
    assert [(line.mark, line.check, line.found) for line in lines] == [
        (Mark.OK, "recipe", "ns/recipe@1 delivers 2 interfaces"),
        (Mark.OK, "recipe Networks", "all 2 present and ready"),
    ]


@pytest.mark.parametrize(
    ("recipe", "mark", "found"),
    [
        pytest.param(RecipeMissing("ns/recipe"), Mark.FAIL, "ConfigMap ns/recipe not found"),
        pytest.param(
            Recipe(ref="ns/recipe@1", problem="bad"), Mark.FAIL, "ns/recipe@1 is invalid: bad"
        ),
        pytest.param(
            Recipe(ref="ns/recipe@1"),
            Mark.WARN,
            "ns/recipe@1 delivers no mapping: no runtime is recipe-bound",
        ),
    ],
)
def test_a_recipe_that_delivers_nothing_is_one_line(
    recipe: Recipe | RecipeMissing, mark: Mark, found: str
) -> None:
    (line,) = recipe_lines(recipe, READY)
    assert (line.mark, line.check, line.found) == (mark, "recipe", found)
    assert line.fix


def test_missing_and_unready_networks_are_named_with_their_interface() -> None:
    networks = Networks(
        by_name={"gpu-nic-1": Network("gpu-nic-1", problem="Ready=False (Down)")},
        param_sets={},
    )
    _, missing, unready = recipe_lines(DELIVERS, networks)
    assert (missing.mark, missing.found) == (Mark.FAIL, "not found: gpu-nic-0 (eth1)")
    assert (unready.mark, unready.found) == (
        Mark.FAIL,
        "not ready: gpu-nic-1 (eth2): Ready=False (Down)",
    )
    assert missing.fix
    assert unready.fix


def test_a_cluster_without_the_network_api_fails_the_recipe_networks() -> None:
    _, line = recipe_lines(DELIVERS, Networks(by_name={}, served=False))
    assert (line.mark, line.found) == (Mark.FAIL, "networks.networking.gke.io is not served")
    assert line.fix


def test_many_missing_networks_are_cut_short() -> None:
    many = Recipe(ref="r", mapping=tuple(InterfaceRef(f"eth{i}", f"n{i}") for i in range(1, 9)))
    _, line = recipe_lines(many, Networks(by_name={}))
    assert line.found.endswith("n5 (eth5) and 3 more")


def binding(
    name: str, role: tuple[str, str], *subjects: tuple[str, str], namespace: str = ""
) -> dict[str, Any]:
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {
        "metadata": metadata,
        "roleRef": {"kind": role[0], "name": role[1]},
        "subjects": [{"kind": k, "name": n} for k, n in subjects] + [{"kind": "User"}],
    }


IMPERSONATE: Final = {
    "rules": [
        "not a rule",
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]},
        {
            "apiGroups": [""],
            "resources": ["groups"],
            "verbs": ["impersonate"],
            "resourceNames": [BREAK_GLASS_GROUP],
        },
    ]
}
OTHER_GROUP: Final = {
    "rules": [
        {
            "apiGroups": ["*"],
            "resources": ["groups"],
            "verbs": ["*"],
            "resourceNames": ["someone-else"],
        }
    ]
}
ADMIN: Final = {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
ROLES: Final[dict[RoleKey, dict[str, Any]]] = {
    ("ClusterRole", "", "impersonator"): IMPERSONATE,
    ("ClusterRole", "", "other"): OTHER_GROUP,
    ("ClusterRole", "", "cluster-admin"): ADMIN,
    ("Role", "team", "impersonator"): IMPERSONATE,
}


def test_holders_are_the_group_bound_and_who_may_impersonate_it() -> None:
    cluster_bindings = [
        binding("editor", ("ClusterRole", "editor"), ("Group", BREAK_GLASS_GROUP)),
        binding("oncall", ("ClusterRole", "impersonator"), ("User", "bob")),
        binding("others", ("ClusterRole", "other"), ("User", "carol")),
        binding("admins", ("ClusterRole", "cluster-admin"), ("Group", "system:masters")),
    ]
    bindings = [
        binding("local", ("Role", "impersonator"), ("User", "dan"), namespace="team"),
        binding("missing", ("Role", "impersonator"), ("User", "erin"), namespace="elsewhere"),
    ]
    assert break_glass_holders(cluster_bindings, bindings, ROLES) == [
        Holder("Group", BREAK_GLASS_GROUP, "ClusterRoleBinding editor", impersonates=False),
        Holder("User", "bob", "ClusterRoleBinding oncall", impersonates=True),
        Holder("User", "dan", "RoleBinding team/local", impersonates=True),
    ]


def test_nobody_holding_the_group_is_ok() -> None:
    line = break_glass_line([])
    assert (line.mark, line.found) == (
        Mark.OK,
        "no binding names it and no role lets anyone impersonate it (system:masters always may)",
    )


def test_holders_are_named_and_everyone_holding_it_is_a_warning() -> None:
    holders = [
        Holder("Group", BREAK_GLASS_GROUP, "ClusterRoleBinding editor", impersonates=False),
        Holder("User", "bob", "ClusterRoleBinding oncall", impersonates=True),
    ]
    line = break_glass_line(holders)
    assert (line.mark, line.fix) == (Mark.OK, "")
    assert line.found == (
        "rights through ClusterRoleBinding editor; "
        "may be impersonated by User bob (ClusterRoleBinding oncall)"
    )
    only_bound = break_glass_line(holders[:1])
    assert only_bound.found == "rights through ClusterRoleBinding editor"
    broad = Holder("Group", "system:authenticated", "ClusterRoleBinding all", impersonates=True)
    line = break_glass_line([broad])
    assert line.mark is Mark.WARN
    assert "not Group system:authenticated (ClusterRoleBinding all)" in line.fix


@pytest.mark.parametrize(
    ("audited", "mark", "found"),
    [
        pytest.param(Audited("runtimes", 2, ()), Mark.OK, "2 judged, none fails", id="pass"),
        pytest.param(
            Audited("runtimes", 3, ("ClusterTrainingRuntime a",)),
            Mark.FAIL,
            "1 of 3 fail: ClusterTrainingRuntime a",
            id="fail",
        ),
    ],
)
def test_the_audit_counts(audited: Audited, mark: Mark, found: str) -> None:
    line = audit_line(audited)
    assert (line.check, line.mark, line.found) == ("audit: runtimes", mark, found)
    assert bool(line.fix) is (mark is Mark.FAIL)
