"""Faults on a real control plane of its own (ClusterStateUnavailable; docs/operations.md).

While kube-apiserver or etcd restarts, nicguard's watches are cut, its RBAC is withdrawn or the
recipe disappears, AdmissionReviews are posted straight to nicguard (``faults.Tally``): each
answer must be the healthy verdict or ``ClusterStateUnavailable`` (503), never a wrong allow.
Afterwards the caches resync and ``kubectl`` is judged correctly again, by the same nicguard
process (same PID): recovery never needs a restart. Each test prints its numbers
(``pytest -rP``) for RELIABILITY.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Final

import pytest

from app.kube.client import WATCH_SECONDS, WATCH_SILENCE_ALLOWANCE
from app.kube.watch_cache import DEFAULT_PACING
from tests.harness import expect
from tests.harness.audit import metrics
from tests.harness.faults import (
    DIVERGES,
    RECOVERY_TIMEOUT,
    UNAVAILABLE,
    FaultStack,
    Tally,
    example_review,
    fault_stack,
    healthy,
    judge_until,
    numbers,
    outcome,
    post_review,
    relists,
    synced_caches,
)
from tests.harness.objects import (
    DENIED,
    INTERFACES,
    RECIPE_PAIRS,
    conditions,
    interfaces,
    node_override,
    runtime,
    trainjob,
    unique,
    with_pairs,
)
from tests.harness.procs import wait_until
from tests.harness.stack import network_backed_runtime, wait_for_recipe
from tests.harness.state import (
    NETWORKS,
    RECIPE,
    Run,
    apply_recipe,
    checked,
    create_namespace,
    delete_past_nicguard,
    eventually,
    set_status,
)
from tests.harness.webhook import Nicguard

pytestmark = pytest.mark.e2e

# Watch failures nicguard tolerates while serving its last state.
GRACE: Final = DEFAULT_PACING.grace
# How long the last state may be seen served at all after a partition: bounds a hang only.
STALE_HANG: Final = 5 * GRACE
# A log line's time is cut to the millisecond.
LOG_RESOLUTION: Final = 0.001
DOWN_ROUNDS: Final = 20  # judging rounds while a component is down (3 reviews each)
ETCD_DOWN_SECONDS: Final = 12.0  # longer than the grace: nicguard must not care (watches stay)
NETWORK_KEY: Final = "/registry/networking.gke.io/networks/{}"


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    """Its own control plane and nicguard: restarts and RBAC edits stay in this module."""
    with fault_stack(tmp_path_factory.mktemp("faults")) as started:
        yield started


@pytest.fixture
def tally(faults: FaultStack) -> Iterator[Tally]:
    """A fresh tally; the test starts from (and must leave) a healthy nicguard, same PID."""
    pid = faults.nicguard.pid
    wait_until(
        lambda: healthy(faults.nicguard) or None,
        timeout=RECOVERY_TIMEOUT,
        what="nicguard healthy before the test",
        diagnose=faults.report,
    )
    counted = Tally(faults.nicguard)
    counted.round()
    assert counted.counts["correct"] == 3, counted.counts
    yield counted
    assert faults.nicguard.pid == pid, "nicguard was restarted"
    assert faults.nicguard.process is not None
    assert faults.nicguard.process.running()


@pytest.fixture
def namespace(faults: FaultStack) -> str:
    name = unique("faults")
    create_namespace(faults.plane, name)
    return name


def apply(faults: FaultStack, *objects: dict[str, Any], dry_run: bool = True) -> Run:
    return faults.stack.apply(*objects, dry_run=dry_run)


def unavailable(run: Run, subject: str, *fragments: str) -> str:
    """Exit 1 and nicguard's ClusterStateUnavailable denial (status 503) of ``subject``."""
    assert run.returncode == 1, expect.shown(run)
    assert "Error from server (ServiceUnavailable)" in run.stderr, expect.shown(run)
    lead = f"{DENIED}{subject}: [{UNAVAILABLE}] "
    assert lead in run.stderr, expect.shown(run)
    for fragment in fragments:
        assert fragment in run.stderr, f"expected {fragment!r}\n{expect.shown(run)}"
    return run.stderr


