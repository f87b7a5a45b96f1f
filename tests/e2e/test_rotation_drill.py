"""The rotation drill: minutes-long certificates, two replicas, a real apiserver, no failed call.

CA 150 s, serving certificate 60 s, controller period 1 s. The webhook configuration holds one
webhook per replica, so every admission call reaches both. While kubectl applies objects in a
loop, the drill watches the Secret, the caBundles and what each replica serves until it has seen
the serving certificate renewed under the first CA, the next CA trusted, promoted and served by
both replicas, and the old CA pruned from the caBundle. Every call must get nicguard's verdict;
every fresh TLS handshake must verify against the caBundle of the moment; no replica may turn
unready.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import pytest

from tests.harness.certs import (
    Cluster,
    ca_bundles,
    certificates,
    fingerprint,
    fresh_cluster,
    handshake,
    secret_data,
    webhook_name,
)
from tests.harness.objects import RECIPE_PAIRS, runtime, unique, with_pairs
from tests.harness.procs import http_status, wait_until
from tests.harness.stack import wait_for_recipe
from tests.harness.state import Run, apply_networks, apply_recipe

pytestmark = pytest.mark.e2e

CA_LIFETIME, CERT_LIFETIME, PERIOD = 150, 60, 1
ARGS: Final = (
    f"--ca-lifetime={CA_LIFETIME}",
    f"--cert-lifetime={CERT_LIFETIME}",
    f"--cert-period={PERIOD}",
)
REPLICAS: Final = ("replica-a", "replica-b")
DRILL_TIMEOUT: Final = 240.0  # the old CA is pruned at 150 s; the rest is start-up and slack
WORKERS: Final = 2
DRIFT: Final = "[MappingDivergesFromRecipe]"


@dataclass
class Tally:
    """Admission calls by outcome; thread-safe."""

    calls: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, what: str, run: Run, ok: bool) -> None:
        with self.lock:
            self.calls[what if ok else f"{what} FAILED"] += 1
            if not ok:
                self.failures.append(f"{what}: exit {run.returncode}: {run.stderr.strip()[:400]}")


def denied_by_nicguard(run: Run) -> bool:
    ours = any(
        f'admission webhook "{webhook_name(i)}" denied the request: ' in run.stderr
        for i in range(len(REPLICAS))
    )
    return run.returncode == 1 and ours and DRIFT in run.stderr


def load(cluster: Cluster, tally: Tally, stop: threading.Event) -> None:
    """Dry-run a good and a drifted runtime, and create a good one, until ``stop``."""
    stack = cluster.stack
    while not stop.is_set():
        good = runtime(unique("drill-good"), recipe_bound=True)
        run = stack.apply(good, dry_run=True)
        tally.record("allowed (dry run)", run, run.returncode == 0 and not run.stderr)
        drifted = runtime(unique("drill-drift"), pairs=with_pairs(RECIPE_PAIRS, (2, 3)))
        drifted["metadata"]["labels"]["nicguard.dev/recipe-bound"] = "true"
        run = stack.apply(drifted, dry_run=True)
        tally.record("denied (dry run)", run, denied_by_nicguard(run))
        run = stack.apply(runtime(unique("drill-good"), recipe_bound=True))
        tally.record("allowed (created)", run, run.returncode == 0 and "created" in run.stdout)


@dataclass
class Observed:
    """What the drill saw, sample by sample."""

    cas: list[str] = field(default_factory=list)  # the Secret's current CA, each once, in order
    leaves: dict[str, set[str]] = field(default_factory=dict)  # CA -> serving certs issued by it
    bundle_sizes: list[int] = field(default_factory=list)  # CAs in the caBundle, on change
    served: dict[str, str] = field(default_factory=dict)  # replica -> last served fingerprint
    handshakes: int = 0
    problems: list[str] = field(default_factory=list)

    def step(self, cluster: Cluster) -> bool | None:
        self.sample(cluster)
        return self.complete()

    def sample(self, cluster: Cluster) -> None:
        data, bundles = secret_data(cluster.plane), ca_bundles(cluster.plane)
        ca = fingerprint(data["ca.crt"])
        if not self.cas or self.cas[-1] != ca:
            self.cas.append(ca)
        self.leaves.setdefault(ca, set()).add(fingerprint(data["tls.crt"]))
        size = len(certificates(bundles[0]))
        if not self.bundle_sizes or self.bundle_sizes[-1] != size:
            self.bundle_sizes.append(size)
        for (name, nicguard), bundle in zip(cluster.replicas.items(), bundles, strict=True):
            try:
                self.served[name] = handshake(nicguard.port, bundle)
                self.handshakes += 1
            except (ssl.SSLError, OSError) as error:
                self.problems.append(f"{name}: handshake against the caBundle failed: {error}")
            ready = http_status(f"http://127.0.0.1:{nicguard.probe_port}/readyz")
            if ready != 200:
                self.problems.append(f"{name}: /readyz {ready}")

    def complete(self) -> bool | None:
        """Renewed under the first CA, the next CA served everywhere, the old one pruned."""
        if len(self.cas) < 2 or len(self.leaves[self.cas[0]]) < 2:
            return None
        newest = self.leaves[self.cas[-1]]
        everywhere = len(self.served) == len(REPLICAS) and set(self.served.values()) <= newest
        pruned = self.bundle_sizes[-3:] == [1, 2, 1]
        return (everywhere and pruned) or None


def test_rotation_drill_crosses_leaf_and_ca_rotations_without_a_failed_call(
    tmp_path_factory: pytest.TempPathFactory, record_property: Callable[[str, object], None]
) -> None:
    workdir = tmp_path_factory.mktemp("drill")
    with fresh_cluster(workdir, REPLICAS, *ARGS) as cluster:
        apply_networks(cluster.plane)
        apply_recipe(cluster.plane)
        wait_for_recipe(cluster.stack)  # both replicas allow a recipe-bound runtime
        before = {name: len(r.decisions()) for name, r in cluster.replicas.items()}
        tally, observed, stop = Tally(), Observed(), threading.Event()
        workers = [
            threading.Thread(target=load, args=(cluster, tally, stop), daemon=True)
            for _ in range(WORKERS)
        ]
        started = time.monotonic()
        for worker in workers:
            worker.start()
        try:
            wait_until(
                lambda: observed.step(cluster),
                timeout=DRILL_TIMEOUT,
                what="a leaf rotation, a CA rotation and the old CA pruned",
                interval=0.5,
                diagnose=lambda: f"{observed}\n{tally.calls}\n{cluster.stack.report()}",
            )
        finally:
            stop.set()
            for worker in workers:
                worker.join()
        decided = {n: len(r.decisions()) - before[n] for n, r in cluster.replicas.items()}
    summary = {
        "seconds": round(time.monotonic() - started),
        "admission_calls": dict(tally.calls),
        "decisions_per_replica": decided,
        "ca_rotations": len(observed.cas) - 1,
        "serving_certificates": sum(len(leaves) for leaves in observed.leaves.values()),
        "bundle_sizes": observed.bundle_sizes,
        "handshakes": observed.handshakes,
        "problems": observed.problems,
        "failures": tally.failures,
    }
    (workdir / "drill.json").write_text(json.dumps(summary, indent=2))
    record_property("drill", json.dumps(summary))
    assert tally.failures == [], summary
    assert observed.problems == [], summary
    assert sum(tally.calls.values()) >= 100, summary
    assert all(count > 0 for count in decided.values()), summary
