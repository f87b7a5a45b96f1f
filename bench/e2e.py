"""Create latency through a real kube-apiserver: none vs ValidatingAdmissionPolicy vs nicguard.

One control plane (``tests/e2e``: etcd + kube-apiserver on loopback, the Trainer and Network CRDs,
the example Networks and recipe, ``nicguard serve`` in Kubernetes mode as its ServiceAccount) and
three configurations, switched in turn, several rounds each, in the same run:

- ``none``: no webhook configuration and no policy binding;
- ``vap``: an in-tree ValidatingAdmissionPolicy doing what CEL can: the node pod template's
  ``networking.gke.io/interfaces`` must equal the recipe string held in a param ConfigMap (same
  resources, operations, namespaceSelector and matchConditions as nicguard's webhook);
- ``echo``: a webhook configuration like nicguard's (same rules, selectors, matchConditions)
  pointing at the bare FastAPI echo of ``make bench`` (``bench/echo_app.py``, same TLS set-up, on
  nicguard's serving stack, httptools and uvloop): what any Python/uvicorn webhook costs;
- ``go-echo``: the same pointing at a bare Go echo (``bench/goecho``, built with ``go build``;
  left out when ``go`` is not installed): what any out-of-process webhook costs;
- ``nicguard``: the shipped ValidatingWebhookConfiguration pointing at nicguard.

Each measured create is a ``kubectl create``-equivalent POST of a recipe-bound TrainingRuntime
(the shipped TCPXO runtime, allowed by all) as the non-admin user ``alice``, over one
keep-alive HTTPS connection, timed from request to the 201 response (``--client kubectl``: a real
``kubectl create -f -`` process per create instead, timed from spawn to exit: what a user waits
for). For the webhooks, the apiserver's own measure of each call
(``apiserver_admission_webhook_admission_duration_seconds``) is reported beside it.

    python -m bench.e2e [--creates 100] [--rounds 3] [--client api|kubectl]

Exit status 0 when nicguard's p50 is within 15 % of the policy's, 1 otherwise, 2 on set-up error.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TextIO

from bench.run import free_port, machine
from tests.harness.controlplane import ControlPlane
from tests.harness.objects import RECIPE_PAIRS, interfaces, runtime, with_pairs
from tests.harness.procs import Process, wait_until
from tests.harness.stack import Stack, populate, running
from tests.harness.state import checked, create_namespace
from tests.harness.webhook import register

MODES: Final = ("none", "vap", "echo", "go-echo", "nicguard")
ECHOES: Final = ("echo", "go-echo")
NICGUARD_WEBHOOK: Final = "validate.nicguard.dev"
MAX_P50_OVERHEAD: Final = 0.15
NAMESPACE: Final = "bench-e2e"
POLICY: Final = "bench-recipe-wiring"
PARAMS: Final = ("nicguard-system", "bench-recipe-params")
WEBHOOK_CONFIG: Final = "nicguard"
_RESOURCE: Final = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainingruntimes"
_SWITCH_TIMEOUT: Final = 60.0
_ROOT: Final = Path(__file__).resolve().parent.parent
_CALLS: Final = "apiserver_admission_webhook_admission_duration_seconds"
_WARMUP: Final = 10

# The node pod template's interfaces annotation, as CEL can reach it (fields are schemaless).
_NODE_ANNOTATION_MATCHES: Final = (
    "object.spec.template.spec.replicatedJobs.exists(j, j.name == 'node'"
    " && has(j.template.spec.template.metadata.annotations)"
    " && 'networking.gke.io/interfaces' in j.template.spec.template.metadata.annotations"
    " && j.template.spec.template.metadata.annotations['networking.gke.io/interfaces']"
    " == params.data['interfaces'])"
)
_RECIPE_BOUND: Final = (
    "has(object.metadata.labels) && 'nicguard.dev/recipe-bound' in object.metadata.labels"
    " && object.metadata.labels['nicguard.dev/recipe-bound'] == 'true'"
)


class E2EBenchError(Exception):
    """The end-to-end benchmark could not run."""


def policy_objects(webhook_config: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The param ConfigMap and the policy (created once), and the binding (switched)."""
    hook = webhook_config["webhooks"][0]  # validate.nicguard.dev, the Trainer objects
    namespace, name = PARAMS
    params = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"interfaces": interfaces(RECIPE_PAIRS)},
    }
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["trainer.kubeflow.org"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["clustertrainingruntimes", "trainingruntimes"],
                    }
                ]
            },
            "matchConditions": [
                *hook.get("matchConditions", []),
                {"name": "recipe-bound", "expression": _RECIPE_BOUND},
            ],
            "validations": [
                {
                    "expression": _NODE_ANNOTATION_MATCHES,
                    "message": "networking.gke.io/interfaces differs from the recipe",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY},
        "spec": {
            "policyName": POLICY,
            "validationActions": ["Deny"],
            "paramRef": {
                "name": name,
                "namespace": namespace,
                "parameterNotFoundAction": "Deny",
            },
            # The webhook's own scope, whichever selectors it has (none: every namespace).
            "matchResources": {
                key: hook[key] for key in ("namespaceSelector", "objectSelector") if key in hook
            },
        },
    }
    return [params, policy], binding


