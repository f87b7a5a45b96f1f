"""An unbound copy of the recipe's wiring in another order: allowed, with a warning that names
the label that would bind it (docs/rules.md, MappingDivergesFromRecipe)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.verdict import Verdict
from tests.builders import (
    GB200_PAIRS,
    INTERFACES,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    codes,
    gb200,
    mpi_runtime,
    plain_recipe,
    recipe_result,
    review,
    runtime,
    snapshot,
    trainjob,
    wired,
)

SWAPPED = [*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]
NETWORKS_SWAPPED = [*PAIRS[:2], ("eth3", "gpu-nic-3"), ("eth4", "gpu-nic-2"), *PAIRS[4:]]
RECIPE_REF = "nicguard-system/nicguard-recipe@7"
LEAD = (
    "[MappingDivergesFromRecipe] not recipe-bound (label nicguard.dev/recipe-bound=true binds it)"
)
COPY = runtime("team-copy", kind=Kind.TRAINING_RUNTIME, annotations=wired(SWAPPED))


def _judge(obj: dict[str, object], view: ClusterSnapshot | None = None) -> Verdict:
    return evaluate(review(obj), view or snapshot(), Policy())


@pytest.mark.parametrize(
    ("pairs", "position"),
    [
        pytest.param(SWAPPED, "eth3", id="eth3-eth4-swapped"),
        pytest.param(NETWORKS_SWAPPED, "eth3", id="networks-swapped-names-kept"),
        pytest.param(list(reversed(PAIRS)), "eth1", id="reversed"),
    ],
)
def test_an_unbound_copy_in_another_order_is_allowed_with_a_warning(
    pairs: list[tuple[str, str]], position: str
) -> None:
    verdict = _judge(runtime("team-copy", annotations=wired(pairs)))
    assert verdict.allowed
    assert verdict.waived == ()
    (warning,) = verdict.warnings
    assert warning.startswith(f"{LEAD}: at position {position} the object maps ")
    assert warning.endswith(f"(recipe {RECIPE_REF})")
    # Cut to 120 characters (docs/rules.md), it still names the code, the label and the position.
    assert f"at position {position}" in warning[:120]
    assert verdict.recipe == RECIPE_REF


def test_the_same_copy_labelled_recipe_bound_is_denied() -> None:
    labelled = runtime("team-copy", annotations=wired(SWAPPED), labels={RECIPE_BOUND: "true"})
    verdict = _judge(labelled)
    assert codes(verdict) == ("MappingDivergesFromRecipe",)
    assert verdict.warnings == ()


@pytest.mark.parametrize(
    ("obj", "view"),
    [
        pytest.param(runtime("team-copy", annotations=wired()), None, id="the-recipe-order"),
        pytest.param(
            runtime("team-copy", annotations=wired(SWAPPED[:7])), None, id="one-network-fewer"
        ),
        pytest.param(
            runtime("team-copy", annotations=wired([*SWAPPED[:7], ("eth8", "gpu-nic-spare")])),
            snapshot(networks=["gpu-nic-spare", *(n for _, n in PAIRS)]),
            id="another-network",
        ),
        pytest.param(
            runtime(
                "team-copy",
                annotations={
                    INTERFACES: '[{"interfaceName":"eth0","network":"default"},'
                    + ",".join(f'{{"interfaceName":"{i}","interface":"{n}"}}' for i, n in SWAPPED)
                    + "]",
                    "networking.gke.io/default-interface": "eth0",
                },
            ),
            None,
            id="network-interfaces",
        ),
        pytest.param(COPY, snapshot(no_recipe=True), id="no-recipe"),
        pytest.param(COPY, snapshot(recipe=plain_recipe(PAIRS[:7])), id="invalid-recipe"),
        pytest.param(COPY, snapshot(recipe=recipe_result(manifests=())), id="recipe-delivers-none"),
        pytest.param(
            COPY,
            replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced")),
            id="recipe-unknown",
        ),
    ],
)
def test_no_warning_without_the_recipe_s_networks_in_another_order(
    obj: dict[str, object], view: ClusterSnapshot | None
) -> None:
    verdict = _judge(obj, view)
    assert not any(w.startswith("[MappingDivergesFromRecipe]") for w in verdict.warnings)
    assert codes(verdict) == ()


def test_a_runtime_bound_to_a_fixed_profile_is_held_to_it_not_warned() -> None:
    rdma = runtime("torch-distributed-rdma", annotations=wired(list(reversed(GB200_PAIRS))))
    verdict = _judge(rdma, gb200())
    assert codes(verdict) == ("MappingDivergesFromProfile",)
    assert verdict.warnings == ()


def test_each_wired_template_of_an_mpi_copy_is_warned_led_by_the_code() -> None:
    copy = mpi_runtime("deepspeed-copy", launcher=wired(SWAPPED), node=wired(SWAPPED))
    verdict = _judge(copy)
    assert verdict.allowed
    node, launcher = verdict.warnings  # node first, as every finding
    assert launcher.startswith("[MappingDivergesFromRecipe] launcher job: not recipe-bound ")
    assert node.startswith("[MappingDivergesFromRecipe] node job: not recipe-bound ")


def test_a_trainjob_on_an_unbound_copy_is_warned_naming_the_runtime() -> None:
    job = trainjob(ref={"name": "team-copy", "kind": "TrainingRuntime"})
    verdict = _judge(job, snapshot(COPY))
    assert verdict.allowed
    (warning,) = verdict.warnings
    assert warning.startswith(
        "[MappingDivergesFromRecipe] inherited unchanged from TrainingRuntime/team/team-copy: "
        "not recipe-bound"
    )


def test_a_trainjob_whose_own_patch_reorders_an_unbound_runtime_is_warned_as_itself() -> None:
    plain = runtime("plain", annotations=wired())
    job = trainjob("plain", patches=[{INTERFACES: annotation(SWAPPED)}])
    (warning,) = _judge(job, snapshot(plain)).warnings
    assert warning.startswith(f"{LEAD}: at position eth3 ")
