"""``make bench``, scale in file mode: RSS with 10,000 cached objects in several mixes and layouts,
the slope per object from 10,000 to 100,000, time to ready with 100,000, and the audit's CPU per
10,000 runtimes at 100,000.

Each state is served by ``nicguard serve --state`` in a process of its own; RSS (VmRSS) is read once
it answers and its audit has judged every runtime (the metrics say so), so the audit's memory is in
it. Ready is from the start of the process to the first answer. Exit status 0 when every target
is met, 1 otherwise.

    python -m bench.scale [--skip-100k]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from app.certificates.certdir import ensure_cert_dir
from app.domain.cluster import ObjectName, Unverifiable
from app.domain.drift import EVERYTHING, DriftBook
from app.domain.policy import Policy
from app.files.state import state_snapshot
from bench.run import (
    ROOT,
    Server,
    free_port,
    load_average,
    machine,
    rss_kib,
    start_nicguard,
    wait_answering,
)
from bench.shapes import DRA_MIX, Layout, Shape, write_shape

MAX_RSS_BYTES: Final = 120_000_000  # at 10,000 cached objects
MAX_SLOPE_BYTES: Final = 2_000  # per object, 10,000 -> 100,000 (~2 KB)
MAX_READY_SECONDS: Final = 15.0  # with 100,000
MAX_PASS_CPU: Final = 1.0  # seconds per 10,000 runtimes
_HOST: Final = "127.0.0.1"
_RECIPE: Final = ObjectName("nicguard-system", "nicguard-recipe")

# 10,000 objects each; the last two are also grown to 100,000 for the slope.
AT_10K: Final = (
    Shape(1_000, 8_000, varied=False, layout=Layout.FILES),
    Shape(5_000, 0, varied=False, layout=Layout.STREAM),
    Shape(100, 9_800, varied=False, layout=Layout.STREAM),
    Shape(2_500, 5_000, varied=False, layout=Layout.JSON_LIST),
    Shape(1_000, 8_000, varied=True, layout=Layout.JSON_LIST),
    Shape(2_500, 5_000, varied=True, layout=Layout.JSON_LIST),
    DRA_MIX,
)
GROWN: Final = (AT_10K[4], AT_10K[5], AT_10K[6])


@dataclass(frozen=True, slots=True)
class Served:
    shape: Shape
    ready_seconds: float
    rss_kib: int

    @property
    def rss_bytes(self) -> int:
        return self.rss_kib * 1024


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://{_HOST}:{port}/metrics", timeout=5) as reply:
        body: bytes = reply.read()
    return body.decode()


def audited_runtimes(text: str) -> int:
    """How many runtimes the audit has judged, from ``nicguard_audit_runtimes``."""
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(text)
            if family.name == "nicguard_audit_runtimes"
            for sample in family.samples
        )
    )


@contextlib.contextmanager
def serving(work: Path, state: Path, name: str) -> Iterator[tuple[Server, int]]:
    certs = ensure_cert_dir(work / "certs", ("localhost", _HOST))
    probe_port = free_port()
    with start_nicguard(work, state, certs.cert, certs.key, f"{name}.log", probe_port) as server:
        yield server, probe_port


def serve_shape(work: Path, shape: Shape, name: str, timeout: float) -> Served:
    state = work / name
    write_shape(shape, state)
    body = (ROOT / "examples" / "reviews" / "good-runtime.json").read_bytes()
    ca = work / "certs" / "ca.crt"
    started = time.monotonic()
    with serving(work, state, name) as (server, probe_port):
        wait_answering(server, body, ca, timeout=timeout)
        ready = time.monotonic() - started
        deadline = time.monotonic() + timeout
        while audited_runtimes(_metrics(probe_port)) < shape.runtimes:
            server.check_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: the audit did not judge {shape.runtimes} runtimes")
            time.sleep(0.2)
        rss = rss_kib(server.pid)["VmRSS"]
    _remove(state)
    return Served(shape, round(ready, 1), rss)


def _remove(path: Path) -> None:
    for file in path.iterdir():
        file.unlink()
    path.rmdir()


def audit_cpu_per_10k(work: Path, shape: Shape) -> float:
    """CPU seconds of a full audit pass over ``shape``'s runtimes, per 10,000, in this process."""
    state = work / "audit"
    write_shape(shape, state)
    snapshot = state_snapshot(state, _RECIPE, lambda _: None)
    _remove(state)
    book = DriftBook(Policy())
    started = time.process_time()
    runtimes = snapshot.runtime_state
    assert not isinstance(runtimes, Unverifiable)  # noqa: S101 - a file state is complete
    book.rejudge(book.to_judge(EVERYTHING, runtimes), snapshot)
    return (time.process_time() - started) * 10_000 / max(shape.runtimes, 1)


def _verdict(ok: bool) -> str:  # noqa: FBT001 - a plain predicate
    return "PASS" if ok else "FAIL"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--skip-100k", action="store_true", help="only the 10,000-object shapes")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per state")
    args = parser.parse_args(argv)
    _say("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    _say(f"load average at the start: {load_average()}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="nicguard-scale-") as tmp:
        work = Path(tmp)
        _say("\nRSS with 10,000 cached objects (file mode, after the audit has judged them all):")
        at_10k = {}
        for number, shape in enumerate(AT_10K):
            served = serve_shape(work, shape, f"s{number}", args.timeout)
            at_10k[shape] = served
            good = served.rss_bytes <= MAX_RSS_BYTES
            ok = ok and good
            _say(
                f"  {served.rss_kib / 1024:6.1f} MiB = {served.rss_bytes / 1e6:5.1f} MB "
                f"(<= {MAX_RSS_BYTES / 1e6:.0f}) {_verdict(good)}  "
                f"ready {served.ready_seconds:4.1f} s  {shape.describe()}"
            )
        if not args.skip_100k:
            _say("\nFrom 10,000 to 100,000 cached objects (same mix, x10):")
            for number, shape in enumerate(GROWN):
                big = serve_shape(work, shape.scaled(10), f"g{number}", args.timeout)
                small = at_10k[shape]
                slope = (big.rss_bytes - small.rss_bytes) / (big.shape.objects - shape.objects)
                slope_ok = slope <= MAX_SLOPE_BYTES
                ready_ok = big.ready_seconds <= MAX_READY_SECONDS
                ok = ok and slope_ok and ready_ok
                _say(
                    f"  {big.shape.describe()}:\n"
                    f"    RSS {small.rss_kib / 1024:.1f} -> {big.rss_kib / 1024:.1f} MiB: "
                    f"{slope:,.0f} bytes per object (<= {MAX_SLOPE_BYTES:,}) {_verdict(slope_ok)}; "
                    f"ready {big.ready_seconds:.1f} s (<= {MAX_READY_SECONDS:.0f}) "
                    f"{_verdict(ready_ok)}"
                )
            grown = GROWN[0].scaled(10)
            cpu = audit_cpu_per_10k(work, grown)
            cpu_ok = cpu <= MAX_PASS_CPU
            ok = ok and cpu_ok
            _say(
                f"\nThe audit at {grown.runtimes:,} runtimes each wired its own way: a full pass "
                f"{cpu:.2f} s of CPU per 10,000 (<= {MAX_PASS_CPU:.1f}) {_verdict(cpu_ok)}"
            )
    _say(f"load average at the end: {load_average()}")
    _say(f"bench.scale: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
