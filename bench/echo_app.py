"""The baselines: a bare FastAPI echo of the AdmissionReview, on either serving stack.

It decodes the posted review, answers ``allowed: true`` for its uid and does nothing else (no
judging, no audit log, no metrics). TLS is built as ``app.serve.serve`` builds it
(``app.certificates.tls.server_ssl_context``), with ``access_log=False, log_config=None``.
``--stack nicguard`` (the default) serves on nicguard's stack, httptools on uvloop: what nicguard's
own work costs beside it. ``--stack uvicorn-default`` serves on h11 and asyncio, the way
``uvicorn app:app`` runs without uvicorn's ``standard`` extras: the webhook a Python team writes
first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from app.certificates.tls import make_uvicorn_config, server_ssl_context

_JSON: Final = "application/json"
# uvicorn's protocol and loop for each stack.
STACKS: Final = {"nicguard": ("httptools", "uvloop"), "uvicorn-default": ("h11", "asyncio")}


def create_echo_app() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        review = json.loads(await request.body())
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(content=json.dumps(answer, separators=(",", ":")), media_type=_JSON)

    return app


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bare FastAPI/uvicorn AdmissionReview echo")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-cert", type=Path, required=True)
    parser.add_argument("--tls-key", type=Path, required=True)
    parser.add_argument("--stack", choices=sorted(STACKS), default="nicguard")
    args = parser.parse_args(argv)
    http, loop = STACKS[args.stack]
    config = make_uvicorn_config(
        create_echo_app(),
        host=args.host,
        port=args.port,
        ssl_context=server_ssl_context(args.tls_cert, args.tls_key),
        access_log=False,
        log_config=None,
        http=http,
        loop=loop,
        # Forwarding headers believed only on uvicorn's defaults; nicguard believes none.
        proxy_headers=args.stack == "uvicorn-default",
    )
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(uvicorn.Server(config).serve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
