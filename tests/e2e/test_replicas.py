"""Two nicguard replicas behind one webhook URL; one is SIGKILLed during a burst of applies.

The webhook configuration points at a loopback round-robin TCP proxy (``tcpproxy.py``: per
connection, no health checks, no retries: a Service's behaviour before the endpoint is removed)
in front of two replicas serving the same certificate. With ``failurePolicy: Fail`` every call
must end as nicguard's denial or as the apiserver's "failed calling webhook" error: never as an
allowed object. The numbers of each are logged for RELIABILITY.md (``pytest -rP``).
"""

from __future__ import annotations

import base64
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import pytest

from app.certificates.certdir import CertFiles, issue_self_signed
from tests.harness.controlplane import KUBECTL, KUBECTL_TIMEOUT, ControlPlane
from tests.harness.faults import Proxy, Tally, numbers, tls_context
from tests.harness.objects import (
    DENIED,
    RECIPE_PAIRS,
    WEBHOOK,
    as_list,
    runtime,
    unique,
    with_pairs,
)
from tests.harness.procs import wait_until
from tests.harness.stack import Stack, populate
from tests.harness.state import Run, grant_developers, install_crds
from tests.harness.webhook import Nicguard, install_base, register_url

pytestmark = pytest.mark.e2e

WAVE: Final = 4  # concurrent creates: the apiserver opens several connections, spread by the proxy
WAVES: Final = 10  # 40 creates in the burst
KILL_IN_WAVE: Final = 3  # the victim is killed while this wave's creates are in flight
AFTER_WAVES: Final = 5  # 20 more creates once the victim is back
DENIAL: Final = "[MappingDivergesFromRecipe]"
FAILED_CALL: Final = f'failed calling webhook "{WEBHOOK}"'


@dataclass(frozen=True, slots=True)
class Replicated:
    stack: Stack
    replicas: tuple[Nicguard, Nicguard]
    proxy: Proxy
    serving: CertFiles

    @property
    def plane(self) -> ControlPlane:
        return self.stack.plane

    def report(self) -> str:
        return "\n".join(
            [self.plane.report(), *(r.report() for r in self.replicas), self.proxy.report()]
        )


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicated]:
    workdir = tmp_path_factory.mktemp("replicas")
    serving = issue_self_signed(workdir / "serving", ["127.0.0.1"])
    plane = ControlPlane(workdir)
    tls = [f"--tls-cert={serving.cert}", f"--tls-key={serving.key}"]
    replicas = []
    for name in ("replica-a", "replica-b"):
        (workdir / name).mkdir()
        replicas.append(Nicguard(plane, workdir / name, args=tls))
    first, second = replicas
    proxy = Proxy(workdir, "webhook-proxy", [first.port, second.port])
    try:
        plane.start()
        install_crds(plane)
        config = install_base(plane)
        grant_developers(plane)
        for replica in replicas:
            replica.start()
        proxy.start()
        bundle = base64.b64encode(serving.ca.read_bytes()).decode("ascii")
        url = f"https://127.0.0.1:{proxy.port}/validate"
        register_url(plane, config, url, bundle, diagnose=proxy.report)
        stack = Stack(plane, first, config, workdir)
        populate(stack)
        yield Replicated(stack, (first, second), proxy, serving)
    finally:
        try:
            for replica in replicas:
                replica.stop()
        finally:
            try:
                proxy.stop()
            finally:
                plane.stop()


def drifted(name: str) -> str:
    return as_list([runtime(name, pairs=with_pairs(RECIPE_PAIRS, (4, 5)), recipe_bound=True)])


