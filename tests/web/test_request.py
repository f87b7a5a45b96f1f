"""AdmissionReview v1 to core (app.web.request): what each field becomes, which objects are
judged, and every malformed body refused with its short reason."""

from __future__ import annotations

from typing import Any, Final

import pytest

from app.domain.cluster import ObjectName
from app.domain.kinds import Kind
from app.domain.recipe import Recipe
from app.domain.review import Operation
from app.web.request import API_VERSION, KIND, MalformedReviewError, request_from_body
from tests.builders import RECIPE_NAME, configmap, plain_recipe, runtime

CTR: Final = runtime()


def envelope(**request: Any) -> dict[str, object]:
    """An AdmissionReview of a CREATE of the default CTR, ``request`` overriding its fields."""
    fields: dict[str, object] = {
        "uid": "u-1",
        "kind": {
            "group": "trainer.kubeflow.org",
            "version": "v1alpha1",
            "kind": "ClusterTrainingRuntime",
        },
        "operation": "CREATE",
        "name": "torch-distributed-tcpxo",
        "userInfo": {"username": "alice"},
        "object": CTR,
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "request": fields | request}


def test_a_create_of_a_runtime_becomes_the_cores_review() -> None:
    found = request_from_body(envelope(dryRun=True, subResource="status"))
    assert (found.uid, found.kind, found.group) == (
        "u-1",
        "ClusterTrainingRuntime",
        "trainer.kubeflow.org",
    )
    assert (found.name, found.username, found.dry_run) == ("torch-distributed-tcpxo", "alice", True)
    review = found.review
    assert (review.operation, review.kind, review.namespace) == (
        Operation.CREATE,
        Kind.CLUSTER_TRAINING_RUNTIME,
        "",
    )
    assert (review.obj, review.old_obj, review.subresource) == (CTR, None, "status")
    assert (review.name, review.username, review.written_recipe) == (
        "torch-distributed-tcpxo",
        "alice",
        None,
    )


@pytest.mark.parametrize(
    ("overrides", "field", "expected"),
    [
        pytest.param({"dryRun": "true"}, "dry_run", False, id="dryRun only when JSON true"),
        pytest.param({"name": None}, "name", "torch-distributed-tcpxo", id="name from object"),
        pytest.param({"name": "", "object": {"metadata": {}}}, "name", "", id="no name anywhere"),
        pytest.param({"userInfo": None}, "username", "", id="no userInfo"),
        pytest.param({"userInfo": {"username": 7}}, "username", "", id="username not a string"),
        pytest.param({"kind": None}, "kind", "", id="no kind"),
        pytest.param({"kind": {"group": 1, "kind": ["x"]}}, "group", "", id="kind of wrong types"),
    ],
)
def test_odd_but_usable_fields_read_as_empty_or_fall_back(
    overrides: dict[str, object], field: str, expected: object
) -> None:
    assert getattr(request_from_body(envelope(**overrides)), field) == expected


@pytest.mark.parametrize(
    ("group", "kind", "namespace", "name", "judged"),
    [
        pytest.param(
            "trainer.kubeflow.org", "TrainingRuntime", "t", "r", Kind.TRAINING_RUNTIME, id="TR"
        ),
        pytest.param("trainer.kubeflow.org", "TrainJob", "t", "j", Kind.TRAIN_JOB, id="TrainJob"),
        pytest.param("trainer.kubeflow.org", "Widget", "t", "w", None, id="other trainer kind"),
        pytest.param("example.com", "TrainJob", "t", "j", None, id="a TrainJob of another group"),
        pytest.param("networking.gke.io", "Network", "", "gpu-nic-0", "Network", id="Network"),
        pytest.param(
            "networking.gke.io", "GKENetworkParamSet", "", "p", "GKENetworkParamSet", id="GNP"
        ),
        pytest.param("networking.gke.io", "Subnet", "", "s", None, id="other networking kind"),
        pytest.param(
            "resource.k8s.io",
            "ResourceClaimTemplate",
            "t",
            "default-rdma",
            "ResourceClaimTemplate",
            id="ResourceClaimTemplate",
        ),
        pytest.param("resource.k8s.io", "ResourceClaim", "t", "c", None, id="ResourceClaim"),
        pytest.param("", "ResourceClaimTemplate", "t", "x", None, id="a template of the core"),
        pytest.param(
            "", "ConfigMap", "nicguard-system", "nicguard-recipe", "ConfigMap", id="recipe"
        ),
        pytest.param("", "ConfigMap", "nicguard-system", "other", None, id="another ConfigMap"),
        pytest.param(
            "", "ConfigMap", "team", "nicguard-recipe", None, id="recipe's name elsewhere"
        ),
        pytest.param("", "Network", "", "gpu-nic-0", None, id="a Network of the core group"),
        pytest.param("jobset.x-k8s.io", "JobSet", "t", "js", "JobSet", id="JobSet"),
        pytest.param("batch", "Job", "t", "job", "Job", id="Job"),
        pytest.param("", "Pod", "t", "pod", "Pod", id="Pod"),
        pytest.param("batch", "CronJob", "t", "cron", None, id="CronJob"),
        pytest.param("example.com", "Pod", "t", "pod", None, id="a Pod of another group"),
    ],
)
def test_which_objects_are_judged(
    group: str, kind: str, namespace: str, name: str, judged: str | None
) -> None:
    body = envelope(
        kind={"group": group, "version": "v1", "kind": kind},
        namespace=namespace,
        name=name,
        operation="DELETE",
        object=None,
    )
    assert request_from_body(body, RECIPE_NAME).review.kind == judged


