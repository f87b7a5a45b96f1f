"""``make bench``, the audit: CPU of a full pass over 10,000 runtimes, and of the passes a
Network change costs, beside the same runtimes judged by a plain loop of ``evaluate`` (what
admission would spend on them) in the same run.

The runtimes are copies of AICR's ``torch-distributed-tcpxo`` as TrainingRuntimes (``bench.state``),
all naming gpu-nic-0..7; 2,000 Networks. Exit status 0 when a full pass costs at most 1 s of CPU
per 10,000 runtimes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Final

from app.documents import load_yaml
from app.domain.cluster import ClusterSnapshot, Networks, ObjectName, Unverifiable, snapshot_of
from app.domain.drift import EVERYTHING, Change, DriftBook
from app.domain.evaluate import evaluate
from app.domain.network import network_from_object
from app.domain.policy import Policy
from app.domain.review import Operation, Review
from app.files.state import iter_objects
from bench.state import EXAMPLES, generated_networks, generated_runtimes, load_one

RUNTIMES: Final = 10_000
NETWORKS: Final = 2_000
MAX_FULL_PASS_CPU: Final = 1.0  # seconds per 10,000 runtimes (BENCHMARKS.md)
ROUNDS: Final = 3


def cluster(runtimes: int) -> ClusterSnapshot:
    recipe = ObjectName("nicguard-system", "nicguard-recipe")
    template = load_one(EXAMPLES / "cluster" / "torch-distributed-tcpxo.yaml")
    objects = [o.obj for o in iter_objects([EXAMPLES / "cluster"])]
    objects += list(generated_networks(NETWORKS))
    objects += list(generated_runtimes(template, runtimes))
    return snapshot_of(objects, recipe_name=recipe, load_yaml=load_yaml)


def with_network_down(view: ClusterSnapshot, name: str) -> ClusterSnapshot:
    networks = view.network_state
    if not isinstance(networks, Networks):
        raise TypeError("a file state always has its Networks")
    down = network_from_object(
        {
            "metadata": {"name": name},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Bench"}]},
        }
    )
    if down is None:
        raise TypeError("the Network has a name")
    by_name = {**networks.by_name, name: down}
    flipped = Networks(by_name, param_sets=networks.param_sets)  # the param sets unchanged
    return ClusterSnapshot(flipped, view.recipe_state, view.runtime_state)


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def cpu(work: Callable[[], object]) -> float:
    gc.collect()
    start = time.process_time()
    work()
    return time.process_time() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtimes", type=int, default=RUNTIMES)
    args = parser.parse_args(argv)
    view = cluster(args.runtimes)
    runtimes = view.runtime_state
    if isinstance(runtimes, Unverifiable):
        raise TypeError("a file state is always complete")
    policy = Policy()  # the webhook's defaults
    count = len(runtimes)

    def plain() -> None:
        for (kind, namespace, name), obj in runtimes.items():
            review = Review(
                operation=Operation.CREATE, kind=kind, namespace=namespace, obj=obj, name=name
            )
            evaluate(review, view, policy)

    baseline, full, flip, back, unrelated, failing = [], [], [], [], [], []
    down = with_network_down(view, "gpu-nic-3")
    for _ in range(ROUNDS):
        baseline.append(cpu(plain))
        book = DriftBook(policy)
        full.append(cpu(lambda: book.apply(EVERYTHING, view)))  # noqa: B023 - run at once
        named = Change(networks=frozenset({"gpu-nic-3"}))
        other = Change(networks=frozenset({"bench-net-00007"}))
        flip.append(cpu(lambda: book.apply(named, down)))  # noqa: B023
        # Every runtime fails NotReady, whose message lists the usable Networks: re-judged.
        failing.append(cpu(lambda: book.apply(other, down)))  # noqa: B023
        back.append(cpu(lambda: book.apply(named, view)))  # noqa: B023
        unrelated.append(cpu(lambda: book.apply(other, view)))  # noqa: B023
    per_10k = statistics.median(full) * 10_000 / count
    _say(f"audit over {count:,} runtimes, {NETWORKS:,} Networks; medians of {ROUNDS} rounds, CPU s")
    rows = [
        ("plain evaluate() loop (baseline)", baseline),
        ("full pass (DriftBook, everything)", full),
        ("gpu-nic-3 NotReady (named by all)", flip),
        ("another Network, while all fail", failing),
        ("gpu-nic-3 Ready again", back),
        ("another Network, while all pass", unrelated),
    ]
    for label, samples in rows:
        _say(f"  {label:36s} {statistics.median(samples):8.3f}")
    verdict = "PASS" if per_10k <= MAX_FULL_PASS_CPU else "FAIL"
    _say(f"full pass: {per_10k:.3f} s CPU per 10,000 runtimes (<= {MAX_FULL_PASS_CPU}) {verdict}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