def healthy_again(faults: FaultStack, tally: Tally) -> float:
    """Judge rounds until /readyz is 200 and every cache reports synced; returns seconds."""
    return judge_until(
        tally,
        lambda: healthy(faults.nicguard),
        what="nicguard's caches to resync",
        timeout=RECOVERY_TIMEOUT,
    )


def assert_sees_new_writes(faults: FaultStack, namespace: str) -> None:
    """A Network created now is in nicguard's cache: its watches are live, not just synced."""
    network_backed_runtime(faults.stack, namespace)


def assert_judges_kubectl(faults: FaultStack) -> None:
    """The drifted runtime is denied and the good one admitted, through the apiserver."""
    name = unique("tcpxo-after")
    drifted = runtime(name, pairs=with_pairs(RECIPE_PAIRS, (2, 3)), recipe_bound=True)
    expect.denied(apply(faults, drifted), f"ClusterTrainingRuntime/{name}", DIVERGES)
    expect.allowed(apply(faults, runtime(name, recipe_bound=True)), "created (server dry run)")


def test_apiserver_crash_and_restart_while_serving(
    faults: FaultStack, tally: Tally, namespace: str
) -> None:
    relisted_before = relists(faults.nicguard)
    faults.plane.stop_apiserver(crash=True)
    for _ in range(DOWN_ROUNDS):
        tally.round()
    down = tally.total
    faults.plane.start_apiserver(wait=False)
    to_ready = judge_until(
        tally, faults.plane.apiserver_ready, what="kube-apiserver /readyz", timeout=90
    )
    resync = healthy_again(faults, tally)
    assert_judges_kubectl(faults)
    assert_sees_new_writes(faults, namespace)
    relisted = relists(faults.nicguard) - relisted_before
    numbers(
        "apiserver-crash-restart",
        f"{tally.summary()}; {down} while down; "
        f"apiserver ready {to_ready:.1f}s after start, caches synced {resync:.1f}s later; "
        f"410 relists {dict(relisted)}; unavailable because {sorted(tally.messages)[:2]}",
    )


def test_etcd_restart_while_serving(faults: FaultStack, tally: Tally, namespace: str) -> None:
    faults.plane.stop_etcd()
    started = time.monotonic()
    judge_until(
        tally,
        lambda: time.monotonic() - started >= ETCD_DOWN_SECONDS,
        what="the observation window with etcd down",
        timeout=ETCD_DOWN_SECONDS + 10,
    )
    down = tally.total
    readyz, _ = faults.nicguard.probe("/readyz")
    faults.plane.start_etcd(wait=False)
    faults.plane.wait_etcd_healthy()
    # The apiserver notices etcd again at its own pace; writes work as soon as it does.
    eventually(
        lambda: faults.plane.kubectl("admin", "get", "--raw=/readyz/etcd"),
        lambda run: run.returncode == 0,
        timeout=90,
    )
    resync = healthy_again(faults, tally)
    assert_judges_kubectl(faults)
    assert_sees_new_writes(faults, namespace)
    numbers(
        "etcd-restart",
        f"{tally.summary()}; {down} in {ETCD_DOWN_SECONDS:.0f}s with "
        f"etcd down (nicguard /readyz {readyz} meanwhile: its watches on the apiserver's cache "
        f"stayed open); caches synced {resync:.1f}s after the apiserver saw etcd again",
    )


