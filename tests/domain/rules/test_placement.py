"""Placement: an unbound wired template may use any of the delivered recipe's Networks, each on
the interface the recipe gives it, or it is NetworkMisplaced (docs/rules.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Enforcement, OnUnverifiable, Placement, Policy
from app.domain.verdict import Code, Decision, Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    GB200_NETWORKS,
    GB200_PAIRS,
    GPU_NICS,
    INTERFACES,
    INTERFACES_PATH,
    PAIRS,
    RECIPE_BOUND,
    annotation,
    codes,
    gb200,
    mpi_runtime,
    node_job,
    plain_recipe,
    recipe_result,
    review,
    runtime,
    snapshot,
    trainjob,
    waived_codes,
    wired,
)

Pair = tuple[str, str]
RECIPE_REF = "nicguard-system/nicguard-recipe@7"
SWAPPED = [*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]
"""The recipe's pairs in another order: every Network on its own interface."""
NETWORKS_SWAPPED = [*PAIRS[:2], ("eth3", "gpu-nic-3"), ("eth4", "gpu-nic-2"), *PAIRS[4:]]
COPY = runtime("team-copy", kind=Kind.TRAINING_RUNTIME, annotations=wired(NETWORKS_SWAPPED))
EVALUATOR = "spec.template.spec.replicatedJobs[1].template.spec.template.metadata.annotations"
LEAD = "Networks on another interface than the recipe gives them: "
BOTH = snapshot(networks=[*GB200_NETWORKS, *GPU_NICS])
"""The recipe, and a GB200 profile's Networks (no param sets: their checks are skipped)."""


def _misplaced(*pairs: tuple[str, str, str]) -> str:
    """The message for ``(interface, network, where the recipe places it)`` pairs."""
    listed = ", ".join(f"{i}->{n} (the recipe places {n} on {at})" for i, n, at in pairs)
    return f"{LEAD}{listed} (recipe {RECIPE_REF})"


def _judge(
    obj: JsonMap, view: ClusterSnapshot | None = None, policy: Policy | None = None
) -> Verdict:
    return evaluate(review(obj), view or snapshot(), policy or Policy())


def _with_evaluator(evaluator: Mapping[str, object], **labels: str) -> dict[str, object]:
    jobs = [node_job(wired()), node_job(evaluator, name="evaluator")]
    return runtime("eval-copy", jobs=jobs, labels=labels or None)


@pytest.mark.parametrize(
    "pairs",
    [
        pytest.param(list(PAIRS), id="the-recipe-itself"),
        pytest.param([PAIRS[0]], id="one-network"),
        pytest.param([PAIRS[2], PAIRS[5]], id="a-subset-on-its-interfaces"),
        pytest.param(SWAPPED, id="another-order-same-pairs"),
        pytest.param(list(reversed(PAIRS)), id="reversed-order-same-pairs"),
        pytest.param([("eth1", "gpu-nic-spare")], id="a-network-the-recipe-does-not-name"),
        pytest.param([("gpu0rdma0", "gpu-nic-spare")], id="any-name-for-other-networks"),
    ],
)
def test_networks_on_the_interfaces_the_recipe_gives_them_are_allowed_without_a_word(
    pairs: list[Pair],
) -> None:
    view = snapshot(networks=["gpu-nic-spare", *(n for _, n in PAIRS)])
    verdict = _judge(runtime("team-copy", annotations=wired(pairs)), view)
    assert verdict == Verdict()


@pytest.mark.parametrize(
    ("pairs", "misplaced"),
    [
        pytest.param(
            [("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-5")],
            [("eth2", "gpu-nic-5", "eth6")],
            id="one-pair",
        ),
        pytest.param(
            NETWORKS_SWAPPED,
            [("eth3", "gpu-nic-3", "eth4"), ("eth4", "gpu-nic-2", "eth3")],
            id="two-networks-swapped",
        ),
        pytest.param(
            [(f"eth{i + 1}", net) for i, (_, net) in enumerate(reversed(PAIRS))],
            [(f"eth{i + 1}", f"gpu-nic-{7 - i}", f"eth{8 - i}") for i in range(8)],
            id="every-network-reversed",
        ),
        pytest.param(
            [("eth1", "gpu-nic-spare"), ("eth7", "gpu-nic-0")],
            [("eth7", "gpu-nic-0", "eth1")],
            id="beside-a-network-the-recipe-does-not-name",
        ),
    ],
)
def test_one_violation_lists_every_misplaced_pair_and_the_recipe(
    pairs: list[Pair], misplaced: list[tuple[str, str, str]]
) -> None:
    view = snapshot(networks=["gpu-nic-spare", *(n for _, n in PAIRS)])
    verdict = _judge(runtime("team-copy", annotations=wired(pairs)), view)
    (violation,) = verdict.violations
    assert violation.code is Code.NETWORK_MISPLACED
    assert violation.field == INTERFACES_PATH
    assert violation.message == _misplaced(*misplaced)
    assert verdict.recipe == RECIPE_REF
    assert verdict.warnings == ()


