"""Costly writers beside legitimate ones, through the real apiserver (SPEC §10: "No writer can make
nicguard refuse another's review", "Memory under hostile input").

For a bounded window, all at once:

- a tenant with create rights in its namespace runs ``kubectl create --dry-run=server`` (through
  admission, nothing stored) of a one-template JobSet whose pod template's interfaces annotation
  lists 50,000 well-formed entries (~2.4 MiB; the apiserver does not size-check a JobSet
  template's annotations) and of Pods carrying a ~250 KiB one (under the apiserver's 256 KiB of
  annotations). No machine attaches such a list: each is denied ``InterfacesAnnotationMalformed``,
  refused from its length (every entry is well-formed: only its length makes it malformed);
- other clients post costly JobSet UPDATE reviews (~1.5 MiB) straight to nicguard's ``/validate``
  over TLS, as any pod can, and close the connection 0.2 s later without reading the answer;
- another tenant creates (server dry-run) a correctly wired JobSet of 100 templates (~77 KiB,
  allowed), a small wired Pod (allowed) and a drifted one (denied ``NetworkNotFound``), round after
  round.

Every legitimate create is answered with nicguard's verdict (none refused because the webhook
failed), every attack is denied or refused (its own body, for the budget: never allowed),
nicguard's RSS (polled) stays within 200 MiB, ``/healthz`` answers 200 on every poll, and
nicguard counts the abandoned reviews it dropped
(``nicguard_reviews_dropped_total``). Latencies are printed (``-rP``), never asserted (§10,
"Tests that do not flake").
"""

from __future__ import annotations

import json
import socket
import ssl
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from tests.harness.controlplane import KUBECTL
from tests.harness.objects import INTERFACES, RECIPE_PAIRS, Obj, as_list, interfaces, unique
from tests.harness.stack import Stack
from tests.harness.state import Run, checked, create_namespace
from tests.harness.webhook import Nicguard
from tests.live_serve import memory_kib
from tests.support.costly_jobset import Edit, costly_jobset_update

pytestmark = pytest.mark.e2e

WINDOW_S: Final = 20.0  # how long everyone runs at once; each loop then ends its current step
JOBSET_ATTACKERS: Final = 2
POD_ATTACKERS: Final = 2
ABANDONERS: Final = 3
LEGIT_CLIENTS: Final = 2
ABANDON_S: Final = 0.2  # an abandoning client closes this long after its body is sent
ATTACK_ENTRIES: Final = 50_000
POD_ANNOTATION_CHARS: Final = 250 * 1024
LEGIT_TEMPLATES: Final = 100
# A JobSet UPDATE of this many wired templates, old and new (~1.5 MiB): costly to judge, and
# three of them arriving at once fit the shipped body budget beside the attackers' dry-runs.
ABANDONED_TEMPLATES: Final = 1_000
RSS_BOUND_MIB: Final = 200
KUBECTL_TIMEOUT_S: Final = 30.0  # a bound on a hung kubectl, far above the webhook's 3 s
SEND_TIMEOUT_S: Final = 10.0
POLL_S: Final = 0.1
WORKLOADS: Final = "workloads.nicguard.dev"
PODS: Final = "pods.nicguard.dev"
MALFORMED: Final = "InterfacesAnnotationMalformed"
DRIFTED_CODE: Final = "NetworkNotFound"
DEFAULT_INTERFACE: Final = "networking.gke.io/default-interface"
# What kubectl prints when the apiserver refused a write because calling nicguard failed.
WEBHOOK_FAILED: Final = (
    "failed calling webhook",
    "503",
    "context deadline exceeded",
    "EOF",
    "connection reset",
)
DROPPED: Final = "nicguard_reviews_dropped_total"
REFUSED: Final = "nicguard_malformed_requests_total"
CONTAINERS: Final = [{"name": "trainer", "image": "registry.example/trainer:1"}]
# No digits in the names: kubectl's output is searched for "503".
LEGIT_JOBSET, GOOD_POD, DRIFTED_POD = "llama", "node", "drifted"
ATTACK_JOBSET, ATTACK_POD = "long-list", "long-list-pod"


