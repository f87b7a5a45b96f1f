"""KubeClusterView over scripted sources, and once over the real client against a local server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from immutables import Map
from kubernetes.client import ApiException

from app.domain.annotation import InterfaceRef
from app.domain.cluster import ClaimTemplates, ClusterView, Networks, ObjectName, Unverifiable
from app.domain.drift import EVERYTHING, Change
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.network import Network
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.slim import slim_runtime
from app.kube.client import (
    INITIAL_EVENTS_SECONDS,
    WATCH_SECONDS,
    Listing,
    WatchEvent,
    load_api_client,
)
from app.kube.cluster_view import KubeClusterView, Sources
from app.kube.credentials import ClientConfigError
from app.kube.watch_cache import Pacing
from tests.kube.test_watch_cache import FAST, Held, ScriptedSource, Stream, wait_for
from tests.support.apiserver import (
    Answer,
    Request,
    Respond,
    Silence,
    Watch,
    client_of,
    status,
)

RECIPE = ObjectName("nicguard-system", "nicguard-recipe")
PAIRS = [(f"eth{n}", f"gpu-nic-{n - 1}") for n in range(1, 9)]
MAPPING = tuple(InterfaceRef(name, network=network) for name, network in PAIRS)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CLUSTER_RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
STOP_HANG_SECONDS = 30.0  # bounds a hang only: stopping takes milliseconds


def network(name: str, *, ready: bool = True, version: str = "3") -> JsonMap:
    status = "True" if ready else "False"
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "Network",
        "metadata": {"name": name, "resourceVersion": version},
        "spec": {"parametersRef": {"kind": "GKENetworkParamSet", "name": name}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": status, "reason": "Pending"},
                {"type": "ParamsReady", "status": "True"},
            ]
        },
    }


def recipe_configmap(version: str, interfaces: str) -> JsonMap:
    metadata = {"name": RECIPE.name, "namespace": RECIPE.namespace, "resourceVersion": version}
    return {"metadata": metadata, "data": {"tcpxoInterfaces": interfaces}}


def runtime(kind: str, name: str, namespace: str | None = None) -> JsonMap:
    metadata: dict[str, object] = {
        "name": name,
        "resourceVersion": "4",
        "labels": {"nicguard.dev/recipe-bound": "true"},
        "annotations": {LAST_APPLIED: "{...}", "team": "a"},
        "managedFields": [{"manager": "kubectl"}],
    }
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": metadata}


def synced_source(*items: JsonMap) -> ScriptedSource:
    return ScriptedSource(lists=[Listing(items, "10")])


MakeView = Callable[..., KubeClusterView]


def _is_a_cluster_view(view: KubeClusterView) -> ClusterView:
    return view  # mypy proves the structural fit with the domain protocol


@pytest.fixture
def make_view() -> Iterator[MakeView]:
    made: list[tuple[KubeClusterView, list[ScriptedSource]]] = []

    def make(
        networks: ScriptedSource | None = None,
        recipe: ScriptedSource | None = None,
        cluster_runtimes: ScriptedSource | None = None,
        runtimes: ScriptedSource | None = None,
    ) -> KubeClusterView:
        scripted = [
            source or synced_source() for source in (networks, recipe, cluster_runtimes, runtimes)
        ]
        view = KubeClusterView(
            Sources(scripted[0], scripted[1], scripted[2], scripted[3]),
            recipe_name=RECIPE,
            pacing=FAST,
        )
        view.start()
        made.append((view, scripted))
        return view

    yield make
    for view, scripted in made:
        view.stop(timeout=STOP_HANG_SECONDS)
        assert all(source.closed.is_set() for source in scripted)
        assert not view.alive()


def test_unsynced_caches_answer_unverifiable(make_view: MakeView) -> None:
    pending = [Held[Listing | Exception](Listing((), "1")) for _ in range(4)]
    view = make_view(*(ScriptedSource(lists=[held]) for held in pending))
    assert not view.wait_synced(0.05)
    assert view.networks() == Unverifiable("networks cache not synced: initial list pending")
    assert view.recipe() == Unverifiable("recipe cache not synced: initial list pending")
    assert view.runtime(Kind.TRAINING_RUNTIME, "team-a", "rt") == Unverifiable(
        "trainingruntimes cache not synced: initial list pending"
    )
    assert [s.synced for s in view.status()] == [False] * 4
    for held in pending:
        held.release.set()
    assert view.wait_synced(5)
    assert view.networks() == Networks(by_name=Map(), served=True)
    assert view.recipe() == RecipeMissing(ref=str(RECIPE))


def test_networks_come_from_the_cache_as_domain_values(make_view: MakeView) -> None:
    source = ScriptedSource(
        lists=[Listing((network("gpu-nic-0"), network("gpu-nic-1", ready=False)), "10")],
        watches=[[WatchEvent("DELETED", network("gpu-nic-1"))]],
    )
    view = make_view(networks=source)
    assert view.wait_synced(5)
    wait_for(lambda: len(source.watch_versions) == 2)
    assert view.networks() == Networks(
        by_name=Map({"gpu-nic-0": Network("gpu-nic-0", param_set="gpu-nic-0")})
    )


def test_network_api_not_served_is_answered_without_unverifiable(make_view: MakeView) -> None:
    view = make_view(networks=ScriptedSource(lists=[ApiException(status=404)]))
    assert view.wait_synced(5)
    assert view.networks() == Networks(by_name=Map(), served=False)
    assert [s.served for s in view.status()] == [False, True, True, True]


def test_recipe_follows_its_configmap_and_is_parsed_once_per_change(
    make_view: MakeView,
) -> None:
    interfaces = json.dumps([{"interfaceName": eth, "network": net} for eth, net in PAIRS])
    steps: list[Held[Stream | Exception]] = [
        Held([WatchEvent("ADDED", recipe_configmap("7", interfaces))]),
        Held([WatchEvent("MODIFIED", recipe_configmap("8", "[]"))]),
        Held([WatchEvent("DELETED", recipe_configmap("9", "[]"))]),
    ]
    view = make_view(recipe=ScriptedSource(lists=[Listing((), "5")], watches=steps))
    assert view.wait_synced(5)
    assert view.recipe() == RecipeMissing(ref="nicguard-system/nicguard-recipe")

    steps[0].release.set()
    wait_for(lambda: isinstance(view.recipe(), Recipe))
    assert view.recipe() == Recipe(ref="nicguard-system/nicguard-recipe@7", mapping=MAPPING)
    assert view.recipe() is view.recipe()

    steps[1].release.set()
    wait_for(lambda: view.recipe() != Recipe(ref=f"{RECIPE}@7", mapping=MAPPING))
    changed = view.recipe()
    assert isinstance(changed, Recipe)
    assert changed.ref == "nicguard-system/nicguard-recipe@8"
    assert changed.problem is not None

    steps[2].release.set()
    wait_for(lambda: isinstance(view.recipe(), RecipeMissing))


def test_runtimes_are_looked_up_by_kind_namespace_and_name(make_view: MakeView) -> None:
    view = make_view(
        cluster_runtimes=synced_source(runtime("ClusterTrainingRuntime", "torch")),
        runtimes=synced_source(runtime("TrainingRuntime", "rt", "team-a")),
    )
    assert view.wait_synced(5)
    found = view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "ignored", "torch")
    assert isinstance(found, Mapping)
    # The cache keeps what the rules read (slim_runtime): no managedFields, no annotations.
    assert found["metadata"] == {
        "name": "torch",
        "resourceVersion": "4",
        "labels": {"nicguard.dev/recipe-bound": "true"},
    }
    assert view.runtime(Kind.TRAINING_RUNTIME, "team-a", "rt") is not None
    assert view.runtime(Kind.TRAINING_RUNTIME, "team-b", "rt") is None
    assert view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "other") is None
    assert view.runtime(Kind.TRAIN_JOB, "team-a", "rt") is None


def test_a_forbidden_cache_makes_only_its_answers_unverifiable(make_view: MakeView) -> None:
    denied = ScriptedSource(lists=[ApiException(status=403, reason="Forbidden")])
    view = make_view(runtimes=denied)
    wait_for(lambda: denied.list_calls >= 2 and all(s.synced for s in view.status()[:3]))
    message = "forbidden: cannot list trainingruntimes.trainer.kubeflow.org (RBAC)"
    assert view.runtime(Kind.TRAINING_RUNTIME, "team-a", "rt") == Unverifiable(
        f"trainingruntimes cache not synced: {message}"
    )
    assert view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "rt") is None
    assert isinstance(view.networks(), Networks)
    status = {s.name: s for s in view.status()}
    assert list(status) == ["networks", "recipe", "clustertrainingruntimes", "trainingruntimes"]
    assert status["trainingruntimes"].error == message
    assert not status["trainingruntimes"].synced
    assert status["networks"].synced
    assert status["networks"].last_event_age_seconds is not None


def cluster_of_a_view() -> Respond:
    """Answers the LIST/WATCH and GET paths of a view like a kube-apiserver without WatchList
    would: networks in two pages then one watch event, the recipe's ConfigMap empty, no CTR
    API, TrainingRuntimes forbidden; GETs of named CTRs present, garbled or silent."""
    network_watches = 0
    group = "/apis/trainer.kubeflow.org/v1alpha1/"

    def respond(request: Request) -> Answer:
        nonlocal network_watches
        path, query = request.path, request.query
        if query.get("sendInitialEvents") == "true":  # as kube-apiserver without WatchList
            return status(422, "Invalid")
        if path.startswith(group + "clustertrainingruntimes/"):
            return get_runtime(path.rsplit("/", 1)[1])
        if path.startswith(group + "namespaces/") or path == group + "trainingruntimes":
            return status(403, "Forbidden")
        if path == group + "clustertrainingruntimes":
            return status(404, "NotFound")
        if query.get("watch") != "true" and path.endswith("/networks"):
            # Two pages: the continue token of the first fetches the second.
            page = "continue" in query
            metadata = {"resourceVersion": "100"} | ({} if page else {"continue": "p2"})
            return 200, {
                "items": [network("gpu-nic-2" if page else "gpu-nic-0")],
                "metadata": metadata,
            }
        if query.get("watch") != "true":
            return 200, {"items": [], "metadata": {"resourceVersion": "100"}}
        if path.endswith("/networks") and network_watches == 0:
            network_watches += 1
            return Watch(({"type": "ADDED", "object": network("gpu-nic-1", version="101")},))
        return Watch(hold=True)  # a quiet watch, held open until teardown

    def get_runtime(name: str) -> Answer:
        if name == "present":
            return 200, runtime("ClusterTrainingRuntime", "present")
        if name == "garbled":
            return 200, ["not", "an", "object"]
        if name == "silent":
            return Silence()  # no answer until teardown: the GET times out
        return status(404, "NotFound")

    return respond


@pytest.mark.slow  # a live client against a local server; stopping ends its held watches
def test_from_api_client_lists_and_watches_through_the_generated_client() -> None:
    with client_of(cluster_of_a_view()) as (server, api_client):
        pacing = Pacing(backoff_base=0.01, backoff_cap=0.05, recheck=0.05)
        view = KubeClusterView.from_api_client(api_client, RECIPE, pacing=pacing)
        before = set(threading.enumerate())
        view.start()
        caches = [
            t for t in threading.enumerate() if t not in before and t.name.startswith("watch-")
        ]
        try:
            wait_for(lambda: all(s.synced for s in view.status()[:3]))
            wait_for(lambda: len(getattr(view.networks(), "by_name", {})) == 3)
            assert view.recipe() == RecipeMissing(ref=str(RECIPE))
            assert view.runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "torch") is None
            wait_for(lambda: view.claim_templates() == ClaimTemplates(by_key=Map()))
            assert "/apis/resource.k8s.io/v1/resourceclaimtemplates" in dict(server.queries)
            wait_for(
                lambda: isinstance(view.runtime(Kind.TRAINING_RUNTIME, "a", "b"), Unverifiable)
            )
            queries = [q for p, q in server.queries if p.endswith("/networks")][:4]
            watch_seconds = int(queries[3].pop("timeoutSeconds"))
            assert WATCH_SECONDS[0] <= watch_seconds <= WATCH_SECONDS[1]  # short, jittered
            assert queries == [
                # The initial events first; refused, the LIST pages.
                {
                    "watch": "true",
                    "sendInitialEvents": "true",
                    "resourceVersionMatch": "NotOlderThan",
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": str(INITIAL_EVENTS_SECONDS),
                },
                {"limit": "100"},
                {"limit": "100", "continue": "p2"},
                {"watch": "true", "resourceVersion": "100", "allowWatchBookmarks": "true"},
            ]
            configmaps = dict(server.queries)["/api/v1/namespaces/nicguard-system/configmaps"]
            assert configmaps["fieldSelector"] == "metadata.name=nicguard-recipe"
            assert len(caches) == len(view.status())
            # The quiet watches are held open by the server until teardown: a thread still in
            # its read would outlive this generous wait, which only bounds a hang.
            view.stop(timeout=STOP_HANG_SECONDS)
            assert not server.closing.is_set()  # nothing ended the watches but stop()
            assert [t.name for t in caches if t.is_alive()] == []
            assert not view.alive()
        finally:
            view.stop()


@pytest.mark.slow  # an unanswered GET waits out its 1 s read timeout
def test_fetch_runtime_gets_one_runtime_through_the_generated_client() -> None:
    with client_of(cluster_of_a_view()) as (server, api_client):
        view = KubeClusterView.from_api_client(api_client, RECIPE)
        fetch = view.fetch_runtime
        found = fetch(Kind.CLUSTER_TRAINING_RUNTIME, "ignored", "present")
        assert found == slim_runtime(runtime("ClusterTrainingRuntime", "present"))
        assert fetch(Kind.CLUSTER_TRAINING_RUNTIME, "", "absent") is None
        assert fetch(Kind.TRAINING_RUNTIME, "team-a", "x") == Unverifiable(
            "GET TrainingRuntime team-a/x: HTTP 403 Forbidden (RBAC: nicguard needs get on it)"
        )
        assert fetch(Kind.CLUSTER_TRAINING_RUNTIME, "", "garbled") == Unverifiable(
            "GET ClusterTrainingRuntime garbled: not an object"
        )
        silent = fetch(Kind.CLUSTER_TRAINING_RUNTIME, "", "silent")
        assert isinstance(silent, Unverifiable)
        assert silent.reason.startswith("GET ClusterTrainingRuntime silent failed: ")
        assert "timed out" in silent.reason
        paths = [p for p, _ in server.queries]
        # One attempt, no retry: the server saw the unanswered GET once.
        assert paths.count(f"{CLUSTER_RUNTIMES}/silent") == 1
        assert paths[:2] == [
            "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/present",
            "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/absent",
        ]
        assert (
            paths[2] == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainingruntimes/x"
        )


def test_without_an_api_fetch_runtime_finds_nothing(make_view: MakeView) -> None:
    assert make_view().fetch_runtime(Kind.CLUSTER_TRAINING_RUNTIME, "", "x") is None


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_load_api_client_prefers_an_explicit_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    api_client = load_api_client({"KUBECONFIG": str(path)})
    assert api_client.configuration.host == "https://127.0.0.1:6443"
    api_client.rest_client.close()


def test_load_api_client_with_an_unusable_kubeconfig_says_why(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="cannot use KUBECONFIG="):
        load_api_client({"KUBECONFIG": str(tmp_path / "absent")})


def test_snapshot_is_unverifiable_until_both_runtime_caches_are_synced() -> None:
    held = Held[Listing | Exception](Listing((runtime("TrainingRuntime", "rt", "team-a"),), "1"))
    sources = [synced_source(network("gpu-nic-0")), synced_source()]
    sources += [
        synced_source(runtime("ClusterTrainingRuntime", "ctr")),
        ScriptedSource(lists=[held]),
    ]
    view = KubeClusterView(
        Sources(sources[0], sources[1], sources[2], sources[3]), recipe_name=RECIPE, pacing=FAST
    )
    view.start()
    try:
        wait_for(lambda: view.status()[2].synced)
        assert view.snapshot().runtime_state == Unverifiable(
            "trainingruntimes cache not synced: initial list pending"
        )
        held.release.set()
        assert view.wait_synced(5)
        snapshot = view.snapshot()
        runtimes = snapshot.runtime_state
        assert not isinstance(runtimes, Unverifiable)
        ctr = (Kind.CLUSTER_TRAINING_RUNTIME, "", "ctr")
        tr = (Kind.TRAINING_RUNTIME, "team-a", "rt")
        assert sorted(runtimes) == sorted([ctr, tr])
        assert len(runtimes) == 2
        assert runtimes[tr] == slim_runtime(runtime("TrainingRuntime", "rt", "team-a"))
        assert (Kind.TRAINING_RUNTIME, "team-a", "other") not in runtimes
        assert snapshot.networks() == view.networks()
    finally:
        view.stop()


def subscribed(view: KubeClusterView) -> list[Change]:
    """Every Change the view's caches report from now on (appended on their threads)."""
    heard: list[Change] = []
    lock = threading.Lock()

    def listen(change: Change) -> None:
        with lock:
            heard.append(change)

    view.subscribe(listen)
    return heard


