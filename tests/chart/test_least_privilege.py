"""What the chart and the kustomizations exempt and grant (docs/operations.md, Security): no
namespace is exempt from the Trainer webhook, the only exempt identities are the namespace
controller and the garbage collector, nicguard's ServiceAccount may change nothing of its webhook
configuration but the caBundle, and every RBAC rule that can name its objects does."""

from __future__ import annotations

import re
from typing import Any, Final

import pytest

from app.domain.assessment import EXEMPT_USERS
from tests.chart.render import kustomize, one, template
from tests.support.paths import ROOT

# Every way the project installs nicguard: (what, the rendered objects, nicguard's namespace).
KUSTOMIZATIONS: Final = (
    "manifests",
    "manifests/overlays/cert-manager",
    "manifests/overlays/aicr-recipe",
)
CHART_VALUES: Final = {
    "self-managed": (),
    "cert-manager": ("--set", "certificates.mode=cert-manager"),
    "bring-your-own": (
        "--set", "certificates.mode=bring-your-own",
        "--set", "certificates.bringYourOwn.secretName=my-tls",
        "--set", "certificates.bringYourOwn.caBundle=Q0E=",
    ),
}  # fmt: skip
TRAINER_WEBHOOK: Final = "validate.nicguard.dev"
RECIPE_WEBHOOK: Final = "recipe.nicguard.dev"
CLAIM_TEMPLATE_DOOR: Final = "claimtemplates.nicguard.dev"
# The workload doors exempt no identity: the controller manager creates every Job's pods where
# controllers share its credentials (docs/rules.md, the workload doors).
WORKLOAD_DOORS: Final = frozenset({"workloads.nicguard.dev", "pods.nicguard.dev"})


def installs() -> list[Any]:
    found = [
        pytest.param(lambda k=k: kustomize(ROOT / k), "nicguard-system", id=k)
        for k in KUSTOMIZATIONS
    ]
    for mode, args in CHART_VALUES.items():
        for namespace in ("nicguard-system", "kubeflow"):
            found.append(
                pytest.param(
                    lambda a=args, n=namespace: template(*a, namespace=n),
                    namespace,
                    id=f"chart {mode} -n {namespace}",
                )
            )
    return found


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """Whether a label selector (absent: everything) selects an object with ``labels``."""
    if not selector:
        return True
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values", [])
        held = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True


def namespace_labels(name: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name}