def long_list(*, entries: int = 10**9, chars: int = 10**9) -> str:
    """An interfaces annotation of well-formed entries (eth0 on the default Network, then
    ``ethN`` on the recipe's Networks in turn), compact: ``entries`` of them, or as many as fit
    in ``chars`` characters."""
    compact = (",", ":")
    listed = [{"interfaceName": "eth0", "network": "default"}]
    size = len(json.dumps(listed, separators=compact))
    while len(listed) < entries:
        n = len(listed)
        entry = {"interfaceName": f"eth{n}", "network": RECIPE_PAIRS[(n - 1) % 8][1]}
        grown = size + 1 + len(json.dumps(entry, separators=compact))
        if grown > chars:
            break
        listed.append(entry)
        size = grown
    return json.dumps(listed, separators=compact)


def wired(value: str) -> dict[str, str]:
    return {INTERFACES: value, DEFAULT_INTERFACE: "eth0"}


def replicated_job(name: str, annotations: dict[str, str]) -> Obj:
    pod = {"metadata": {"annotations": annotations}, "spec": {"containers": CONTAINERS}}
    return {"name": name, "replicas": 1, "template": {"spec": {"template": pod}}}


def job_set(name: str, namespace: str, jobs: list[Obj]) -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"suspend": True, "replicatedJobs": jobs},
    }


def pod(name: str, namespace: str, annotations: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"containers": CONTAINERS},
    }


def created(kind: str, name: str) -> Callable[[Run], bool]:
    """Allowed: kubectl printed the server dry-run's creation."""
    return lambda run: (
        run.returncode == 0 and f"{kind}/{name} created (server dry run)" in run.stdout
    )


def denied(webhook: str, subject: str, code: str) -> Callable[[Run], bool]:
    """Denied by nicguard's ``webhook``, ``[code]`` among the violations of ``subject``."""
    lead = f'admission webhook "{webhook}" denied the request: {subject}: '
    return lambda run: run.returncode == 1 and lead in run.stderr and f"[{code}]" in run.stderr


@dataclass(frozen=True, slots=True)
class Door:
    """One create a client repeats: the object (JSON) and the verdict it must get."""

    what: str
    body: str
    verdict: Callable[[Run], bool]


@dataclass(frozen=True, slots=True)
class Create:
    """One ``kubectl create --dry-run=server`` and how it went."""

    what: str
    as_expected: bool  # nicguard's verdict, the expected one
    webhook_failed: bool  # kubectl's output names a failure to call the webhook
    seconds: float
    shown: str

    @property
    def outcome(self) -> str:
        if self.as_expected:
            return "as expected"
        if self.webhook_failed:
            return "webhook failed"
        return "denied otherwise" if "denied the request" in self.shown else "other"

    def line(self) -> str:
        return f"{self.what} ({self.seconds:.1f} s, {self.outcome}): {self.shown[:500]}"


@dataclass(frozen=True, slots=True)
class Tenant:
    """A ServiceAccount that may create Pods and JobSets in its namespace, and nothing else."""

    namespace: str
    kubeconfig: Path
    cache_dir: Path

    def create(self, door: Door) -> Create:
        argv = [str(KUBECTL), f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}"]
        argv += ["create", "--dry-run=server", "-f", "-"]
        started = time.perf_counter()
        try:
            run = subprocess.run(
                argv,
                input=door.body,
                capture_output=True,
                text=True,
                timeout=KUBECTL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            took = time.perf_counter() - started
            return Create(
                door.what, False, False, took, f"kubectl still running after {took:.0f} s"
            )
        took = time.perf_counter() - started
        output = f"exit {run.returncode}: {run.stdout.strip()[:300]} {run.stderr.strip()[:600]}"
        output = output.replace("\n", " | ")  # one line per create in the failure's list
        failed = any(marker in run.stderr for marker in WEBHOOK_FAILED)
        return Create(door.what, door.verdict(run), failed, took, output)

    def warm(self) -> None:
        """kubectl's discovery cache filled before the window: creates then only read it."""
        argv = [str(KUBECTL), f"--kubeconfig={self.kubeconfig}", f"--cache-dir={self.cache_dir}"]
        checked(
            subprocess.run(
                [*argv, "api-resources", "-o", "name"],
                capture_output=True,
                text=True,
                timeout=KUBECTL_TIMEOUT_S,
                check=False,
            ),
            f"kubectl api-resources as the tenant of {self.namespace}",
        )


def tenant(stack: Stack, prefix: str) -> Tenant:
    """A fresh namespace and a ServiceAccount there allowed to create Pods and JobSets."""
    namespace, name = unique(prefix), "writer"
    create_namespace(stack.plane, namespace)
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create"]},
    ]
    meta = {"name": name, "namespace": namespace}
    rbac = "rbac.authorization.k8s.io"
    objects: list[Obj] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]
    applied = stack.plane.kubectl("admin", "apply", "-f", "-", input=as_list(objects))
    checked(applied, f"the tenant of {namespace}")
    kubeconfig = stack.plane.service_account_kubeconfig(namespace, name)
    return Tenant(namespace, kubeconfig, stack.workdir / f"kubectl-cache-{namespace}")


