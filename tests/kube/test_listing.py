"""One read of the cluster (app.kube.listing) and the report API discovery (app.kube.discovery)
through the real generated client, against a local server answering like a kube-apiserver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes.client import ApiClient, ApiException, Configuration

from app.domain.cluster import Networks, RuntimeKey
from app.domain.kinds import Kind
from app.domain.network import ParamSet
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.reports import ReportApi
from app.domain.slim import slim_runtime
from app.kube.discovery import served_report_api
from app.kube.listing import ClusterReadError, list_snapshot
from tests.builders import (
    GPU_NICS,
    RECIPE_NAME,
    configmap,
    network,
    plain_recipe,
    runtime,
    wired,
    with_metadata,
)

TRAINER: Final = "/apis/trainer.kubeflow.org/v1alpha1"
NETWORKS: Final = "/apis/networking.gke.io/v1/networks"
PARAM_SETS: Final = "/apis/networking.gke.io/v1/gkenetworkparamsets"
CONFIGMAPS: Final = "/api/v1/namespaces/nicguard-system/configmaps"
CTRS: Final = f"{TRAINER}/clustertrainingruntimes"
TRS: Final = f"{TRAINER}/trainingruntimes"
OPENREPORTS: Final = "/apis/openreports.io/v1alpha1"
WGPOLICYK8S: Final = "/apis/wgpolicyk8s.io/v1alpha2"
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"

Reply = tuple[int, object]


def listed(*items: object) -> Reply:
    return 200, {"kind": "List", "metadata": {"resourceVersion": "10"}, "items": list(items)}


def status(code: int, reason: str, message: str = "") -> Reply:
    return code, {"kind": "Status", "code": code, "reason": reason, "message": message}


def discovery(group_version: str) -> Reply:
    return 200, {"kind": "APIResourceList", "groupVersion": group_version, "resources": []}


def team_runtime(namespace: str, name: str, uid: str) -> dict[str, object]:
    found = runtime(name, kind=Kind.TRAINING_RUNTIME, namespace=namespace, annotations=wired())
    return with_metadata(found, uid=uid, annotations={LAST_APPLIED: "{...}"})


CTR: Final = with_metadata(runtime(annotations=wired()), uid="u-ctr")
TEAM_A: Final = team_runtime("team-a", "a", "u-a")
TEAM_B: Final = team_runtime("team-b", "b", "u-b")
CLUSTER: Final[dict[str, Reply]] = {
    NETWORKS: listed(*(network(name) for name in GPU_NICS)),
    CONFIGMAPS: listed(configmap(plain_recipe())),
    CTRS: listed(CTR),
    TRS: listed(TEAM_A, TEAM_B),
    f"{TRAINER}/namespaces/team-a/trainingruntimes": listed(TEAM_A),
    OPENREPORTS: discovery("openreports.io/v1alpha1"),
    WGPOLICYK8S: discovery("wgpolicyk8s.io/v1alpha2"),
}


class ApiServer(ThreadingHTTPServer):
    """Answers GETs from ``routes`` by path (404 for any other), recording each path and query."""

    daemon_threads = True

    def __init__(self, routes: Mapping[str, Reply]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = dict(routes)
        self.queries: list[tuple[str, dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.queries]

    def kubeconfig(self, directory: Path) -> Path:
        """A kubeconfig naming this server, as a user's would."""
        path = directory / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": self.url}}],
                    "users": [{"name": "u", "user": {"token": "t0ken"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        return path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.server.queries.append((url.path, {k: v[0] for k, v in parse_qs(url.query).items()}))
        code, body = self.server.routes.get(url.path, status(404, "NotFound"))
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(routes: Mapping[str, Reply]) -> Iterator[ApiServer]:
    server = ApiServer(routes)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def client_of(routes: Mapping[str, Reply]) -> Iterator[tuple[ApiServer, ApiClient]]:
    with serving(routes) as server:
        api_client = ApiClient(Configuration(host=server.url))
        try:
            yield server, api_client
        finally:
            api_client.rest_client.close()


def test_one_list_per_resource_gives_a_complete_slim_snapshot() -> None:
    with client_of(CLUSTER) as (server, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    assert server.queries == [
        (NETWORKS, {"limit": "100"}),
        (PARAM_SETS, {"limit": "100"}),
        (CONFIGMAPS, {"fieldSelector": "metadata.name=nicguard-recipe", "limit": "100"}),
        (CTRS, {"limit": "100"}),
        (TRS, {"limit": "100"}),
    ]
    networks = snapshot.network_state
    assert isinstance(networks, Networks)
    assert networks.served
    assert sorted(networks.by_name) == sorted(GPU_NICS)
    assert networks.param_sets is None  # answered 404: not served, so not described
    recipe = snapshot.recipe_state
    assert isinstance(recipe, Recipe)
    assert recipe.ref == "nicguard-system/nicguard-recipe@7"
    expected: dict[RuntimeKey, object] = {
        (Kind.CLUSTER_TRAINING_RUNTIME, "", "torch-distributed-tcpxo"): slim_runtime(CTR),
        (Kind.TRAINING_RUNTIME, "team-a", "a"): slim_runtime(TEAM_A),
        (Kind.TRAINING_RUNTIME, "team-b", "b"): slim_runtime(TEAM_B),
    }
    assert snapshot.runtime_state == expected
    slim = snapshot.runtime(Kind.TRAINING_RUNTIME, "team-a", "a")
    assert isinstance(slim, Mapping)
    assert slim["metadata"] == {"name": "a", "namespace": "team-a"}


def test_one_namespace_lists_only_its_training_runtimes() -> None:
    with client_of(CLUSTER) as (server, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, "team-a")
    assert server.paths == [
        NETWORKS,
        PARAM_SETS,
        CONFIGMAPS,
        f"{TRAINER}/namespaces/team-a/trainingruntimes",
    ]
    assert snapshot.runtime_state == {(Kind.TRAINING_RUNTIME, "team-a", "a"): slim_runtime(TEAM_A)}


def test_networks_not_served_and_no_recipe_are_answers_not_failures() -> None:
    routes = {**CLUSTER, CONFIGMAPS: listed()}
    del routes[NETWORKS]
    with client_of(routes) as (_, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    assert snapshot.network_state == Networks(by_name={}, served=False)
    assert snapshot.recipe_state == RecipeMissing(ref="nicguard-system/nicguard-recipe")


@pytest.mark.parametrize(
    ("path", "reply", "message"),
    [
        pytest.param(
            CTRS,
            status(403, "Forbidden", 'cannot list resource "clustertrainingruntimes"'),
            "cannot list clustertrainingruntimes.trainer.kubeflow.org: forbidden (RBAC): "
            'cannot list resource "clustertrainingruntimes"',
            id="forbidden",
        ),
        pytest.param(
            NETWORKS,
            status(500, "InternalError", "etcdserver: request timed out"),
            "cannot list networks.networking.gke.io: HTTP 500: etcdserver: request timed out",
            id="networks failing otherwise than NotFound",
        ),
        pytest.param(
            TRS,
            status(404, "NotFound", "the server could not find the requested resource"),
            "cannot list trainingruntimes.trainer.kubeflow.org: HTTP 404: "
            "the server could not find the requested resource",
            id="trainer not installed",
        ),
    ],
)
def test_any_other_failure_is_one_line_naming_what_could_not_be_listed(
    path: str, reply: Reply, message: str
) -> None:
    with (
        client_of({**CLUSTER, path: reply}) as (_, api_client),
        pytest.raises(ClusterReadError) as raised,
    ):
        list_snapshot(api_client, RECIPE_NAME, None)
    assert str(raised.value) == message


def test_an_unreachable_server_is_one_line_naming_the_first_list() -> None:
    with serving(CLUSTER) as server:
        url = server.url  # closed on leaving: nothing listens there any more
    configuration = Configuration(host=url)
    configuration.retries = False
    api_client = ApiClient(configuration)
    try:
        with pytest.raises(ClusterReadError) as raised:
            list_snapshot(api_client, RECIPE_NAME, None)
    finally:
        api_client.rest_client.close()
    message = str(raised.value)
    assert message.startswith("cannot list networks.networking.gke.io: ")
    assert "Connection refused" in message
    assert "\n" not in message
    assert len(message) < 400


@pytest.mark.parametrize(
    ("served", "found"),
    [
        pytest.param((OPENREPORTS, WGPOLICYK8S), ReportApi.OPENREPORTS, id="both: openreports"),
        pytest.param((WGPOLICYK8S,), ReportApi.WGPOLICYK8S, id="only wgpolicyk8s"),
        pytest.param((), None, id="neither"),
    ],
)
def test_auto_finds_the_preferred_report_api_the_cluster_serves(
    served: tuple[str, ...], found: ReportApi | None
) -> None:
    routes = {path: CLUSTER[path] for path in served}
    with client_of(routes) as (server, api_client):
        assert served_report_api(api_client, "auto") is found
    asked = [OPENREPORTS] if found is ReportApi.OPENREPORTS else [OPENREPORTS, WGPOLICYK8S]
    assert server.paths == asked


@pytest.mark.parametrize(
    ("choice", "found"),
    [("off", None), (ReportApi.WGPOLICYK8S, ReportApi.WGPOLICYK8S)],
)
def test_off_and_a_named_api_ask_nothing(choice: ReportApi | str, found: ReportApi | None) -> None:
    with client_of({}) as (server, api_client):
        assert served_report_api(api_client, choice) is found
    assert server.paths == []


def test_discovery_failing_otherwise_than_not_found_is_the_callers_to_judge() -> None:
    forbidden = {OPENREPORTS: status(403, "Forbidden")}
    with client_of(forbidden) as (_, api_client), pytest.raises(ApiException) as raised:
        served_report_api(api_client, "auto")
    assert raised.value.status == 403
    with client_of({}) as (_, api_client), pytest.raises(ValueError, match="not a reports"):
        served_report_api(api_client, "sometimes")


def test_param_sets_served_describe_the_networks_usability() -> None:
    gnp = {
        "apiVersion": "networking.gke.io/v1",
        "kind": "GKENetworkParamSet",
        "metadata": {"name": "gpu-nic-0"},
        "spec": {"deviceMode": "NetDevice"},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "VPCNotFound"}]},
    }
    with client_of({**CLUSTER, PARAM_SETS: listed(gnp)}) as (_, api_client):
        snapshot = list_snapshot(api_client, RECIPE_NAME, None)
    networks = snapshot.network_state
    assert isinstance(networks, Networks)
    assert networks.param_sets == {
        "gpu-nic-0": ParamSet("gpu-nic-0", "Ready=VPCNotFound", "NetDevice")
    }
    assert networks.problem(networks.by_name["gpu-nic-0"]) == (
        "GKENetworkParamSet gpu-nic-0: Ready=VPCNotFound"
    )
    assert networks.problem(networks.by_name["gpu-nic-1"]) == (
        "GKENetworkParamSet gpu-nic-1 does not exist"
    )
