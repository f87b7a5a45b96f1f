"""CPU and memory of the costliest review a JobSet writer can make the apiserver send (SPEC §15: a
3 MiB UPDATE with 2,000 wired templates, old and new): ``python -m bench.costly_review``.

Each edit of tests/support/costly_jobset.py is posted to ``POST /validate`` called as an ASGI
app, built as ``nicguard serve`` builds it on ``examples/cluster`` (bench.inprocess): CPU is the
best of 5 process-time runs (the judging thread's included), memory the tracemalloc peak of one
more. Numbers go to RELIABILITY.md by hand.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import tracemalloc
from typing import Final

from bench.inprocess import build_app, call
from tests.support.costly_jobset import Edit, costly_jobset_update

_RUNS: Final = 5


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> int:
    logging.disable(logging.CRITICAL)  # the decision log's lines are not what is measured
    app = build_app()
    _say(f"{'edit':14} {'bytes':>8} {'CPU ms':>7} {'MiB':>6}  answer")
    for edit in Edit:
        body = costly_jobset_update(edit)
        best = float("inf")
        for _ in range(_RUNS):
            started = time.process_time()
            asyncio.run(call(app, body))
            best = min(best, time.process_time() - started)
        tracemalloc.start()
        status, answer = asyncio.run(call(app, body))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        allowed = b'"allowed":true' in answer
        cpu, mib = best * 1000, peak / 2**20
        _say(f"{edit.value:14} {len(body):8d} {cpu:7.0f} {mib:6.1f}  {status} {allowed=}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