@dataclass(slots=True)
class ApiClient:
    """One keep-alive HTTPS connection to the apiserver as a token user."""

    host: str
    port: int
    ca: Path
    token: str
    connection: http.client.HTTPSConnection | None = None

    def post(
        self, path: str, obj: dict[str, Any], extra_headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes, float]:
        """POST ``obj`` (with ``extra_headers``); the status, the body and the seconds it took
        (request to last byte)."""
        body = json.dumps(obj).encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            **(extra_headers or {}),
        }
        for attempt in (1, 2):
            connection = self._connection()
            started = time.perf_counter()
            try:
                connection.request("POST", path, body=body, headers=headers)
                reply = connection.getresponse()
                payload = reply.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    raise
                continue
            return reply.status, payload, time.perf_counter() - started
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _connection(self) -> http.client.HTTPSConnection:
        if self.connection is None:
            context = ssl.create_default_context(cafile=str(self.ca))
            self.connection = http.client.HTTPSConnection(
                self.host, self.port, context=context, timeout=30
            )
        return self.connection


def webhook_name(mode: str) -> str:
    return NICGUARD_WEBHOOK if mode == "nicguard" else f"{mode}.bench.nicguard.dev"


def echo_config(webhook_config: dict[str, Any], mode: str, url: str, ca_bundle: str) -> Any:
    """nicguard's configuration (rules, selectors, matchConditions) pointing at an echo."""
    config: Any = json.loads(json.dumps(webhook_config))
    config["metadata"] = {"name": f"bench-{mode}"}
    hook = config["webhooks"][0]  # the Trainer objects' webhook, measured alone
    config["webhooks"] = [hook]
    hook["name"] = webhook_name(mode)
    hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return config


@contextlib.contextmanager
def echo_servers(stack: Stack, out: TextIO) -> Iterator[dict[str, str]]:
    """The Python and (when ``go`` is installed) Go echoes on nicguard's certificate; their URLs."""
    cert, key = stack.nicguard.cert_dir / "tls.crt", stack.nicguard.cert_dir / "tls.key"
    workdir = stack.workdir
    argvs = {"echo": [sys.executable, "-m", "bench.echo_app", "--host=127.0.0.1"]}
    if shutil.which("go") is None:
        _say(out, "go not installed: the go-echo configuration is left out")
    else:
        binary = workdir / "goecho"
        go_build("goecho", binary)
        argvs["go-echo"] = [str(binary)]
    urls: dict[str, str] = {}
    processes: list[Process] = []
    try:
        for mode, argv in argvs.items():
            port = free_port()
            if mode == "echo":
                argv = [*argv, f"--port={port}", f"--tls-cert={cert}", f"--tls-key={key}"]
            else:
                argv = [*argv, f"127.0.0.1:{port}", str(cert), str(key)]
            env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(_ROOT)}
            processes.append(Process(mode, argv, workdir / f"{mode}.log", env=env))
            urls[mode] = f"https://127.0.0.1:{port}/validate"
            wait_until(
                partial(listening, port),
                timeout=30,
                what=f"{mode} listening",
                diagnose=processes[-1].report,
            )
        yield urls
    finally:
        for process in processes:
            process.stop()


