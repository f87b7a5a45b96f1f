"""Who a TrainJob's violation is about: its runtime when it inherits the wiring unchanged, itself
when its own patches introduce it (docs/rules.md, "TrainJobs")."""

from __future__ import annotations

import pytest

from app.domain.cluster import ClusterSnapshot
from app.domain.evaluate import evaluate
from app.domain.kinds import Kind
from app.domain.policy import NotReady, Policy
from app.domain.verdict import Verdict
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    PAIRS,
    annotation,
    network,
    override,
    recipe_result,
    review,
    runtime,
    snapshot,
    trainjob,
    wired,
)

SWAPPED = [*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]
REVERSED = list(reversed(PAIRS))
TCPXO = "ClusterTrainingRuntime/torch-distributed-tcpxo"
BLAME_TCPXO = f"inherited unchanged from {TCPXO}, the object to fix: "
PATCH = (
    "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    ".template.spec.template.metadata.annotations"
)
DRIFTED_TCPXO = runtime(annotations=wired(SWAPPED))
NO_DEFAULT = runtime("plain", annotations=wired([("eth1", "absent")], default="eth9"))
TEAM_TR = runtime(
    "torch-tcpxo",
    kind=Kind.TRAINING_RUNTIME,
    annotations=wired([("eth1", "absent")]),
)


def _judge(job: dict[str, object], view: ClusterSnapshot, policy: Policy | None = None) -> Verdict:
    return evaluate(review(job), view, policy or Policy())


# (TrainJob, cluster) -> each violation as (code, field, message start)
CASES = [
    pytest.param(
        trainjob(),
        snapshot(DRIFTED_TCPXO),
        [
            (
                "MappingDivergesFromRecipe",
                "spec.runtimeRef",
                f"{BLAME_TCPXO}at position eth3 the object maps eth4->gpu-nic-3",
            )
        ],
        id="no-patches-on-a-drifted-runtime",
    ),
    pytest.param(
        trainjob(overrides=[override({DEFAULT_INTERFACE: "eth0"})]),
        snapshot(DRIFTED_TCPXO),
        [("MappingDivergesFromRecipe", "spec.runtimeRef", f"{BLAME_TCPXO}at position eth3 ")],
        id="a-patch-of-the-other-annotation-changes-nothing",
    ),
    pytest.param(
        trainjob(patches=[{INTERFACES: annotation(REVERSED)}]),
        snapshot(DRIFTED_TCPXO),
        [
            (
                "MappingDivergesFromRecipe",
                f"{PATCH}[{INTERFACES}][1]",
                "at position eth1 the object maps eth8->gpu-nic-7",
            )
        ],
        id="its-own-patch-is-its-own",
    ),
    pytest.param(
        trainjob(patches=[{INTERFACES: annotation(SWAPPED)}]),
        snapshot(DRIFTED_TCPXO),
        [("MappingDivergesFromRecipe", f"{PATCH}[{INTERFACES}][3]", "at position eth3 ")],
        id="restating-the-runtime-drift-in-a-patch-is-its-own",
    ),
    pytest.param(
        trainjob("plain", patches=[{INTERFACES: annotation([("eth1", "gpu-nic-0")])}]),
        snapshot(runtime("plain", annotations={DEFAULT_INTERFACE: "eth9"})),
        [("DefaultInterfaceInvalid", "spec.runtimeRef", "networking.gke.io/default-interface")],
        id="wiring-an-unwired-runtime-without-its-default-is-its-own",
    ),
    pytest.param(
        trainjob("plain"),
        snapshot(NO_DEFAULT),
        [
            (
                "DefaultInterfaceInvalid",
                "spec.runtimeRef",
                "inherited unchanged from ClusterTrainingRuntime/plain, the object to fix: "
                'networking.gke.io/default-interface is "eth9"',
            ),
            (
                "NetworkNotFound",
                "spec.runtimeRef",
                "inherited unchanged from ClusterTrainingRuntime/plain, the object to fix: "
                "no Network object exists for eth1->absent",
            ),
        ],
        id="every-inherited-violation",
    ),
    pytest.param(
        trainjob(ref={"name": "torch-tcpxo", "kind": "TrainingRuntime"}, namespace="team"),
        snapshot(TEAM_TR),
        [
            (
                "NetworkNotFound",
                "spec.runtimeRef",
                "inherited unchanged from TrainingRuntime/team/torch-tcpxo, the object to fix: ",
            )
        ],
        id="a-training-runtime-is-named-with-its-namespace",
    ),
    pytest.param(
        trainjob(),
        snapshot(runtime(annotations=wired())),
        [],
        id="nothing-to-attribute",
    ),
    pytest.param(
        trainjob(),
        snapshot(runtime(annotations=wired()), recipe=recipe_result(PAIRS[:7])),
        [("RecipeInvalid", "spec.runtimeRef", "recipe-bound, but the recipe ConfigMap ")],
        id="the-recipe-is-not-the-runtime",
    ),
]


@pytest.mark.parametrize(("job", "view", "expected"), CASES)
def test_a_violation_is_attributed_to_who_can_fix_it(
    job: dict[str, object], view: ClusterSnapshot, expected: list[tuple[str, str, str]]
) -> None:
    verdict = _judge(job, view)
    found = [(v.code.value, v.field, v.message) for v in verdict.violations]
    assert [(code, field) for code, field, _ in found] == [(c, f) for c, f, _ in expected]
    for (_, _, message), (_, _, start) in zip(found, expected, strict=True):
        assert message.startswith(start), message


def test_a_network_that_is_not_ready_is_named_not_the_runtime() -> None:
    nets = [f"gpu-nic-{i}" for i in range(8) if i != 3]
    view = snapshot(runtime(annotations=wired()), network("gpu-nic-3", ready=False), networks=nets)
    verdict = _judge(trainjob(), view)
    (violation,) = verdict.violations
    assert violation.code == "NetworkNotReady"
    assert "inherited" not in violation.message
    waived = _judge(trainjob(), view, Policy(not_ready=NotReady.WARN))
    assert waived.allowed
    assert waived.warnings[0].startswith("[NetworkNotReady] ")
