"""The plain-HTTP probe server: ``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict

from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.domain.cluster import CacheStatus
from app.metrics import Metrics
from app.web.router import router

ReadinessCheck = Callable[[], tuple[bool, list[CacheStatus], list[str]]]
"""Returns (ready, cache statuses, reasons not ready)."""


def create_probe_app(
    *, readiness: ReadinessCheck, liveness: Callable[[], bool], metrics: Metrics
) -> FastAPI:
    async def healthz(_: Request) -> Response:
        alive = liveness()
        return _json({"alive": alive}, 200 if alive else 503)

    async def readyz(_: Request) -> Response:
        ready, caches, reasons = readiness()
        body = {"ready": ready, "reasons": reasons, "caches": [asdict(c) for c in caches]}
        return _json(body, 200 if ready else 503)

    async def metrics_endpoint(_: Request) -> Response:
        return Response(content=metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return router(
        [
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ]
    )


def _json(body: object, status: int) -> Response:
    return Response(content=json.dumps(body), status_code=status, media_type="application/json")