def webhooks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = one(docs, "ValidatingWebhookConfiguration")["webhooks"]
    return hooks


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_no_namespace_is_exempt_from_the_trainer_webhook(render: Any, namespace: str) -> None:
    """Installed into kubeflow (beside Trainer), the TrainingRuntimes and TrainJobs there are still
    judged; so are kube-system's and nicguard's own namespace's."""
    (trainer,) = (h for h in webhooks(render()) if h["name"] == TRAINER_WEBHOOK)
    for judged in (namespace, "kube-system", "kubeflow", "nicguard-system", "team-a"):
        assert selects(trainer.get("namespaceSelector"), namespace_labels(judged)), judged
    assert selects(trainer.get("objectSelector"), {})
    for condition in trainer["matchConditions"]:
        assert "request.namespace" not in condition["expression"], condition
        assert "namespaceObject" not in condition["expression"], condition


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_the_workload_doors_fail_closed_and_are_sent_only_wired_objects(
    render: Any, namespace: str
) -> None:
    """JobSets, Jobs and Pods on CREATE and UPDATE, each only when a pod template carries the
    interfaces annotation (or, on UPDATE, did; a Pod's UPDATE, or its status write, only when
    its wiring changes; a Binding only when it carries either wiring annotation: docs/rules.md,
    the workload doors)."""
    doors = {h["name"]: h for h in webhooks(render()) if h["name"] in WORKLOAD_DOORS}
    assert set(doors) == WORKLOAD_DOORS
    for hook in doors.values():
        assert hook["failurePolicy"] == "Fail", hook["name"]
        assert "objectSelector" not in hook, hook["name"]
    rules = {
        name: sorted(
            (group, resource, tuple(rule["operations"]), tuple(rule["apiVersions"]))
            for rule in hook["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
        )
        for name, hook in doors.items()
    }
    assert rules == {
        "workloads.nicguard.dev": [
            ("batch", "jobs", ("CREATE", "UPDATE"), ("v1",)),
            ("jobset.x-k8s.io", "jobsets", ("CREATE", "UPDATE"), ("v1alpha2",)),
        ],
        # A status write and a Binding (pods/binding, or the older bindings) can rewire a Pod.
        "pods.nicguard.dev": [
            ("", "bindings", ("CREATE",), ("v1",)),
            ("", "pods", ("CREATE", "UPDATE"), ("v1",)),
            ("", "pods/binding", ("CREATE",), ("v1",)),
            ("", "pods/status", ("UPDATE",), ("v1",)),
        ],
    }
    wired = {
        name: [c["name"] for c in hook["matchConditions"] if c["name"].startswith("wired-")]
        for name, hook in doors.items()
    }
    assert wired == {
        "workloads.nicguard.dev": ["wired-jobset", "wired-job"],
        "pods.nicguard.dev": ["wired-pod"],
    }
    for hook in doors.values():
        for condition in hook["matchConditions"]:
            if condition["name"].startswith("wired-"):
                assert "'networking.gke.io/interfaces' in " in condition["expression"]
                # What an UPDATE removes or changes is sent too (the e2e tier drives each case).
                assert "oldObject != null" in condition["expression"], condition["name"]


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_the_claim_template_door_fails_closed_on_creates_only(render: Any, namespace: str) -> None:
    """A ResourceClaimTemplate's spec is immutable: CREATE of v1 templates, in every namespace,
    and nothing else of resource.k8s.io (docs/dra.md); the cache's list+watch is all the RBAC."""
    (door,) = (h for h in webhooks(render()) if h["name"] == CLAIM_TEMPLATE_DOOR)
    assert door["failurePolicy"] == "Fail"
    assert "objectSelector" not in door
    assert door["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["resourceclaimtemplates"],
            "scope": "Namespaced",
        }
    ]
    assert [c["name"] for c in door["matchConditions"]] == [
        "not-break-glass",
        "not-system-component",
    ]


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_only_the_recipe_webhook_has_a_namespace_selector_and_it_scopes(
    render: Any, namespace: str
) -> None:
    """The recipe's namespaceSelector keeps every other namespace's ConfigMaps away from nicguard:
    scoping, not an exemption."""
    for hook in webhooks(render()):
        if hook["name"] != RECIPE_WEBHOOK:
            assert "namespaceSelector" not in hook, hook["name"]
            continue
        (expression,) = hook["namespaceSelector"]["matchExpressions"]
        assert (expression["key"], expression["operator"]) == ("kubernetes.io/metadata.name", "In")
        assert len(expression["values"]) == 1


