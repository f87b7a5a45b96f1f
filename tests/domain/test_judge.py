"""Judging runtimes against the recipe: who is recipe-bound and what that demands.

(app.domain.judge, docs/rules.md.)
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate_object
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import OnUnverifiable, Placement, Policy
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    INTERFACES_PATH,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    bound,
    codes,
    messages,
    node_job,
    recipe_result,
    runtime,
    snapshot,
    waived_codes,
    wired,
)

RECIPE_REF = "nicguard-system/nicguard-recipe@7"
REVERSED = list(reversed(PAIRS))


def _assess(
    obj: JsonMap, view: ClusterSnapshot | None = None, policy: Policy | None = None
) -> Verdict:
    kind = Kind(str(obj["kind"]))
    return evaluate_object(kind, obj, "team", view or snapshot(), policy or Policy()).verdict


@pytest.mark.parametrize(
    ("obj", "policy", "expected"),
    [
        pytest.param(runtime(), Policy(), ("InterfacesAnnotationMissing",), id="ctr-by-name"),
        pytest.param(runtime("plain"), Policy(), (), id="other-ctr-name"),
        pytest.param(bound("plain"), Policy(), ("InterfacesAnnotationMissing",), id="ctr-by-label"),
        pytest.param(
            runtime("plain", labels={RECIPE_BOUND: "false"}), Policy(), (), id="label-false"
        ),
        pytest.param(
            runtime("plain", labels={RECIPE_BOUND: True}), Policy(), (), id="label-not-a-string"
        ),
        pytest.param(runtime(kind=Kind.TRAINING_RUNTIME), Policy(), (), id="tr-not-bound-by-name"),
        pytest.param(
            runtime("tr", kind=Kind.TRAINING_RUNTIME, labels={RECIPE_BOUND: "true"}),
            Policy(),
            ("InterfacesAnnotationMissing",),
            id="tr-by-label",
        ),
        pytest.param(
            runtime("mine"),
            Policy(recipe_runtimes=frozenset({"mine", "theirs"})),
            ("InterfacesAnnotationMissing",),
            id="ctr-named-in-recipe-runtimes-setting",
        ),
        pytest.param(
            runtime(), Policy(recipe_runtimes=frozenset({"mine"})), (), id="default-name-replaced"
        ),
    ],
)
def test_recipe_bound_runtimes_must_be_wired(
    obj: JsonMap, policy: Policy, expected: tuple[str, ...]
) -> None:
    verdict = _assess(obj, policy=policy)
    assert codes(verdict) == expected
    if expected:
        assert verdict.violations[0].field == INTERFACES_PATH
        assert "recipe-bound" in verdict.violations[0].message
        assert verdict.recipe == RECIPE_REF


def test_a_default_interface_without_interfaces_is_not_wiring() -> None:
    verdict = _assess(runtime("plain", annotations={DEFAULT_INTERFACE: "eth3"}))
    assert verdict == Verdict()


def test_an_unbound_runtime_needs_the_recipe_only_for_placement() -> None:
    view = replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced"))
    verdict = _assess(runtime("plain", annotations=wired(REVERSED)), view)
    assert codes(verdict) == ("ClusterStateUnavailable",)
    off = _assess(
        runtime("plain", annotations=wired(REVERSED)), view, Policy(placement=Placement.OFF)
    )
    assert off == Verdict()


@pytest.mark.parametrize(
    ("jobs", "field"),
    [
        pytest.param([], "spec.template.spec.replicatedJobs", id="no-node-job"),
        pytest.param([{"name": "launcher"}], "spec.template.spec.replicatedJobs", id="other-job"),
        pytest.param(
            ["junk", {"name": "node", "template": {"spec": {}}}],
            "spec.template.spec.replicatedJobs[1]",
            id="first-node-job-has-no-pod-template",
        ),
        pytest.param(
            [{"name": "node", "template": {}}],
            "spec.template.spec.replicatedJobs[0]",
            id="node-job-without-pod-template",
        ),
    ],
)
def test_a_recipe_bound_runtime_without_node_template_is_node_job_missing(
    jobs: list[object], field: str
) -> None:
    verdict = _assess(runtime(jobs=jobs))
    assert codes(verdict) == ("NodeJobMissing",)
    assert verdict.violations[0].field == field
    assert "cannot be wired" in verdict.violations[0].message


def test_an_unbound_runtime_without_node_job_is_allowed() -> None:
    assert _assess(runtime("plain", jobs=[])) == Verdict()


def test_a_bound_runtime_with_an_unannotated_node_job_is_annotation_missing() -> None:
    verdict = _assess(runtime(jobs=[node_job()]))
    assert codes(verdict) == ("InterfacesAnnotationMissing",)
    assert "its pods would get only eth0" in verdict.violations[0].message


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param(wired(), (), id="matches"),
        pytest.param(wired(REVERSED), ("MappingDivergesFromRecipe",), id="reversed"),
        pytest.param(wired(PAIRS[:7]), ("MappingDivergesFromRecipe",), id="shorter"),
    ],
)
def test_a_recipe_bound_runtime_must_map_exactly_the_recipe(
    annotations: dict[str, object], expected: tuple[str, ...]
) -> None:
    verdict = _assess(runtime(annotations=annotations))
    assert codes(verdict) == expected
    assert verdict.recipe == RECIPE_REF


def test_a_divergence_names_position_both_pairs_order_and_recipe() -> None:
    verdict = _assess(bound(annotations=wired(REVERSED)))
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert verdict.violations[0].field == f"{INTERFACES_PATH}[1]"
    text = messages(verdict)
    for fragment in ("eth1", "eth8->gpu-nic-7", "eth1->gpu-nic-0", "different order", RECIPE_REF):
        assert fragment in text


@pytest.mark.parametrize(
    "recipe",
    [
        pytest.param({"snapshot.yaml": "kind: RecipeResult"}, id="no-component-refs"),
        pytest.param(
            {"recipe.yaml": json.dumps(recipe_result(manifests=()))}, id="manifest-not-shipped"
        ),
        pytest.param(
            {"recipe.yaml": json.dumps(recipe_result(enabled=False))}, id="trainer-disabled"
        ),
    ],
)
def test_a_recipe_that_delivers_nothing_binds_nobody(recipe: dict[str, object]) -> None:
    view = snapshot(recipe=recipe)
    assert _assess(runtime(), view) == Verdict(recipe=RECIPE_REF)
    assert _assess(bound(annotations=wired(REVERSED)), view) == Verdict(recipe=RECIPE_REF)


def test_a_shipped_runtime_from_a_recipe_result_binds_objects() -> None:
    view = snapshot(recipe={"snapshot.yaml": json.dumps(recipe_result())})
    assert codes(_assess(runtime(), view)) == ("InterfacesAnnotationMissing",)
    assert codes(_assess(runtime(annotations=wired()), view)) == ()


@pytest.mark.parametrize(
    ("required", "denied", "waived"),
    [
        pytest.param(True, ("RecipeUnavailable",), (), id="recipe-required"),
        pytest.param(False, (), ("RecipeUnavailable",), id="recipe-optional"),
    ],
)
def test_a_missing_recipe_denies_bound_objects_only_when_required(
    required: bool, denied: tuple[str, ...], waived: tuple[str, ...]
) -> None:
    verdict = _assess(
        runtime(annotations=wired()), snapshot(no_recipe=True), Policy(recipe_required=required)
    )
    assert codes(verdict) == denied
    assert waived_codes(verdict) == waived
    assert "nicguard-system/nicguard-recipe does not exist" in messages(verdict)
    assert verdict.recipe == "nicguard-system/nicguard-recipe"


def test_a_missing_recipe_still_lets_every_other_rule_report() -> None:
    annotations = wired([("eth1", "absent")], default="eth1")
    verdict = _assess(runtime(annotations=annotations), snapshot(no_recipe=True))
    assert codes(verdict) == ("RecipeUnavailable", "DefaultInterfaceInvalid", "NetworkNotFound")


@pytest.mark.parametrize(
    ("recipe", "fragment"),
    [
        pytest.param({}, "exactly one of", id="no-key"),
        pytest.param({"recipe.yaml": ""}, "does not hold a RecipeResult", id="empty-recipe-result"),
        pytest.param({"tcpxoInterfaces": "[a"}, "not valid YAML", id="invalid-yaml"),
        pytest.param(
            {"recipe.yaml": json.dumps(recipe_result(override_pairs=None))},
            "records no tcpxoInterfaces override",
            id="manifest-without-override",
        ),
        pytest.param(
            {"recipe.yaml": json.dumps(recipe_result(configuration=REVERSED))},
            "disagrees with configuration.gke.tcpxoInterfaces",
            id="configuration-mismatch",
        ),
        pytest.param({"tcpxoInterfaces": annotation()}, "got 9", id="recipe-with-eth0"),
    ],
)
def test_an_invalid_recipe_denies_every_bound_object(
    recipe: dict[str, object], fragment: str
) -> None:
    view = snapshot(recipe=recipe)
    for obj in (runtime(), runtime(annotations=wired())):
        verdict = _assess(obj, view)
        assert codes(verdict) == ("RecipeInvalid",)
        assert verdict.violations[0].field == INTERFACES_PATH
        assert fragment in verdict.violations[0].message
        assert f"recipe ConfigMap {RECIPE_REF} is invalid" in verdict.violations[0].message
    assert _assess(runtime("plain"), view) == Verdict()


@pytest.mark.parametrize(
    ("on_unverifiable", "denied", "waived"),
    [
        pytest.param(OnUnverifiable.DENY, ("ClusterStateUnavailable",), (), id="deny"),
        pytest.param(OnUnverifiable.ALLOW, (), ("ClusterStateUnavailable",), id="allow"),
    ],
)
def test_an_unreadable_recipe_is_cluster_state_unavailable_per_policy(
    on_unverifiable: OnUnverifiable, denied: tuple[str, ...], waived: tuple[str, ...]
) -> None:
    view = replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced"))
    verdict = _assess(
        runtime(annotations=wired(REVERSED)), view, Policy(on_unverifiable=on_unverifiable)
    )
    assert codes(verdict) == denied
    assert waived_codes(verdict) == waived
    assert (
        "nicguard cannot decide: the recipe ConfigMap cannot be read: recipe cache not synced"
        in (messages(verdict))
    )
    assert verdict.recipe == "none"
    if denied:
        assert verdict.undecided
        assert verdict.violations[0].field == INTERFACES_PATH


def test_a_network_interface_entry_never_matches_the_recipe_and_is_warned_about() -> None:
    value = json.dumps(
        [
            {"interfaceName": "eth0", "network": "default"},
            {"interfaceName": "eth1", "interface": "gpu-nic-0"},
            *({"interfaceName": n, "network": net} for n, net in PAIRS[1:]),
        ]
    )
    verdict = _assess(runtime(annotations={INTERFACES: value, DEFAULT_INTERFACE: "eth0"}))
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert "eth1->interface:gpu-nic-0" in verdict.violations[0].message
    assert verdict.warnings == (
        "eth1->interface:gpu-nic-0 (entry 1) uses a NetworkInterface; not checked",
    )
