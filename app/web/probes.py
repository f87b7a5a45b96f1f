"""The plain-HTTP probe server: ``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.domain.cluster import CacheStatus
from app.metrics import Metrics

ReadinessCheck = Callable[[], tuple[bool, list[CacheStatus], list[str]]]
"""Returns (ready, cache statuses, reasons not ready)."""


def create_probe_app(
    *, readiness: ReadinessCheck, liveness: Callable[[], bool], metrics: Metrics
) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    def healthz() -> Response:
        alive = liveness()
        return _json({"alive": alive}, 200 if alive else 503)

    @app.get("/readyz")
    def readyz() -> Response:
        ready, caches, reasons = readiness()
        body = {"ready": ready, "reasons": reasons, "caches": [asdict(c) for c in caches]}
        return _json(body, 200 if ready else 503)

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(content=metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app


def _json(body: object, status: int) -> Response:
    return Response(content=json.dumps(body), status_code=status, media_type="application/json")