def test_subscribers_hear_cache_changes_as_audit_changes() -> None:
    sources = [
        ScriptedSource(lists=[Listing((), "1")], watches=[[WatchEvent("ADDED", network("n1"))]]),
        ScriptedSource(
            lists=[Listing((), "1")],
            watches=[[WatchEvent("ADDED", recipe_configmap("2", "[]"))]],
        ),
        synced_source(),
        ScriptedSource(
            lists=[Listing((), "1")],
            watches=[[WatchEvent("ADDED", runtime("TrainingRuntime", "rt", "team-a"))]],
        ),
    ]
    view = KubeClusterView(
        Sources(sources[0], sources[1], sources[2], sources[3]), recipe_name=RECIPE, pacing=FAST
    )
    heard = subscribed(view)
    view.start()
    try:
        expected = {
            EVERYTHING,
            Change(networks=frozenset({"n1"})),
            Change(recipe=True),
            Change(runtimes=frozenset({(Kind.TRAINING_RUNTIME, "team-a", "rt")})),
        }
        wait_for(lambda: expected <= set(heard))
        assert set(heard) == expected  # each cache's first list is "everything"
    finally:
        view.stop()


def gnp(name: str, *, ready: bool = True, mode: str = "NetDevice") -> JsonMap:
    condition = {"type": "Ready", "status": "True" if ready else "False", "reason": "GNPReady"}
    if not ready:
        condition["reason"] = "SubnetNotFound"
    return {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": name, "resourceVersion": "5"},
        "spec": {"deviceMode": mode},
        "status": {"conditions": [condition]},
    }


