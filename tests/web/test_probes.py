"""The probe listener in-process: /healthz, /readyz, /metrics, and nothing else."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.domain.cluster import CacheStatus
from app.metrics import Metrics
from app.web.probes import create_probe_app

SYNCED = CacheStatus(name="networks", synced=True, last_event_age_seconds=1.5)
UNSYNCED = CacheStatus(name="recipe", synced=False, error="forbidden")


def _client(*, alive: bool = True, ready: bool = True) -> TestClient:
    caches = [SYNCED] if ready else [SYNCED, UNSYNCED]
    reasons = [] if ready else ["cache recipe: forbidden"]
    app = create_probe_app(
        readiness=lambda: (ready, caches, reasons),
        liveness=lambda: alive,
        metrics=Metrics(lambda: caches),
    )
    return TestClient(app)


@pytest.mark.parametrize(("alive", "status"), [(True, 200), (False, 503)])
def test_healthz_says_whether_the_process_and_its_caches_live(alive: bool, status: int) -> None:
    reply = _client(alive=alive).get("/healthz")
    assert (reply.status_code, reply.json()) == (status, {"alive": alive})


def test_readyz_is_200_with_every_cache_synced() -> None:
    reply = _client().get("/readyz")
    assert reply.status_code == 200
    assert reply.json() == {
        "ready": True,
        "reasons": [],
        "caches": [
            {
                "name": "networks",
                "synced": True,
                "served": True,
                "last_event_age_seconds": 1.5,
                "error": None,
            }
        ],
    }


def test_readyz_is_503_with_the_reasons_when_a_cache_is_not_synced() -> None:
    reply = _client(ready=False).get("/readyz")
    assert reply.status_code == 503
    body = reply.json()
    assert (body["ready"], body["reasons"]) == (False, ["cache recipe: forbidden"])
    assert [c["synced"] for c in body["caches"]] == [True, False]


def test_metrics_are_prometheus_text_with_the_cache_gauges() -> None:
    reply = _client(ready=False).get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    assert 'nicguard_cache_synced{cache="recipe"} 0.0' in reply.text
    assert 'nicguard_cache_synced{cache="networks"} 1.0' in reply.text


def test_the_probe_listener_routes_nothing_else() -> None:
    client = _client()
    assert client.get("/validate").status_code == 404
    assert client.post("/validate", json={}).status_code == 404
    reply = client.post("/readyz")
    assert reply.status_code == 405
    assert set(reply.headers["allow"].split(", ")) == {"GET", "HEAD"}