def test_the_interfaces_key_places_networks_of_any_name() -> None:
    vpcs = [(f"eth{i}", f"vpc{i}") for i in range(1, 5)]
    view = snapshot(
        networks=[n for _, n in vpcs],
        recipe={"interfaces": json.dumps([{"interfaceName": i, "network": n} for i, n in vpcs])},
    )
    assert _judge(runtime("team", annotations=wired(vpcs[2:])), view) == Verdict()
    verdict = _judge(runtime("team", annotations=wired([("eth1", "vpc2")])), view)
    assert [v.message for v in verdict.violations] == [
        f"{LEAD}eth1->vpc2 (the recipe places vpc2 on eth2) (recipe {RECIPE_REF})"
    ]


def test_network_interface_references_are_not_placed() -> None:
    entries = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": i, "interface": n} for i, n in NETWORKS_SWAPPED
    ]
    annotations = {INTERFACES: json.dumps(entries), DEFAULT_INTERFACE: "eth0"}
    verdict = _judge(runtime("team-copy", annotations=annotations))
    assert codes(verdict) == ()
    assert all("uses a NetworkInterface" in w for w in verdict.warnings)


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(snapshot(no_recipe=True), id="no-recipe"),
        pytest.param(snapshot(recipe=plain_recipe(PAIRS[:7])), id="invalid-recipe"),
        pytest.param(snapshot(recipe=recipe_result(manifests=())), id="recipe-delivers-none"),
    ],
)
def test_only_a_valid_delivered_recipe_places(view: ClusterSnapshot) -> None:
    assert _judge(COPY, view) == Verdict()


@pytest.mark.parametrize(
    ("policy", "denied", "waived"),
    [
        pytest.param(Policy(), ("ClusterStateUnavailable",), (), id="deny"),
        pytest.param(
            Policy(on_unverifiable=OnUnverifiable.ALLOW),
            (),
            ("ClusterStateUnavailable",),
            id="allow",
        ),
        pytest.param(Policy(placement=Placement.OFF), (), (), id="placement-off"),
    ],
)
def test_an_unreadable_recipe_cannot_decide_placement(
    policy: Policy, denied: tuple[str, ...], waived: tuple[str, ...]
) -> None:
    view = replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced"))
    verdict = _judge(COPY, view, policy)
    assert (codes(verdict), waived_codes(verdict)) == (denied, waived)
    if denied:
        (violation,) = verdict.violations
        assert violation.message == (
            "nicguard cannot decide: the recipe ConfigMap cannot be read: recipe cache not synced"
        )
        assert violation.field == INTERFACES_PATH


def test_an_unreadable_recipe_is_said_once_for_a_template_bound_to_it() -> None:
    view = replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced"))
    jobs = [node_job(wired()), node_job(wired(NETWORKS_SWAPPED), name="evaluator")]
    verdict = _judge(runtime(jobs=jobs), view)
    assert codes(verdict) == ("ClusterStateUnavailable",)


def test_an_unreadable_recipe_does_not_matter_to_a_template_naming_no_network() -> None:
    view = replace(snapshot(), recipe_state=Unverifiable("recipe cache not synced"))
    only_eth0 = {INTERFACES: '[{"interfaceName":"eth0","network":"default"}]'}
    verdict = _judge(runtime("team", annotations={**only_eth0, DEFAULT_INTERFACE: "eth0"}), view)
    assert codes(verdict) == ()


@pytest.mark.parametrize(
    ("obj", "view", "expected"),
    [
        pytest.param(
            runtime(
                "team-copy", annotations=wired(NETWORKS_SWAPPED), labels={RECIPE_BOUND: "true"}
            ),
            None,
            ("MappingDivergesFromRecipe",),
            id="recipe-bound-by-label",
        ),
        pytest.param(
            runtime(annotations=wired(NETWORKS_SWAPPED)),
            None,
            ("MappingDivergesFromRecipe",),
            id="recipe-bound-by-name",
        ),
        pytest.param(
            runtime("torch-distributed-rdma", annotations=wired(list(reversed(GB200_PAIRS)))),
            gb200(),
            ("MappingDivergesFromProfile",),
            id="profile-bound",
        ),
        pytest.param(
            runtime(
                "torch-distributed-rdma",
                annotations=wired([("eth1", "gvnic-1"), ("eth2", "gpu-nic-0")]),
            ),
            BOTH,
            ("MappingDivergesFromProfile",),
            id="profile-bound-with-a-recipe-network",
        ),
    ],
)
def test_a_bound_template_is_held_to_its_binding_not_placed(
    obj: JsonMap, view: ClusterSnapshot | None, expected: tuple[str, ...]
) -> None:
    verdict = _judge(obj, view)
    assert codes(verdict) == expected
    assert Code.NETWORK_MISPLACED not in {v.code for v in (*verdict.violations, *verdict.waived)}


