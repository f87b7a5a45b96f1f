"""Instructions per request of the in-process path (``bench.inprocess``), counted by callgrind.

Counts, unlike times, repeat to within 0.1 % whatever else the machine runs: the way to tell
whether a change to the request path pays on a shared VM whose speed drifts by a quarter.

    python -m bench.instructions [--requests N] [--reviews drifted-runtime ...] [--echo]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import uvloop

from bench.echo_app import create_echo_app
from bench.inprocess import REVIEWS, ROOT, audit_to_file, build_app, loop

WARM_UP: Final = 300
# Two libc calls nothing on the path makes: callgrind zeroes its counts on entering the first
# and writes them out on entering the second, so the count holds the timed loop only.
_START, _STOP = "getppid", "getpgrp"


def count(review: str, requests: int, *, echo: bool = False) -> float:
    """Instructions per request for ``review``, in a child process under callgrind."""
    with tempfile.TemporaryDirectory(prefix="nicguard-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        child = [sys.executable, "-m", "bench.instructions", "--child", review, str(requests)]
        subprocess.run(  # noqa: S603 - valgrind on our own interpreter and module
            [
                _valgrind(),
                "--tool=callgrind",
                f"--zero-before={_START}",
                f"--dump-before={_STOP}",
                f"--callgrind-out-file={out}",
                *child,
                *(["--echo"] if echo else []),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        loop = out.with_name(out.name + ".1")  # the first dump: the loop alone
        totals = [line for line in loop.read_text().splitlines() if line.startswith("totals:")]
        return int(totals[0].split()[1]) / requests


def _valgrind() -> str:
    found = shutil.which("valgrind")
    if found is None:
        raise SystemExit("bench.instructions: valgrind is not on PATH (Debian package valgrind)")
    return found


def _child(review: str, requests: int, *, echo: bool) -> None:
    app = create_echo_app() if echo else build_app()
    body = (ROOT / "examples" / "reviews" / f"{review}.json").read_bytes()

    async def counted() -> None:
        os.getppid()
        await loop(app, body, requests)
        os.getpgrp()

    with audit_to_file():
        uvloop.run(loop(app, body, WARM_UP))
        uvloop.run(counted())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="instructions per request, under callgrind")
    parser.add_argument("--requests", type=int, default=200, help="counted calls (<= 10^5)")
    parser.add_argument("--reviews", nargs="+", choices=REVIEWS, default=list(REVIEWS[:2]))
    parser.add_argument("--echo", action="store_true", help="also the bare echo app")
    parser.add_argument("--child", nargs=2, metavar=("REVIEW", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), echo=args.echo)
        return 0
    if not 1 <= args.requests <= 100_000:
        parser.error("--requests must be in 1..10^5")
    runs = [(review, False) for review in args.reviews]
    runs += [(review, True) for review in args.reviews if args.echo]
    for review, echo in runs:
        app = "echo" if echo else "nicguard"
        per_request = count(review, args.requests, echo=echo) / 1000
        sys.stdout.write(f"{app:<9}{review:<22}{per_request:9.1f} kIr/request\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
