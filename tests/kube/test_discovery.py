"""Which policy report API the cluster serves (app.kube.discovery), asked of the fake API
server through the real generated client."""

from __future__ import annotations

import pytest
from kubernetes.client import ApiException

from app.domain.policy_reports import ReportApi
from app.kube.discovery import served_report_api
from tests.support.apiserver import client_of, routes, status
from tests.support.cluster import CLUSTER, OPENREPORTS, WGPOLICYK8S


@pytest.mark.parametrize(
    ("served", "found"),
    [
        pytest.param((OPENREPORTS, WGPOLICYK8S), ReportApi.OPENREPORTS, id="both: openreports"),
        pytest.param((WGPOLICYK8S,), ReportApi.WGPOLICYK8S, id="only wgpolicyk8s"),
        pytest.param((OPENREPORTS,), ReportApi.OPENREPORTS, id="only openreports"),
        pytest.param((), None, id="neither"),
    ],
)
def test_auto_finds_the_preferred_report_api_the_cluster_serves(
    served: tuple[str, ...], found: ReportApi | None
) -> None:
    with client_of(routes({path: CLUSTER[path] for path in served})) as (server, api_client):
        assert served_report_api(api_client, "auto") is found
    asked = [OPENREPORTS] if found is ReportApi.OPENREPORTS else [OPENREPORTS, WGPOLICYK8S]
    assert server.paths == asked
    assert {request.method for request in server.requests} == {"GET"}


@pytest.mark.parametrize(
    ("choice", "found"),
    [
        pytest.param("off", None, id="off"),
        pytest.param(ReportApi.WGPOLICYK8S, ReportApi.WGPOLICYK8S, id="wgpolicyk8s"),
        pytest.param(ReportApi.OPENREPORTS, ReportApi.OPENREPORTS, id="openreports"),
    ],
)
def test_off_and_a_named_api_ask_nothing(choice: ReportApi | str, found: ReportApi | None) -> None:
    with client_of(routes({})) as (server, api_client):
        assert served_report_api(api_client, choice) is found
    assert server.paths == []


@pytest.mark.parametrize(
    ("failing", "code"),
    [
        pytest.param(OPENREPORTS, 403, id="forbidden"),
        pytest.param(WGPOLICYK8S, 500, id="the second API failing"),
    ],
)
def test_discovery_failing_otherwise_than_not_found_is_the_callers_to_judge(
    failing: str, code: int
) -> None:
    with (
        client_of(routes({failing: status(code, "Refused")})) as (_, api_client),
        pytest.raises(ApiException) as raised,
    ):
        served_report_api(api_client, "auto")
    assert raised.value.status == code


def test_a_setting_that_names_nothing_known_is_refused_without_asking() -> None:
    with (
        client_of(routes({})) as (server, api_client),
        pytest.raises(ValueError, match="not a reports setting: 'sometimes'"),
    ):
        served_report_api(api_client, "sometimes")
    assert server.paths == []