def keep_creating(client: Tenant, doors: Sequence[Door], stop: threading.Event) -> list[Create]:
    """``doors`` in turn, round after round, until ``stop``."""
    done: list[Create] = []
    while True:
        for door in doors:
            if stop.is_set():
                return done
            done.append(client.create(door))


def keep_abandoning(
    nicguard: Nicguard, context: ssl.SSLContext, body: bytes, stop: threading.Event
) -> Counter[str]:
    """POST ``body`` to nicguard's /validate, close ``ABANDON_S`` after it is sent without
    reading the answer, again until ``stop``: ``sent`` whole, or ``cut`` (nicguard closed it or
    stopped reading for ``SEND_TIMEOUT_S``)."""
    head = (
        f"POST /validate HTTP/1.1\r\nHost: 127.0.0.1:{nicguard.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    request = head + body
    counts: Counter[str] = Counter()
    while not stop.is_set():
        try:
            with (
                socket.create_connection(("127.0.0.1", nicguard.port), SEND_TIMEOUT_S) as raw,
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
            ):
                tls.sendall(request)
                counts["sent"] += 1
                stop.wait(ABANDON_S)  # the client's patience, not a synchronisation
        except OSError:
            counts["cut"] += 1
    return counts


@dataclass
class Watch:
    """/healthz (status, seconds) and nicguard's VmRSS (KiB) at each poll."""

    probes: list[tuple[int | None, float]]
    rss_kib: list[int]


def keep_watching(nicguard: Nicguard, pid: int, stop: threading.Event) -> Watch:
    watch = Watch([], [])
    while True:
        started = time.perf_counter()
        status, _ = nicguard.probe("/healthz")  # None: no answer within 5 s
        watch.probes.append((status, time.perf_counter() - started))
        watch.rss_kib.append(memory_kib(pid)["VmRSS"])
        if stop.wait(POLL_S):
            return watch


def counter_sums(metrics: str, name: str) -> dict[str, float]:
    """The samples of counter ``name`` (``..._total``) by label set; {} when it is not exported."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith((f"{name}{{", f"{name} ")):
            labels, _, value = line.rpartition(" ")
            found[labels[len(name) :]] = float(value)
    return found


def examples(creates: list[Create]) -> list[str]:
    """The first create of each kind and outcome among ``creates``."""
    first: dict[tuple[str, str], Create] = {}
    for create in creates:
        first.setdefault((create.what, create.outcome), create)
    return [f"  {create.line()}" for create in first.values()]


def metrics(nicguard: Nicguard) -> str:
    status, text = nicguard.probe("/metrics")
    assert status == 200, f"nicguard /metrics answered {status}\n{nicguard.report()}"
    return text


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def test_costly_writers_leave_every_legitimate_review_answered(stack: Stack) -> None:
    nicguard = stack.nicguard
    pid = nicguard.pid
    assert pid is not None
    attacker, legit = tenant(stack, "costly-writer"), tenant(stack, "legit-writer")
    # The attacks: a JobSet of one template listing ATTACK_ENTRIES entries, a Pod ~250 KiB.
    huge = long_list(entries=ATTACK_ENTRIES)
    jobset_attack = job_set(
        ATTACK_JOBSET, attacker.namespace, [replicated_job("node", wired(huge))]
    )
    pod_value = long_list(chars=POD_ANNOTATION_CHARS)
    pod_attack = pod(ATTACK_POD, attacker.namespace, wired(pod_value))
    attacks = [
        Door(
            "attack-jobset",
            json.dumps(jobset_attack),
            denied(WORKLOADS, f"JobSet/{attacker.namespace}/{ATTACK_JOBSET}", MALFORMED),
        ),
        Door(
            "attack-pod",
            json.dumps(pod_attack),
            denied(PODS, f"Pod/{attacker.namespace}/{ATTACK_POD}", MALFORMED),
        ),
    ]
    # The legitimate client's round: 100 templates wired as the recipe says, a wired Pod, and
    # a Pod one of whose Networks does not exist.
    recipe = wired(interfaces(RECIPE_PAIRS))
    templates = [replicated_job(f"slice-{n:03d}", recipe) for n in range(LEGIT_TEMPLATES)]
    lost = wired(interfaces([*RECIPE_PAIRS[:7], ("eth8", "gpu-nic-missing")]))
    namespace = legit.namespace
    rounds = [
        Door(
            "jobset",
            json.dumps(job_set(LEGIT_JOBSET, namespace, templates)),
            created("jobset.jobset.x-k8s.io", LEGIT_JOBSET),
        ),
        Door("pod", json.dumps(pod(GOOD_POD, namespace, recipe)), created("pod", GOOD_POD)),
        Door(
            "drifted",
            json.dumps(pod(DRIFTED_POD, namespace, lost)),
            denied(PODS, f"Pod/{namespace}/{DRIFTED_POD}", DRIFTED_CODE),
        ),
    ]
    abandoned = costly_jobset_update(Edit.BROKEN, templates=ABANDONED_TEMPLATES)
    context = ssl.create_default_context(cafile=str(nicguard.cert_dir / "ca.crt"))

    # Unloaded, first: each legitimate create gets its verdict (the premise), the caches warm.
    attacker.warm()
    for door in rounds:
        alone = legit.create(door)
        assert alone.as_expected, f"without load: {alone.line()}"
    refused_before = counter_sums(metrics(nicguard), REFUSED)
    rss_before = memory_kib(pid)

    stop = threading.Event()
    clients = JOBSET_ATTACKERS + POD_ATTACKERS + ABANDONERS + LEGIT_CLIENTS
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients + 1) as pool:
        watcher = pool.submit(keep_watching, nicguard, pid, stop)
        creators: list[Future[list[Create]]] = [
            pool.submit(keep_creating, attacker, [attacks[0]], stop)
            for _ in range(JOBSET_ATTACKERS)
        ]
        creators += [
            pool.submit(keep_creating, attacker, [attacks[1]], stop) for _ in range(POD_ATTACKERS)
        ]
        creators += [pool.submit(keep_creating, legit, rounds, stop) for _ in range(LEGIT_CLIENTS)]
        abandoners = [
            pool.submit(keep_abandoning, nicguard, context, abandoned, stop)
            for _ in range(ABANDONERS)
        ]
        try:
            # The window's bound: it ends early only if a client raised.
            clients_running: list[Future[Any]] = [*creators, *abandoners]
            wait(clients_running, timeout=WINDOW_S, return_when=FIRST_EXCEPTION)
        finally:
            stop.set()
        made = [create for future in creators for create in future.result()]
        cut: Counter[str] = sum((future.result() for future in abandoners), Counter())
        watch = watcher.result()
    elapsed = time.perf_counter() - started
    text = metrics(nicguard)
    dropped = counter_sums(text, DROPPED)
    refused = {
        labels: value - refused_before.get(labels, 0.0)
        for labels, value in counter_sums(text, REFUSED).items()
    }

    attacked = [c for c in made if c.what.startswith("attack-")]
    served = [c for c in made if not c.what.startswith("attack-")]
    count = Counter(c.what for c in made)
    answered = Counter(c.what for c in made if c.as_expected)
    failed = [c for c in served if c.webhook_failed]
    latencies = [c.seconds for c in served]
    probe_max = max(seconds for _, seconds in watch.probes)
    unhealthy = [(status, seconds) for status, seconds in watch.probes if status != 200]
    peak_mib = max(watch.rss_kib) / 1024
    others = Counter(f"{c.what} {c.outcome}" for c in attacked if not c.as_expected)
    print(  # noqa: T201 - the reproduction's numbers (-rP)
        f"RELIABILITY costly writers: {elapsed:.1f} s; attacks: "
        f"{count['attack-jobset']} JobSet dry-runs ({ATTACK_ENTRIES} entries, "
        f"{len(attacks[0].body) / 2**20:.1f} MiB) {answered['attack-jobset']} denied {MALFORMED}, "
        f"{count['attack-pod']} Pod dry-runs ({len(pod_value) // 1024} KiB) "
        f"{answered['attack-pod']} denied {MALFORMED}, "
        f"the rest {dict(others)}; "
        f"{cut['sent']} reviews of {len(abandoned) / 2**20:.1f} MiB abandoned after "
        f"{ABANDON_S} s ({cut['cut']} cut while sending); legit: {count['jobset']} JobSets "
        f"({LEGIT_TEMPLATES} templates, {len(rounds[0].body) // 1024} KiB) {answered['jobset']} "
        f"allowed, {count['pod']} Pods {answered['pod']} allowed, {count['drifted']} drifted "
        f"Pods {answered['drifted']} denied {DRIFTED_CODE}, {len(failed)} refused as webhook "
        f"failures; kubectl create p50 {ms(statistics.median(latencies))} "
        f"max {ms(max(latencies))}; /healthz {len(watch.probes)} polls, {len(unhealthy)} not 200, "
        f"max {ms(probe_max)}; RSS {rss_before['VmRSS'] / 1024:.0f} -> peak {peak_mib:.0f} MiB "
        f"(VmHWM since start {memory_kib(pid)['VmHWM'] / 1024:.0f}); refused unjudged {refused}; "
        f"{DROPPED} {dropped or 'not exported'}"
    )

    problems: list[str] = []
    for what in ("jobset", "pod", "drifted", "attack-jobset", "attack-pod"):
        if not count[what]:
            problems.append(f"no {what} create finished within the window")
    wrong = [c for c in served if not c.as_expected]
    if wrong:
        problems.append(f"{len(wrong)} legitimate creates without their verdict, e.g.:")
        problems += examples(wrong)
    if failed:
        problems.append(f"{len(failed)} legitimate creates refused as webhook failures")
    # An attack's own body may be refused for the budget (closed arriving, or 503 waiting): the
    # attacker's loss, SPEC §10. Never allowed, never judged as a list.
    not_denied = [c for c in attacked if not c.as_expected and not c.webhook_failed]
    if not_denied:
        problems.append(
            f"{len(not_denied)} attacks neither denied {MALFORMED} nor refused {dict(others)}:"
        )
        problems += examples(not_denied)
    for what in ("attack-jobset", "attack-pod"):
        if not answered[what]:
            problems.append(f"no {what} was denied {MALFORMED}: {dict(others)}")
    if not cut["sent"]:
        problems.append("no abandoned review was sent whole")
    if unhealthy:
        problems.append(f"/healthz not 200 at {len(unhealthy)} polls: {unhealthy[:5]}")
    if peak_mib > RSS_BOUND_MIB:
        problems.append(f"RSS peaked at {peak_mib:.0f} MiB (> {RSS_BOUND_MIB})")
    if sum(dropped.values()) <= 0:
        problems.append(f"{DROPPED}: {dropped or 'not exported'}, after {cut['sent']} abandoned")
    if not nicguard.process or not nicguard.process.running():
        problems.append("nicguard exited")
    assert not problems, "\n".join(problems)
