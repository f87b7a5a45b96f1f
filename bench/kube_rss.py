"""nicguard's RSS in Kubernetes mode with 10,000 and 100,000 cached objects, on a real apiserver.

``make bench`` measures file mode; this is the mode a cluster runs. The control plane of
``tests/e2e`` gets the example cluster plus generated Networks (each with its GKENetworkParamSet,
which nicguard caches too) and TrainingRuntimes up to 1,000 + 1,000 and 8,000 (``bench/state.py``:
full-size AICR pod templates, created with ``kubectl create``); nicguard is then restarted so its
caches LIST all of them, proven by a TrainJob on the last runtime that only a cache holding it
can deny. VmRSS is read once its audit has judged every runtime and after a wrk round. Then ten
times the objects (the added runtimes each wired its own way): the slope per object and the time to
ready after a restart (a rollout's cold start), beside its floor: the same collections streamed to
a client that only reads them (``bench/initial_events.py``), and the API server's CPU for each.
``--mix dra`` is ``bench.scale``'s DRA mix instead (``bench/shapes.py``): 1,000 Networks and their
param sets, 3,000 ResourceClaimTemplates and 5,000 runtimes bound to ``a4-dranet`` claiming them
(and so when grown); ``--divide`` shrinks either mix, the slope still over ten times the objects.

    NICGUARD_K8S_BIN_DIR="$(scripts/k8s-bins.sh)" python -m bench.kube_rss [--mix dra]
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
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from bench.initial_events import Streamed, apiserver_cpu, stream_all
from bench.run import ROOT, Load, cpu_seconds, load_average, machine, rss_kib, run_wrk
from bench.scale import MAX_SLOPE_BYTES, audited_runtimes
from bench.shapes import DRA_MIX, claiming_runtimes, wired_runtimes
from bench.state import (
    EXAMPLES,
    NAMESPACES,
    NETWORKS,
    RUNTIMES,
    StateCounts,
    generated_claim_templates,
    generated_networks,
    generated_runtimes,
    load_one,
)
from tests.harness.objects import example
from tests.harness.stack import Stack, populate, running
from tests.harness.state import checked
from tests.harness.webhook import Nicguard

MAX_RSS_BYTES: Final = 120_000_000
# Ready with 100,000 objects: at most this many times the floor, a client that only streams the
# same collections from the same API server right after (SPEC §10).
MAX_READY_OVER_FLOOR: Final = 1.25
_BATCH: Final = 100
_PARALLEL: Final = 3
# A batch is _BATCH API creates, each through nicguard; the apiserver slows as it grows (its watch
# cache and the audit log), so a batch gets more than the tests' 60 s.
_BATCH_TIMEOUT: Final = 600.0
_PROGRESS_EVERY: Final = 100  # batches
_MISSING: Final = "bench-missing-network"
_EXAMPLE_NETWORKS: Final = 9  # examples/cluster, which populate() applies
_EXAMPLE_RUNTIMES: Final = 2
# What only a cache holding the last runtime denies the probe for: a DRA-bound runtime's patched
# annotation is a conflict first.
_PROBE_CODES: Final = ("NetworkNotFound", "WiringModeConflict")


class Mix(StrEnum):
    WIRED = "wired"
    DRA = "dra"

    @property
    def counts(self) -> StateCounts:
        if self is Mix.DRA:
            return StateCounts(DRA_MIX.networks, DRA_MIX.runtimes, DRA_MIX.templates)
        return StateCounts(NETWORKS, RUNTIMES)


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

    def create(batch: str) -> float:
        started = time.monotonic()
        run = stack.plane.kubectl("admin", "create", "-f", "-", input=batch, timeout=_BATCH_TIMEOUT)
        checked(run, "kubectl create")
        return time.monotonic() - started

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
        futures = [pool.submit(create, batch) for batch in _batches(objects)]
        for number, done in enumerate(futures, start=1):
            seconds = done.result()
            if number % _PROGRESS_EVERY == 0:
                _say(
                    f"  {number * _BATCH:,} created in {time.monotonic() - started:.0f}s "
                    f"(the last batch of {_BATCH}: {seconds:.1f}s)"
                )


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


def fill(stack: Stack, counts: StateCounts) -> None:
    """The team namespaces, then Networks (and their param sets), templates and runtimes up to
    ``counts``."""
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{n:02d}"}}
        for n in range(NAMESPACES)
    ]
    items = json.dumps({"apiVersion": "v1", "kind": "List", "items": namespaces})
    checked(stack.plane.kubectl("admin", "create", "-f", "-", input=items), "team namespaces")
    template = load_one(EXAMPLES / "cluster" / "torch-distributed-tcpxo.yaml")
    started = time.monotonic()
    networks = list(generated_networks(counts.networks - _EXAMPLE_NETWORKS))
    create_all(stack, networks)
    set_ready(stack, networks)  # grow() wires runtimes to these too
    create_all(stack, generated_claim_templates(counts.templates))  # before the runtimes claim them
    runtimes = generated_runtimes(template, counts.runtimes - _EXAMPLE_RUNTIMES)
    create_all(
        stack, claiming_runtimes(runtimes, 0, counts.templates) if counts.templates else runtimes
    )
    _say(f"created the generated objects in {time.monotonic() - started:.0f}s")


def grow(stack: Stack, have: StateCounts, factor: int) -> StateCounts:
    """``factor`` times the Networks, param sets, templates and runtimes; the new runtimes each
    wired its own way over all the Networks (nothing shared: the shape that costs most per
    object), or claiming a template over all of them."""
    want = have.scaled(factor)
    have_networks = have.networks - _EXAMPLE_NETWORKS
    have_runtimes = have.runtimes - _EXAMPLE_RUNTIMES
    template = load_one(EXAMPLES / "cluster" / "torch-distributed-tcpxo.yaml")
    started, cpu = time.monotonic(), _nicguard_cpu(stack)
    created = list(generated_networks(want.networks - have.networks, start=have_networks))
    create_all(stack, created)
    set_ready(stack, created)  # else nicguard denies the runtimes naming them: NetworkNotReady
    templates = want.templates - have.templates
    create_all(stack, generated_claim_templates(templates, start=have.templates))
    added = generated_runtimes(template, want.runtimes - have.runtimes, start=have_runtimes)
    # Over every generated Network: bench-net-00000 up to the last one added.
    generated = have_networks + want.networks - have.networks
    wired = wired_runtimes(added, have_runtimes, generated, varied=True)
    claiming = claiming_runtimes(wired, have_runtimes, want.templates)
    create_all(stack, claiming if want.templates else wired)
    _say(
        f"created {want.total - have.total:,} more objects in "
        f"{time.monotonic() - started:.0f}s (nicguard's CPU meanwhile, admitting each and "
        f"caching its watch event: {_nicguard_cpu(stack) - cpu:.0f}s)"
    )
    return want


def _nicguard_cpu(stack: Stack) -> float:
    return cpu_seconds(Running(stack.nicguard).pid)


def set_ready(stack: Stack, objects: list[dict[str, Any]]) -> None:
    """Each object's status written as generated (Ready), through the status subresource, in
    batches: ``kubectl patch -f`` applies one patch to every object of a list, and the generated
    statuses differ only in a param set's networkName, which nicguard does not read."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)

    def patch(items: list[dict[str, Any]]) -> None:
        status = {"conditions": items[0]["status"]["conditions"]}
        names = [
            {"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": o["metadata"]}
            for o in items
        ]
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": names})
        args = ["patch", "-f", "-", "--subresource=status", "--type=merge"]
        patched = json.dumps({"status": status})
        run = stack.plane.kubectl(
            "admin", *args, "-p", patched, input=listed, timeout=_BATCH_TIMEOUT
        )
        checked(run, "kubectl patch --subresource=status")

    with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
        futures = [
            pool.submit(patch, items[start : start + _BATCH])
            for items in by_kind.values()
            for start in range(0, len(items), _BATCH)
        ]
        for done in futures:
            done.result()


