"""Protecting what the wiring depends on (app.domain.rules.protect, docs/rules.md).

Deleting a Network the recipe or a cached runtime names, the GKENetworkParamSet behind such a
Network, or the recipe while it binds a runtime; writing the recipe.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.documents import load_yaml
from app.domain.assessment import EXEMPT_USERS
from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.kinds import Kind, Protected
from app.domain.policy import Policy, Protect
from app.domain.recipe import Recipe, recipe_from_configmap
from app.domain.review import Operation, Review
from app.domain.verdict import Verdict
from tests.builders import (
    GPU_NICS,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    TCPXO_MANIFEST,
    entries,
    mpi_runtime,
    network,
    node_job,
    plain_recipe,
    recipe_result,
    runtime,
    snapshot,
    wired,
)

RECIPE = "recipe nicguard-system/nicguard-recipe"
TCPXO = runtime(annotations=wired())  # the CTR bound to the recipe by name
TEAM = runtime("team-tr", kind=Kind.TRAINING_RUNTIME, annotations=wired())  # not bound
SWAPPED = (PAIRS[1], PAIRS[0], *PAIRS[2:])


def _delete(kind: Protected, name: str, *, user: str = "alice") -> Review:
    return Review(operation=Operation.DELETE, kind=kind, name=name, username=user)


def _write(data: dict[str, str], operation: Operation = Operation.UPDATE) -> Review:
    written = recipe_from_configmap(
        data, ref="nicguard-system/nicguard-recipe@9", load_yaml=load_yaml
    )
    return Review(
        operation=operation,
        kind=Protected.RECIPE,
        namespace="nicguard-system",
        name="nicguard-recipe",
        obj={"metadata": {"name": "nicguard-recipe"}, "data": data},
        written_recipe=written,
    )


def _messages(verdict: Verdict) -> list[str]:
    return [v.render() for v in verdict.violations]


@pytest.mark.parametrize(
    ("view", "dependents"),
    [
        pytest.param(snapshot(), [f"{RECIPE} (eth4)"], id="recipe-only"),
        pytest.param(
            snapshot(TEAM, no_recipe=True), ["TrainingRuntime team/team-tr (eth4)"], id="tr-only"
        ),
        pytest.param(
            snapshot(TCPXO, TEAM),
            [
                f"{RECIPE} (eth4)",
                "ClusterTrainingRuntime torch-distributed-tcpxo (eth4)",
                "TrainingRuntime team/team-tr (eth4)",
            ],
            id="recipe-and-runtimes",
        ),
    ],
)
def test_deleting_a_network_in_use_names_each_dependent_and_its_interface(
    view: ClusterSnapshot, dependents: list[str]
) -> None:
    verdict = evaluate(_delete(Protected.NETWORK, "gpu-nic-3"), view, Policy())
    (violation,) = verdict.violations
    assert violation.code == "NetworkInUse"
    assert violation.message == (
        f"Network gpu-nic-3 is in use by {', '.join(dependents)}; deleting it would leave their "
        "pods without these interfaces"
    )
    assert [message for _, message in violation.causes] == dependents


def test_an_unused_network_deletes_fine() -> None:
    view = snapshot(TCPXO, networks=[*GPU_NICS, "spare"])
    assert evaluate(_delete(Protected.NETWORK, "spare"), view, Policy()) == Verdict()


def test_more_than_ten_dependents_are_counted_and_causes_stay_ten() -> None:
    many = [
        runtime(f"tr-{i:02d}", kind=Kind.TRAINING_RUNTIME, annotations=wired()) for i in range(14)
    ]
    verdict = evaluate(_delete(Protected.NETWORK, "gpu-nic-0"), snapshot(*many), Policy())
    (violation,) = verdict.violations
    assert "TrainingRuntime team/tr-08 (eth1) and 5 more; deleting it" in violation.message
    assert len(violation.causes) == 10


def test_a_launcher_wired_as_a_node_is_a_dependent_too() -> None:
    mpi = mpi_runtime("mpi", launcher=wired([("eth1", "only-launcher")]), node=wired())
    view = snapshot(mpi, no_recipe=True, networks=[*GPU_NICS, "only-launcher"])
    verdict = evaluate(_delete(Protected.NETWORK, "only-launcher"), view, Policy())
    assert [m for _, m in verdict.violations[0].causes] == ["ClusterTrainingRuntime mpi (eth1)"]


def test_an_annotated_job_is_a_dependent_too() -> None:
    """An evaluator's pods lose their interface with the Network as the trainer's would, and
    the runtime, re-applied, would be refused (NetworkNotFound): deleting it is refused."""
    evaluator = node_job(wired([("eth2", "only-eval")]), name="evaluator")
    unnamed = {"template": node_job(wired([("eth3", "only-eval")]))["template"]}
    tr = runtime("eval", kind=Kind.TRAINING_RUNTIME, jobs=[node_job(), evaluator, unnamed])
    view = snapshot(tr, no_recipe=True, networks=[*GPU_NICS, "only-eval"])
    verdict = evaluate(_delete(Protected.NETWORK, "only-eval"), view, Policy())
    assert [m for _, m in verdict.violations[0].causes] == [
        "TrainingRuntime team/eval (eth2, eth3)"
    ]


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(replace(snapshot(), runtime_state=Unverifiable("not synced")), id="runtimes"),
        pytest.param(replace(snapshot(), recipe_state=Unverifiable("not synced")), id="recipe"),
    ],
)
def test_an_unsynced_cache_is_cluster_state_unavailable(view: ClusterSnapshot) -> None:
    verdict = evaluate(_delete(Protected.NETWORK, "gpu-nic-3"), view, Policy())
    assert [v.code for v in verdict.violations] == ["ClusterStateUnavailable"]
    assert verdict.undecided


@pytest.mark.parametrize(
    ("protect", "allowed", "warned"),
    [(Protect.DENY, False, False), (Protect.WARN, True, True), (Protect.OFF, True, False)],
)
def test_protect_decides_between_deny_warn_and_off(
    protect: Protect, allowed: bool, warned: bool
) -> None:
    verdict = evaluate(_delete(Protected.NETWORK, "gpu-nic-3"), snapshot(), Policy(protect=protect))
    assert verdict.allowed is allowed
    assert bool(verdict.warnings) is warned
    if warned:
        assert verdict.warnings[0].startswith("[NetworkInUse] Network gpu-nic-3 is in use by")


@pytest.mark.parametrize("user", sorted(EXEMPT_USERS))
def test_the_namespace_controller_and_garbage_collector_are_never_blocked(user: str) -> None:
    assert evaluate(
        _delete(Protected.NETWORK, "gpu-nic-3", user=user), snapshot(), Policy()
    ).allowed


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(
            Review(operation=Operation.CREATE, kind=Protected.NETWORK, name="gpu-nic-3"),
            id="create",
        ),
        pytest.param(
            replace(_delete(Protected.NETWORK, "gpu-nic-3"), subresource="status"), id="status"
        ),
    ],
)
def test_only_deletes_of_networks_are_judged(request_: Review) -> None:
    assert evaluate(request_, snapshot(), Policy()) == Verdict()


def test_deleting_the_param_set_behind_an_in_use_network_is_refused() -> None:
    verdict = evaluate(_delete(Protected.PARAM_SET, "gpu-nic-3"), snapshot(TCPXO), Policy())
    (violation,) = verdict.violations
    assert violation.code == "ParamSetInUse"
    assert violation.message == (
        "GKENetworkParamSet gpu-nic-3 backs Network gpu-nic-3, used by "
        f"{RECIPE} (eth4), ClusterTrainingRuntime torch-distributed-tcpxo (eth4); deleting it "
        "would make these Networks unusable"
    )


@pytest.mark.parametrize(
    ("view", "name"),
    [
        pytest.param(
            snapshot(networks=[*GPU_NICS, "spare"]), "spare", id="backs-an-unused-network"
        ),
        pytest.param(snapshot(), "nobody-uses-it", id="backs-no-network"),
    ],
)
def test_a_param_set_that_no_in_use_network_references_deletes_fine(
    view: ClusterSnapshot, name: str
) -> None:
    assert evaluate(_delete(Protected.PARAM_SET, name), view, Policy()).allowed


def test_param_set_deletion_needs_the_networks() -> None:
    view = replace(snapshot(), network_state=Unverifiable("networks cache not synced"))
    verdict = evaluate(_delete(Protected.PARAM_SET, "gpu-nic-3"), view, Policy())
    assert [v.code for v in verdict.violations] == ["ClusterStateUnavailable"]


def test_deleting_the_recipe_while_it_binds_a_runtime_is_refused() -> None:
    bound = runtime("custom", labels={RECIPE_BOUND: "true"}, annotations=wired())
    verdict = evaluate(
        _delete(Protected.RECIPE, "nicguard-recipe"), snapshot(TCPXO, bound, TEAM), Policy()
    )
    (violation,) = verdict.violations
    assert violation.code == "RecipeInUse"
    assert violation.message == (
        "the recipe nicguard-system/nicguard-recipe binds ClusterTrainingRuntime custom, "
        "ClusterTrainingRuntime torch-distributed-tcpxo; without it they could not be checked "
        "(RecipeUnavailable)"
    )


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(snapshot(TEAM), id="no-bound-runtime"),
        pytest.param(snapshot(TCPXO, no_recipe=True), id="no-recipe"),
        pytest.param(
            snapshot(TCPXO, recipe={"tcpxoInterfaces": "[]"}), id="recipe-delivers-nothing"
        ),
    ],
)
def test_a_recipe_that_binds_nothing_deletes_fine(view: ClusterSnapshot) -> None:
    assert evaluate(_delete(Protected.RECIPE, "nicguard-recipe"), view, Policy()).allowed


def test_recipe_deletion_needs_the_runtimes() -> None:
    view = replace(snapshot(TCPXO), runtime_state=Unverifiable("runtimes cache not synced"))
    verdict = evaluate(_delete(Protected.RECIPE, "nicguard-recipe"), view, Policy())
    assert _messages(verdict) == [
        "[ClusterStateUnavailable] nicguard cannot decide: runtimes cannot be read: runtimes "
        "cache not synced"
    ]


def test_an_invalid_recipe_write_is_recipe_invalid() -> None:
    seven = {"tcpxoInterfaces": json.dumps(entries(PAIRS[:7]))}
    verdict = evaluate(_write(seven, Operation.CREATE), snapshot(TCPXO), Policy())
    (violation,) = verdict.violations
    assert (violation.code, violation.field) == ("RecipeInvalid", "data")
    assert "the mapping must contain exactly 8 entries" in violation.message


def test_a_valid_recipe_write_is_allowed_with_its_blast_radius() -> None:
    swapped = {"tcpxoInterfaces": json.dumps(entries(SWAPPED))}
    verdict = evaluate(_write(swapped), snapshot(TCPXO, TEAM), Policy())
    assert verdict.allowed
    assert verdict.warnings == (
        "[MappingDivergesFromRecipe] would diverge from this recipe: "
        "ClusterTrainingRuntime torch-distributed-tcpxo",
    )


def test_a_recipe_naming_missing_or_unusable_networks_warns_of_them() -> None:
    pairs = (*PAIRS[:6], ("eth7", "gpu-nic-absent"), ("eth8", "gpu-nic-down"))
    view = snapshot(network("gpu-nic-down", ready=False), networks=GPU_NICS)
    verdict = evaluate(_write({"tcpxoInterfaces": json.dumps(entries(pairs))}), view, Policy())
    assert verdict.allowed
    assert verdict.warnings == (
        "[NetworkNotFound] names a missing Network: eth7->gpu-nic-absent",
        "[NetworkNotReady] names a Network that is not usable: eth8->gpu-nic-down",
    )


def test_a_recipe_write_that_delivers_nothing_or_repeats_itself_is_allowed_quietly() -> None:
    assert evaluate(_write(plain_recipe()), snapshot(TCPXO), Policy()) == Verdict()
    nothing = {"recipe.yaml": "kind: RecipeResult\n"}
    assert evaluate(_write(nothing), snapshot(TCPXO), Policy()) == Verdict()


def test_runtimes_whose_wiring_cannot_be_read_name_no_network() -> None:
    unreadable = [
        runtime("no-template", jobs=[{"name": "node"}]),
        runtime("not-a-string", annotations={"networking.gke.io/interfaces": 7}),
        runtime("malformed", annotations={"networking.gke.io/interfaces": "[nope"}),
    ]
    view = snapshot(*unreadable, no_recipe=True)
    assert evaluate(_delete(Protected.NETWORK, "gpu-nic-3"), view, Policy()).allowed


def test_param_set_deletion_needs_the_runtimes_of_its_networks() -> None:
    view = replace(snapshot(), runtime_state=Unverifiable("runtimes cache not synced"))
    verdict = evaluate(_delete(Protected.PARAM_SET, "gpu-nic-3"), view, Policy())
    assert [v.code for v in verdict.violations] == ["ClusterStateUnavailable"]


def test_a_recipe_write_is_judged_without_the_caches_it_warns_from() -> None:
    swapped = {"tcpxoInterfaces": json.dumps(entries(SWAPPED))}
    view = replace(
        snapshot(TCPXO),
        runtime_state=Unverifiable("not synced"),
        network_state=Unverifiable("not synced"),
    )
    assert evaluate(_write(swapped), view, Policy()) == Verdict()


def test_a_recipe_write_the_adapter_could_not_read_is_not_judged() -> None:
    unread = replace(_write(plain_recipe()), written_recipe=None)
    assert evaluate(unread, snapshot(TCPXO), Policy()) == Verdict()


def test_the_blast_radius_names_three_and_counts_the_rest() -> None:
    bound = [
        runtime(f"tcpxo-{i}", labels={RECIPE_BOUND: "true"}, annotations=wired()) for i in range(5)
    ]
    swapped = {"tcpxoInterfaces": json.dumps(entries(SWAPPED))}
    warnings = evaluate(_write(swapped), snapshot(*bound), Policy()).warnings
    lead = "[MappingDivergesFromRecipe] would diverge from this recipe: ClusterTrainingRuntime"
    assert warnings == (
        f"{lead} tcpxo-0",
        f"{lead} tcpxo-1",
        f"{lead} tcpxo-2",
        "[MappingDivergesFromRecipe] ... and 2 more",
    )


def _update(
    data: dict[str, str],
    old_data: dict[str, str],
    *,
    owners: list[dict[str, object]] | None = None,
    old_owners: list[dict[str, object]] | None = None,
) -> Review:
    def configmap(
        content: dict[str, str], refs: list[dict[str, object]] | None
    ) -> dict[str, object]:
        metadata: dict[str, object] = {"name": "nicguard-recipe"}
        if refs is not None:
            metadata["ownerReferences"] = refs
        return {"metadata": metadata, "data": content}

    def read(content: dict[str, str], version: str) -> Recipe:
        return recipe_from_configmap(
            content, ref=f"nicguard-system/nicguard-recipe@{version}", load_yaml=load_yaml
        )

    return Review(
        operation=Operation.UPDATE,
        kind=Protected.RECIPE,
        namespace="nicguard-system",
        name="nicguard-recipe",
        obj=configmap(data, owners),
        old_obj=configmap(old_data, old_owners),
        written_recipe=read(data, "9"),
        old_recipe=read(old_data, "8"),
    )


def _result(*, enabled: object = None, manifests: tuple[str, ...] | None = None) -> dict[str, str]:
    result = recipe_result(enabled=enabled, manifests=manifests or (TCPXO_MANIFEST,))
    return {"recipe.yaml": json.dumps(result)}


@pytest.mark.parametrize(
    "switched_off",
    [
        pytest.param(_result(enabled=False), id="overrides-enabled-false"),
        pytest.param(_result(manifests=("components/x.yaml",)), id="tcpxo-manifest-dropped"),
        pytest.param({"recipe.yaml": json.dumps({"kind": "RecipeResult"})}, id="component-removed"),
    ],
)
def test_an_update_switching_a_delivering_recipe_off_while_runtimes_are_bound_is_refused(
    switched_off: dict[str, str],
) -> None:
    verdict = evaluate(_update(switched_off, _result()), snapshot(TCPXO, TEAM), Policy())
    (violation,) = verdict.violations
    assert violation.code == "RecipeInUse"
    assert violation.field == "data"
    assert violation.message.startswith(
        f"the {RECIPE} binds ClusterTrainingRuntime torch-distributed-tcpxo; this update makes it "
        "deliver no mapping"
    )


def test_switching_the_recipe_off_binding_nothing_or_that_delivered_nothing_is_allowed() -> None:
    assert evaluate(_update(_result(enabled=False), _result()), snapshot(TEAM), Policy()).allowed
    off = _result(enabled=False)
    assert evaluate(_update(off, off), snapshot(TCPXO), Policy()).allowed


def test_switching_the_recipe_off_needs_the_runtimes() -> None:
    view = snapshot(TCPXO)
    unknown = ClusterSnapshot(view.network_state, view.recipe_state, Unverifiable("not synced"))
    verdict = evaluate(_update(_result(enabled=False), _result()), unknown, Policy())
    assert [v.code for v in verdict.violations] == ["ClusterStateUnavailable"]


OWNER: dict[str, object] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "name": "gpu-operator",
    "uid": "u-1",
}


def test_a_write_adding_an_owner_to_the_recipe_is_recipe_invalid() -> None:
    added: dict[str, object] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "aicr-agent"}
    request = _update(plain_recipe(), plain_recipe(), owners=[OWNER, added], old_owners=[OWNER])
    verdict = evaluate(request, snapshot(TCPXO), Policy())
    (violation,) = verdict.violations
    assert violation.code == "RecipeInvalid"
    assert violation.field == "metadata.ownerReferences"
    assert "must not get an owner (Deployment aicr-agent): the garbage collector" in (
        violation.message
    )
    assert verdict.warnings[0] == (
        "[RecipeInvalid] the recipe ConfigMap nicguard-system/nicguard-recipe has owners "
        "(Namespace gpu-operator): the garbage collector deletes it with them"
    )


def test_owners_the_recipe_already_had_are_only_named_in_a_warning() -> None:
    unnamed: dict[str, object] = {"uid": ""}
    request = _update(
        plain_recipe(), plain_recipe(), owners=[OWNER, unnamed], old_owners=[OWNER, unnamed]
    )
    verdict = evaluate(request, snapshot(TCPXO), Policy())
    assert verdict.allowed
    assert "(Namespace gpu-operator, owner (unnamed))" in verdict.warnings[0]


def test_a_create_with_an_owner_is_refused_and_protect_warn_allows_it() -> None:
    review = replace(
        _write(plain_recipe(), Operation.CREATE),
        obj={"metadata": {"ownerReferences": [OWNER, "x"]}},
    )
    assert [v.code for v in evaluate(review, snapshot(), Policy()).violations] == ["RecipeInvalid"]
    assert evaluate(review, snapshot(), Policy(protect=Protect.WARN)).allowed


def test_owner_references_that_are_not_a_list_are_no_owners() -> None:
    review = replace(_write(plain_recipe()), obj={"metadata": {"ownerReferences": "x"}})
    assert evaluate(review, snapshot(), Policy()).allowed


@pytest.mark.parametrize(
    ("pairs", "dependents"),
    [
        pytest.param(
            [("eth1", "only-gw"), ("eth0", "default")],
            ["TrainingRuntime team/gw (eth1)"],
            id="first-entry-of-an-unbound-list",
        ),
        pytest.param(
            [("eth0", "default"), ("eth1", "default")], [], id="pod-network-is-no-network"
        ),
    ],
)
def test_every_entry_of_an_unbound_list_but_the_pod_networks_is_a_dependent(
    pairs: list[tuple[str, str]], dependents: list[str]
) -> None:
    """An unbound list need not start with eth0 (GKE attaches each entry by its name)."""
    annotations = {INTERFACES: json.dumps(entries(pairs))}
    tr = runtime("gw", kind=Kind.TRAINING_RUNTIME, annotations=annotations)
    name = pairs[0][1] if dependents else "default"
    view = snapshot(tr, no_recipe=True, networks=[*GPU_NICS, "only-gw", "default"])
    verdict = evaluate(_delete(Protected.NETWORK, name), view, Policy())
    assert [m for v in verdict.violations for _, m in v.causes] == dependents