def test_without_a_recipe_name_no_configmap_is_judged() -> None:
    body = envelope(
        kind={"group": "", "version": "v1", "kind": "ConfigMap"},
        namespace="nicguard-system",
        name="nicguard-recipe",
        object=configmap(plain_recipe()),
    )
    assert request_from_body(body).review.kind is None


@pytest.mark.parametrize(
    ("operation", "written"),
    [
        pytest.param("CREATE", True, id="CREATE: parsed"),
        pytest.param("UPDATE", True, id="UPDATE: parsed"),
        pytest.param("DELETE", False, id="DELETE: nothing written"),
    ],
)
def test_a_write_of_the_recipe_carries_the_recipe_it_writes(operation: str, written: bool) -> None:
    recipe = configmap(plain_recipe())
    body = envelope(
        kind={"group": "", "version": "v1", "kind": "ConfigMap"},
        operation=operation,
        namespace=RECIPE_NAME.namespace,
        name=RECIPE_NAME.name,
        object=recipe if written else None,
        oldObject=recipe,
    )
    found = request_from_body(body, ObjectName(RECIPE_NAME.namespace, RECIPE_NAME.name))
    if written:
        assert isinstance(found.review.written_recipe, Recipe)
        assert found.review.written_recipe.ref == "nicguard-system/nicguard-recipe@7"
        assert found.review.written_recipe.mapping is not None
    else:
        assert found.review.written_recipe is None
    assert found.review.old_obj == recipe


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param([], "body is not an AdmissionReview", id="not an object"),
        pytest.param({"kind": "Pod"}, "body is not an AdmissionReview", id="another kind"),
        pytest.param(
            {"kind": KIND, "apiVersion": "admission.k8s.io/v1beta1"},
            "only admission.k8s.io/v1 AdmissionReview is supported",
            id="v1beta1",
        ),
        pytest.param(
            {"kind": KIND, "apiVersion": API_VERSION}, "AdmissionReview has no request", id="none"
        ),
        pytest.param(
            {"kind": KIND, "apiVersion": API_VERSION, "request": "x"},
            "AdmissionReview has no request",
            id="request not an object",
        ),
        pytest.param(envelope(uid=""), "request.uid is missing", id="empty uid"),
        pytest.param(envelope(uid=7), "request.uid is missing", id="uid not a string"),
        pytest.param(
            envelope(operation="PATCH"),
            "request.operation is not one of CREATE, UPDATE, DELETE, CONNECT",
            id="unknown operation",
        ),
        pytest.param(
            envelope(operation=None),
            "request.operation is not one of CREATE, UPDATE, DELETE, CONNECT",
            id="no operation",
        ),
        pytest.param(
            envelope(object=None), "request.object is required for CREATE", id="CREATE, no object"
        ),
        pytest.param(
            envelope(operation="UPDATE", object=None),
            "request.object is required for UPDATE",
            id="UPDATE, no object",
        ),
        pytest.param(envelope(object=[1]), "request.object is not an object", id="object a list"),
        pytest.param(
            envelope(oldObject="x"), "request.oldObject is not an object", id="oldObject a string"
        ),
    ],
)
def test_a_malformed_review_is_refused_with_a_short_reason(body: object, reason: str) -> None:
    with pytest.raises(MalformedReviewError) as raised:
        request_from_body(body)
    assert str(raised.value) == reason