def test_profiles_place_nothing() -> None:
    # GKE documents gpu0rdma0 for the RDMA Networks of a4x-gb200-rdma: only the recipe places.
    team = runtime("team", annotations=wired([("gpu0rdma0", "rdma-0"), ("eth3", "gvnic-1")]))
    assert codes(_judge(team, gb200())) == ()
    assert codes(_judge(team, BOTH)) == ()


def test_an_annotated_evaluator_job_is_placed_even_in_a_bound_runtime() -> None:
    evaluator = wired([("eth1", "gpu-nic-1")])
    for obj in (_with_evaluator(evaluator), _with_evaluator(evaluator, **{RECIPE_BOUND: "true"})):
        (violation,) = _judge(obj).violations
        assert violation.code is Code.NETWORK_MISPLACED
        assert violation.field == f"{EVALUATOR}[{INTERFACES}]"
        assert violation.message == "evaluator job: " + _misplaced(("eth1", "gpu-nic-1", "eth2"))


def test_each_wired_template_of_an_mpi_copy_is_judged() -> None:
    copy = mpi_runtime("deepspeed-copy", launcher=wired(NETWORKS_SWAPPED), node=wired(SWAPPED))
    verdict = _judge(copy)
    assert [v.message.split(":")[0] for v in verdict.violations] == ["launcher job"]


def test_a_trainjob_on_a_misplacing_runtime_is_blamed_on_the_runtime() -> None:
    job = trainjob(ref={"name": "team-copy", "kind": "TrainingRuntime"})
    (violation,) = _judge(job, snapshot(COPY)).violations
    assert violation.code is Code.NETWORK_MISPLACED
    assert violation.field == "spec.runtimeRef"
    assert violation.message.startswith(
        f"inherited unchanged from TrainingRuntime/team/team-copy, the object to fix: {LEAD}"
    )


def test_a_trainjob_whose_own_patch_misplaces_is_attributed_to_the_trainjob() -> None:
    plain = runtime("plain", annotations=wired())
    job = trainjob("plain", patches=[{INTERFACES: annotation(NETWORKS_SWAPPED)}])
    (violation,) = _judge(job, snapshot(plain)).violations
    assert violation.code is Code.NETWORK_MISPLACED
    assert violation.field.startswith("spec.runtimePatches[0].")
    assert violation.message == _misplaced(
        ("eth3", "gpu-nic-3", "eth4"), ("eth4", "gpu-nic-2", "eth3")
    )


def test_a_trainjob_whose_patch_reorders_only_is_allowed() -> None:
    plain = runtime("plain", annotations=wired())
    job = trainjob("plain", patches=[{INTERFACES: annotation(SWAPPED)}])
    assert _judge(job, snapshot(plain)) == Verdict()


@pytest.mark.parametrize(
    ("policy", "decision"),
    [
        pytest.param(Policy(placement=Placement.WARN), Decision.ALLOWED, id="placement-warn"),
        pytest.param(Policy(enforcement=Enforcement.WARN), Decision.WARNED, id="enforcement-warn"),
        pytest.param(
            Policy(placement=Placement.WARN, enforcement=Enforcement.WARN),
            Decision.ALLOWED,
            id="both-warn",
        ),
    ],
)
def test_the_most_lenient_setting_wins_and_the_warning_leads_with_the_code(
    policy: Policy, decision: Decision
) -> None:
    verdict = _judge(COPY, policy=policy)
    assert verdict.allowed
    assert verdict.decision is decision
    (warning,) = verdict.warnings
    assert warning.startswith(f"[NetworkMisplaced] {LEAD}eth3->gpu-nic-3 ")


def test_placement_off_judges_nothing() -> None:
    assert _judge(COPY, policy=Policy(placement=Placement.OFF)) == Verdict()


def test_a_long_list_of_misplaced_pairs_is_cut_and_counted() -> None:
    pairs = [(f"eth{i}", "gpu-nic-0") for i in range(2, 64)]  # with eth0: as many as are read
    verdict = _judge(runtime("team", annotations=wired(pairs)))
    (misplaced,) = (v for v in verdict.violations if v.code is Code.NETWORK_MISPLACED)
    listed = ", ".join(
        f"eth{i}->gpu-nic-0 (the recipe places gpu-nic-0 on eth1)" for i in range(2, 14)
    )
    assert misplaced.message == f"{LEAD}{listed} and 50 more (recipe {RECIPE_REF})"
