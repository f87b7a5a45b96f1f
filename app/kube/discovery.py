"""Which policy report API the cluster serves (docs/audit.md), asked of each group version's
discovery document: what the setting ``reports`` resolves to in Kubernetes mode.
"""

from __future__ import annotations

from typing import Final

from kubernetes.client import ApiClient, ApiException, CustomObjectsApi

from app.config import REPORTS_AUTO, REPORTS_OFF
from app.domain.policy_reports import ReportApi
from app.kube.errors import NOT_FOUND, TIMEOUT, read_body, status_of

PREFERENCE: Final = (ReportApi.OPENREPORTS, ReportApi.WGPOLICYK8S)


def served_report_api(api_client: ApiClient, choice: ReportApi | str) -> ReportApi | None:
    """``choice`` itself when it names an API (unchecked), None for ``off``; for ``auto``, the
    first of ``PREFERENCE`` the cluster serves, None when it serves neither.

    Raises ``ApiException`` and transport errors other than a 404: the caller decides.
    """
    if isinstance(choice, ReportApi):
        return choice
    if choice == REPORTS_OFF:
        return None
    if choice != REPORTS_AUTO:
        raise ValueError(f"not a reports setting: {choice!r}")
    custom = CustomObjectsApi(api_client)
    return next((api for api in PREFERENCE if _served(custom, api)), None)


def _served(custom: CustomObjectsApi, api: ReportApi) -> bool:
    """Whether ``GET /apis/<group>/<version>`` answers: a NotFound means the API is not served."""
    try:
        read_body(
            custom.get_api_resources(
                api.group, api.version, _preload_content=False, _request_timeout=TIMEOUT
            )
        )
    except ApiException as error:
        if status_of(error) == NOT_FOUND:
            return False
        raise
    return True
