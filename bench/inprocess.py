"""The request path in-process: ``POST /validate`` called as an ASGI app, timed and profiled.

No sockets, TLS or HTTP parsing: what is left is routing (FastAPI/Starlette for the echo, the
raw ASGI endpoint for nicguard), body reading, JSON decoding, judging, metrics, the audit log
line (JSON-formatted, written to a temporary file as ``nicguard serve`` writes it to stdout)
and the response. ``--profile`` runs the loop under
pyinstrument (a one-off tool: ``pip install pyinstrument`` into the venv) and prints its report.

    python -m bench.inprocess [--requests N] [--profile] [--reviews drifted-runtime ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any, Final

from app.documents import load_yaml
from app.domain.cluster import CacheStatus, ObjectName, snapshot_of
from app.domain.policy import Policy
from app.files.state import load_objects
from app.logs import configure_logging
from app.metrics import Metrics
from app.web.admission import create_admission_app
from bench.echo_app import create_echo_app

ROOT: Final = Path(__file__).resolve().parents[1]
REVIEWS: Final = (
    "drifted-runtime",
    "good-runtime",
    "trainjob-patch-drift",
    "misplaced-pod",
    "served-pod",
)
_RECIPE: Final = ObjectName("nicguard-system", "nicguard-recipe")

Message = MutableMapping[str, Any]


def build_app() -> Any:
    """The admission app exactly as ``nicguard serve`` builds it, on ``examples/cluster``."""
    objects = (o.obj for o in load_objects([ROOT / "examples" / "cluster"]))
    view = snapshot_of(objects, recipe_name=_RECIPE, load_yaml=load_yaml)
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    return create_admission_app(view=view, policy=Policy(), metrics=metrics)


def _scope(length: int) -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": "/validate",
        "raw_path": b"/validate",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8443"),
            (b"content-type", b"application/json"),
            (b"content-length", str(length).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8443),
        "state": {},
    }


async def call(app: Any, body: bytes) -> tuple[int, bytes]:
    """One request; the status and the response body."""
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)  # a disconnect only arrives after the response
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(_scope(len(body)), receive, send)
    return status, b"".join(chunks)


async def loop(app: Any, body: bytes, requests: int) -> float:
    """CPU seconds of this thread for ``requests`` sequential calls.

    CPU time, not wall-clock time, so that other processes on the machine do not count.
    """
    started = time.thread_time()
    for _ in range(requests):
        await call(app, body)
    return time.thread_time() - started


@contextlib.contextmanager
def audit_to_file() -> Iterator[Path]:
    """Configure nicguard's JSON logging as ``serve`` does, but into a temporary file."""
    with tempfile.TemporaryDirectory(prefix="nicguard-inprocess-") as tmp:
        path = Path(tmp) / "audit.log"
        with path.open("w", encoding="utf-8") as stream:
            stdout, sys.stdout = sys.stdout, stream
            try:
                configure_logging("info")
            finally:
                sys.stdout = stdout
            yield path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="time/profile POST /validate in-process")
    parser.add_argument("--requests", type=int, default=5000, help="calls per review (<= 10^6)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per review (<= 100)")
    parser.add_argument("--reviews", nargs="+", choices=REVIEWS, default=list(REVIEWS[:2]))
    parser.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    parser.add_argument("--echo", action="store_true", help="the bare echo app instead")
    args = parser.parse_args(argv)
    if not (1 <= args.requests <= 1_000_000 and 1 <= args.repeats <= 100):
        parser.error("--requests must be in 1..10^6 and --repeats in 1..100")
    app = create_echo_app() if args.echo else build_app()
    out = sys.stdout
    with audit_to_file() as log:
        for review in args.reviews:
            body = (ROOT / "examples" / "reviews" / f"{review}.json").read_bytes()
            status, answer = asyncio.run(call(app, body))
            allowed = json.loads(answer)["response"]["allowed"]
            asyncio.run(loop(app, body, min(args.requests, 500)))  # warm-up
            if args.profile:
                _profile(app, body, args.requests, review)
                continue
            runs = [asyncio.run(loop(app, body, args.requests)) for _ in range(args.repeats)]
            best = min(runs) / args.requests * 1e6
            median = sorted(runs)[len(runs) // 2] / args.requests * 1e6
            out.write(
                f"{review:<22} HTTP {status} allowed={allowed!s:<5} "
                f"CPU best {best:7.1f} us/request  median {median:7.1f} us/request "
                f"({args.repeats} x {args.requests} requests)\n"
            )
        out.write(f"audit log: {sum(1 for _ in log.open(encoding='utf-8'))} lines\n")
    return 0


def _profile(app: Any, body: bytes, requests: int, review: str) -> None:
    pyinstrument = importlib.import_module("pyinstrument")
    profiler = pyinstrument.Profiler(interval=0.0001, async_mode="disabled")
    profiler.start()
    asyncio.run(loop(app, body, requests))
    profiler.stop()
    sys.stdout.write(f"=== {review}: {requests} requests ===\n")
    sys.stdout.write(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    raise SystemExit(main())