def with_param_sets(
    param_sets: ScriptedSource, networks: ScriptedSource | None = None
) -> KubeClusterView:
    sources = Sources(
        networks or synced_source(network("gpu-nic-0"), network("gpu-nic-1")),
        synced_source(),
        synced_source(),
        synced_source(),
        param_sets=param_sets,
    )
    return KubeClusterView(sources, recipe_name=RECIPE, pacing=FAST)


def test_networks_come_with_their_param_sets_once_that_cache_is_synced() -> None:
    held = Held[Listing | Exception](
        Listing((gnp("gpu-nic-0"), gnp("gpu-nic-1", ready=False)), "9")
    )
    view = with_param_sets(ScriptedSource(lists=[held]))
    view.start()
    try:
        wait_for(lambda: view.status()[0].synced)
        assert view.networks() == Unverifiable(
            "gkenetworkparamsets cache not synced: initial list pending"
        )
        assert [s.name for s in view.status()][-1] == "gkenetworkparamsets"
        held.release.set()
        assert view.wait_synced(5)
        networks = view.networks()
        assert isinstance(networks, Networks)
        assert networks.param_sets is not None
        assert networks.usable(networks.by_name["gpu-nic-0"])
        assert networks.problem(networks.by_name["gpu-nic-1"]) == (
            "GKENetworkParamSet gpu-nic-1: Ready=SubnetNotFound"
        )
    finally:
        view.stop()