def exempt_users(expression: str) -> set[str]:
    """The user names a ``not-system-component`` condition lets through unjudged."""
    shape = r"!\(request\.userInfo\.username in \[(?P<names>[^\]]*)\]\)"
    match = re.fullmatch(shape, " ".join(expression.split()))
    assert match is not None, expression
    return set(re.findall(r"'([^']*)'", match["names"]))


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_every_webhook_exempts_only_the_namespace_controller_and_the_garbage_collector(
    render: Any, namespace: str
) -> None:
    """By user name, the same names nicguard itself never holds (EXEMPT_USERS); no group (not
    every ServiceAccount of kube-system, not the kubelets) and no namespace; the workload doors
    none at all."""
    assert {
        "system:serviceaccount:kube-system:namespace-controller",
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:kube-controller-manager",
    } == EXEMPT_USERS
    for hook in webhooks(render()):
        conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
        on_identity = {n for n, e in conditions.items() if "userInfo" in e}
        if hook["name"] in WORKLOAD_DOORS:
            assert on_identity == {"not-break-glass"}, hook["name"]
        else:
            assert exempt_users(conditions["not-system-component"]) == EXEMPT_USERS, hook["name"]
            assert on_identity == {"not-system-component", "not-break-glass"}, hook["name"]
        # Break-glass needs the label on the object and the group: the group alone is not enough.
        glass = " ".join(conditions["not-break-glass"].split())
        assert "'nicguard.dev/break-glass'" in glass
        assert "'nicguard:break-glass' in request.userInfo.groups" in glass
        assert "system:serviceaccounts" not in " ".join(conditions.values())


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_a_policy_refuses_any_webhook_configuration_change_by_nicguard_but_the_ca_bundle(
    render: Any, namespace: str
) -> None:
    docs = render()
    policy = one(docs, "ValidatingAdmissionPolicy")
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    name = policy["metadata"]["name"]
    assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["admissionregistration.k8s.io"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    assert set(rule["resources"]) == {
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    }
    (condition,) = spec["matchConditions"]
    account = f"system:serviceaccount:{namespace}:nicguard"
    assert condition["expression"] == f"request.userInfo.username == '{account}'"
    subjects = [
        s for d in docs if d["kind"].endswith("Binding") and "subjects" in d for s in d["subjects"]
    ]
    assert {(s["kind"], s.get("namespace"), s["name"]) for s in subjects} == {
        ("ServiceAccount", namespace, "nicguard")
    }
    configuration = one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"]
    variables = {v["name"]: " ".join(v["expression"].split()) for v in spec["variables"]}
    assert f"request.name == '{configuration}'" in variables["caBundleUpdate"]
    assert "request.operation == 'UPDATE'" in variables["caBundleUpdate"]
    # What may differ is only clientConfig.caBundle: every other field is compared.
    compared = variables["sameWebhooksButCABundle"]
    for field in (
        "admissionReviewVersions", "sideEffects", "rules", "failurePolicy", "matchPolicy",
        "namespaceSelector", "objectSelector", "timeoutSeconds", "matchConditions",
        "clientConfig.url", "clientConfig.service",
    ):  # fmt: skip
        assert f"w.{field} == o.{field}" in compared, field
    assert "caBundle" not in compared


def test_the_chart_names_the_webhook_configuration_it_renders_in_the_policy() -> None:
    docs = template("--set", "settings.webhookConfiguration=ng", namespace="platform")
    policy = one(docs, "ValidatingAdmissionPolicy")["spec"]
    assert "request.name == 'ng'" in policy["variables"][0]["expression"]
    assert "system:serviceaccount:platform:nicguard" in policy["matchConditions"][0]["expression"]


# Rules that cannot name their objects, each with the reason rbac.yaml gives.
UNNAMED: Final = {
    ("", "secrets", "create"),  # a create carries no name RBAC could check
    ("coordination.k8s.io", "leases", "create"),
    ("openreports.io", "reports", "create"),
    ("openreports.io", "clusterreports", "create"),
    ("wgpolicyk8s.io", "policyreports", "create"),
    ("wgpolicyk8s.io", "clusterpolicyreports", "create"),
    ("events.k8s.io", "events", "create"),
    # The audit finds the Events it wrote (generated names) by label, across namespaces.
    ("events.k8s.io", "events", "list"),
    # The sweep lists what may name a namespace's ResourceClaimTemplates: list only, no watch.
    ("", "configmaps", "list"),
    ("", "pods", "list"),
    ("batch", "jobs", "list"),
    ("jobset.x-k8s.io", "jobsets", "list"),
    # The caches: every object of the kinds nicguard judges against, read-only.
    *(
        (group, resource, verb)
        for group, resources in (
            ("networking.gke.io", ("networks", "gkenetworkparamsets")),
            ("trainer.kubeflow.org", ("clustertrainingruntimes", "trainingruntimes")),
            ("resource.k8s.io", ("resourceclaimtemplates",)),
        )
        for resource in resources
        for verb in ("get", "list", "watch")
    ),
}


@pytest.mark.parametrize(("render", "namespace"), installs())
def test_every_rbac_rule_that_can_name_its_objects_does(render: Any, namespace: str) -> None:
    unnamed = set()
    for role in (d for d in render() if d["kind"] in ("Role", "ClusterRole")):
        if role["metadata"]["name"].startswith("nicguard-break-glass"):
            continue  # shipped unbound, for people, not for nicguard
        for rule in role["rules"]:
            if rule.get("resourceNames"):
                assert "create" not in rule["verbs"], rule  # would never match
                continue
            unnamed |= {
                (group, resource, verb)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    assert unnamed <= UNNAMED, unnamed - UNNAMED
    assert not any(r.startswith("validatingadmissionpolic") for _, r, _ in unnamed)
