"""CPU and memory of reading the costliest runtime snapshots (SPEC §14: the worst accepted
``data.runtime`` costs at most 50 ms of CPU and 16 MiB): ``python -m bench.snapshot_cost``.

Each text of tests/support/hostile_snapshots.py is read as the webhook reads it (read_snapshot
with app.kubeyaml's snapshot budget); CPU is the best of 7 process-time runs, memory the
tracemalloc peak of one more. Numbers go to RELIABILITY.md by hand.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from typing import Final

from app.domain.runtime_snapshot import read_snapshot
from app.kubeyaml import load_snapshot_yaml
from tests.support.hostile_snapshots import refused_for_cost, worst_accepted

_RUNS: Final = 7
_CPU_BOUND_MS: Final = 50.0
_MEMORY_BOUND_MIB: Final = 16.0


def _measure(text: str) -> tuple[float, float, str]:
    configmap = {"metadata": {"name": "j-runtime-snapshot"}, "data": {"runtime": text}}
    best = float("inf")
    found = read_snapshot(configmap, "j", load_snapshot_yaml)
    for _ in range(_RUNS):
        started = time.process_time()
        found = read_snapshot(configmap, "j", load_snapshot_yaml)
        best = min(best, time.process_time() - started)
    tracemalloc.start()
    read_snapshot(configmap, "j", load_snapshot_yaml)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    outcome = "read" if found.problem is None or "YAML" not in found.problem else "refused"
    return best * 1000, peak / 2**20, outcome


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> int:
    worst, over_memory = 0.0, False
    _say(f"{'input':40} {'bytes':>8} {'CPU ms':>7} {'MiB':>6}  outcome")
    for table in (worst_accepted(), refused_for_cost()):
        for name, text in table.items():
            cpu, mib, outcome = _measure(text)
            worst = max(worst, cpu)
            size = len(text.encode())
            _say(f"{name:40} {size:8d} {cpu:7.1f} {mib:6.2f}  {outcome}")
            over_memory = over_memory or mib > _MEMORY_BOUND_MIB
    _say(f"worst CPU: {worst:.1f} ms (bound {_CPU_BOUND_MS:.0f} ms)")
    return 0 if worst <= _CPU_BOUND_MS and not over_memory else 1


if __name__ == "__main__":
    sys.exit(main())