@dataclass(frozen=True, slots=True)
class Measured:
    counts: StateCounts
    ready_seconds: float
    ready_cpu: tuple[float, float]  # (nicguard, kube-apiserver) from the start to ready
    floor: Streamed  # the same collections read by a client that does nothing with them
    audited_seconds: float
    audited_kib: int
    after_kib: dict[str, int]
    requests: int

    @property
    def worst_bytes(self) -> int:
        return max(self.audited_kib, self.after_kib["VmRSS"]) * 1024


def measure(stack: Stack, counts: StateCounts, seconds: int) -> Measured:
    """Restart nicguard on the full cluster (a rollout's cold start): seconds to ready, then RSS
    once its audit has judged every runtime, and after a wrk round."""
    stack.nicguard.stop()
    apiserver, started = apiserver_cpu(stack.plane), time.monotonic()
    # Returns once /readyz answers (every cache listed); on a busy machine that can take longer
    # than the tests' minute, and a slow start is a result to report, not a crash.
    stack.nicguard.start(ready_timeout=300)
    ready_seconds = time.monotonic() - started
    target = Running(stack.nicguard)
    ready_cpu = (cpu_seconds(target.pid), apiserver_cpu(stack.plane) - apiserver)
    namespace, job = last_runtime_trainjob(counts.runtimes - _EXAMPLE_RUNTIMES)
    probe = stack.plane.kubectl(
        "alice", "create", "--dry-run=server", "-n", namespace, "-f", "-", input=job
    )
    if probe.returncode == 0 or not any(code in probe.stderr for code in _PROBE_CODES):
        raise RuntimeError(f"nicguard's cache lacks the last runtime: {probe.stderr.strip()}")
    deadline = time.monotonic() + 300
    while audited_runtimes(stack.nicguard.probe("/metrics")[1]) < counts.runtimes:
        target.check_running()
        if time.monotonic() > deadline:
            raise RuntimeError(f"the audit did not judge {counts.runtimes:,} runtimes in 300 s")
        time.sleep(0.2)
    audited_seconds = time.monotonic() - started
    audited = rss_kib(target.pid)["VmRSS"]
    review = ROOT / "examples" / "reviews" / "drifted-runtime.json"
    loaded = run_wrk(target, review, Load(threads=2, connections=16, seconds=seconds))
    after = rss_kib(target.pid)
    floor = stream_all(stack.plane)  # nicguard idle meanwhile: the API server has the cores
    return Measured(
        counts, ready_seconds, ready_cpu, floor, audited_seconds, audited, after, loaded.requests
    )