def create_wave(plane: ControlPlane, names: list[str]) -> list[subprocess.Popen[str]]:
    """Start one ``kubectl create --dry-run=server`` per name, as alice, all at once."""
    argv = [str(KUBECTL), f"--kubeconfig={plane.kubeconfig('alice')}"]
    argv += [f"--cache-dir={plane.workdir / 'kubectl-cache'}", "create", "--dry-run=server"]
    folder = plane.workdir / "burst"
    folder.mkdir(exist_ok=True)
    started = []
    for name in names:
        manifest = folder / f"{name}.json"
        manifest.write_text(drifted(name))
        started.append(
            subprocess.Popen(
                [*argv, "-f", str(manifest)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return started


def finish(started: list[subprocess.Popen[str]]) -> list[Run]:
    runs = []
    for process in started:
        out, err = process.communicate(timeout=KUBECTL_TIMEOUT)
        runs.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return runs


def classify(run: Run) -> str:
    """``denied`` (nicguard's verdict), ``call failed`` (failurePolicy Fail) or ``ALLOWED``."""
    if run.returncode == 0:
        return "ALLOWED"
    if DENIED in run.stderr and DENIAL in run.stderr:
        return "denied"
    if FAILED_CALL in run.stderr:
        return "call failed"
    raise AssertionError(f"unexpected outcome: exit {run.returncode}\n{run.stderr}")


def answered(replica: Nicguard, names: set[str]) -> list[str]:
    """Names (of ``names``) that ``replica`` judged, in the order it judged them."""
    return [d["resource_name"] for d in replica.decisions() if d["resource_name"] in names]


def reached(
    victim: Nicguard, names: set[str], started: list[subprocess.Popen[str]]
) -> Callable[[], bool | None]:
    """A probe: the victim judged one of ``names``, or every create of the wave has ended."""

    def probe() -> bool | None:
        return bool(answered(victim, names)) or all(p.poll() is not None for p in started) or None

    return probe


def test_replica_killed_during_a_burst_never_lets_an_object_through(
    replicated: Replicated,
) -> None:
    context = tls_context(replicated.serving.ca)
    for replica in replicated.replicas:
        wait_until(
            Tally(replica, client=context).judges_all,
            timeout=30,
            what="each replica to judge the examples",
            diagnose=replicated.report,
        )
    names = [unique("tcpxo-burst") for _ in range(WAVE * WAVES)]
    runs: list[Run] = []
    victim: Nicguard | None = None
    for wave in range(WAVES):
        batch = names[wave * WAVE : (wave + 1) * WAVE]
        started = create_wave(replicated.plane, batch)
        if wave == KILL_IN_WAVE:
            # The replica that answered most so far holds most of the apiserver's connections;
            # it is killed as soon as it judges one of this wave (the rest are in flight).
            sent = set(names[: wave * WAVE])
            victim = max(replicated.replicas, key=lambda r: (len(answered(r, sent)), r.port))
            wait_until(
                reached(victim, set(batch), started),
                timeout=KUBECTL_TIMEOUT,
                what="the wave to reach the victim",
                interval=0.002,
            )
            assert victim.process is not None
            victim.process.kill()
        runs.extend(finish(started))
    assert victim is not None
    outcomes = Counter(classify(run) for run in runs)
    assert outcomes["ALLOWED"] == 0, outcomes
    assert outcomes["denied"] + outcomes["call failed"] == len(names)
    survivor = next(r for r in replicated.replicas if r is not victim)
    before = set(names[: KILL_IN_WAVE * WAVE])
    served = {
        "victim before the kill": len(answered(victim, before)),
        "survivor before the kill": len(answered(survivor, before)),
        "survivor in all": len(answered(survivor, set(names))),
    }
    refused = sum(1 for e in replicated.proxy.events() if e["event"] == "refused")
    causes = sorted(
        {run.stderr.strip().rsplit(": ", 1)[-1] for run in runs if classify(run) == "call failed"}
    )

    victim.start()  # the same ports: back behind the proxy, like a restarted pod
    after = [unique("tcpxo-after") for _ in range(WAVE * AFTER_WAVES)]
    later = Counter(
        classify(run)
        for wave in range(AFTER_WAVES)
        for run in finish(create_wave(replicated.plane, after[wave * WAVE : (wave + 1) * WAVE]))
    )
    assert later == {"denied": len(after)}, later
    # Usually 0: the apiserver keeps its keep-alive connections to the survivor.
    restarted_served = len(answered(victim, set(after)))
    numbers(
        "replica-killed-in-burst",
        f"{len(names)} dry-run creates of drifted runtimes in waves of {WAVE}, one replica "
        f"SIGKILLed in wave {KILL_IN_WAVE + 1}: {outcomes['denied']} denied by nicguard, "
        f"{outcomes['call failed']} '{FAILED_CALL}' (cause: {causes}), 0 allowed; "
        f"answers {served}; "
        f"connections the proxy reset to the dead replica: {refused}; after its restart "
        f"{len(after)} creates: {later['denied']} denied ({restarted_served} by the restarted "
        "replica), 0 failed, 0 allowed",
    )