def listening(port: int) -> bool | None:
    """True once ``port`` accepts connections, None (keep waiting) before."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return None


def go_build(package: str, binary: Path) -> None:
    """``go build`` of ``bench/<package>`` into ``binary``; E2EBenchError without ``go`` or when
    the build fails."""
    go = shutil.which("go")
    if go is None:
        raise E2EBenchError(f"go is not installed: bench/{package} cannot be built")
    built = subprocess.run(  # noqa: S603 - the Go toolchain on our own source
        [go, "build", "-o", str(binary), "."],
        cwd=_ROOT / "bench" / package,
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        raise E2EBenchError(f"go build bench/{package} failed: {built.stderr[-2000:]}")


def webhook_calls(plane: ControlPlane) -> dict[str, tuple[int, float]]:
    """Per webhook name: (calls, seconds) the apiserver has measured so far."""
    scraped = plane.kubectl("admin", "get", "--raw", "/metrics")
    checked(scraped, "reading the apiserver's metrics")
    calls: dict[str, list[float]] = {}
    for line in scraped.stdout.splitlines():
        if not line.startswith((f"{_CALLS}_count{{", f"{_CALLS}_sum{{")):
            continue
        labels, _, value = line.rpartition(" ")
        name = labels.partition('name="')[2].partition('"')[0]
        totals = calls.setdefault(name, [0.0, 0.0])
        totals[0 if labels.startswith(f"{_CALLS}_count") else 1] += float(value)
    return {name: (int(count), seconds) for name, (count, seconds) in calls.items()}


@dataclass(slots=True)
class Switch:
    """Puts one configuration in effect, and proves it with a dry run."""

    stack: Stack
    client: ApiClient
    binding: dict[str, Any]
    echo_urls: dict[str, str]
    current: str = "nicguard"  # stack.running() registers the webhook

    def to(self, mode: str) -> None:
        if mode == self.current:
            return
        plane = self.stack.plane
        if self.current == "vap":
            deleted = plane.kubectl("admin", "delete", "validatingadmissionpolicybinding", POLICY)
            checked(deleted, "deleting the policy binding")
        elif self.current != "none":
            name = WEBHOOK_CONFIG if self.current == "nicguard" else f"bench-{self.current}"
            deleted = plane.kubectl("admin", "delete", "validatingwebhookconfiguration", name)
            checked(deleted, "deleting the webhook configuration")
        if mode == "nicguard":
            register(plane, self.stack.nicguard, self.stack.webhook_config)
        elif mode == "vap":
            created = plane.kubectl("admin", "create", "-f", "-", input=json.dumps(self.binding))
            checked(created, "creating the policy binding")
        elif mode in ECHOES:
            config = echo_config(
                self.stack.webhook_config,
                mode,
                self.echo_urls[mode],
                self.stack.nicguard.ca_bundle(),
            )
            created = plane.kubectl("admin", "create", "-f", "-", input=json.dumps(config))
            checked(created, f"registering the {mode} webhook")
        self._wait_in_effect(mode)
        self.current = mode

    def in_effect(self) -> str:
        """Which configuration judges a drifted runtime (server-side dry run): the policy and
        nicguard deny it, the echoes allow it and show in the apiserver's webhook metrics."""
        before = webhook_calls(self.stack.plane)
        drifted = runtime(
            "bench-probe",
            namespace=NAMESPACE,
            pairs=with_pairs(RECIPE_PAIRS, (2, 3)),
            recipe_bound=True,
        )
        status, payload, _ = self.client.post(f"{_RESOURCE}?dryRun=All", drifted)
        after = webhook_calls(self.stack.plane)
        echoes = [
            m for m in self.echo_urls if after.get(webhook_name(m)) != before.get(webhook_name(m))
        ]
        text = payload.decode(errors="replace")
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
            text = decoded["message"]
        if status == 201:
            seen = "none"
        elif f"ValidatingAdmissionPolicy '{POLICY}'" in text:
            seen = "vap"
        elif f'admission webhook "{NICGUARD_WEBHOOK}" denied' in text:
            seen = "nicguard"
        else:
            return f"unexpected HTTP {status}: {text[:300]}"
        if seen == "none" and len(echoes) == 1:
            return echoes[0]
        return "+".join([seen, *echoes])

    def _wait_in_effect(self, mode: str) -> None:
        deadline = time.monotonic() + _SWITCH_TIMEOUT
        seen = ""
        while time.monotonic() < deadline:
            seen = self.in_effect()
            if seen == mode:
                return
            time.sleep(0.2)
        raise E2EBenchError(f"{mode} not in effect after {_SWITCH_TIMEOUT:.0f}s (saw {seen})")


