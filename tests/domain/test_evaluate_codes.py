"""Every docs/rules.md code is produced by evaluate() for CREATE requests, with its status code."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest

from app.domain.cluster import ClusterSnapshot, Networks, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.verdict import Code
from tests.builders import (
    DEFAULT_INTERFACE,
    GB200_PAIRS,
    INTERFACES,
    PAIRS,
    RDMA_RUNTIME,
    by_template,
    claim_template,
    claimed_job,
    codes,
    dra_runtime,
    exactly,
    gb200,
    network,
    review,
    runtime,
    snapshot,
    trainjob,
    wired,
)


@dataclass(frozen=True)
class Case:
    obj: JsonMap
    view: ClusterSnapshot
    expected: tuple[str, ...]
    status: int = 403


def _annotated(value: str, default: str = "eth0") -> JsonMap:
    return runtime("plain", annotations={INTERFACES: value, DEFAULT_INTERFACE: default})


def _bound(value: str) -> JsonMap:
    """The recipe's runtime (bound by name), held to AICR's conventions."""
    return runtime(annotations={INTERFACES: value, DEFAULT_INTERFACE: "eth0"})


SWAPPED_RDMA = (GB200_PAIRS[0], GB200_PAIRS[1], GB200_PAIRS[3], GB200_PAIRS[2], GB200_PAIRS[4])

CASES = {
    Code.MAPPING_DIVERGES_FROM_PROFILE: Case(
        runtime(RDMA_RUNTIME, annotations=wired(SWAPPED_RDMA)),
        gb200(),
        ("MappingDivergesFromProfile",),
    ),
    Code.DEVICE_MODE_MISMATCH: Case(
        runtime(RDMA_RUNTIME, annotations=wired(GB200_PAIRS)),
        gb200(modes={"rdma-2": "NetDevice"}),
        ("DeviceModeMismatch",),
    ),
    Code.INTERFACES_ANNOTATION_MISSING: Case(
        runtime(), snapshot(), ("InterfacesAnnotationMissing",)
    ),
    Code.INTERFACES_ANNOTATION_MALFORMED: Case(
        _annotated("[]"), snapshot(), ("InterfacesAnnotationMalformed",)
    ),
    Code.PRIMARY_INTERFACE_INVALID: Case(
        _bound(json.dumps([{"interfaceName": "eth1", "network": "gpu-nic-0"}])),
        snapshot(),
        ("PrimaryInterfaceInvalid",),
    ),
    Code.DEFAULT_INTERFACE_INVALID: Case(
        runtime(annotations=wired(default=None)), snapshot(), ("DefaultInterfaceInvalid",)
    ),
    Code.INTERFACE_NAME_INVALID: Case(
        runtime("plain", annotations=wired([("eth3:1", "gpu-nic-0")])),
        snapshot(no_recipe=True),
        ("InterfaceNameInvalid",),
    ),
    Code.INTERFACE_DUPLICATED: Case(
        runtime("plain", annotations=wired([("eth1", "gpu-nic-0"), ("eth1", "gpu-nic-1")])),
        snapshot(no_recipe=True),
        ("InterfaceDuplicated",),
    ),
    Code.NETWORK_DUPLICATED: Case(
        runtime("plain", annotations=wired([("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-0")])),
        snapshot(no_recipe=True),
        ("NetworkDuplicated",),
    ),
    Code.NETWORK_RESERVED: Case(
        runtime(annotations=wired([("eth1", "default")])),
        snapshot(),
        ("NetworkReserved", "MappingDivergesFromRecipe"),
    ),
    Code.NODE_JOB_MISSING: Case(runtime(jobs=[]), snapshot(), ("NodeJobMissing",)),
    Code.PATCH_DIRECTIVE_UNSUPPORTED: Case(
        trainjob(patches=[{"$patch": "delete"}]),
        snapshot(runtime(annotations=wired())),
        ("PatchDirectiveUnsupported",),
    ),
    Code.MAPPING_DIVERGES_FROM_RECIPE: Case(
        runtime(annotations=wired(PAIRS[::-1])), snapshot(), ("MappingDivergesFromRecipe",)
    ),
    Code.NETWORK_MISPLACED: Case(
        runtime("plain", annotations=wired([("eth1", "gpu-nic-1")])),
        snapshot(),
        ("NetworkMisplaced",),
    ),
    Code.NETWORK_NOT_FOUND: Case(
        runtime("plain", annotations=wired([("eth1", "absent")])),
        snapshot(),
        ("NetworkNotFound",),
    ),
    Code.NETWORK_NOT_READY: Case(
        runtime("plain", annotations=wired([("eth1", "flaky")])),
        snapshot(network("flaky", ready=False)),
        ("NetworkNotReady",),
    ),
    Code.NETWORK_API_NOT_SERVED: Case(
        runtime("plain", annotations=wired()),
        replace(snapshot(), network_state=Networks({}, served=False)),
        ("NetworkAPINotServed",),
    ),
    Code.RECIPE_UNAVAILABLE: Case(
        runtime(annotations=wired()), snapshot(no_recipe=True), ("RecipeUnavailable",)
    ),
    Code.RECIPE_INVALID: Case(
        runtime(annotations=wired()),
        snapshot(recipe={"tcpxoInterfaces": "[]"}),
        ("RecipeInvalid",),
    ),
    Code.RDMA_CLAIM_MISSING: Case(dra_runtime(), snapshot(), ("RdmaClaimMissing",)),
    Code.RDMA_CLAIM_MISMATCH: Case(
        dra_runtime(by_template()),
        snapshot(claim_template("default-rdma", exactly(mode="ExactCount", count=1))),
        ("RdmaClaimMismatch",),
    ),
    Code.RESOURCE_CLAIM_TEMPLATE_NOT_FOUND: Case(
        dra_runtime(by_template()), snapshot(), ("ResourceClaimTemplateNotFound",)
    ),
    Code.WIRING_MODE_CONFLICT: Case(
        runtime(
            "plain",
            jobs=[claimed_job(by_template(), annotations=wired())],
            kind=Kind.TRAINING_RUNTIME,
        ),
        snapshot(claim_template()),
        ("WiringModeConflict",),
    ),
    Code.CLUSTER_STATE_UNAVAILABLE: Case(
        runtime("plain", annotations=wired()),
        replace(snapshot(), network_state=Unverifiable("networks cache not synced")),
        ("ClusterStateUnavailable",),
        503,
    ),
}


# Produced by deleting what the wiring depends on or writing the recipe (tests/domain/rules/
# test_protect.py), or by a runtime snapshot (tests/domain/test_snapshot.py), not by a
# CREATE of a Trainer object.
GUARD_CODES = {
    Code.NETWORK_IN_USE,
    Code.PARAM_SET_IN_USE,
    Code.RECIPE_IN_USE,
    Code.RUNTIME_SNAPSHOT_INVALID,
}


def test_the_table_below_covers_every_code() -> None:
    assert set(CASES) | GUARD_CODES == set(Code)


@pytest.mark.parametrize("code", [pytest.param(code, id=code.value) for code in CASES])
def test_each_code_is_produced_by_a_create_and_denies_it(code: Code) -> None:
    case = CASES[code]
    verdict = evaluate(review(case.obj), case.view, Policy())
    assert not verdict.allowed
    assert codes(verdict) == case.expected
    assert verdict.undecided is (case.status == 503)
    assert all(v.field and v.message for v in verdict.violations)


def test_all_applicable_violations_are_collected_together() -> None:
    pairs = [("eth1", "gpu-nic-1"), ("eth1", "pod-network"), ("eth3", "absent")]
    obj = runtime(annotations=wired(pairs, default="eth9"))
    view = snapshot(network("gpu-nic-1", params_ready=False), networks=())
    assert codes(evaluate(review(obj), view, Policy())) == (
        "DefaultInterfaceInvalid",
        "NetworkReserved",
        "InterfaceDuplicated",
        "MappingDivergesFromRecipe",
        "NetworkNotFound",
        "NetworkNotReady",
    )
