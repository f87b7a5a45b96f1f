"""What the wiring depends on, guarded on the real apiserver (docs/rules.md: NetworkInUse,
ParamSetInUse, RecipeInUse): Network and GKENetworkParamSet deletions and recipe writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import pytest
import yaml

from tests.harness import expect
from tests.harness.objects import RECIPE_PAIRS, as_list, param_set, unique, with_pairs
from tests.harness.procs import wait_until
from tests.harness.stack import (
    Stack,
    network_backed_runtime,
    populate,
    ready_network,
    running,
    wait_for_recipe,
)
from tests.harness.state import NETWORKS, PARAM_SETS, RECIPE, checked

pytestmark = pytest.mark.e2e

RECIPE_SUBJECT: Final = "ConfigMap/nicguard-system/nicguard-recipe"
NAMESPACE_DELETION_TIMEOUT: Final = 90.0
NAMESPACE_CONTROLLER: Final = [
    "--as=system:serviceaccount:kube-system:namespace-controller",
    "--as-group=system:serviceaccounts",
    "--as-group=system:serviceaccounts:kube-system",
]
# The non-admin "alice" (group developers) may also manage GKE Networks, as a platform team does.
NETWORK_ADMIN_RBAC: Final = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "e2e-network-admin"},
        "rules": [
            {
                "apiGroups": ["networking.gke.io"],
                "resources": ["networks", "gkenetworkparamsets"],
                "verbs": ["get", "list", "watch", "create", "delete", "deletecollection"],
            }
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-network-admin"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "e2e-network-admin",
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}
        ],
    },
]


@pytest.fixture(scope="module")
def network_admins(stack: Stack) -> Stack:
    checked(stack.apply(*NETWORK_ADMIN_RBAC, who="admin"), "granting Network admin")
    return stack


def test_deleting_a_network_the_recipe_and_runtimes_use_is_refused(network_admins: Stack) -> None:
    run = network_admins.kubectl("delete", NETWORKS, "gpu-nic-3")
    expect.denied(
        run,
        "Network/gpu-nic-3",
        "NetworkInUse",
        "Network gpu-nic-3 is in use by recipe nicguard-system/nicguard-recipe (eth4), ",
        "ClusterTrainingRuntime torch-distributed-tcpxo (eth4)",
    )
    assert network_admins.kubectl("get", NETWORKS, "gpu-nic-3").returncode == 0


def test_deleting_networks_in_bulk_removes_only_the_unused_ones(
    network_admins: Stack, namespace: str
) -> None:
    stack = network_admins
    batch = unique("batch")
    used, runtime_name = network_backed_runtime(stack, namespace)
    spare = [unique("gpu-nic-spare") for _ in range(2)]
    for name in spare:
        ready_network(stack, name)  # ready, but no runtime names it
    for name in (used, *spare):
        checked(stack.kubectl("label", NETWORKS, name, f"batch={batch}", who="admin"), "labelling")
    run = stack.kubectl("delete", NETWORKS, "-l", f"batch={batch}")
    assert run.returncode == 1, expect.shown(run)
    for name in spare:
        assert f'network.networking.gke.io "{name}" deleted' in run.stdout, expect.shown(run)
    assert f"[NetworkInUse] Network {used} is in use by TrainingRuntime {namespace}/" in run.stderr
    assert f"{runtime_name} (eth8)" in run.stderr
    left = stack.kubectl("get", NETWORKS, "-l", f"batch={batch}", "-o", "name")
    assert left.stdout.split() == [f"network.networking.gke.io/{used}"]


def test_deleting_the_param_set_behind_an_in_use_network_is_refused(
    network_admins: Stack, namespace: str
) -> None:
    stack = network_admins
    used, _ = network_backed_runtime(stack, namespace)  # its Network's param set is ``used``
    expect.denied(
        stack.kubectl("delete", PARAM_SETS, used),
        f"GKENetworkParamSet/{used}",
        "ParamSetInUse",
        f"GKENetworkParamSet {used} backs Network {used}, used by TrainingRuntime {namespace}/",
    )
    assert stack.kubectl("get", PARAM_SETS, used).returncode == 0
    unused = unique("gnp-unused")
    checked(stack.apply(param_set(unused), who="admin"), "creating the GKENetworkParamSet")
    expect.allowed(stack.kubectl("delete", PARAM_SETS, unused), "deleted")


def _recipe(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    namespace, name = RECIPE
    mapping = [{"interfaceName": i, "network": n} for i, n in pairs]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"tcpxoInterfaces": yaml.safe_dump(mapping)},
    }


def test_recipe_writes_are_judged_and_a_valid_one_shows_its_blast_radius(stack: Stack) -> None:
    namespace, name = RECIPE
    get = ["get", "configmap", name, "-n", namespace, "-o", "json"]
    original = json.loads(checked(stack.kubectl(*get, who="admin"), "reading the recipe").stdout)
    expect.denied(
        stack.apply(_recipe(list(RECIPE_PAIRS[:7])), who="admin"),
        RECIPE_SUBJECT,
        "RecipeInvalid",
        "the mapping must contain exactly 8 entries",
    )
    swapped = _recipe(with_pairs(RECIPE_PAIRS, (0, 1)))
    dry = stack.apply(swapped, who="admin", dry_run=True)
    # Every recipe-bound runtime other tests left behind would diverge too: the first three
    # are named (in name order), the rest counted.
    expect.warned(
        dry, "[MappingDivergesFromRecipe] would diverge from this recipe: ClusterTrainingRuntime "
    )
    try:
        run = stack.apply(swapped, who="admin")
        expect.warned(run, "[MappingDivergesFromRecipe] would diverge from this recipe:")
        assert "configmap/nicguard-recipe configured" in run.stdout, expect.shown(run)
    finally:
        patch = json.dumps([{"op": "replace", "path": "/data", "value": original["data"]}])
        restore = ["patch", "configmap", name, "-n", namespace, "--type=json", "-p", patch]
        checked(stack.kubectl(*restore, who="admin"), "restoring the recipe")
        wait_for_recipe(stack)


def test_the_recipe_cannot_be_deleted_while_it_binds_a_runtime(stack: Stack) -> None:
    namespace, name = RECIPE
    for dry_run in (["--dry-run=server"], []):
        run = stack.kubectl("delete", "configmap", name, "-n", namespace, *dry_run, who="admin")
        expect.denied(
            run,
            RECIPE_SUBJECT,
            "RecipeInUse",
            "the recipe nicguard-system/nicguard-recipe binds ClusterTrainingRuntime ",
        )


def test_the_namespace_controller_is_never_held(stack: Stack) -> None:
    """Deleting nicguard-system must not deadlock: the namespace controller's deletes pass (the
    control plane here runs no controller-manager, so its identity is impersonated)."""
    namespace, name = RECIPE
    args = ["delete", "configmap", name, "-n", namespace, "--dry-run=server", *NAMESPACE_CONTROLLER]
    expect.allowed(stack.kubectl(*args, who="admin"), "deleted from nicguard-system namespace")
    args = ["delete", NETWORKS, "gpu-nic-3", "--dry-run=server", *NAMESPACE_CONTROLLER]
    expect.allowed(stack.kubectl(*args, who="admin"), '"gpu-nic-3" deleted (server dry run)')


def _webhook_calls(stack: Stack) -> dict[str, float]:
    """The apiserver's own count of admission calls per webhook name."""
    raw = checked(stack.kubectl("get", "--raw", "/metrics", who="admin"), "apiserver metrics")
    calls: dict[str, float] = {}
    for line in raw.stdout.splitlines():
        if line.startswith("apiserver_admission_webhook_admission_duration_seconds_count{"):
            labels, _, value = line.partition("} ")
            webhook = labels.split('name="', 1)[1].split('"', 1)[0]
            calls[webhook] = calls.get(webhook, 0.0) + float(value)
    return calls


