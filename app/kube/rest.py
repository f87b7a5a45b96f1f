"""ConfigMaps, Secrets and the webhook configuration as plain REST calls through the ApiClient.

The generated CoreV1Api and AdmissionregistrationV1Api import some 300 model classes (26 MiB
resident, BENCHMARKS.md) for the few calls nicguard makes, whose bodies it reads as JSON anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import urllib3
from kubernetes.client import ApiClient, ApiException

from app.kube.client import ListCall

_CONFIG_MAPS: Final = "/api/v1/namespaces/{namespace}/configmaps"
_SECRETS: Final = "/api/v1/namespaces/{namespace}/secrets"
_SECRET: Final = "/api/v1/namespaces/{namespace}/secrets/{name}"  # noqa: S105 - a path
_CUSTOM_OBJECTS: Final = "/apis/{group}/{version}/{plural}"  # cluster-wide: every namespace
_NAMESPACED_OBJECTS: Final = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"
_CORE_OBJECTS: Final = "/api/{version}/{plural}"
_NAMESPACED_CORE_OBJECTS: Final = "/api/{version}/namespaces/{namespace}/{plural}"
_WEBHOOK_CONFIGURATION: Final = (
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}"
)
# The keyword names of the generated list methods, as ApiListWatch passes them.
_QUERY: Final = {
    "_continue": "continue",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "field_selector": "fieldSelector",
    "limit": "limit",
    "resource_version": "resourceVersion",
    "resource_version_match": "resourceVersionMatch",
    "send_initial_events": "sendInitialEvents",
    "timeout_seconds": "timeoutSeconds",
    "watch": "watch",
}

Timeout = float | tuple[float, float] | None


def request(
    api_client: ApiClient,
    method: str,
    path: str,
    path_params: Mapping[str, str],
    *,
    query: list[tuple[str, object]] | None = None,
    body: object = None,
    content_type: str = "application/json",
    timeout: Timeout = None,
) -> urllib3.BaseHTTPResponse:
    """The raw response of a 2xx answer (unread: a watch streams); raises ``ApiException``
    otherwise, as the generated methods do with ``_preload_content=False``."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    serialized = api_client.param_serialize(
        method=method,
        resource_path=path,
        path_params=dict(path_params),
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*serialized, _request_timeout=timeout)
    if not 200 <= response.status <= 299:
        response.read()  # type: ignore[no-untyped-call]
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    raw: urllib3.BaseHTTPResponse = response.response
    return raw


def config_map_list(api_client: ApiClient, namespace: str, field_selector: str) -> ListCall:
    """A list (and watch) call of the ConfigMaps of ``namespace`` that ``field_selector`` keeps,
    taking the keywords of ``CoreV1Api.list_namespaced_config_map`` (and those of WatchList)."""
    return _list_call(
        api_client, _CONFIG_MAPS, {"namespace": namespace}, [("fieldSelector", field_selector)]
    )


def custom_object_list(api_client: ApiClient, group: str, version: str, plural: str) -> ListCall:
    """A list (and watch) call of a custom resource in the whole cluster, taking the keywords
    of ``CustomObjectsApi.list_cluster_custom_object`` and those of WatchList
    (``send_initial_events``, ``resource_version_match``), which the generated method lacks."""
    path_params = {"group": group, "version": version, "plural": plural}
    return _list_call(api_client, _CUSTOM_OBJECTS, path_params, [])


def resource_list(
    api_client: ApiClient, group: str, version: str, plural: str, namespace: str | None
) -> ListCall:
    """A list call of any resource (``group`` empty: the core API) in the whole cluster, or
    only in ``namespace``."""
    path_params = {"group": group, "version": version, "plural": plural}
    if namespace is not None:
        path_params["namespace"] = namespace
        path = _NAMESPACED_OBJECTS if group else _NAMESPACED_CORE_OBJECTS
    else:
        path = _CUSTOM_OBJECTS if group else _CORE_OBJECTS
    return _list_call(api_client, path, path_params, [])


def _list_call(
    api_client: ApiClient,
    path: str,
    path_params: Mapping[str, str],
    fixed: list[tuple[str, object]],
) -> ListCall:
    def call(
        *, _preload_content: bool = False, _request_timeout: Timeout = None, **params: object
    ) -> urllib3.BaseHTTPResponse:
        query = [(_QUERY[k], v) for k, v in params.items() if v is not None]
        return request(
            api_client, "GET", path, path_params, query=query + fixed, timeout=_request_timeout
        )

    return call


def read_secret(
    api_client: ApiClient, namespace: str, name: str, timeout: Timeout
) -> urllib3.BaseHTTPResponse:
    return request(
        api_client, "GET", _SECRET, {"namespace": namespace, "name": name}, timeout=timeout
    )


def create_secret(
    api_client: ApiClient, namespace: str, body: Mapping[str, object], timeout: Timeout
) -> urllib3.BaseHTTPResponse:
    return request(
        api_client, "POST", _SECRETS, {"namespace": namespace}, body=body, timeout=timeout
    )


def replace_secret(
    api_client: ApiClient, namespace: str, name: str, body: Mapping[str, object], timeout: Timeout
) -> urllib3.BaseHTTPResponse:
    return request(
        api_client,
        "PUT",
        _SECRET,
        {"namespace": namespace, "name": name},
        body=body,
        timeout=timeout,
    )


def read_webhook_configuration(
    api_client: ApiClient, name: str, timeout: Timeout
) -> urllib3.BaseHTTPResponse:
    return request(api_client, "GET", _WEBHOOK_CONFIGURATION, {"name": name}, timeout=timeout)


def patch_webhook_configuration(
    api_client: ApiClient,
    name: str,
    patch: Mapping[str, object],
    content_type: str,
    timeout: Timeout,
) -> urllib3.BaseHTTPResponse:
    return request(
        api_client,
        "PATCH",
        _WEBHOOK_CONFIGURATION,
        {"name": name},
        body=patch,
        content_type=content_type,
        timeout=timeout,
    )
