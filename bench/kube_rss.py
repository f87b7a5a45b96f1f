"""nicguard's RSS in Kubernetes mode with 10,000 cached objects, on a real kube-apiserver.

``make bench`` measures file mode; this is the mode a cluster runs. The control plane of
``tests/e2e`` gets the example cluster plus generated Networks (each with its GKENetworkParamSet,
which nicguard caches too) and TrainingRuntimes up to 1,000 + 1,000 and 8,000 (``bench/state.py``:
full-size AICR pod templates, created with ``kubectl create``); nicguard is then restarted so its
caches LIST all of them, proven by a TrainJob on the last runtime that only a cache holding it
can deny. VmRSS is read once ready and after a wrk round.

    NICGUARD_K8S_BIN_DIR="$(scripts/k8s-bins.sh)" python -m bench.kube_rss
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.run import ROOT, Load, load_average, machine, rss_kib, run_wrk
from bench.state import (
    EXAMPLES,
    NAMESPACES,
    NETWORKS,
    RUNTIMES,
    StateCounts,
    generated_networks,
    generated_runtimes,
    load_one,
)
from tests.e2e.objects import example
from tests.e2e.stack import Stack, populate, running
from tests.e2e.state import checked
from tests.e2e.webhook import Nicguard

MAX_RSS_BYTES: Final = 120_000_000
_BATCH: Final = 250
_PARALLEL: Final = 3
_MISSING: Final = "bench-missing-network"
_EXAMPLE_NETWORKS: Final = 9  # examples/cluster, which populate() applies
_EXAMPLE_RUNTIMES: Final = 2


@dataclass(frozen=True, slots=True)
class Running:
    """The stack's nicguard as a wrk target."""

    nicguard: Nicguard

    @property
    def url(self) -> str:
        return self.nicguard.url

    @property
    def pid(self) -> int:
        pid = self.nicguard.pid
        if pid is None:
            raise RuntimeError("nicguard is not running")
        return pid

    def check_running(self) -> None:
        if self.nicguard.process is None or not self.nicguard.process.running():
            raise RuntimeError(f"nicguard exited:\n{self.nicguard.report()}")


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _batches(objects: Iterable[dict[str, Any]]) -> Iterator[str]:
    batch: list[dict[str, Any]] = []
    for obj in objects:
        obj["metadata"].pop("resourceVersion", None)  # a create must not carry one
        batch.append(obj)
        if len(batch) == _BATCH:
            yield json.dumps({"apiVersion": "v1", "kind": "List", "items": batch})
            batch = []
    if batch:
        yield json.dumps({"apiVersion": "v1", "kind": "List", "items": batch})


def create_all(stack: Stack, objects: Iterable[dict[str, Any]]) -> None:
    """``kubectl create -f -`` in batches, a few at a time (each object is one API create)."""

    def create(batch: str) -> None:
        checked(stack.plane.kubectl("admin", "create", "-f", "-", input=batch), "kubectl create")

    with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
        for done in [pool.submit(create, batch) for batch in _batches(objects)]:
            done.result()


def last_runtime_trainjob(runtimes: int) -> tuple[str, str]:
    """A TrainJob on the last generated runtime whose patch names a missing Network: denied
    (NetworkNotFound) only when nicguard's cache holds that runtime. (namespace, JSON)"""
    number = runtimes - 1
    namespace = f"team-{number % NAMESPACES:02d}"
    job = example("objects/trainjob-patch-drift.yaml")
    job["metadata"] = {"name": "bench-rss-probe", "namespace": namespace}
    job["spec"]["runtimeRef"] = {"name": f"tcpxo-{number:05d}", "kind": "TrainingRuntime"}
    (patch,) = job["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    entries = [
        {"interfaceName": "eth0", "network": "default"},
        {"interfaceName": "eth1", "network": _MISSING},
    ]
    node["template"]["spec"]["template"]["metadata"]["annotations"] = {
        "networking.gke.io/interfaces": json.dumps(entries)
    }
    return namespace, json.dumps(job)


def fill(stack: Stack) -> None:
    """The team namespaces, then Networks (and their param sets) and runtimes up to NETWORKS and
    RUNTIMES."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{n:02d}"}}
        for n in range(NAMESPACES)
    ]
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": namespaces})
    checked(stack.plane.kubectl("admin", "create", "-f", "-", input=items), "team namespaces")
    template = load_one(EXAMPLES / "cluster" / "torch-distributed-tcpxo.yaml")
    started = time.monotonic()
    create_all(stack, generated_networks(NETWORKS - _EXAMPLE_NETWORKS))
    create_all(stack, generated_runtimes(template, RUNTIMES - _EXAMPLE_RUNTIMES))
    _say(f"created the generated objects in {time.monotonic() - started:.0f}s")


def measure(stack: Stack, seconds: int) -> tuple[float, dict[str, int], dict[str, int], int]:
    """Restart nicguard on the full cluster: (seconds to ready, RSS ready, RSS after, requests)."""
    stack.nicguard.stop()
    started = time.monotonic()
    stack.nicguard.start()  # returns once /readyz answers: every cache listed
    ready_seconds = time.monotonic() - started
    target = Running(stack.nicguard)
    ready = rss_kib(target.pid)
    namespace, job = last_runtime_trainjob(RUNTIMES - _EXAMPLE_RUNTIMES)
    probe = stack.plane.kubectl(
        "alice", "create", "--dry-run=server", "-n", namespace, "-f", "-", input=job
    )
    if probe.returncode == 0 or "NetworkNotFound" not in probe.stderr:
        raise RuntimeError(f"nicguard's cache lacks the last runtime: {probe.stderr.strip()}")
    review = ROOT / "examples" / "reviews" / "drifted-runtime.json"
    loaded = run_wrk(target, review, Load(threads=2, connections=16, seconds=seconds))
    return ready_seconds, ready, rss_kib(target.pid), loaded.requests


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.kube_rss", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds of the wrk round")
    args = parser.parse_args(argv)
    _say("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    with (
        tempfile.TemporaryDirectory(prefix="nicguard-kube-rss-") as tmp,
        running(Path(tmp)) as stack,
    ):
        _say(f"control plane: {stack.plane.versions()}")
        populate(stack)
        fill(stack)
        ready_seconds, ready, after, requests = measure(stack, args.duration)
    worst = max(ready["VmRSS"], after["VmRSS"]) * 1024
    ok = worst <= MAX_RSS_BYTES
    _say(
        f"RSS in Kubernetes mode, {StateCounts(NETWORKS, RUNTIMES).described()} "
        f"(ready {ready_seconds:.1f}s after start):"
    )
    _say(f"  ready:                   VmRSS {ready['VmRSS'] / 1024:6.1f} MiB")
    _say(
        f"  after {requests:,} requests: VmRSS {after['VmRSS'] / 1024:6.1f} MiB "
        f"(VmHWM {after['VmHWM'] / 1024:.1f} MiB)"
    )
    verdict = "PASS" if ok else "FAIL"
    _say(f"  RSS {worst / 1e6:.1f} MB (<= {MAX_RSS_BYTES / 1e6:.0f} MB) {verdict}")
    _say(f"load average at the end: {load_average()}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
