"""The one HTTP router of both listeners: FastAPI routing of a list of routes, docs off.

The webhook listener routes ``POST /validate`` (in front of it, the measured fast path of
``app.web.admission``); the probe listener routes ``/healthz``, ``/readyz`` and ``/metrics``.
Either answers anything else as FastAPI does (404, 405 with ``Allow``).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI
from starlette.routing import BaseRoute


def router(routes: Sequence[BaseRoute]) -> FastAPI:
    """An app that routes ``routes`` and nothing else (no OpenAPI schema, no docs pages)."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.router.routes.extend(routes)
    return app