def test_watch_expiry_410_relists_and_drops_what_was_deleted_meanwhile(
    faults: FaultStack, tally: Tally, namespace: str
) -> None:
    """A Network deleted behind the watch (in etcd, then compacted) is gone after the relist."""
    doomed, _ = network_backed_runtime(faults.stack, namespace)
    relisted_before = relists(faults.nicguard)
    faults.plane.stop_apiserver(crash=True)
    assert faults.plane.etcd_delete(NETWORK_KEY.format(doomed)) == 1
    revision = faults.plane.etcd_revision()
    faults.plane.etcd_compact(revision)  # resuming from any earlier version is now impossible
    faults.plane.start_apiserver(wait=False)
    judge_until(tally, faults.plane.apiserver_ready, what="kube-apiserver /readyz", timeout=90)

    def relisted() -> bool:
        return (relists(faults.nicguard) - relisted_before)["networks"] > 0

    judge_until(tally, relisted, what="the networks cache to relist on 410", timeout=60)
    healthy_again(faults, tally)
    name = unique("torch-tcpxo")  # a new object: a create gets the full verdict
    again = runtime(name, namespace=namespace, pairs=[*RECIPE_PAIRS[:7], ("eth8", doomed)])
    expect.denied(
        apply(faults, again),
        f"TrainingRuntime/{namespace}/{name}",
        "NetworkNotFound",
        f"no Network object exists for eth8->{doomed}",
    )
    expired = [
        line
        for line in faults.nicguard.log_lines()
        if line.get("message") == "watch expired, relisting"
    ]
    numbers(
        "watch-410",
        f"etcd compacted at revision {revision} with the apiserver down; "
        f"relists {dict(relists(faults.nicguard) - relisted_before)}; {tally.summary()}; "
        f"the Network deleted behind the watch is NetworkNotFound after the relist; "
        f"last expiry logged: {expired[-1]['time']}",
    )


def test_a_silently_dead_watch_is_restarted_well_before_the_old_330_s(
    faults: FaultStack, tally: Tally, namespace: str
) -> None:
    """Every open connection of nicguard's stops forwarding without being closed (a NAT or a
    proxy losing it; new connections flow): a Network turned NotReady meanwhile is seen once
    the silent watch is given up, after a short watch plus its allowance (app/kube/client.py),
    where a 300 s watch with a 330 s read timeout would have served the stale state.

    Asserted: the networks watch was given up (a failure logged, nothing else could fail it)
    and watched again from its resourceVersion (no relist), the flip then seen. How long it took
    is printed; the wait for it only bounds a hang, and stays below the old 330 s."""
    net, _ = network_backed_runtime(faults.stack, namespace)
    name = unique("torch-tcpxo")  # a create: the full verdict
    obj = runtime(name, namespace=namespace, pairs=[*RECIPE_PAIRS[:7], ("eth8", net)])
    logged = len(faults.nicguard.log_lines())
    held = faults.proxy.hold()
    silenced = time.monotonic()
    expected = WATCH_SECONDS[1] + WATCH_SILENCE_ALLOWANCE + 15.0  # + backoff and a pass
    try:
        set_status(faults.plane, NETWORKS, net, conditions(ready=False, reason="Detached"))
        eventually(
            lambda: apply(faults, obj),
            lambda run: "NetworkNotReady" in run.stderr,
            timeout=4 * expected,  # a hang: 240 s, still short of the old 330 s
        )
        seen = time.monotonic() - silenced
    finally:
        faults.proxy.release()
    since = faults.nicguard.log_lines()[logged:]
    given_up = [
        str(line.get("error"))
        for line in since
        if line.get("message") == "watch cache failure" and line.get("cache") == "networks"
    ]
    relisted = [
        line
        for line in since
        if line.get("message") == "watch cache listed" and line.get("cache") == "networks"
    ]
    # Given up by its read timeout: the hold closes nothing, so nothing else could end it.
    assert any("timed out" in error for error in given_up), given_up
    assert relisted == [], relisted  # resumed from its resourceVersion
    healthy_again(faults, tally)
    numbers(
        "dead-watch",
        f"{held} connections held silent; a Network turned NotReady meanwhile was judged "
        f"{seen:.1f}s later (expected under {expected:.0f}s; a 300 s watch read with a 330 s "
        f"timeout: up to 330 s); given up as {given_up[0]!r}; {tally.summary()}",
    )


