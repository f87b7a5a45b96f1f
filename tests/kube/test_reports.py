"""Policy reports over the real API (app.kube.reports) against the fake API server: which API,
which namespaces hold ours, server-side apply of a whole report, removal of an empty one."""

from __future__ import annotations

from typing import Final

import pytest
from kubernetes.client import ApiException

from app.domain.policy_reports import ReportApi, report
from app.kube.reports import FIELD_MANAGER, ReportWriter
from tests.support.apiserver import Reply, Request, client_of, listed, routes, status
from tests.support.cluster import CLUSTER, OPENREPORTS, WGPOLICYK8S

# By label and by name: RBAC narrows the list to resourceNames [nicguard].
SELECTOR: Final = {
    "labelSelector": "app.kubernetes.io/managed-by=nicguard",
    "fieldSelector": "metadata.name=nicguard",
}
APPLY: Final = {"fieldManager": FIELD_MANAGER, "force": "true"}


def named(namespace: str, name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}}


def applied(request: Request) -> Reply:
    return (200, request.body) if request.method == "PATCH" else status(405, "MethodNotAllowed")


@pytest.mark.parametrize(
    ("choice", "served", "found"),
    [
        pytest.param("auto", (WGPOLICYK8S,), ReportApi.WGPOLICYK8S, id="auto: what is served"),
        pytest.param("auto", (), None, id="auto: nothing served"),
        pytest.param("off", (OPENREPORTS,), None, id="off"),
        pytest.param(ReportApi.OPENREPORTS, (), ReportApi.OPENREPORTS, id="named"),
    ],
)
def test_resolve_is_the_setting_as_the_cluster_answers_it(
    choice: ReportApi | str, served: tuple[str, ...], found: ReportApi | None
) -> None:
    table = {path: CLUSTER[path] for path in served}
    with client_of(routes(table)) as (_, api_client):
        assert ReportWriter(api_client, choice).resolve() is found


@pytest.mark.parametrize(
    ("api", "path"),
    [
        pytest.param(ReportApi.OPENREPORTS, "/apis/openreports.io/v1alpha1/reports"),
        pytest.param(ReportApi.WGPOLICYK8S, "/apis/wgpolicyk8s.io/v1alpha2/policyreports"),
    ],
)
def test_namespaces_are_those_holding_a_report_of_ours(api: ReportApi, path: str) -> None:
    items = listed(
        named("team-a", "nicguard"), named("team-b", "other"), named("team-c", "nicguard")
    )
    with client_of(routes({path: items})) as (server, api_client):
        assert ReportWriter(api_client, "auto").namespaces(api) == {"team-a", "team-c"}
    assert server.queries == [(path, SELECTOR)]


@pytest.mark.parametrize(
    ("api", "namespace", "path"),
    [
        pytest.param(
            ReportApi.OPENREPORTS,
            "team-a",
            "/apis/openreports.io/v1alpha1/namespaces/team-a/reports/nicguard",
            id="a namespace's Report",
        ),
        pytest.param(
            ReportApi.OPENREPORTS,
            "",
            "/apis/openreports.io/v1alpha1/clusterreports/nicguard",
            id="the ClusterReport",
        ),
        pytest.param(
            ReportApi.WGPOLICYK8S,
            "team-a",
            "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-a/policyreports/nicguard",
            id="a namespace's PolicyReport",
        ),
        pytest.param(
            ReportApi.WGPOLICYK8S,
            "",
            "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/nicguard",
            id="the ClusterPolicyReport",
        ),
    ],
)
def test_write_applies_the_whole_report_server_side(
    api: ReportApi, namespace: str, path: str
) -> None:
    body = report(api, namespace, (), 1_700_000_000)
    with client_of(applied) as (server, api_client):
        ReportWriter(api_client, api).write(api, body)
    (sent,) = server.requests
    assert (sent.method, sent.path, sent.query) == ("PATCH", path, APPLY)
    assert sent.content_type == "application/apply-patch+yaml"
    assert sent.body == body


def test_a_refused_write_raises() -> None:
    body = report(ReportApi.OPENREPORTS, "team-a", (), 0)
    refused = status(422, "Invalid", "summary.pass: Invalid value")
    with client_of(lambda _: refused) as (_, api_client), pytest.raises(ApiException) as raised:
        ReportWriter(api_client, "auto").write(ReportApi.OPENREPORTS, body)
    assert raised.value.status == 422


@pytest.mark.parametrize(
    ("reply", "raises"),
    [
        pytest.param((200, {"kind": "Status", "status": "Success"}), None, id="removed"),
        pytest.param(status(404, "NotFound"), None, id="already gone"),
        pytest.param(status(403, "Forbidden"), 403, id="forbidden"),
    ],
)
def test_remove_deletes_a_namespaces_report_and_a_missing_one_is_no_error(
    reply: Reply, raises: int | None
) -> None:
    path = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-a/policyreports/nicguard"
    with client_of(lambda _: reply) as (server, api_client):
        writer = ReportWriter(api_client, "auto")
        if raises is None:
            writer.remove(ReportApi.WGPOLICYK8S, "team-a")
        else:
            with pytest.raises(ApiException) as raised:
                writer.remove(ReportApi.WGPOLICYK8S, "team-a")
            assert raised.value.status == raises
    assert [(r.method, r.path) for r in server.requests] == [("DELETE", path)]