@dataclass(slots=True)
class Samples:
    """Create latencies in milliseconds per configuration and round; the apiserver's measure
    of the webhook calls (calls, seconds) per webhook configuration."""

    modes: tuple[str, ...] = MODES
    rounds: dict[str, list[list[float]]] = field(default_factory=lambda: {m: [] for m in MODES})
    calls: dict[str, tuple[int, float]] = field(default_factory=dict)

    def all(self, mode: str) -> list[float]:
        return [ms for one in self.rounds[mode] for ms in one]

    def p50(self, mode: str) -> float:
        return statistics.median(self.all(mode))

    def p99(self, mode: str) -> float:
        return statistics.quantiles(self.all(mode), n=100, method="inclusive")[98]

    def add_calls(self, mode: str, before: dict[str, tuple[int, float]], after: Any) -> None:
        name = webhook_name(mode)
        start, end = before.get(name, (0, 0.0)), after.get(name, (0, 0.0))
        count, seconds = self.calls.get(mode, (0, 0.0))
        self.calls[mode] = (count + end[0] - start[0], seconds + end[1] - start[1])

    def call_ms(self, mode: str) -> float | None:
        count, seconds = self.calls.get(mode, (0, 0.0))
        return seconds / count * 1000 if count else None


def create_round(
    stack: Stack, client: ApiClient | None, mode: str, number: int, creates: int
) -> list[float]:
    """``creates`` creates of distinct, allowed runtimes (after a few unmeasured ones): POSTs on
    ``client``'s keep-alive connection, or with ``client`` None a ``kubectl create`` each."""
    latencies: list[float] = []
    for index in range(-_WARMUP, creates):
        name = f"rt-{mode}-{number}-{index + _WARMUP:04d}"
        obj = runtime(name, namespace=NAMESPACE, recipe_bound=True)
        if client is None:
            started = time.perf_counter()
            created = stack.plane.kubectl("alice", "create", "-f", "-", input=json.dumps(obj))
            seconds = time.perf_counter() - started
            failure = None if created.returncode == 0 else created.stderr[:300]
        else:
            status, payload, seconds = client.post(_RESOURCE, obj)
            failure = None if status == 201 else f"HTTP {status}: {payload[:300]!r}"
        if failure is not None:
            raise E2EBenchError(f"create {name} under {mode}: {failure}")
        if index >= 0:
            latencies.append(seconds * 1000)
    return latencies


def _say(out: TextIO, text: str = "") -> None:
    out.write(text + "\n")
    out.flush()


