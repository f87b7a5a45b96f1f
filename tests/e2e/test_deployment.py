"""The kustomize package against a real apiserver: accepted as a whole, RBAC least-privilege.

A fresh control plane: ``kubectl apply -k manifests --dry-run=server`` must pass every object
through the apiserver's validation and admission (Pod Security "restricted" included) once the
namespace and RBAC exist for real; the ServiceAccount then may do exactly what nicguard needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness import expect
from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.state import install_crds
from tests.harness.webhook import BASE_KINDS, install_base, rendered_manifests

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    started = ControlPlane(tmp_path_factory.mktemp("deployment"))
    try:
        started.start()
        install_crds(started)
        install_base(started)  # namespace (its opt-in piece) and RBAC for real, as `apply -k` would
        yield started
    finally:
        started.stop()


def resource(doc: dict[str, Any]) -> str:
    """``kind.group/name`` as kubectl prints it."""
    api_version, kind = str(doc["apiVersion"]), str(doc["kind"]).lower()
    group = api_version.partition("/")[0] if "/" in api_version else ""
    name = doc["metadata"]["name"]
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def test_the_rbac_objects_are_created_for_real(plane: ControlPlane) -> None:
    for doc in rendered_manifests(plane):
        if doc["kind"] in BASE_KINDS:
            namespace = doc["metadata"].get("namespace")
            args = ["get", resource(doc), *(["-n", namespace] if namespace else [])]
            expect.allowed(plane.kubectl("admin", *args))


def test_every_object_of_the_kustomize_output_passes_a_server_side_dry_run(
    plane: ControlPlane,
) -> None:
    """The namespace exists (fixture): namespaced objects can be dry-run into it."""
    docs = rendered_manifests(plane)
    assert {doc["kind"] for doc in docs} >= {
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ValidatingWebhookConfiguration",
    }
    # Neither the namespace nor a recipe: `kubectl delete -k manifests/` must not take them along.
    assert not {doc["kind"] for doc in docs} & {"Namespace", "ConfigMap"}
    run = plane.kubectl("admin", "apply", "-k", str(ROOT / "manifests"), "--dry-run=server")
    expect.allowed(run)  # exit 0 and no warning (a Pod Security warning would show here)
    for doc in docs:
        assert f"{resource(doc)} " in run.stdout, expect.shown(run)
    assert run.stdout.count("(server dry run)") == len(docs), expect.shown(run)
    for missing in ("deployment.apps/nicguard", "validatingwebhookconfiguration"):
        get = plane.kubectl("admin", "get", missing.split("/")[0], "-A", "-o", "name")
        assert missing not in get.stdout, "a dry run must not create anything"


AS_NICGUARD = ("-n", "nicguard-system")
ALLOWED = [
    ("get", "secrets/nicguard-tls"),
    ("update", "secrets/nicguard-tls"),
    ("create", "secrets"),
    ("get", "leases.coordination.k8s.io/nicguard-cert-writer"),
    ("update", "leases.coordination.k8s.io/nicguard-cert-writer"),
    ("create", "leases.coordination.k8s.io"),
    ("get", "validatingwebhookconfigurations.admissionregistration.k8s.io/nicguard"),
    ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/nicguard"),
    ("watch", "networks.networking.gke.io"),
    ("list", "gkenetworkparamsets.networking.gke.io"),
    ("watch", "gkenetworkparamsets.networking.gke.io"),
    ("list", "clustertrainingruntimes.trainer.kubeflow.org"),
    ("get", "configmaps/nicguard-recipe"),
    ("list", "resourceclaimtemplates.resource.k8s.io"),
    ("watch", "resourceclaimtemplates.resource.k8s.io"),
]
DENIED = [
    ("list", "secrets"),
    ("get", "secrets/other"),
    ("update", "secrets/other"),
    ("patch", "secrets/nicguard-tls"),
    ("delete", "secrets/nicguard-tls"),
    ("update", "leases.coordination.k8s.io/other"),
    ("delete", "leases.coordination.k8s.io/nicguard-cert-writer"),
    ("patch", "validatingwebhookconfigurations.admissionregistration.k8s.io/other"),
    ("delete", "validatingwebhookconfigurations.admissionregistration.k8s.io/nicguard"),
    ("create", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
    ("update", "configmaps/nicguard-recipe"),
    ("delete", "gkenetworkparamsets.networking.gke.io"),
    ("update", "gkenetworkparamsets.networking.gke.io"),
    ("create", "resourceclaimtemplates.resource.k8s.io"),
    ("delete", "resourceclaimtemplates.resource.k8s.io"),
    ("list", "resourceclaims.resource.k8s.io"),
]


def may(plane: ControlPlane, verb: str, what: str) -> bool:
    """Whether nicguard's ServiceAccount may ``verb`` ``what`` in its namespace: ``kubectl auth
    can-i``. Where the cluster does not serve ``resource.k8s.io/v1`` (before 1.34) kubectl
    cannot resolve that group's resources (it warns and asks about another): RBAC is asked
    directly there, by a SelfSubjectAccessReview naming the group, and grants the same, so
    nicguard's templates cache works once the cluster serves the API."""
    resource, _, group = what.partition(".")
    if group == "resource.k8s.io" and not plane.served().dra_v1:
        run = plane.kubectl("nicguard", "auth", "can-i", verb, what, *AS_NICGUARD)
        unknown = f"the server doesn't have a resource type '{resource}' in group '{group}'"
        assert unknown in run.stderr, expect.shown(run)
        attributes = {"namespace": AS_NICGUARD[1], "verb": verb, "group": group}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes | {"resource": resource}},
        }
        asked = plane.kubectl(
            "nicguard",
            "create",
            "--validate=false",
            "-f",
            "-",
            "-o",
            "json",
            input=json.dumps(review),
        )
        assert asked.returncode == 0, expect.shown(asked)
        return bool(json.loads(asked.stdout)["status"].get("allowed", False))
    run = plane.kubectl("nicguard", "auth", "can-i", verb, what, *AS_NICGUARD)
    answer = (run.returncode, run.stdout.strip())
    assert answer in {(0, "yes"), (1, "no")}, expect.shown(run)
    return answer == (0, "yes")


@pytest.mark.parametrize(("verb", "what"), ALLOWED, ids=[" ".join(a) for a in ALLOWED])
def test_the_service_account_may_do_what_nicguard_needs(
    plane: ControlPlane, verb: str, what: str
) -> None:
    assert may(plane, verb, what)


@pytest.mark.parametrize(("verb", "what"), DENIED, ids=[" ".join(d) for d in DENIED])
def test_the_service_account_may_do_nothing_more(plane: ControlPlane, verb: str, what: str) -> None:
    assert not may(plane, verb, what)


def test_secrets_elsewhere_are_out_of_reach(plane: ControlPlane) -> None:
    run = plane.kubectl("nicguard", "auth", "can-i", "create", "secrets", "-n", "default")
    assert (run.returncode, run.stdout.strip()) == (1, "no"), expect.shown(run)
