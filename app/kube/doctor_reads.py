"""The reads of ``nicguard doctor``: the server's version and discovery, the Deployment, the webhook
configuration, the RBAC that names the break-glass group, and server-side dry-run creates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from kubernetes.client import ApiClient, ApiException

from app.domain.doctor import Replicas
from app.domain.doctor_cluster import RoleKey
from app.domain.doctor_webhooks import DryRun
from app.domain.fields import JsonMap, as_list, as_map, str_at, value_at
from app.kube.client import ApiListWatch
from app.kube.errors import NOT_FOUND, TIMEOUT, read_body, read_json, status_of
from app.kube.listing import read_failures
from app.kube.rest import read_webhook_configuration, request, resource_list

_RBAC: Final = ("rbac.authorization.k8s.io", "v1")


def server_version(api_client: ApiClient) -> tuple[str, str]:
    """``(gitVersion, minor)`` of ``GET /version``; raises ``ClusterReadError``."""
    with read_failures("read the server version"):
        body = read_json(request(api_client, "GET", "/version", {}, timeout=TIMEOUT))
    return str_at(body, "gitVersion") or "unknown", str_at(body, "minor") or ""


def served_resources(api_client: ApiClient, group_version: str) -> frozenset[str] | None:
    """The resources the discovery document of ``group_version`` lists; None when the API
    server does not serve it."""
    path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
    with read_failures(f"read the discovery document of {group_version}"):
        body = _absent_as_none(
            lambda: read_json(request(api_client, "GET", path, {}, timeout=TIMEOUT))
        )
    if body is None:
        return None
    resources = as_list(value_at(body, "resources")) or ()
    return frozenset(str_at(as_map(r) or {}, "name") or "" for r in resources)


def deployment_replicas(api_client: ApiClient, namespace: str, name: str) -> Replicas | None:
    """Wanted and ready replicas of Deployment ``namespace/name``; None when it does not exist."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    with read_failures(f"get deployment {namespace}/{name}"):
        body = _absent_as_none(
            lambda: read_json(request(api_client, "GET", path, {}, timeout=TIMEOUT))
        )
    if body is None:
        return None
    desired, ready = value_at(body, "spec", "replicas"), value_at(body, "status", "readyReplicas")
    # The API server defaults spec.replicas to 1; a status without readyReplicas means none.
    return Replicas(
        desired=desired if isinstance(desired, int) else 1,
        ready=ready if isinstance(ready, int) else 0,
    )


def webhook_configuration(api_client: ApiClient, name: str) -> JsonMap | None:
    """ValidatingWebhookConfiguration ``name``; None when it does not exist."""
    what = f"get validatingwebhookconfiguration {name}"
    with read_failures(what):
        return _absent_as_none(
            lambda: read_json(read_webhook_configuration(api_client, name, TIMEOUT))
        )


def rbac(api_client: ApiClient) -> tuple[list[JsonMap], list[JsonMap], dict[RoleKey, JsonMap]]:
    """The ClusterRoleBindings, the RoleBindings of every namespace, and every ClusterRole and
    Role by ``(kind, namespace, name)``."""
    lists = {}
    for plural in ("clusterrolebindings", "rolebindings", "clusterroles", "roles"):
        with read_failures(f"list {plural}.{_RBAC[0]}"):
            call = resource_list(api_client, *_RBAC, plural, None)
            lists[plural] = list(ApiListWatch(call).list().items)
    roles = {
        (
            kind,
            str_at(role, "metadata", "namespace") or "",
            str_at(role, "metadata", "name") or "",
        ): role
        for kind, plural in (("ClusterRole", "clusterroles"), ("Role", "roles"))
        for role in lists[plural]
    }
    return lists["clusterrolebindings"], lists["rolebindings"], roles


def dry_run_create(api_client: ApiClient, path: str, body: JsonMap) -> DryRun:
    """``POST path?dryRun=All`` of ``body``: admitted with the API server's warnings, or refused
    with its status and message. Raises ``ClusterReadError`` when no answer came."""
    query: list[tuple[str, object]] = [("dryRun", "All")]
    with read_failures(f"dry-run create {path}"):
        try:
            response = request(
                api_client, "POST", path, {}, query=query, body=body, timeout=TIMEOUT
            )
        except ApiException as error:
            return DryRun(status=status_of(error) or 0, message=_message(error))
        warnings = response.headers.getlist("Warning")
        read_body(response)
    return DryRun(status=response.status, warnings=tuple(_warning_text(w) for w in warnings))


def _message(error: ApiException) -> str:
    try:
        return str_at(json.loads(error.body or ""), "message") or str(error.reason)
    except ValueError:
        return str(error.reason)


def _warning_text(header: str) -> str:
    # RFC 9111 warn-value, as the API server writes it: `299 - "text"` (quotes escaped).
    _, _, text = header.partition(' - "')
    return text.removesuffix('"').replace('\\"', '"') if text else header


def _absent_as_none(call: Callable[[], JsonMap]) -> JsonMap | None:
    try:
        return call()
    except ApiException as error:
        if status_of(error) == NOT_FOUND:
            return None
        raise