def measure(stack: Stack, args: argparse.Namespace, out: TextIO) -> Samples:
    plane = stack.plane
    create_namespace(plane, NAMESPACE)
    setup, binding = policy_objects(stack.webhook_config)
    created = plane.kubectl(
        "admin",
        "create",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": setup}),
    )
    checked(created, "creating the policy and its params")
    client = ApiClient("127.0.0.1", plane.port, plane.ca_file, plane.users["alice"].token)
    with echo_servers(stack, out) as echo_urls:
        modes = tuple(m for m in MODES if m not in ECHOES or m in echo_urls)
        samples = Samples(modes=modes)
        switch = Switch(stack, client, binding, echo_urls)
        try:
            for number in range(args.rounds):
                shift = number % len(modes)
                for mode in modes[shift:] + modes[:shift]:
                    switch.to(mode)
                    before = webhook_calls(stack.plane)
                    creator = None if args.client == "kubectl" else client
                    latencies = create_round(stack, creator, mode, number, args.creates)
                    samples.add_calls(mode, before, webhook_calls(stack.plane))
                    samples.rounds[mode].append(latencies)
                    _say(
                        out,
                        f"  round {number + 1} {mode:<8} p50 {statistics.median(latencies):6.2f}"
                        f" ms  max {max(latencies):7.2f} ms  ({len(latencies)} creates)",
                    )
        finally:
            client.close()
    return samples


def report(samples: Samples, out: TextIO) -> bool:
    _say(out)
    _say(out, "configuration   creates   p50 ms   p99 ms   webhook call ms (apiserver, mean)")
    for mode in samples.modes:
        call = samples.call_ms(mode)
        _say(
            out,
            f"{mode:<15} {len(samples.all(mode)):7d} {samples.p50(mode):8.2f} "
            f"{samples.p99(mode):8.2f}   {'-' if call is None else f'{call:.3f}'}",
        )
    vap = samples.p50("vap")
    overhead = samples.p50("nicguard") / vap - 1
    ok = overhead <= MAX_P50_OVERHEAD
    _say(out)
    _say(
        out,
        f"nicguard vs ValidatingAdmissionPolicy at p50: {overhead * 100:+.1f} % "
        f"(<= +{MAX_P50_OVERHEAD * 100:.0f} %) {'PASS' if ok else 'FAIL'}",
    )
    for mode in samples.modes:
        if mode in ECHOES:
            scale = (samples.p50(mode) / vap - 1) * 100
            _say(out, f"  for scale, {mode} vs the policy at p50: {scale:+.1f} %")
    costs = ", ".join(
        f"{mode} {samples.p50(mode) - samples.p50('none'):+.2f} ms"
        for mode in samples.modes
        if mode != "none"
    )
    _say(out, f"admission cost over none at p50: {costs}")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=100, help="measured creates per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs every mode)")
    parser.add_argument(
        "--client",
        choices=["api", "kubectl"],
        default="api",
        help="api: POSTs on one keep-alive connection (the strict view); kubectl: one "
        "`kubectl create -f -` process per create (what a user waits for)",
    )
    parser.add_argument("--json", type=Path, help="also write the raw latencies here")
    args = parser.parse_args(argv)
    if not (1 <= args.creates <= 2000 and 1 <= args.rounds <= 20):
        parser.error("--creates must be in 1..2000 and --rounds in 1..20")
    out = sys.stdout
    _say(out, "machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    try:
        with (
            tempfile.TemporaryDirectory(prefix="nicguard-bench-e2e-") as tmp,
            running(Path(tmp)) as stack,
        ):
            _say(out, f"control plane: {stack.plane.versions()}")
            populate(stack)
            _say(
                out,
                f"{args.rounds} rounds x {args.creates} creates per configuration "
                f"(+{_WARMUP} unmeasured), order rotated each round, client {args.client}",
            )
            samples = measure(stack, args, out)
    except (E2EBenchError, RuntimeError, AssertionError) as error:
        _say(sys.stderr, f"bench.e2e: {error}")
        return 2
    ok = report(samples, out)
    if args.json is not None:
        args.json.write_text(json.dumps({"rounds": samples.rounds}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