def test_other_configmaps_never_reach_nicguard(stack: Stack) -> None:
    before, judged = _webhook_calls(stack), stack.nicguard.judged_requests()
    namespaces = [unique("cms") for _ in range(4)]
    for namespace in namespaces:
        checked(stack.kubectl("create", "namespace", namespace, who="admin"), "namespace")
    maps = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"unrelated-{i}", "namespace": namespaces[i % 4]},
            "data": {"k": "v"},
        }
        for i in range(200)
    ]
    checked(stack.plane.kubectl("admin", "apply", "-f", "-", input=as_list(maps)), "200 ConfigMaps")
    # nicguard's own namespace too: a ConfigMap that is not the recipe.
    other = maps[0] | {"metadata": {"name": "not-the-recipe", "namespace": RECIPE[0]}}
    checked(stack.apply(other, who="admin"), "writing a ConfigMap beside the recipe")
    after = _webhook_calls(stack)
    for webhook in (
        "recipe.nicguard.dev",
        "protect.nicguard.dev",
        "validate.nicguard.dev",
        "snapshot.nicguard.dev",
    ):
        assert after.get(webhook, 0.0) == before.get(webhook, 0.0), (webhook, before, after)
    assert stack.nicguard.judged_requests() == judged


def test_a_ready_network_and_its_status_updates_are_not_judged(network_admins: Stack) -> None:
    name = unique("gpu-nic-status")
    ready_network(network_admins, name)  # both statuses written through the subresource
    expect.allowed(network_admins.kubectl("delete", NETWORKS, name), "deleted")
    expect.allowed(network_admins.kubectl("delete", PARAM_SETS, name), "deleted")