def test_rbac_for_networks_removed_then_restored(faults: FaultStack, tally: Tally) -> None:
    role = json.loads(
        checked(
            faults.plane.kubectl("admin", "get", "clusterrole", "nicguard", "-o", "json"),
            "reading the ClusterRole",
        ).stdout
    )
    original = {k: v for k, v in role.items() if k != "status"}
    original["metadata"] = {"name": "nicguard", "labels": role["metadata"].get("labels", {})}
    reduced = json.loads(json.dumps(original))
    reduced["rules"] = [r for r in role["rules"] if "networks" not in r.get("resources", [])]
    assert len(reduced["rules"]) == len(role["rules"]) - 1
    permission = "cannot watch networks.networking.gke.io (RBAC)"
    replace = ["replace", "-f", "-"]
    checked(faults.plane.kubectl("admin", *replace, input=json.dumps(reduced)), "removing")
    try:
        # An open watch outlives an RBAC change; the next one (after a lost connection) does not.
        faults.proxy.cut()

        def networks_unsynced() -> bool:
            status, body = faults.nicguard.probe("/readyz")
            return status == 503 and f"cache networks: forbidden: {permission}" in body

        judge_until(tally, networks_unsynced, what="/readyz to name the permission", timeout=60)
        assert synced_caches(faults.nicguard)["networks"] == 0.0
        name = unique("tcpxo-rbac")
        message = unavailable(
            apply(faults, runtime(name, recipe_bound=True)),
            f"ClusterTrainingRuntime/{name}",
            f"networks cache not synced: forbidden: {permission}",
        )
        status, body = post_review(
            faults.nicguard.url, example_review("good-runtime"), tally.context
        )
        codes, code, text = outcome(body)
        assert (status, set(codes.split(",")), code) == (200, {UNAVAILABLE}, 503), body
        assert permission in text
        while_forbidden = tally.counts["unavailable"] + tally.counts["partial"]
    finally:
        original_json = json.dumps(original)
        checked(faults.plane.kubectl("admin", *replace, input=original_json), "restoring RBAC")
    recovered = healthy_again(faults, tally)
    assert_judges_kubectl(faults)
    numbers(
        "rbac-networks-removed",
        f"{tally.summary()} "
        f"({while_forbidden} with ClusterStateUnavailable while forbidden); kubectl saw: "
        f"{message.strip()[message.index('[ClusterStateUnavailable]') :]}; "
        f"recovered {recovered:.1f}s after restoring",
    )


