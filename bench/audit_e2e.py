"""``make bench-e2e``, the audit on a real kube-apiserver: how soon a Network's status flip is an
Event on the runtimes naming it, and what an audit storm costs admission.

1. The control plane of ``tests/e2e`` with nicguard in Kubernetes mode (as its ServiceAccount);
   ``examples/cluster``; ``--flip-networks`` Networks (each with its GKENetworkParamSet, Ready)
   each named (at eth8) by one TrainingRuntime;
   ``--load`` TrainingRuntimes naming gpu-nic-0..7, the work a flip of gpu-nic-3 makes.
2. Latency: each flip Network goes Ready=False, then Ready=True again (2 flips each), through the
   status subresource as admin; the time from just before the PATCH to the ``eventTime`` of the
   runtime's ``WiringDrift`` / ``WiringRestored`` Event (nicguard's clock, the same machine).
3. Storm: rounds of ``--creates`` dry-run creates of a TrainingRuntime (not naming gpu-nic-3) as
   alice on one keep-alive connection, alternately quiet and while gpu-nic-3 flips every 100 ms;
   p99 of each, and nicguard's own share (its histogram) beside it.

    NICGUARD_K8S_BIN_DIR="$(scripts/k8s-bins.sh)" python -m bench.audit_e2e

Exit status 0 when the storm's p99 is within 1.5x the quiet p99, 1 otherwise, 2 on set-up error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from bench.run import load_average, machine
from tests.harness.objects import (
    RECIPE_PAIRS,
    conditions,
    network,
    param_set,
    param_set_status,
    runtime,
    unique,
)
from tests.harness.stack import Stack, populate, running
from tests.harness.state import checked, create_namespace

NAMESPACE: Final = "bench-audit"
STORM_NETWORK: Final = "gpu-nic-3"
STORM_PERIOD: Final = 0.1
MAX_STORM_P99_RATIO: Final = 1.5
EVENT_TIMEOUT: Final = 30.0
_EVENTS: Final = "/apis/events.k8s.io/v1/namespaces/" + NAMESPACE + "/events"
_NETWORKS: Final = "/apis/networking.gke.io/v1/networks"
_PARAM_SETS: Final = "/apis/networking.gke.io/v1/gkenetworkparamsets"
_RUNTIMES: Final = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainingruntimes"


class Api:
    """One keep-alive HTTPS connection to the apiserver as a token user."""

    def __init__(self, stack: Stack, user: str) -> None:
        plane = stack.plane
        self._host, self._port = "127.0.0.1", plane.port
        self._context = ssl.create_default_context(cafile=str(plane.ca_file))
        self._token = plane.users[user].token
        self._connection: http.client.HTTPSConnection | None = None

    def call(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            if self._connection is None:
                self._connection = http.client.HTTPSConnection(
                    self._host, self._port, context=self._context, timeout=30
                )
            try:
                self._connection.request(method, path, body=payload, headers=headers)
                reply = self._connection.getresponse()
                data = reply.read()
            except (OSError, http.client.HTTPException):
                self._connection.close()
                self._connection = None
                if attempt == 2:
                    raise
                continue
            return reply.status, json.loads(data) if data else None
        raise AssertionError("unreachable")

    def flip(self, name: str, *, ready: bool) -> None:
        self.set_status(
            f"{_NETWORKS}/{name}", conditions(ready=ready, reason="Bench" if not ready else "")
        )

    def set_status(self, path: str, status: dict[str, Any]) -> None:
        """Merge ``status`` into the object at ``path`` through its status subresource."""
        code, body = self.call(
            "PATCH", f"{path}/status", {"status": status}, "application/merge-patch+json"
        )
        if code != 200:
            raise RuntimeError(f"writing the status of {path}: HTTP {code} {body}")


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _p(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _event_time(event: dict[str, Any]) -> float:
    stamp = str(event.get("eventTime", "")).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def _apply(stack: Stack, objects: list[dict[str, Any]]) -> None:
    checked(stack.apply(*objects, who="admin"), "creating the bench objects")


def _audited(stack: Stack) -> dict[str, float]:
    code, text = stack.nicguard.probe("/metrics")
    if code != 200:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("nicguard_audit_runtimes{"):
            result = line.partition('result="')[2].partition('"')[0]
            found[result] = float(line.rpartition(" ")[2])
        elif line.startswith("nicguard_admission_duration_seconds_sum "):
            found["duration_sum"] = float(line.rpartition(" ")[2])
        elif line.startswith("nicguard_admission_duration_seconds_count "):
            found["duration_count"] = float(line.rpartition(" ")[2])
    return found


def _wait(what: str, check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)  # poll interval of a set-up step, not a measurement


def prepare(stack: Stack, flips: int, load: int) -> list[tuple[str, str]]:
    """The flip Networks and their runtimes, the load runtimes; all passing in nicguard."""
    populate(stack)
    create_namespace(stack.plane, NAMESPACE)
    pairs: list[tuple[str, str]] = []
    objects: list[dict[str, Any]] = []
    for _ in range(flips):
        net, name = unique("bench-flip"), unique("flip-rt")
        objects += [param_set(net), network(net)]
        pairs.append((net, name))
    _apply(stack, objects)
    admin = Api(stack, "admin")
    for net, _ in pairs:  # as GKE: the param set Ready, then the Network
        admin.set_status(f"{_PARAM_SETS}/{net}", param_set_status(net, ready=True))
        admin.flip(net, ready=True)
    wired = [
        runtime(name, namespace=NAMESPACE, pairs=[*RECIPE_PAIRS[:7], ("eth8", net)])
        for net, name in pairs
    ]
    wired += [runtime(unique("load-rt"), namespace=NAMESPACE) for _ in range(load)]
    for start in range(0, len(wired), 100):
        _apply(stack, wired[start : start + 100])
    total = flips + load + 2  # and the two example ClusterTrainingRuntimes
    _wait(
        f"nicguard's audit to pass all {total} runtimes",
        lambda: _audited(stack).get("pass", 0) >= total,
    )
    return pairs


def flip_latencies(stack: Stack, pairs: list[tuple[str, str]]) -> list[float]:
    admin = Api(stack, "admin")
    latencies: list[float] = []
    for net, name in pairs:
        for ready, reason in ((False, "WiringDrift"), (True, "WiringRestored")):
            started = time.time()
            admin.flip(net, ready=ready)
            selector = f"fieldSelector=regarding.name%3D{name},reason%3D{reason}"
            found: list[dict[str, Any]] = []

            def seen(query: str = selector, out: list[dict[str, Any]] = found) -> bool:
                _, body = admin.call("GET", f"{_EVENTS}?{query}")
                out[:] = (body or {}).get("items", [])
                return bool(out)

            _wait(f"{reason} on {name}", seen, timeout=EVENT_TIMEOUT)
            latencies.append(_event_time(found[-1]) - started)
    return latencies


@contextmanager
def storm(stack: Stack) -> Iterator[list[int]]:
    """gpu-nic-3 flips every 100 ms until the block ends; yields the count of flips."""
    admin, stop, flips = Api(stack, "admin"), threading.Event(), [0]

    def run() -> None:
        ready = False
        while not stop.wait(STORM_PERIOD):
            admin.flip(STORM_NETWORK, ready=ready)
            ready = not ready
            flips[0] += 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield flips
    finally:
        stop.set()
        thread.join(10)
        admin.flip(STORM_NETWORK, ready=True)


def create_round(client: Api, creates: int) -> list[float]:
    obj = runtime("bench-create", namespace=NAMESPACE, pairs=list(RECIPE_PAIRS[:2]))
    latencies = []
    for _ in range(creates):
        started = time.perf_counter()
        status, body = client.call("POST", f"{_RUNTIMES}?dryRun=All", obj)
        latencies.append((time.perf_counter() - started) * 1000)
        if status != 201:
            raise RuntimeError(f"dry-run create: HTTP {status} {body}")
    return latencies


@dataclass(slots=True)
class Storms:
    quiet: list[float]
    stormy: list[float]
    own_quiet: list[float]
    own_stormy: list[float]
    flips: int = 0


def storm_rounds(stack: Stack, creates: int, rounds: int) -> Storms:
    client = Api(stack, "alice")
    create_round(client, 20)  # warm the connection and nicguard
    result = Storms([], [], [], [])
    for _ in range(rounds):
        for stormy in (False, True):
            before = _audited(stack)
            if stormy:
                with storm(stack) as flips:
                    latencies = create_round(client, creates)
                result.flips += flips[0]
            else:
                latencies = create_round(client, creates)
            after = _audited(stack)
            count = after["duration_count"] - before["duration_count"]
            own = (after["duration_sum"] - before["duration_sum"]) / max(count, 1) * 1000
            (result.stormy if stormy else result.quiet).extend(latencies)
            (result.own_stormy if stormy else result.own_quiet).append(own)
            _say(
                f"  {'storm' if stormy else 'quiet'}: p50 {statistics.median(latencies):6.2f} ms"
                f"  p99 {_p(latencies, 0.99):6.2f} ms  nicguard mean {own:5.2f} ms"
            )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.audit_e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--flip-networks", type=int, default=25, help="2 flips each")
    parser.add_argument("--load", type=int, default=200, help="runtimes naming gpu-nic-3")
    parser.add_argument("--creates", type=int, default=200, help="dry-run creates per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    about = machine()
    _say(f"bench.audit_e2e: {about.get('cpu', '?')}; load average {load_average()}")
    with (
        tempfile.TemporaryDirectory(prefix="nicguard-audit-bench-") as tmp,
        running(Path(tmp)) as stack,
    ):
        pairs = prepare(stack, args.flip_networks, args.load)
        latencies = flip_latencies(stack, pairs)
        _say(
            f"status flip -> Event, {len(latencies)} flips: "
            f"p50 {statistics.median(latencies) * 1000:.0f} ms, "
            f"p99 {_p(latencies, 0.99) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
        )
        storms = storm_rounds(stack, args.creates, args.rounds)
    quiet, stormy = _p(storms.quiet, 0.99), _p(storms.stormy, 0.99)
    ratio = stormy / quiet
    verdict = "PASS" if ratio <= MAX_STORM_P99_RATIO else "FAIL"
    _say(
        f"admission (dry-run create through the apiserver) while {STORM_NETWORK} flips every "
        f"{STORM_PERIOD * 1000:.0f} ms ({storms.flips} flips, {args.load} runtimes re-judged "
        f"each): p99 {stormy:.2f} ms vs quiet {quiet:.2f} ms = {ratio:.2f}x "
        f"(<= {MAX_STORM_P99_RATIO}) {verdict}; nicguard's own mean "
        f"{statistics.mean(storms.own_stormy):.2f} vs {statistics.mean(storms.own_quiet):.2f} ms"
    )
    _say(f"load average at the end {load_average()}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
