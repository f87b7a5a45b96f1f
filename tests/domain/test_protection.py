"""Judging what the wiring depends on (app.domain.protection): each protected request reaches its
rule, protect=off judges none, and a recipe write's owner references are read from the request's
objects. State from upstream: gke-networking/a4x-gb200 with AICR's RDMA runtime, examples/cluster
with AICR's TCPXO runtime. The rules in depth: tests/domain/rules/test_protect.py."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from app.documents import load_all_yaml, load_yaml
from app.domain.cluster import ClusterSnapshot, recipe_of, snapshot_of
from app.domain.kinds import Protected
from app.domain.policy import Policy, Protect
from app.domain.protection import judge_protected
from app.domain.review import Operation, Review
from app.domain.verdict import Verdict
from tests.builders import RECIPE_NAME, with_metadata
from tests.support.paths import ROOT, UPSTREAM


def _objects(*paths: Path) -> list[object]:
    return [obj for path in paths for obj in load_all_yaml(path.read_text(encoding="utf-8"))]


def _state(*paths: Path) -> ClusterSnapshot:
    return snapshot_of(_objects(*paths), recipe_name=RECIPE_NAME, load_yaml=load_yaml)


GB200: Final = _state(
    UPSTREAM / "gke-networking/a4x-gb200/networks.yaml",
    UPSTREAM / "aicr/torch-distributed-rdma-cluster-training-runtime.yaml",
)
A3MEGA: Final = _state(
    ROOT / "examples/cluster/networks.yaml",
    ROOT / "examples/cluster/recipe-configmap.yaml",
    UPSTREAM / "aicr/torch-distributed-tcpxo-cluster-training-runtime.yaml",
)
(DELIVERING,) = _objects(ROOT / "examples/cluster/recipe-configmap.yaml")
(EKS,) = _objects(UPSTREAM / "aicr/recipes/eks-training-recipe-configmap.yaml")  # no TCPXO
RECIPE: Final = "recipe nicguard-system/nicguard-recipe"
TCPXO: Final = "ClusterTrainingRuntime torch-distributed-tcpxo"
RDMA: Final = "ClusterTrainingRuntime torch-distributed-rdma"
OWNER: Final = {"apiVersion": "v1", "kind": "Namespace", "name": "gpu-operator", "uid": "u-1"}


def _delete(kind: Protected, name: str) -> Review:
    return Review(operation=Operation.DELETE, kind=kind, name=name, username="alice")


def _write(obj: object, old: object = DELIVERING) -> Review:
    """An UPDATE of the recipe ConfigMap from ``old`` to ``obj``, as the adapter parses it."""
    assert isinstance(obj, dict)
    assert isinstance(old, dict)
    return Review(
        operation=Operation.UPDATE,
        kind=Protected.RECIPE,
        namespace="nicguard-system",
        name="nicguard-recipe",
        obj=obj,
        old_obj=old,
        written_recipe=recipe_of(obj, RECIPE_NAME, load_yaml),
        old_recipe=recipe_of(old, RECIPE_NAME, load_yaml),
    )


IN_USE: Final = [
    pytest.param(
        _delete(Protected.NETWORK, "rdma-2"),
        GB200,
        ("NetworkInUse", "metadata.name"),
        f"Network rdma-2 is in use by {RDMA} (eth4); deleting it would leave their pods without "
        "these interfaces",
        id="network",
    ),
    pytest.param(
        _delete(Protected.NETWORK, "gpu-nic-3"),
        A3MEGA,
        ("NetworkInUse", "metadata.name"),
        f"Network gpu-nic-3 is in use by {RECIPE} (eth4), {TCPXO} (eth4); deleting it would "
        "leave their pods without these interfaces",
        id="network-of-the-recipe",
    ),
    pytest.param(
        _delete(Protected.PARAM_SET, "rdma-2"),
        GB200,
        ("ParamSetInUse", "metadata.name"),
        f"GKENetworkParamSet rdma-2 backs Network rdma-2, used by {RDMA} (eth4); deleting it "
        "would make these Networks unusable",
        id="param-set",
    ),
    pytest.param(
        _delete(Protected.RECIPE, "nicguard-recipe"),
        A3MEGA,
        ("RecipeInUse", "metadata.name"),
        f"the {RECIPE} binds {TCPXO}; without it they could not be checked (RecipeUnavailable)",
        id="recipe-deletion",
    ),
    pytest.param(
        _write(EKS),
        A3MEGA,
        ("RecipeInUse", "data"),
        f"the {RECIPE} binds {TCPXO}; this update makes it deliver no mapping (the "
        "kubeflow-trainer component disabled or without the TCPXO runtime), which would unbind "
        "them all",
        id="recipe-write-switching-it-off",
    ),
]


@pytest.mark.parametrize(("review", "view", "code_and_field", "message"), IN_USE)
def test_each_protected_request_reaches_its_rule(
    review: Review, view: ClusterSnapshot, code_and_field: tuple[str, str], message: str
) -> None:
    assert isinstance(review.kind, Protected)
    verdict = judge_protected(review.kind, review, view, Policy())
    (violation,) = verdict.violations
    assert (violation.code, violation.field) == code_and_field
    assert violation.message == message
    assert verdict.warnings == ()


@pytest.mark.parametrize(
    ("review", "view"), [pytest.param(*case.values[:2], id=case.id) for case in IN_USE]
)
def test_protect_off_judges_no_protected_request(review: Review, view: ClusterSnapshot) -> None:
    assert isinstance(review.kind, Protected)
    assert judge_protected(review.kind, review, view, Policy(protect=Protect.OFF)) == Verdict()


@pytest.mark.parametrize(
    ("review", "view"),
    [
        pytest.param(_delete(Protected.NETWORK, "gpu-nic-spare"), A3MEGA, id="unused-network"),
        pytest.param(_delete(Protected.PARAM_SET, "gpu-nic-spare"), A3MEGA, id="unused-param-set"),
        pytest.param(_delete(Protected.RECIPE, "nicguard-recipe"), GB200, id="absent-recipe"),
        pytest.param(_write(DELIVERING), A3MEGA, id="recipe-rewritten-unchanged"),
        pytest.param(_write(EKS, old=EKS), A3MEGA, id="recipe-that-delivered-nothing"),
    ],
)
def test_what_nothing_depends_on_is_allowed_quietly(review: Review, view: ClusterSnapshot) -> None:
    assert isinstance(review.kind, Protected)
    assert judge_protected(review.kind, review, view, Policy()) == Verdict()


def test_a_recipe_write_the_adapter_could_not_parse_is_not_judged() -> None:
    unread = Review(
        operation=Operation.CREATE,
        kind=Protected.RECIPE,
        namespace="nicguard-system",
        name="nicguard-recipe",
        obj={"metadata": {"name": "nicguard-recipe", "ownerReferences": [OWNER]}},
    )
    assert judge_protected(Protected.RECIPE, unread, A3MEGA, Policy()) == Verdict()


def _owned(references: object) -> dict[str, object]:
    assert isinstance(DELIVERING, dict)
    return with_metadata(DELIVERING, ownerReferences=references)


def _without_metadata() -> dict[str, object]:
    assert isinstance(DELIVERING, dict)
    return {key: value for key, value in DELIVERING.items() if key != "metadata"}


ADDED: Final = (
    "the recipe ConfigMap nicguard-system/nicguard-recipe must not get an owner (Namespace "
    "gpu-operator): the garbage collector, which nicguard never holds, would delete the recipe "
    "with it"
)
KEPT: Final = (
    "[RecipeInvalid] the recipe ConfigMap nicguard-system/nicguard-recipe has owners (Namespace "
    "gpu-operator): the garbage collector deletes it with them"
)


@pytest.mark.parametrize(
    ("obj", "old", "denied", "warnings"),
    [
        pytest.param(_owned([OWNER]), DELIVERING, ADDED, (), id="owner-added"),
        pytest.param(
            _owned([OWNER]), _without_metadata(), ADDED, (), id="owner-added-old-without-metadata"
        ),
        pytest.param(_owned([OWNER]), _owned([OWNER]), None, (KEPT,), id="owner-kept"),
        pytest.param(
            _owned(["x", 7, OWNER]), _owned([OWNER]), None, (KEPT,), id="non-objects-passed-over"
        ),
        pytest.param(_owned({"0": OWNER}), DELIVERING, None, (), id="references-not-a-list"),
        pytest.param(_owned([OWNER]), _owned({"0": OWNER}), ADDED, (), id="old-not-a-list"),
        pytest.param(_without_metadata(), _owned([OWNER]), None, (), id="owner-dropped"),
    ],
)
def test_a_recipe_writes_owners_are_read_from_the_new_and_old_object(
    obj: dict[str, object], old: object, denied: str | None, warnings: tuple[str, ...]
) -> None:
    verdict = judge_protected(Protected.RECIPE, _write(obj, old), A3MEGA, Policy())
    found = [(v.code, v.field, v.message) for v in verdict.violations]
    assert found == (
        [] if denied is None else [("RecipeInvalid", "metadata.ownerReferences", denied)]
    )
    assert verdict.warnings == warnings