@pytest.fixture(scope="module", params=["warn", "off"])
def protect_setting(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Stack]]:
    """A stack of its own whose nicguard runs with ``--protect=warn`` or ``--protect=off``."""
    workdir = tmp_path_factory.mktemp(f"protect-{request.param}")
    with running(workdir, nicguard_args=[f"--protect={request.param}"]) as started:
        populate(started)
        yield request.param, started


def test_protect_warn_allows_with_the_message_and_off_allows_silently(
    protect_setting: tuple[str, Stack],
) -> None:
    setting, stack = protect_setting
    run = stack.kubectl("delete", NETWORKS, "gpu-nic-3", "--dry-run=server", who="admin")
    assert run.returncode == 0, expect.shown(run)
    assert '"gpu-nic-3" deleted (server dry run)' in run.stdout, expect.shown(run)
    warning = "Warning: [NetworkInUse] Network gpu-nic-3 is in use by recipe "
    assert (warning in run.stderr) is (setting == "warn"), expect.shown(run)


@pytest.fixture(scope="module")
def with_namespace_controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack of its own with kube-controller-manager running the namespace controller."""
    with running(tmp_path_factory.mktemp("namespace-deletion")) as started:
        populate(started)
        started.plane.start_controller_manager("namespace")
        yield started


def test_deleting_nicguards_namespace_completes_while_the_recipe_binds_runtimes(
    with_namespace_controller: Stack,
) -> None:
    """The namespace controller deletes the recipe (which RecipeInUse refuses to anyone else):
    never a deadlock, with nicguard running elsewhere and its webhooks in effect."""
    stack = with_namespace_controller
    namespace, name = RECIPE
    refused = stack.kubectl("delete", "configmap", name, "-n", namespace, who="admin")
    expect.denied(refused, RECIPE_SUBJECT, "RecipeInUse")
    run = stack.kubectl("delete", "namespace", namespace, "--wait=false", who="admin")
    assert run.returncode == 0, expect.shown(run)
    wait_until(
        lambda: stack.kubectl("get", "namespace", namespace, who="admin").returncode == 1 or None,
        timeout=NAMESPACE_DELETION_TIMEOUT,
        what=f"namespace {namespace} to be deleted",
        diagnose=stack.report,
    )
    gone = stack.kubectl("get", "configmap", name, "-n", namespace, who="admin")
    assert "NotFound" in gone.stderr, expect.shown(gone)