def test_watch_loss_unsyncs_after_the_grace_never_later_and_resyncs(
    faults: FaultStack, tally: Tally, namespace: str
) -> None:
    """nicguard cut off from the apiserver (which keeps accepting writes): the last state is
    served for at most the grace period, then ClusterStateUnavailable until the watch is back.

    "At most the grace" is checked against nicguard's own log, not the test's stopwatch: the
    grace runs from the networks cache's first failure, logged just after it begins, and a review
    sent a grace after that line reads the cache after the grace is over, so it must not be
    answered from the last state however slow the machine."""
    gone, name = network_backed_runtime(faults.stack, namespace)
    stale_review = example_review("good-runtime")
    obj = runtime(name, namespace=namespace, pairs=[*RECIPE_PAIRS[:7], ("eth8", gone)])
    stale_review["request"].update(
        namespace=namespace,
        name=name,
        kind={"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainingRuntime"},
        resource={
            "group": "trainer.kubeflow.org",
            "version": "v1alpha1",
            "resource": "trainingruntimes",
        },
        object=obj,
    )
    context = tally.context
    logged = len(faults.nicguard.log_lines())
    cut = faults.proxy.pause()
    partitioned = time.monotonic()
    try:
        # nicguard's webhooks still answer (only its way to the apiserver is cut): the Network is in
        # use, so only the break-glass deletes it.
        delete_past_nicguard(faults.plane, NETWORKS, gone)
        stale: list[float] = []  # when each review answered from the last state was sent
        while True:
            tally.round()
            sent = time.time()
            _, body = post_review(faults.nicguard.url, stale_review, context)
            got, _, _ = outcome(body)
            elapsed = time.monotonic() - partitioned
            if set(got.split(",")) == {UNAVAILABLE}:
                break
            assert got == "allowed", body  # the state before the partition, or nothing
            stale.append(sent)
            assert elapsed < STALE_HANG, (
                f"still serving the pre-partition state {elapsed:.1f}s after the watch was lost "
                f"(grace {GRACE:.0f}s): {len(stale)} stale allows\n{faults.report()}"
            )
        first_unavailable = time.monotonic() - partitioned
        lost = wait_until(
            lambda: first_failure(faults.nicguard, "networks", logged),
            timeout=RECOVERY_TIMEOUT,
            what="the networks cache's failure in nicguard's log",
        )
        over = lost + LOG_RESOLUTION + GRACE
        late = [round(sent - lost, 3) for sent in stale if sent >= over]
        last_stale = max((sent - lost for sent in stale), default=0.0)
        assert late == [], (
            f"answered from the last state although sent this long after the networks watch "
            f"failed (grace {GRACE:.0f}s): {late}\n{faults.report()}"
        )
        for _ in range(DOWN_ROUNDS):
            tally.round()
            got, code, _ = outcome(post_review(faults.nicguard.url, stale_review, context)[1])
            assert (set(got.split(",")), code) == ({UNAVAILABLE}, 503)
    finally:
        faults.proxy.resume()
    recovered = healthy_again(faults, tally)
    fresh = unique("torch-tcpxo")  # a create (the existing one would be an unchanged update)
    obj["metadata"]["name"] = fresh
    expect.denied(
        apply(faults, obj),
        f"TrainingRuntime/{namespace}/{fresh}",
        "NetworkNotFound",
        f"eth8->{gone}",
    )
    numbers(
        "watch-loss-partition",
        f"{cut} connections cut; a Network deleted meanwhile "
        f"was judged from the last state {len(stale)} times within {first_unavailable:.1f}s "
        f"(grace {GRACE:.0f}s; the last sent {last_stale:.2f}s after the networks watch failed, "
        f"by nicguard's log), then ClusterStateUnavailable; {tally.summary()}; "
        f"resynced {recovered:.1f}s after the partition healed",
    )


def test_recipe_configmap_deleted_then_recreated(faults: FaultStack, tally: Tally) -> None:
    namespace, configmap = RECIPE
    name = unique("tcpxo-recipe-gone")
    good = runtime(name, recipe_bound=True)
    # The recipe binds runtimes (RecipeInUse): only the break-glass deletes it.
    delete_past_nicguard(faults.plane, "configmap", configmap, "-n", namespace)
    try:
        eventually(
            lambda: apply(faults, good),
            lambda run: "[RecipeUnavailable]" in run.stderr,
        )
        expect.denied(
            apply(faults, good),
            f"ClusterTrainingRuntime/{name}",
            "RecipeUnavailable",
            f"{namespace}/{configmap}",
        )
        tally.verdicts = dict.fromkeys(tally.verdicts, "RecipeUnavailable")
        for _ in range(DOWN_ROUNDS):
            tally.round()
    finally:
        recreated = apply_recipe(faults.plane)
        wait_for_recipe(faults.stack)
    drifted = runtime(name, pairs=with_pairs(RECIPE_PAIRS, (0, 7)), recipe_bound=True)
    expect.denied(
        apply(faults, drifted),
        f"ClusterTrainingRuntime/{name}",
        DIVERGES,
        f"(recipe {recreated})",
    )
    expect.allowed(apply(faults, good), "created (server dry run)")
    numbers(
        "recipe-deleted-recreated",
        f"{tally.summary()} (RecipeUnavailable while "
        f"absent); judged against {recreated} once recreated",
    )


PAIRS_APPLIED: Final = 50


def last_event_age(nicguard: Nicguard, cache: str) -> float:
    """``nicguard_cache_last_event_age_seconds`` of ``cache``, from /metrics."""
    status, text = nicguard.probe("/metrics")
    assert status == 200, f"/metrics: {status}"
    prefix = f'nicguard_cache_last_event_age_seconds{{cache="{cache}"}} '
    (line,) = (line for line in text.splitlines() if line.startswith(prefix))
    return float(line.removeprefix(prefix))


