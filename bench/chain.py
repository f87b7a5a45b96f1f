"""What nicguard adds to a TrainJob's way to its Pods through the real controllers (the chain tier's
``tests/harness/chain.py``: Trainer, JobSet, the Job controller on the e2e control plane).

One sample: a TrainJob POSTed (as ``alice``, on a keep-alive connection) on a recipe-bound
runtime in a fresh namespace, timed from the request until a watch on the namespace has seen
every Pod created (``ADDED``). ``nicguard``: its shipped webhook configuration registered (five
doors on the way: TrainJob, snapshot, JobSet, Job, Pods); ``none``: no configuration. Each round
puts each in effect in turn, the order rotating, and takes ``--jobs`` samples under each after
one unmeasured (a configuration just registered opens its connections on its first calls).

    NICGUARD_K8S_BIN_DIR="$(scripts/k8s-bins.sh)" NICGUARD_CHAIN_DIR="$(scripts/chain-bins.sh \\
        trainer jobset)" python -m bench.chain [--rounds 5] [--jobs 4]

Exit status 0 when nicguard adds at most 10 % or 20 ms to the median (whichever is more) and
every TrainJob reached its Pods; 1 otherwise; 2 on a set-up error.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

from bench.e2e import ApiClient
from bench.run import load_average
from tests.harness.chain import Chain, running_chain
from tests.harness.chain_reads import NUM_NODES
from tests.harness.objects import runtime, trainjob, unique
from tests.harness.procs import wait_until
from tests.harness.state import checked, create_namespace
from tests.harness.webhook import register, sentinel

MODES: Final = ("nicguard", "none")
CONFIGURATION: Final = "nicguard"
POD_TIMEOUT: Final = 60.0
SWITCH_TIMEOUT: Final = 60.0
# The bar: nicguard may add this fraction of the median without it, or this many seconds.
RATIO_BAR: Final = 0.10
ABSOLUTE_BAR: Final = 0.020


class PodWatch:
    """A watch on a namespace's Pods, on its own connection; ``done`` is set at the time the
    ``count``-th Pod was seen ADDED (``at``)."""

    def __init__(self, chain: Chain, namespace: str, count: int) -> None:
        plane = chain.plane
        context = ssl.create_default_context(cafile=str(plane.ca_file))
        self._connection = http.client.HTTPSConnection("127.0.0.1", plane.port, context=context)
        token = plane.users["admin"].token
        self._connection.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods?watch=1",
            headers={"Authorization": f"Bearer {token}"},
        )
        self._reply = self._connection.getresponse()
        if self._reply.status != 200:
            raise RuntimeError(f"watching Pods in {namespace}: HTTP {self._reply.status}")
        self._count, self.at, self.done = count, 0.0, threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        seen = 0
        for line in self._reply:
            if json.loads(line).get("type") == "ADDED":
                seen += 1
                if seen == self._count:
                    self.at = time.perf_counter()
                    self.done.set()
                    return

    def close(self) -> None:
        self._connection.close()


def switch(chain: Chain, mode: str) -> None:
    """Put ``mode`` in effect: register nicguard's configuration (waits until it denies the
    sentinel) or delete it (waits until the sentinel is allowed)."""
    plane = chain.plane
    if mode == "nicguard":
        register(plane, chain.stack.nicguard, chain.stack.webhook_config)
        return
    args = ["delete", "validatingwebhookconfiguration", CONFIGURATION]
    checked(plane.kubectl("admin", *args), "deleting the configuration")
    body = sentinel()
    wait_until(
        lambda: (
            plane.kubectl("admin", "create", "--dry-run=server", "-f", "-", input=body).returncode
            == 0
            or None
        ),
        timeout=SWITCH_TIMEOUT,
        what="nicguard's configuration to be out of effect",
        interval=0.25,
    )


def sample(chain: Chain, client: ApiClient, runtime_name: str) -> float:
    """Seconds from a TrainJob's POST to the last of its Pods created."""
    namespace = unique("bench-chain")
    create_namespace(chain.plane, namespace)
    watch = PodWatch(chain, namespace, NUM_NODES)
    try:
        job = trainjob(unique("job"), namespace, runtime_name)
        path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
        started = time.perf_counter()
        status, payload, _ = client.post(path, job)
        if status != 201:
            raise RuntimeError(f"creating {namespace}: HTTP {status}: {payload[:300]!r}")
        if not watch.done.wait(POD_TIMEOUT):
            raise RuntimeError(f"no {NUM_NODES} Pods in {namespace} after {POD_TIMEOUT:.0f}s")
        return watch.at - started
    finally:
        watch.close()


def measure(chain: Chain, rounds: int, jobs: int, out: TextIO) -> dict[str, list[float]]:
    name = unique("bench-tcpxo")
    created = chain.stack.apply(runtime(name, recipe_bound=True), who="admin")
    checked(created, "creating the runtime")
    plane = chain.plane
    client = ApiClient("127.0.0.1", plane.port, plane.ca_file, plane.users["alice"].token)
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    sample(chain, client, name)  # warm-up: every cache and connection on the way
    current = "nicguard"  # running_chain() registers it
    for index in range(rounds):
        order = MODES[index % 2 :] + MODES[: index % 2]
        for mode in order:
            if mode != current:
                switch(chain, mode)
                current = mode
            sample(chain, client, name)  # unmeasured: the apiserver's new connections to nicguard
            taken = [sample(chain, client, name) for _ in range(jobs)]
            samples[mode] += taken
            shown = " ".join(f"{t * 1000:.0f}" for t in taken)
            print(f"round {index + 1} {mode:8} ms: {shown}  (load {load_average()})", file=out)
    client.close()
    return samples


def report(samples: dict[str, list[float]], out: TextIO) -> bool:
    with_it, without = (statistics.median(samples[mode]) for mode in MODES)
    added = with_it - without
    bar = max(RATIO_BAR * without, ABSOLUTE_BAR)
    ok = added <= bar
    print(
        f"TrainJob apply -> all {NUM_NODES} Pods, median of {len(samples['none'])}: "
        f"with nicguard {with_it * 1000:.1f} ms, without {without * 1000:.1f} ms, "
        f"added {added * 1000:+.1f} ms ({added / without:+.1%}); bar {bar * 1000:.1f} ms: "
        f"{'PASS' if ok else 'FAIL'}",
        file=out,
    )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.chain", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (each runs both modes)")
    parser.add_argument("--jobs", type=int, default=4, help="TrainJobs per mode per round")
    args = parser.parse_args(argv)
    if not (1 <= args.rounds <= 20 and 1 <= args.jobs <= 50):
        parser.error("--rounds must be in 1..20 and --jobs in 1..50")
    out = sys.stdout
    try:
        with (
            tempfile.TemporaryDirectory(prefix="nicguard-bench-chain-") as tmp,
            running_chain(Path(tmp)) as chain,
        ):
            print(f"control plane: {chain.plane.versions()}; load {load_average()}", file=out)
            samples = measure(chain, args.rounds, args.jobs, out)
    except (RuntimeError, AssertionError) as error:
        sys.stderr.write(f"bench.chain: {error}\n")
        return 2
    return 0 if report(samples, out) else 1


if __name__ == "__main__":
    raise SystemExit(main())
