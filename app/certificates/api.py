"""The certificate Secret and the webhook configuration's caBundles, as raw JSON over the API.

Writes are optimistic: a replace or patch carries the resourceVersion that was read, so a
concurrent writer makes it fail with 409 Conflict (retried by the controller next period).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import urlsplit

from kubernetes.client import ApiClient, ApiException

from app.domain.cluster import ObjectName
from app.domain.fields import JsonMap, as_list, as_map, map_at, str_at, value_at
from app.kube import rest
from app.kube.errors import NOT_FOUND, TIMEOUT, read_json, status_of

logger = logging.getLogger(__name__)

_LABELS: Final = {"app.kubernetes.io/name": "nicguard", "app.kubernetes.io/managed-by": "nicguard"}
_SMP: Final = "application/strategic-merge-patch+json"


class CertApi:
    """Read and write the Secret ``secret`` and the ValidatingWebhookConfiguration ``webhooks``."""

    def __init__(self, api_client: ApiClient, secret: ObjectName, configuration: str) -> None:
        self._api_client = api_client
        self.secret, self.configuration = secret, configuration

    def read_secret(self) -> JsonMap | None:
        name = self.secret
        return _absent_as_none(
            lambda: rest.read_secret(self._api_client, name.namespace, name.name, TIMEOUT)
        )

    def read_configuration(self) -> JsonMap | None:
        return _absent_as_none(
            lambda: rest.read_webhook_configuration(self._api_client, self.configuration, TIMEOUT)
        )

    def write_secret(self, secret: JsonMap | None, data: Mapping[str, bytes]) -> JsonMap:
        """Create the Secret (``secret`` None) or replace it at the resourceVersion read."""
        name = self.secret
        metadata: dict[str, object] = {"name": name.name, "namespace": name.namespace}
        current = map_at(secret, "metadata") or {"labels": _LABELS}
        kept = ("resourceVersion", "labels", "annotations")
        metadata |= {key: current[key] for key in kept if key in current}
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": str_at(secret, "type") or "kubernetes.io/tls",  # immutable once created
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        }
        if secret is None:
            return read_json(rest.create_secret(self._api_client, name.namespace, body, TIMEOUT))
        return read_json(
            rest.replace_secret(self._api_client, name.namespace, name.name, body, TIMEOUT)
        )

    def patch_bundles(self, configuration: JsonMap, bundle: bytes) -> JsonMap:
        """Set ``bundle`` as the caBundle of every webhook (matched by name, as the API merges)."""
        encoded = base64.b64encode(bundle).decode()
        names = [str_at(hook, "name") for hook in as_list(configuration.get("webhooks")) or ()]
        logger.info(
            "patching the caBundle of the webhook configuration",
            extra={"configuration": self.configuration, "webhooks": names},
        )
        patch = {
            "metadata": {"resourceVersion": str_at(configuration, "metadata", "resourceVersion")},
            "webhooks": [{"name": n, "clientConfig": {"caBundle": encoded}} for n in names if n],
        }
        return read_json(
            rest.patch_webhook_configuration(
                self._api_client, self.configuration, patch, _SMP, TIMEOUT
            )
        )


def _absent_as_none(call: Callable[[], object]) -> JsonMap | None:
    try:
        return read_json(call())
    except ApiException as error:
        if status_of(error) == NOT_FOUND:
            return None
        raise


def _decode(value: object) -> bytes:
    try:
        return base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        return b""


def secret_data(secret: JsonMap | None) -> dict[str, bytes] | None:
    """The decoded ``data`` of a Secret; None without a Secret."""
    if secret is None:
        return None
    return {key: _decode(value) for key, value in (map_at(secret, "data") or {}).items()}


def webhooks(configuration: JsonMap | None) -> list[tuple[bytes, str]]:
    """(caBundle, the host name the apiserver verifies) of each webhook; none without one."""
    found = []
    for raw in as_list(value_at(configuration, "webhooks")) or ():
        client = map_at(as_map(raw), "clientConfig") or {}
        url = str_at(client, "url")
        if url:
            host = urlsplit(url).hostname or ""
        else:
            service = map_at(client, "service") or {}
            host = f"{str_at(service, 'name')}.{str_at(service, 'namespace')}.svc"
        found.append((_decode(client.get("caBundle")), host))
    return found