def _report(measured: Measured) -> None:
    _say(
        f"RSS in Kubernetes mode, {measured.counts.described()} (ready "
        f"{measured.ready_seconds:.1f} s after start, audit done after "
        f"{measured.audited_seconds:.1f} s):"
    )
    nicguard, apiserver = measured.ready_cpu
    floor = measured.floor
    _say(
        f"  start to ready:           CPU nicguard {nicguard:.1f} s, kube-apiserver "
        f"{apiserver:.1f} s"
    )
    _say(
        f"  the floor: a client that only reads the same {floor.lines:,} initial events "
        f"({floor.megabytes:.0f} MB) waits {floor.seconds:.1f} s (kube-apiserver CPU "
        f"{floor.apiserver_cpu:.1f} s)"
    )
    _say(f"  audited:                  VmRSS {measured.audited_kib / 1024:6.1f} MiB")
    _say(
        f"  after {measured.requests:,} requests: VmRSS "
        f"{measured.after_kib['VmRSS'] / 1024:6.1f} MiB "
        f"(VmHWM {measured.after_kib['VmHWM'] / 1024:.1f} MiB)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.kube_rss", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds of the wrk round")
    parser.add_argument(
        "--grow", type=int, default=10, help="then this many times the objects (1: skip)"
    )
    parser.add_argument(
        "--mix", type=Mix, choices=list(Mix), default=Mix.WIRED, help="the mix of 10,000 objects"
    )
    parser.add_argument(
        "--divide", type=int, default=1, help="the mix's counts divided by this (a smaller start)"
    )
    args = parser.parse_args(argv)
    _say("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    with (
        tempfile.TemporaryDirectory(prefix="nicguard-kube-rss-") as tmp,
        running(Path(tmp)) as stack,
    ):
        _say(f"control plane: {stack.plane.versions()}")
        populate(stack)
        counts = args.mix.counts.divided(args.divide)
        fill(stack, counts)
        small = measure(stack, counts, args.duration)
        _report(small)
        ok = small.worst_bytes <= MAX_RSS_BYTES
        _say(
            f"  RSS {small.worst_bytes / 1e6:.1f} MB (<= {MAX_RSS_BYTES / 1e6:.0f} MB) "
            f"{_verdict(ok)}"
        )
        if args.grow > 1:
            big = measure(stack, grow(stack, counts, args.grow), args.duration)
            _report(big)
            added = big.counts.total - small.counts.total
            slope = (big.audited_kib - small.audited_kib) * 1024 / added
            bound = MAX_READY_OVER_FLOOR * big.floor.seconds
            slope_ok, ready_ok = slope <= MAX_SLOPE_BYTES, big.ready_seconds <= bound
            ok = ok and slope_ok and ready_ok
            _say(
                f"  {slope:,.0f} bytes per added object (<= {MAX_SLOPE_BYTES:,}) "
                f"{_verdict(slope_ok)}; ready {big.ready_seconds:.1f} s "
                f"(<= {MAX_READY_OVER_FLOOR} x the floor's {big.floor.seconds:.1f} s: "
                f"{big.ready_seconds / big.floor.seconds:.2f} x) {_verdict(ready_ok)}"
            )
    _say(f"load average at the end: {load_average()}")
    return 0 if ok else 1


def _verdict(ok: bool) -> str:  # noqa: FBT001 - a plain predicate
    return "PASS" if ok else "FAIL"


if __name__ == "__main__":
    raise SystemExit(main())
