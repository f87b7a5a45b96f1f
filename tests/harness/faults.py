"""Fault injection for the e2e tier: a TCP proxy we can cut, AdmissionReviews posted straight to
nicguard while the control plane misbehaves, and a tally that fails on the first wrong verdict.

The judged answers during a fault must each be the verdict nicguard gives with a healthy cluster,
or ``ClusterStateUnavailable`` (HTTP-status code 503 in the response), or, for an object that is
denied anyway, its true violation plus ``ClusterStateUnavailable``: never a wrong allow and never
a verdict computed from a half-known state (e.g. ``NetworkNotFound`` for a Network that exists).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tests.harness.controlplane import ControlPlane
from tests.harness.objects import EXAMPLES
from tests.harness.procs import Process, free_ports, wait_until
from tests.harness.stack import Stack, populate
from tests.harness.state import grant_developers, install_crds
from tests.harness.webhook import Nicguard, install_base, register

TCPPROXY: Final = Path(__file__).with_name("tcpproxy.py")
# The numbers behind RELIABILITY.md: shown with ``pytest -rP`` ("Captured log call").
NUMBERS: Final = logging.getLogger("tests.harness.reliability")
NUMBERS.setLevel(logging.INFO)
UNAVAILABLE: Final = "ClusterStateUnavailable"
ALLOWED: Final = "allowed"
DIVERGES: Final = "MappingDivergesFromRecipe"
RECOVERY_TIMEOUT: Final = 60.0
REVIEW_TIMEOUT: Final = 5.0
# examples/reviews/*.json and the verdict each gets against examples/cluster.
VERDICTS: Final = {
    "good-runtime": ALLOWED,
    "drifted-runtime": DIVERGES,
    # Needs the ClusterTrainingRuntime from the CTR cache: an empty cache would mean "runtime not
    # found, allowed with a warning", i.e. the wrong allow a botched relist could produce.
    "trainjob-patch-drift": DIVERGES,
}


class Proxy:
    """``tcpproxy.py`` as a process on a free loopback port, in front of ``backends``."""

    def __init__(self, workdir: Path, name: str, backends: Sequence[int]) -> None:
        self.workdir, self.name, self.backends = workdir, name, list(backends)
        (self.port,) = free_ports(1)
        self.log = workdir / f"{name}.log"
        self.process: Process | None = None
        self._controls = 0

    def start(self) -> None:
        argv = [sys.executable, str(TCPPROXY), f"--listen={self.port}"]
        argv += [f"--backend=127.0.0.1:{port}" for port in self.backends]
        self.process = Process(self.name, argv, self.log)
        wait_until(
            lambda: self._logged("listening"),
            timeout=10,
            what=f"{self.name} to listen",
            diagnose=self.report,
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def report(self) -> str:
        return self.process.report() if self.process else f"----- {self.name} (never started)"

    def events(self) -> list[dict[str, Any]]:
        with contextlib.suppress(FileNotFoundError):
            lines = self.log.read_text(errors="replace").splitlines()
            return [json.loads(line) for line in lines if line.startswith("{")]
        return []

    def cut(self) -> int:
        """Reset every open connection (new ones are accepted); returns how many were open."""
        return self._control(signal.SIGUSR1, "cut")

    def pause(self) -> int:
        """Reset every open connection and refuse new ones until ``resume()``."""
        return self._control(signal.SIGUSR2, "paused")

    def resume(self) -> None:
        self._control(signal.SIGHUP, "resumed")

    def hold(self) -> int:
        """Hold every open connection (bytes wait; later connections flow); returns how many."""
        return self._control(signal.SIGURG, "held")

    def release(self) -> None:
        self._control(signal.SIGWINCH, "released")

    def _control(self, signum: signal.Signals, event: str) -> int:
        assert self.process is not None
        assert self.process.running(), self.report()
        self._controls += 1
        number = self._controls
        self.process.signal(signum)
        done = wait_until(
            lambda: next(
                (e for e in self.events() if e.get("control") == number and e["event"] == event),
                None,
            ),
            timeout=10,
            what=f"{self.name} to log {event}",
            diagnose=self.report,
        )
        return int(done.get("connections", 0))

    def _logged(self, event: str) -> bool | None:
        assert self.process is not None
        if not self.process.running():
            raise RuntimeError(f"{self.name} exited\n{self.report()}")
        return any(e["event"] == event for e in self.events()) or None


def numbers(fault: str, text: str) -> None:
    """Log what a fault test measured (one line per test, for RELIABILITY.md)."""
    NUMBERS.info("RELIABILITY %s: %s", fault, text)


def example_review(name: str) -> dict[str, Any]:
    review: dict[str, Any] = json.loads((EXAMPLES / "reviews" / f"{name}.json").read_text())
    return review


def tls_context(ca_file: Path, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_file))
    if client is not None:
        context.load_cert_chain(*client)
    return context


def post_review(
    url: str, review: dict[str, Any], context: ssl.SSLContext
) -> tuple[int, dict[str, Any]]:
    """POST an AdmissionReview (fresh uid) to nicguard; returns the HTTP status and the body."""
    sent = copy.deepcopy(review)
    sent["request"]["uid"] = str(uuid.uuid4())
    request = urllib.request.Request(  # noqa: S310 - nicguard on loopback
        url,
        data=json.dumps(sent).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=REVIEW_TIMEOUT, context=context) as reply:  # noqa: S310
            status, body = int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as error:
        status, body = error.code, {"error": error.read().decode(errors="replace")}
    if status == 200:
        assert body["response"]["uid"] == sent["request"]["uid"], body
    return status, body


def outcome(body: dict[str, Any]) -> tuple[str, int, str]:
    """(``allowed`` or the comma-joined codes, status.code, status.message) of a response."""
    response = body["response"]
    if response["allowed"]:
        return ALLOWED, 200, ""
    status = response["status"]
    codes = ",".join(cause["reason"] for cause in status["details"]["causes"])
    return codes, int(status["code"]), str(status["message"])


@dataclass
class Tally:
    """Posts ``VERDICTS``' reviews to nicguard in rounds; fails at once on a wrong verdict."""

    nicguard: Nicguard
    client: ssl.SSLContext | None = None  # default: trust nicguard's cert dir CA, no client cert
    verdicts: dict[str, str] = field(default_factory=lambda: dict(VERDICTS))
    counts: Counter[str] = field(default_factory=Counter)
    messages: set[str] = field(default_factory=set)  # ClusterStateUnavailable messages seen
    context: ssl.SSLContext = field(init=False)
    _reviews: dict[str, dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.context = self.client or tls_context(self.nicguard.cert_dir / "ca.crt")
        self._reviews = {name: example_review(name) for name in VERDICTS}

    def round(self) -> int:
        """One review of each kind; returns how many were answered ClusterStateUnavailable."""
        unavailable = 0
        for name, expected in self.verdicts.items():
            status, body = post_review(self.nicguard.url, self._reviews[name], self.context)
            assert status == 200, f"{name}: HTTP {status} {body}\n{self.nicguard.report()}"
            got, code, message = outcome(body)
            codes = set(got.split(","))
            if got == expected:
                self.counts["correct"] += 1
            elif codes == {UNAVAILABLE} and code == 503:
                self.counts["unavailable"] += 1
                self.messages.add(message)
                unavailable += 1
            elif expected != ALLOWED and codes == {expected, UNAVAILABLE}:
                # The violation it can still see, plus what it cannot decide: a right denial.
                self.counts["partial"] += 1
                unavailable += 1
            else:
                raise AssertionError(
                    f"{name}: expected {expected} or {UNAVAILABLE}, got {got} ({code}): "
                    f"{message}\n{self.nicguard.report()}"
                )
        return unavailable

    def judges_all(self) -> bool | None:
        """One round; True when every answer was the healthy verdict (for ``wait_until``)."""
        return self.round() == 0 or None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        return (
            f"{self.total} reviews: {self.counts['correct']} correct verdicts, "
            f"{self.counts['unavailable']} ClusterStateUnavailable, {self.counts['partial']} "
            "the true violation plus ClusterStateUnavailable, 0 wrong"
        )


def synced_caches(nicguard: Nicguard) -> dict[str, float]:
    """``nicguard_cache_synced`` per cache, from /metrics."""
    status, text = nicguard.probe("/metrics")
    assert status == 200, f"/metrics: {status}"
    found = {}
    for line in text.splitlines():
        if line.startswith("nicguard_cache_synced{"):
            labels, _, value = line.partition("} ")
            found[labels.split('cache="', 1)[1].rstrip('"')] = float(value)
    return found


def healthy(nicguard: Nicguard) -> bool:
    """/readyz 200 and every cache reporting synced 1 in /metrics."""
    status, _ = nicguard.probe("/readyz")
    caches = synced_caches(nicguard)
    return status == 200 and bool(caches) and all(v == 1.0 for v in caches.values())


def judge_until(
    tally: Tally, condition: Callable[[], object], *, what: str, timeout: float
) -> float:
    """Judge rounds until ``condition()`` holds; returns the seconds it took."""
    started = time.monotonic()

    def probe() -> bool | None:
        tally.round()
        return bool(condition()) or None

    wait_until(probe, timeout=timeout, what=what, interval=0.05, diagnose=tally.nicguard.report)
    return time.monotonic() - started


def relists(nicguard: Nicguard) -> Counter[str]:
    """How many times each cache logged a 410 relist so far."""
    return Counter(
        str(line.get("cache"))
        for line in nicguard.log_lines()
        if line.get("message") == "watch expired, relisting"
    )


@dataclass(frozen=True, slots=True)
class FaultStack:
    """A stack of its own; nicguard reaches the apiserver through ``proxy`` (cuttable)."""

    stack: Stack
    proxy: Proxy

    @property
    def plane(self) -> ControlPlane:
        return self.stack.plane

    @property
    def nicguard(self) -> Nicguard:
        return self.stack.nicguard

    def report(self) -> str:
        return f"{self.stack.report()}\n{self.proxy.report()}"


def kubeconfig_via(plane: ControlPlane, identity: str, port: int, path: Path) -> Path:
    """``identity``'s kubeconfig with the server replaced by ``127.0.0.1:port``."""
    config = json.loads(plane.kubeconfig(identity).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def fault_stack(workdir: Path) -> Iterator[FaultStack]:
    """Control plane, CRDs, RBAC, nicguard (as its ServiceAccount, via a proxy), the webhook and
    ``examples/cluster``; everything stopped by PID on exit."""
    plane = ControlPlane(workdir)
    proxy = Proxy(workdir, "apiserver-proxy", [plane.port])
    kubeconfig = workdir / "kubeconfig-nicguard-via-proxy"
    nicguard = Nicguard(plane, workdir, kubeconfig=kubeconfig)
    try:
        plane.start()
        proxy.start()
        kubeconfig_via(plane, "nicguard", proxy.port, kubeconfig)
        install_crds(plane)
        config = install_base(plane)
        grant_developers(plane)
        nicguard.start()
        register(plane, nicguard, config)
        stack = Stack(plane, nicguard, config, workdir)
        populate(stack)
        yield FaultStack(stack, proxy)
    finally:
        try:
            nicguard.stop()
        finally:
            try:
                proxy.stop()
            finally:
                plane.stop()
