"""The certificate Secret and the webhooks' caBundles over the API (app.certificates.api),
against the fake API server keeping objects as an apiserver does: reads, optimistic writes,
and what a Secret and a webhook configuration hold."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Final

import pytest
from kubernetes.client import ApiException

from app.certificates.api import CertApi, secret_data, webhooks
from app.domain.cluster import ObjectName
from app.domain.fields import JsonMap
from tests.support.apiserver import ObjectStore, client_of, status

SECRET: Final = ObjectName("nicguard-system", "nicguard-tls")
SECRETS: Final = "/api/v1/namespaces/nicguard-system/secrets"
CONFIGURATION: Final = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/ng"
LABELS: Final = {"app.kubernetes.io/name": "nicguard", "app.kubernetes.io/managed-by": "nicguard"}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hook(name: str, bundle: bytes = b"", **client: object) -> dict[str, object]:
    config: dict[str, object] = {"caBundle": b64(bundle)} if bundle else {}
    return {"name": name, "clientConfig": config | client}


def configuration(*hooks: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": "ng"}, "webhooks": list(hooks)}


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        pytest.param(
            {f"{SECRETS}/nicguard-tls": {"metadata": {"name": "nicguard-tls"}}},
            CertApi.read_secret,
            id="the Secret",
        ),
        pytest.param(
            {CONFIGURATION: configuration(hook("a"))},
            CertApi.read_configuration,
            id="the webhook configuration",
        ),
    ],
)
def test_a_read_is_the_object_or_none_when_absent(
    stored: dict[str, JsonMap], read: Callable[[CertApi], JsonMap | None]
) -> None:
    store = ObjectStore()
    with client_of(store) as (_, api_client):
        api = CertApi(api_client, SECRET, "ng")
        assert read(api) is None
        for path, obj in stored.items():
            store.put(path, obj)
        found = read(api)
    assert found == next(iter(store.objects.values()))


@pytest.mark.parametrize(
    ("path", "read"),
    [
        (f"{SECRETS}/nicguard-tls", CertApi.read_secret),
        (CONFIGURATION, CertApi.read_configuration),
    ],
)
def test_a_read_failing_otherwise_than_not_found_raises(
    path: str, read: Callable[[CertApi], JsonMap | None]
) -> None:
    store = ObjectStore()
    store.failing[("GET", path)] = status(403, "Forbidden")
    with client_of(store) as (_, api_client), pytest.raises(ApiException) as raised:
        read(CertApi(api_client, SECRET, "ng"))
    assert raised.value.status == 403


def test_without_a_secret_it_is_created_labelled_as_a_tls_secret() -> None:
    store = ObjectStore()
    with client_of(store) as (server, api_client):
        written = CertApi(api_client, SECRET, "ng").write_secret(None, {"tls.crt": b"C"})
    assert [(r.method, r.path) for r in server.requests] == [("POST", SECRETS)]
    assert server.requests[0].body == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "nicguard-tls", "namespace": "nicguard-system", "labels": LABELS},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(b"C")},
    }
    assert written == store.objects[f"{SECRETS}/nicguard-tls"]


def test_a_secret_is_replaced_at_the_version_read_keeping_its_metadata_and_type() -> None:
    store = ObjectStore()
    path = f"{SECRETS}/nicguard-tls"
    metadata = {"name": "nicguard-tls", "labels": {"team": "x"}, "annotations": {"a": "b"}}
    existing = store.put(path, {"metadata": metadata | {"uid": "u-1"}, "type": "Opaque"})
    with client_of(store) as (server, api_client):
        CertApi(api_client, SECRET, "ng").write_secret(existing, {"ca.crt": b"A", "tls.key": b"K"})
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("PUT", path)
    assert sent.body == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"namespace": "nicguard-system", "resourceVersion": "1"} | metadata,
        "type": "Opaque",
        "data": {"ca.crt": b64(b"A"), "tls.key": b64(b"K")},
    }


def test_a_write_at_a_stale_version_is_a_conflict() -> None:
    store = ObjectStore()
    path = f"{SECRETS}/nicguard-tls"
    read = store.put(path, {"metadata": {"name": "nicguard-tls"}})
    store.put(path, {"metadata": {"name": "nicguard-tls"}})  # another replica wrote meanwhile
    with client_of(store) as (_, api_client), pytest.raises(ApiException) as raised:
        CertApi(api_client, SECRET, "ng").write_secret(read, {})
    assert raised.value.status == 409


def test_the_bundle_is_patched_into_every_webhook_by_name_at_the_version_read() -> None:
    store = ObjectStore()
    url = "https://nicguard.example:8443/validate"
    config = store.put(CONFIGURATION, configuration(hook("a", b"old"), hook("b", url=url)))
    with client_of(store) as (server, api_client):
        patched = CertApi(api_client, SECRET, "ng").patch_bundles(config, b"NEW CA")
    (sent,) = server.requests
    assert (sent.method, sent.path) == ("PATCH", CONFIGURATION)
    assert sent.content_type == "application/strategic-merge-patch+json"
    assert sent.body == {
        "metadata": {"resourceVersion": "1"},
        "webhooks": [
            {"name": "a", "clientConfig": {"caBundle": b64(b"NEW CA")}},
            {"name": "b", "clientConfig": {"caBundle": b64(b"NEW CA")}},
        ],
    }
    assert [bundle for bundle, _ in webhooks(patched)] == [b"NEW CA", b"NEW CA"]
    assert webhooks(patched)[1] == (b"NEW CA", "nicguard.example")


@pytest.mark.parametrize(
    ("secret", "data"),
    [
        pytest.param(None, None, id="no Secret"),
        pytest.param({}, {}, id="no data"),
        pytest.param(
            {"data": {"tls.crt": b64(b"C"), "bad": "%%%", "number": 7}},
            {"tls.crt": b"C", "bad": b"", "number": b""},
            id="what does not decode is empty",
        ),
    ],
)
def test_secret_data_is_decoded(secret: JsonMap | None, data: dict[str, bytes] | None) -> None:
    assert secret_data(secret) == data


@pytest.mark.parametrize(
    ("config", "found"),
    [
        pytest.param(None, [], id="no configuration"),
        pytest.param({"webhooks": "x"}, [], id="webhooks not a list"),
        pytest.param(
            configuration(
                hook("svc", b"CA", service={"name": "nicguard", "namespace": "nicguard-system"}),
                hook("url", url="https://10.0.0.1:8443/validate"),
            ),
            [(b"CA", "nicguard.nicguard-system.svc"), (b"", "10.0.0.1")],
            id="by service, by URL",
        ),
    ],
)
def test_webhooks_are_each_bundle_with_the_host_it_must_verify(
    config: JsonMap | None, found: list[tuple[bytes, str]]
) -> None:
    assert webhooks(config) == found
