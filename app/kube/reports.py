"""Policy reports over the real API: which API to write, which reports exist, server-side apply
of a whole report (the audit's current state), and removal of a namespace's empty one.
"""

from __future__ import annotations

from functools import partial
from typing import Final

from kubernetes.client import ApiClient, ApiException, CustomObjectsApi

from app.domain.fields import JsonMap, as_list, str_at
from app.domain.policy_reports import MANAGED_BY, REPORT_NAME, ReportApi
from app.kube.discovery import served_report_api
from app.kube.errors import NOT_FOUND, TIMEOUT, read_json, status_of

FIELD_MANAGER: Final = "nicguard"
_APPLY: Final = "application/apply-patch+yaml"
_SELECTOR: Final = "=".join(MANAGED_BY)


class ReportWriter:
    """Satisfies ``app.audit.writer.ReportSink``; ``choice`` is the setting ``reports``."""

    def __init__(self, api_client: ApiClient, choice: ReportApi | str) -> None:
        self._client, self._choice = api_client, choice
        self._api = CustomObjectsApi(api_client)

    def resolve(self) -> ReportApi | None:
        return served_report_api(self._client, self._choice)

    def namespaces(self, api: ReportApi) -> set[str]:
        found: set[str] = set()
        body = read_json(
            self._api.list_custom_object_for_all_namespaces(
                api.group,
                api.version,
                api.plural("x"),
                label_selector=_SELECTOR,
                # By name too: RBAC then narrows the list to resourceNames [nicguard] (rbac.yaml).
                field_selector=f"metadata.name={REPORT_NAME}",
                _preload_content=False,
                _request_timeout=TIMEOUT,
            )
        )
        for item in as_list(body.get("items")) or ():
            if str_at(item, "metadata", "name") == REPORT_NAME:
                found.add(str_at(item, "metadata", "namespace") or "")
        return found

    def write(self, api: ReportApi, body: JsonMap) -> None:
        namespace = str_at(body, "metadata", "namespace") or ""
        if namespace:
            patch = partial(
                self._api.patch_namespaced_custom_object,
                api.group,
                api.version,
                namespace,
                api.plural(namespace),
            )
        else:
            patch = partial(
                self._api.patch_cluster_custom_object, api.group, api.version, api.plural("")
            )
        response = patch(
            REPORT_NAME,
            dict(body),
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=_APPLY,
            _preload_content=False,
            _request_timeout=TIMEOUT,
        )
        read_json(response)

    def remove(self, api: ReportApi, namespace: str) -> None:
        try:
            read_json(
                self._api.delete_namespaced_custom_object(
                    api.group,
                    api.version,
                    namespace,
                    api.plural(namespace),
                    REPORT_NAME,
                    _preload_content=False,
                    _request_timeout=TIMEOUT,
                )
            )
        except ApiException as error:
            if status_of(error) != NOT_FOUND:
                raise