def test_a_param_set_api_that_is_not_served_describes_none() -> None:
    view = with_param_sets(ScriptedSource(lists=[ApiException(status=404)]))
    view.start()
    try:
        assert view.wait_synced(5)
        networks = view.networks()
        assert isinstance(networks, Networks)
        assert networks.param_sets is None  # their checks are skipped, not failed
    finally:
        view.stop()


def test_a_param_set_change_is_heard_as_a_change_of_the_networks_referencing_it() -> None:
    later = Held[Stream | Exception]([WatchEvent("MODIFIED", gnp("gpu-nic-1", ready=False))])
    param_sets = ScriptedSource(lists=[Listing((gnp("gpu-nic-0"),), "9")], watches=[later])
    networks = ScriptedSource(lists=[Listing((network("gpu-nic-0"), network("gpu-nic-1")), "3")])
    view = with_param_sets(param_sets, networks)
    heard = subscribed(view)
    view.start()
    try:
        assert view.wait_synced(5)
        later.release.set()  # the event comes once the Networks are known
        wait_for(lambda: Change(networks=frozenset({"gpu-nic-1"})) in heard)
        assert EVERYTHING in heard  # the first lists
    finally:
        view.stop()


def test_the_networks_view_is_reused_until_a_cache_changes() -> None:
    later = Held[Stream | Exception]([WatchEvent("MODIFIED", gnp("gpu-nic-1", ready=False))])
    param_sets = ScriptedSource(
        lists=[Listing((gnp("gpu-nic-0"), gnp("gpu-nic-1")), "9")], watches=[later]
    )
    view = with_param_sets(param_sets)
    view.start()
    try:
        assert view.wait_synced(5)
        first = view.networks()
        assert isinstance(first, Networks)
        assert view.networks() is first  # worked-out names and usability are kept
        assert first.usable(first.by_name["gpu-nic-1"])
        later.release.set()
        wait_for(lambda: view.networks() is not first)
        changed = view.networks()
        assert isinstance(changed, Networks)
        assert not changed.usable(changed.by_name["gpu-nic-1"])
    finally:
        view.stop()