def runtime_reads(nicguard: Nicguard) -> dict[str, float]:
    """``nicguard_runtime_reads_total`` by outcome, from /metrics."""
    return {
        dict(labels)["outcome"]: value
        for (name, labels), value in metrics(nicguard).items()
        if name == "nicguard_runtime_reads_total"
    }


def test_a_trainjob_applied_with_its_runtime_is_judged_while_the_watch_lags(
    faults: FaultStack, namespace: str
) -> None:
    """``kubectl apply`` of a new runtime and a drifted TrainJob in one file, 50 times, while
    nicguard's watches are held (their events late, the caches synced but stale): each
    TrainJob reaches nicguard before its runtime's watch event and must still be denied, judged
    against one direct read of the runtime (docs/operations.md)."""
    # Fresh connections first: the ones held are then the watches, one per cache. A pooled
    # connection open at the cut (the audit's writer, a runtime GET) comes back only when next
    # used, so the count waited for is the watches', not every connection cut.
    before = len(faults.proxy.events())
    faults.proxy.cut()
    watches = len(synced_caches(faults.nicguard))
    wait_until(
        lambda: (
            (
                sum(e["event"] == "connect" for e in faults.proxy.events()[before:]) >= watches
                and healthy(faults.nicguard)
            )
            or None
        ),
        timeout=RECOVERY_TIMEOUT,
        what="nicguard's watches back after the cut",
        diagnose=faults.report,
    )
    held = faults.proxy.hold()
    assert held >= watches
    drift = {INTERFACES: interfaces(with_pairs(RECIPE_PAIRS, (2, 3)))}
    # Kubernetes mode: every outcome exported, 0 or more, whatever happened before.
    reads_before = runtime_reads(faults.nicguard)
    assert sorted(reads_before) == sorted(
        ["found", "not_found", "failed", "remembered", "joined", "refused", "timed_out"]
    )
    started = time.monotonic()
    try:
        for _ in range(PAIRS_APPLIED):
            name = unique("tr-fresh")
            fresh = runtime(name, namespace=namespace, recipe_bound=True)
            job = trainjob(unique("job"), namespace, name, kind="TrainingRuntime")
            job["spec"] |= node_override(faults.stack.trainer, drift)
            run = apply(faults, fresh, job, dry_run=False)
            assert f"trainingruntime.trainer.kubeflow.org/{name} created" in run.stdout, run
            expect.denied(
                run,
                f"TrainJob/{namespace}/{job['metadata']['name']}",
                DIVERGES,
                "at position eth3 the object maps eth4->gpu-nic-3",
            )
        # The watches really were held: no runtime event reached nicguard's cache meanwhile.
        quiet = time.monotonic() - started
        assert synced_caches(faults.nicguard)["trainingruntimes"] == 1.0
        assert last_event_age(faults.nicguard, "trainingruntimes") >= quiet
        # One GET per TrainJob, each answered with its runtime, and no other outcome.
        reads = runtime_reads(faults.nicguard)
        moved = {k: reads[k] - reads_before[k] for k in reads if reads[k] != reads_before[k]}
        assert moved == {"found": PAIRS_APPLIED}, moved
    finally:
        faults.proxy.release()
    numbers(
        "runtime-and-trainjob-in-one-apply",
        f"{PAIRS_APPLIED} runtime+TrainJob applies with {held} connections held: every "
        f"TrainJob denied in {time.monotonic() - started:.1f}s",
    )


def first_failure(nicguard: Nicguard, cache: str, after: int) -> float | None:
    """When ``cache`` first logged a failure among the log lines after the first ``after``
    (seconds since the epoch, as the line's time says it); None before it has."""
    for line in nicguard.log_lines()[after:]:
        if line.get("message") == "watch cache failure" and line.get("cache") == cache:
            return datetime.fromisoformat(str(line["time"])).timestamp()
    return None
