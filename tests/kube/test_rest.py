"""The plain REST calls of app.kube.rest against the fake API server: each call's method, path,
query, content type and body, a 2xx answer handed back unread, anything else raised."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import urllib3
from kubernetes.client import ApiClient, ApiException

from app.kube.rest import (
    config_map_list,
    create_secret,
    custom_object_list,
    patch_webhook_configuration,
    read_secret,
    read_webhook_configuration,
    replace_secret,
    request,
)
from tests.support.apiserver import Reply, Request, client_of, listed, status

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}}
PATCH = {"webhooks": [{"name": "validate.nicguard.dev", "clientConfig": {"caBundle": "Q0E="}}]}
SMP = "application/strategic-merge-patch+json"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

Call = Callable[[ApiClient], urllib3.BaseHTTPResponse]


def answering(reply: Reply) -> Callable[[Request], Reply]:
    return lambda _: reply


@pytest.mark.parametrize(
    ("call", "method", "path", "content_type", "body"),
    [
        pytest.param(
            lambda api: read_secret(api, "nicguard-system", "tls", 5.0),
            "GET",
            "/api/v1/namespaces/nicguard-system/secrets/tls",
            "",
            None,
            id="read a secret",
        ),
        pytest.param(
            lambda api: create_secret(api, "nicguard-system", SECRET, 5.0),
            "POST",
            "/api/v1/namespaces/nicguard-system/secrets",
            "application/json",
            SECRET,
            id="create a secret",
        ),
        pytest.param(
            lambda api: replace_secret(api, "nicguard-system", "tls", SECRET, (1.0, 2.0)),
            "PUT",
            "/api/v1/namespaces/nicguard-system/secrets/tls",
            "application/json",
            SECRET,
            id="replace a secret",
        ),
        pytest.param(
            lambda api: read_webhook_configuration(api, "nicguard", None),
            "GET",
            f"{WEBHOOKS}/nicguard",
            "",
            None,
            id="read the webhook configuration",
        ),
        pytest.param(
            lambda api: patch_webhook_configuration(api, "nicguard", PATCH, SMP, 5.0),
            "PATCH",
            f"{WEBHOOKS}/nicguard",
            SMP,
            PATCH,
            id="patch the webhook configuration",
        ),
    ],
)
def test_each_call_sends_its_method_path_and_body(
    call: Call, method: str, path: str, content_type: str, body: object
) -> None:
    with client_of(answering((200, {"kind": "Secret"}))) as (server, api_client):
        response = call(api_client)
        assert json.loads(response.data) == {"kind": "Secret"}
    (sent,) = server.requests
    assert (sent.method, sent.path, sent.query) == (method, path, {})
    assert (sent.content_type, sent.body) == (content_type, body)


@pytest.mark.parametrize(
    ("make", "params", "path", "query"),
    [
        pytest.param(
            lambda api: config_map_list(api, "nicguard-system", "metadata.name=nicguard-recipe"),
            {"limit": 100, "_continue": "p2"},
            "/api/v1/namespaces/nicguard-system/configmaps",
            {"limit": "100", "continue": "p2", "fieldSelector": "metadata.name=nicguard-recipe"},
            id="config maps: a page, the selector fixed",
        ),
        pytest.param(
            lambda api: custom_object_list(api, "networking.gke.io", "v1", "networks"),
            {
                "watch": True,
                "resource_version": "100",
                "allow_watch_bookmarks": True,
                "timeout_seconds": 290,
                "field_selector": None,
            },
            "/apis/networking.gke.io/v1/networks",
            {
                "watch": "true",
                "resourceVersion": "100",
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "290",
            },
            id="custom objects: a watch, None left out",
        ),
        pytest.param(
            lambda api: custom_object_list(api, "trainer.kubeflow.org", "v1alpha1", "x"),
            {
                "send_initial_events": True,
                "resource_version_match": "NotOlderThan",
                "watch": True,
            },
            "/apis/trainer.kubeflow.org/v1alpha1/x",
            {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan", "watch": "true"},
            id="custom objects: WatchList keywords the generated method lacks",
        ),
    ],
)
def test_a_list_call_takes_the_generated_methods_keywords(
    make: Callable[[ApiClient], Callable[..., urllib3.BaseHTTPResponse]],
    params: dict[str, object],
    path: str,
    query: dict[str, str],
) -> None:
    with client_of(answering(listed())) as (server, api_client):
        response = make(api_client)(_preload_content=False, _request_timeout=5.0, **params)
        assert json.loads(response.data)["kind"] == "List"
    assert server.queries == [(path, query)]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        pytest.param(status(404, "NotFound", 'secrets "tls" not found'), "Not Found", id="404"),
        pytest.param(status(403, "Forbidden"), "Forbidden", id="403"),
        pytest.param(status(409, "Conflict"), "Conflict", id="409"),
        pytest.param((500, "etcd down"), "Internal Server Error", id="500, not a Status"),
    ],
)
def test_an_answer_outside_2xx_raises_with_its_status_and_body(reply: Reply, reason: str) -> None:
    with (
        client_of(answering(reply)) as (_, api_client),
        pytest.raises(ApiException) as raised,
    ):
        read_secret(api_client, "nicguard-system", "tls", 5.0)
    assert (raised.value.status, raised.value.reason) == (reply[0], reason)
    assert json.loads(raised.value.body or "") == reply[1]


@pytest.mark.parametrize("code", [200, 201, 204, 299])
def test_every_2xx_is_a_success(code: int) -> None:
    with client_of(answering((code, {}))) as (_, api_client):
        response = request(api_client, "DELETE", "/api/v1/{x}", {"x": "y"})
        assert response.status == code
