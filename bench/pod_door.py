"""The Pod door's cost (SPEC §10, §15): bursts of Pod creates through a real kube-apiserver with
nicguard's shipped webhook configuration registered and with none, in the same run.

One control plane (etcd + kube-apiserver on loopback, no scheduler: the Pods stay Pending) and
``nicguard serve --state examples/cluster`` in file mode. ``nicguard``: every entry of the
rendered ``manifests/`` ValidatingWebhookConfiguration (``pods.nicguard.dev`` among them) pointed
at that process; ``go-echo``: its ``pods.nicguard.dev`` entry alone, renamed, pointed at a bare
Go echo (``bench/goecho``), what any out-of-process webhook costs: the floor of the bar;
``none``: no configuration, for scale. Each round puts each in effect in turn (order rotating)
and under each fires two bursts of ``--creates`` Pod creates from ``--clients`` threads,
each on its own keep-alive HTTPS connection: wired Pods (the node Pod of the shipped TCPXO
runtime, the recipe's eight Networks: allowed) and the same Pods without the interfaces
annotation (never sent to nicguard; its request counter must not move). The Pods are deleted
after each burst. Beside the times the report gives, per wired create, the CPU of the machine
(every process: this VM is shared), of apiserver+etcd, of nicguard and of the clients, how busy
the machine was, the apiserver's own mean webhook call, and the run's noise for both kinds.

    NICGUARD_K8S_BIN_DIR="$(scripts/k8s-bins.sh)" python -m bench.pod_door [--creates 1000]
        [--clients 10] [--rounds 5] [--etcd-fsync] [--pin]

``--etcd-fsync``: etcd syncs every write, as a real one does (the harness's etcd syncs none).
``--pin``: apiserver, etcd and the clients on CPU 0, nicguard and the Go echo on CPU 1, as in a
cluster where the webhook runs on a node of its own.

Exit status 0 when the wired bursts take at most 1.10 x the time they take with the bare Go echo
on the same entry (the floor: on 2 cores any webhook costs the apiserver 1.2-1.4 x the time with
none), no create fails, and the unwired bursts differ by less than the run's noise without
reaching nicguard; 1 otherwise; 2 on a set-up error (``go`` is needed for the floor).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import json
import os
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

from bench.e2e import ApiClient, E2EBenchError, go_build, listening, webhook_calls
from bench.run import cpu_seconds, free_port, load_average, machine
from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.objects import INTERFACES, example, interfaces
from tests.harness.procs import NICGUARD, Process, free_ports, http_status, wait_until
from tests.harness.state import checked, create_namespace
from tests.harness.webhook import WEBHOOK_KIND, admission_requests, rendered_manifests

NAMESPACE: Final = "bench-pods"
POD_WEBHOOK: Final = "pods.nicguard.dev"
MODES: Final = ("none", "go-echo", "nicguard")
ECHO_WEBHOOK: Final = "pods.bench-go-echo.dev"
WIRED: Final = "wired"
PLAIN: Final = "plain"
MAX_OVER_FLOOR: Final = 1.10  # nicguard / go-echo, wired Pods
TCPXO: Final = "torch-distributed-tcpxo"
_PODS: Final = f"/api/v1/namespaces/{NAMESPACE}/pods"
_WARMUP: Final = 100  # unmeasured creates under each configuration before the first round
_SWITCH_TIMEOUT: Final = 30.0
_CPUS: Final = os.cpu_count() or 1


class PodDoorError(Exception):
    """The bench could not run or could not be measured."""


@dataclass(frozen=True, slots=True)
class Burst:
    mode: str
    pods: str  # WIRED or PLAIN
    creates: int
    seconds: float
    failed: list[str]  # one line per create not answered 201
    judged: float  # nicguard's admission requests during the burst
    plane_cpu: float  # seconds of CPU kube-apiserver and etcd spent during the burst
    nicguard_cpu: float  # seconds of CPU nicguard spent during the burst
    machine_cpu: float  # seconds of CPU the whole machine spent during the burst (all work)
    clients_cpu: float  # seconds of CPU this process (the clients) spent during the burst
    call_ms: float  # the apiserver's mean webhook call during the burst (0 without one)


@dataclass(frozen=True, slots=True)
class Served:
    """nicguard serving: its webhook URL, its CA (base64 PEM), its probe URL, its PID."""

    url: str
    ca_bundle: str
    probe: str
    pid: int
    cert_dir: Path


@dataclass(frozen=True, slots=True)
class Echo:
    url: str
    pid: int


@dataclass(slots=True)
class Results:
    modes: tuple[str, ...]
    bursts: list[Burst] = field(default_factory=list)

    def seconds(self, mode: str, pods: str) -> list[float]:
        return [b.seconds for b in self.bursts if b.mode == mode and b.pods == pods]

    def median(self, mode: str, pods: str) -> float:
        return statistics.median(self.seconds(mode, pods))

    def ratio(self, pods: str, mode: str = "nicguard", base: str = "none") -> float:
        return self.median(mode, pods) / self.median(base, pods)

    def paired(self, pods: str, mode: str, base: str) -> list[float]:
        """``mode`` over ``base`` round by round (each round ran both, close in time)."""
        return [
            a / b for a, b in zip(self.seconds(mode, pods), self.seconds(base, pods), strict=True)
        ]

    def noise(self, pods: str) -> float:
        """The largest spread of one configuration's rounds, relative to their median."""
        spreads = []
        for mode in self.modes:
            rounds = self.seconds(mode, pods)
            spreads.append((max(rounds) - min(rounds)) / statistics.median(rounds))
        return max(spreads)

    def cpu_per_create(self, mode: str, pods: str) -> float:
        return statistics.median(
            b.plane_cpu / b.creates for b in self.bursts if b.mode == mode and b.pods == pods
        )

    def calls_ms(self, mode: str) -> float:
        """The apiserver's mean call to the configured webhook, wired Pods, median of rounds."""
        return statistics.median(
            b.call_ms for b in self.bursts if b.mode == mode and b.pods == WIRED
        )

    def busy(self, mode: str) -> float:
        """The share of the machine's CPUs busy during the wired bursts, median of rounds."""
        return statistics.median(
            b.machine_cpu / (b.seconds * _CPUS)
            for b in self.bursts
            if b.mode == mode and b.pods == WIRED
        )

    def cpu_ms(self, mode: str) -> dict[str, float]:
        """Per wired create, ms of CPU: the machine, apiserver+etcd, nicguard, the clients."""
        wired = [b for b in self.bursts if b.mode == mode and b.pods == WIRED]
        parts = {
            "machine": [b.machine_cpu for b in wired],
            "apiserver+etcd": [b.plane_cpu for b in wired],
            "nicguard": [b.nicguard_cpu for b in wired],
            "clients": [b.clients_cpu for b in wired],
        }
        creates = wired[0].creates
        return {name: 1000 * statistics.median(v) / creates for name, v in parts.items()}

    def nicguard_cpu_per_judged(self) -> float:
        wired = [b for b in self.bursts if b.mode == "nicguard" and b.pods == WIRED]
        return statistics.median(b.nicguard_cpu / max(b.judged, 1.0) for b in wired)

    def failed(self) -> list[str]:
        return [line for b in self.bursts for line in b.failed]

    def judged_plain(self) -> float:
        return sum(b.judged for b in self.bursts if b.pods == PLAIN)


def _say(out: TextIO, text: str = "") -> None:
    out.write(text + "\n")
    out.flush()


def pod(name: str, *, wired: bool) -> dict[str, Any]:
    """A node Pod of the shipped TCPXO runtime, as the Job controller would create it: its pod
    template's annotations and spec; unless ``wired``, without the interfaces annotation."""
    runtime = example(f"cluster/{TCPXO}.yaml")
    (node,) = (
        j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node"
    )
    template = node["template"]["spec"]["template"]
    annotations = dict(template["metadata"]["annotations"])
    if not wired:
        del annotations[INTERFACES]
    metadata = {"name": name, "namespace": NAMESPACE, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def probe_pod() -> dict[str, Any]:
    """A wired Pod naming a Network that does not exist: only nicguard refuses it (dry run)."""
    probe = pod("bench-probe", wired=True)
    probe["metadata"]["annotations"][INTERFACES] = interfaces([("eth1", "no-such-network")])
    return probe


@contextlib.contextmanager
def file_mode_nicguard(workdir: Path) -> Iterator[Served]:
    """``nicguard serve --state examples/cluster`` until exit."""
    port, probe_port = free_ports(2)
    cert_dir = workdir / "nicguard-certs"
    argv = [*NICGUARD, "serve", f"--state={ROOT / 'examples' / 'cluster'}", "--host=127.0.0.1"]
    argv += [f"--port={port}", f"--probe-port={probe_port}", f"--cert-dir={cert_dir}"]
    process = Process("nicguard", argv, workdir / "nicguard.log")
    probe = f"http://127.0.0.1:{probe_port}"
    try:

        def ready() -> bool | None:
            if not process.running():
                raise PodDoorError(f"nicguard exited\n{process.report()}")
            return http_status(f"{probe}/readyz") == 200 or None

        wait_until(ready, timeout=60, what="nicguard /readyz", diagnose=process.report)
        bundle = base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode("ascii")
        url = f"https://127.0.0.1:{port}/validate"
        yield Served(url, bundle, probe, process.pid, cert_dir)
    finally:
        process.stop()


def cpu(plane: ControlPlane) -> float:
    """Seconds of CPU kube-apiserver and etcd have spent so far."""
    return sum(cpu_seconds(process.pid) for process in plane.processes)


def machine_cpu() -> float:
    """Seconds of CPU every process of the machine has spent so far (/proc/stat, not idle)."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def mean_call_ms(
    before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]
) -> float:
    """The mean of the apiserver's webhook calls between two scrapes (0 when there were none)."""
    calls = sum(after[name][0] - before.get(name, (0, 0.0))[0] for name in after)
    seconds = sum(after[name][1] - before.get(name, (0, 0.0))[1] for name in after)
    return 1000 * seconds / calls if calls else 0.0


def judged_requests(probe: str) -> float:
    """nicguard's admission requests so far (its request counter, every label set)."""
    with urllib.request.urlopen(f"{probe}/metrics", timeout=5) as reply:  # noqa: S310
        text = reply.read().decode()
    return admission_requests(text)


def shipped_configuration(plane: ControlPlane, url: str, ca_bundle: str) -> dict[str, Any]:
    """The rendered ValidatingWebhookConfiguration, every entry pointed at ``url``."""
    (config,) = (d for d in rendered_manifests(plane) if d.get("kind") == WEBHOOK_KIND)
    names = [hook["name"] for hook in config["webhooks"]]
    if POD_WEBHOOK not in names:
        raise PodDoorError(f"the shipped configuration has no {POD_WEBHOOK} entry: {names}")
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return config


@dataclass(slots=True)
class Switch:
    """Puts one configuration in effect and proves it with a dry run of ``probe_pod``."""

    plane: ControlPlane
    client: ApiClient
    configs: dict[str, dict[str, Any]]  # by mode; "none" has none
    current: str = "none"

    def to(self, mode: str) -> None:
        if mode == self.current:
            return
        if self.current in self.configs:
            name = self.configs[self.current]["metadata"]["name"]
            deleted = self.plane.kubectl("admin", "delete", "validatingwebhookconfiguration", name)
            checked(deleted, f"deleting the {self.current} configuration")
        if mode in self.configs:
            config = json.dumps(self.configs[mode])
            created = self.plane.kubectl("admin", "create", "-f", "-", input=config)
            checked(created, f"registering the {mode} configuration")
        wait_until(
            lambda: self.in_effect() == mode or None,
            timeout=_SWITCH_TIMEOUT,
            what=f"configuration {mode} in effect",
            interval=0.2,
            diagnose=lambda: f"a dry-run probe Pod: {self.in_effect()}",
        )
        self.current = mode

    def in_effect(self) -> str:
        """nicguard refuses the probe; the echo allows it and shows in the apiserver's metrics."""
        before = webhook_calls(self.plane).get(ECHO_WEBHOOK)
        status, payload, _ = self.client.post(f"{_PODS}?dryRun=All", probe_pod())
        if status == 201:
            echoed = webhook_calls(self.plane).get(ECHO_WEBHOOK) != before
            return "go-echo" if echoed else "none"
        try:
            message = str(json.loads(payload).get("message", ""))
        except (ValueError, AttributeError):
            message = payload.decode(errors="replace")
        if f'admission webhook "{POD_WEBHOOK}" denied' in message:
            return "nicguard"
        return f"HTTP {status}: {message[:300]}"


def echo_configuration(shipped: dict[str, Any], url: str, ca_bundle: str) -> dict[str, Any]:
    """The shipped ``pods.nicguard.dev`` entry alone (rules, matchConditions), renamed, pointed
    at the echo."""
    config: dict[str, Any] = json.loads(json.dumps(shipped))
    (hook,) = (h for h in config["webhooks"] if h["name"] == POD_WEBHOOK)
    hook["name"] = ECHO_WEBHOOK
    hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    config["metadata"] = {"name": "bench-go-echo"}
    config["webhooks"] = [hook]
    return config


@contextlib.contextmanager
def go_echo(workdir: Path, cert_dir: Path) -> Iterator[Echo]:
    """The bare Go echo on nicguard's certificate until exit: the floor the bar is measured on."""
    binary = workdir / "goecho"
    go_build("goecho", binary)
    port = free_port()
    argv = [str(binary), f"127.0.0.1:{port}", str(cert_dir / "tls.crt"), str(cert_dir / "tls.key")]
    process = Process("go-echo", argv, workdir / "go-echo.log")
    try:
        wait_until(
            partial(listening, port), timeout=30, what="go-echo listening", diagnose=process.report
        )
        yield Echo(f"https://127.0.0.1:{port}/validate", process.pid)
    finally:
        process.stop()


def pin(pids: Sequence[int], cpu: int) -> None:
    """Every thread of each of ``pids`` to ``cpu`` alone (threads they start later inherit it)."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
                os.sched_setaffinity(int(task.name), {cpu})


@dataclass(frozen=True, slots=True)
class Fired:
    """One burst, from the start to the last answer: seconds of time and of CPU (the machine's,
    every process; this one's, the clients), and a line per create not answered 201."""

    seconds: float
    machine_cpu: float
    clients_cpu: float
    failed: list[str]


def fire(plane: ControlPlane, prefix: str, count: int, clients: int, *, wired: bool) -> Fired:
    """``count`` Pod creates from ``clients`` threads started together."""
    template = pod(prefix, wired=wired)
    work: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    for index in range(count):  # built before the burst: the clients only send
        obj = copy.deepcopy(template)
        obj["metadata"]["name"] = f"{prefix}-{index:04d}"
        work.put(obj)
    start = threading.Barrier(clients + 1)
    token = plane.users["admin"].token

    def client() -> list[str]:
        api = ApiClient("127.0.0.1", plane.port, plane.ca_file, token)
        failed: list[str] = []
        try:
            start.wait()
            while True:
                try:
                    obj = work.get_nowait()
                except queue.Empty:
                    return failed
                try:
                    status, payload, _ = api.post(_PODS, obj)
                except OSError as error:
                    status, payload = 0, str(error).encode()
                if status != 201:
                    failed.append(f"{obj['metadata']['name']}: HTTP {status} {payload[:200]!r}")
        finally:
            api.close()

    with ThreadPoolExecutor(max_workers=clients) as pool:
        futures = [pool.submit(client) for _ in range(clients)]
        start.wait(timeout=60)
        started, machine, own = time.perf_counter(), machine_cpu(), time.process_time()
        failed = [line for f in futures for line in f.result()]
        seconds = time.perf_counter() - started
        machine, own = machine_cpu() - machine, time.process_time() - own
    return Fired(seconds, machine, own, failed)


def delete_pods(plane: ControlPlane) -> None:
    """Delete the namespace's Pods (unbound Pods go at once) and wait until none is listed."""
    checked(plane.kubectl("admin", "delete", "--raw", _PODS), "deleting the Pods")
    listed = ["get", "pods", "-n", NAMESPACE, "-o", "name"]
    wait_until(
        lambda: (
            not checked(plane.kubectl("admin", *listed), "listing the Pods").stdout.strip() or None
        ),
        timeout=60,
        what="the Pods to be deleted",
    )


def measure(
    plane: ControlPlane, switch: Switch, served: Served, args: argparse.Namespace, out: TextIO
) -> Results:
    modes = tuple(m for m in MODES if m == "none" or m in switch.configs)
    results = Results(modes)
    for mode in modes:  # warm every path: connections, the webhook clients, nicguard's caches
        switch.to(mode)
        fire(plane, f"warm-{mode}", _WARMUP, args.clients, wired=True)
        delete_pods(plane)
    kinds = (WIRED, PLAIN)
    for number in range(args.rounds):
        shift = number % len(modes)
        for mode in modes[shift:] + modes[:shift]:
            switch.to(mode)
            order = kinds[(number // 2) % 2 :] + kinds[: (number // 2) % 2]
            for pods in order:
                calls = webhook_calls(plane)
                before = _counters(plane, served)
                prefix = f"{pods}-{mode}-{number}"
                fired = fire(plane, prefix, args.creates, args.clients, wired=pods == WIRED)
                after = _counters(plane, served)
                call_ms = mean_call_ms(calls, webhook_calls(plane))
                judged, plane_cpu, nicguard_cpu = (
                    end - start for start, end in zip(before, after, strict=True)
                )
                burst = Burst(
                    mode,
                    pods,
                    args.creates,
                    fired.seconds,
                    fired.failed,
                    judged,
                    plane_cpu,
                    nicguard_cpu,
                    fired.machine_cpu,
                    fired.clients_cpu,
                    call_ms,
                )
                results.bursts.append(burst)
                delete_pods(plane)
                _say(
                    out,
                    f"  round {number + 1} {mode:<8} {pods:<5} {args.creates} creates in"
                    f" {burst.seconds:6.2f} s, {len(burst.failed)} failed,"
                    f" nicguard judged {burst.judged:.0f}; CPU s: apiserver+etcd"
                    f" {burst.plane_cpu:.2f}, nicguard {burst.nicguard_cpu:.2f},"
                    f" machine {burst.machine_cpu:.2f}; webhook call {burst.call_ms:.1f} ms",
                )
    return results


def _counters(plane: ControlPlane, served: Served) -> tuple[float, float, float]:
    """nicguard's requests; seconds of CPU of apiserver+etcd and of nicguard."""
    return judged_requests(served.probe), cpu(plane), cpu_seconds(served.pid)


def report(results: Results, out: TextIO) -> bool:
    _say(out)
    _say(out, "pods    configuration   median s   rounds (s)")
    for pods in (WIRED, PLAIN):
        for mode in results.modes:
            rounds = " ".join(f"{s:.2f}" for s in results.seconds(mode, pods))
            _say(out, f"{pods:<7} {mode:<15} {results.median(mode, pods):8.2f}   {rounds}")
    wired, wired_none = results.ratio(WIRED, base="go-echo"), results.ratio(WIRED)
    plain, noise = results.ratio(PLAIN), results.noise(PLAIN)
    failed, judged = results.failed(), results.judged_plain()
    plane_ms = {m: 1000 * results.cpu_per_create(m, WIRED) for m in results.modes}
    nicguard_ms = 1000 * results.nicguard_cpu_per_judged()
    _say(
        out,
        f"CPU per wired create, apiserver+etcd: {plane_ms['none']:.2f} ms without a webhook,"
        f" {plane_ms['nicguard']:.2f} ms with nicguard registered; nicguard's own:"
        f" {nicguard_ms:.2f} ms per Pod judged (medians over rounds)",
    )
    _say(
        out,
        f"the floor, a bare Go echo on the same entry: wired Pods"
        f" {results.ratio(WIRED, 'go-echo'):.3f} x the time with no webhook, apiserver+etcd CPU"
        f" {plane_ms['go-echo']:.2f} ms per wired create; nicguard {wired_none:.3f} x",
    )
    rounds = " ".join(f"{r:.3f}" for r in results.paired(WIRED, "nicguard", "go-echo"))
    _say(out, f"wired Pods, nicguard / go-echo round by round: {rounds}")
    for mode in results.modes:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in results.cpu_ms(mode).items())
        _say(
            out,
            f"wired, {mode}: ms of CPU per create: {parts}; machine busy"
            f" {results.busy(mode):.0%}; the apiserver's webhook call"
            f" {results.calls_ms(mode):.1f} ms",
        )
    _say(
        out,
        f"the run's noise (largest spread of one configuration's rounds over their median):"
        f" wired {results.noise(WIRED):.1%}, unwired {noise:.1%}",
    )
    for line in failed[:10]:
        _say(out, f"  failed: {line}")
    checks = [
        (
            wired <= MAX_OVER_FLOOR,
            f"wired Pods: nicguard / go-echo {wired:.3f} x (<= {MAX_OVER_FLOOR})",
        ),
        (not failed, f"failed creates: {len(failed)} (0)"),
        (
            abs(plain - 1) <= noise,
            f"unwired Pods: nicguard / none {plain:.3f} x (within the run's noise, {noise:.1%})",
        ),
        (judged == 0, f"unwired Pods that reached nicguard: {judged:.0f} (0)"),
    ]
    for ok, text in checks:
        _say(out, f"{'PASS' if ok else 'FAIL'}  {text}")
    return all(ok for ok, _ in checks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.pod_door", description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=1000, help="Pod creates per burst")
    parser.add_argument("--clients", type=int, default=10, help="parallel clients per burst")
    parser.add_argument("--rounds", type=int, default=5, help="bursts per configuration and kind")
    parser.add_argument(
        "--etcd-fsync", action="store_true", help="etcd syncs every write, as a real one does"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="apiserver, etcd and the clients on CPU 0, the webhooks on CPU 1, as a webhook runs"
        " on a node of its own",
    )
    args = parser.parse_args(argv)
    if not (1 <= args.creates <= 10000 and 1 <= args.clients <= 100 and 2 <= args.rounds <= 20):
        parser.error("--creates must be in 1..10000, --clients in 1..100, --rounds in 2..20")
    if args.pin and not {0, 1} <= os.sched_getaffinity(0):
        parser.error("--pin needs CPUs 0 and 1")
    if shutil.which("go") is None:
        _say(sys.stderr, "bench.pod_door: set-up: go is needed to build the Go echo, the floor")
        return 2
    out = sys.stdout
    _say(out, "machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    with tempfile.TemporaryDirectory(prefix="nicguard-bench-pods-") as tmp:
        workdir = Path(tmp)
        plane = ControlPlane(workdir, etcd_fsync=args.etcd_fsync)
        try:
            try:
                plane.start()
                create_namespace(plane, NAMESPACE)
            except (RuntimeError, OSError) as error:
                _say(sys.stderr, f"bench.pod_door: set-up: {error}")
                return 2
            with contextlib.ExitStack() as stack:
                served = stack.enter_context(file_mode_nicguard(workdir))
                _say(out, f"control plane: {plane.versions()}")
                client = ApiClient(
                    "127.0.0.1", plane.port, plane.ca_file, plane.users["admin"].token
                )
                configs = {"nicguard": shipped_configuration(plane, served.url, served.ca_bundle)}
                echo = stack.enter_context(go_echo(workdir, served.cert_dir))
                configs["go-echo"] = echo_configuration(
                    configs["nicguard"], echo.url, served.ca_bundle
                )
                if args.pin:
                    pin([p.pid for p in plane.processes] + [os.getpid()], 0)
                    pin([served.pid, echo.pid], 1)
                _say(
                    out,
                    f"etcd {'syncs every write' if args.etcd_fsync else 'syncs no write'};"
                    + (
                        " apiserver, etcd and the clients on CPU 0, the webhooks on CPU 1"
                        if args.pin
                        else " every process on every CPU"
                    ),
                )
                switch = Switch(plane, client, configs)
                _say(
                    out,
                    f"{args.rounds} round(s), each: every configuration (order rotating), under"
                    f" each {args.creates} wired and {args.creates} unwired Pod creates from"
                    f" {args.clients} clients; load average {load_average()}",
                )
                try:
                    results = measure(plane, switch, served, args, out)
                finally:
                    client.close()
                ok = report(results, out)
        except (PodDoorError, E2EBenchError, RuntimeError, OSError, ValueError) as error:
            _say(sys.stderr, f"bench.pod_door: {error}")
            return 1
        finally:
            plane.stop()
    _say(out, f"load average at the end: {load_average()}")
    _say(out, "bench.pod_door: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
