"""Create latency through a real kube-apiserver: none vs ValidatingAdmissionPolicy vs nicguard.

One control plane (``tests/e2e``: etcd + kube-apiserver on loopback, the Trainer and Network CRDs,
the example Networks and recipe, ``nicguard serve`` in Kubernetes mode as its ServiceAccount) and
three configurations, switched in turn, several rounds each, in the same run:

- ``none``: no webhook configuration and no policy binding;
- ``vap``: an in-tree ValidatingAdmissionPolicy doing what CEL can: the node pod template's
  ``networking.gke.io/interfaces`` must equal the recipe string held in a param ConfigMap (same
  resources, operations, namespaceSelector and matchConditions as nicguard's webhook);
- ``nicguard``: the shipped ValidatingWebhookConfiguration pointing at nicguard.

Each measured create is a ``kubectl create``-equivalent POST of a recipe-bound TrainingRuntime
(the shipped TCPXO runtime, allowed by all three) as the non-admin user ``alice``, over one
keep-alive HTTPS connection, timed from request to the 201 response.

    python -m bench.e2e [--creates 100] [--rounds 3]

Exit status 0 when nicguard's p50 is within 15 % of the policy's, 1 otherwise, 2 on set-up error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from bench.run import machine
from tests.e2e.objects import RECIPE_PAIRS, interfaces, runtime, with_pairs
from tests.e2e.stack import Stack, populate, running
from tests.e2e.state import checked, create_namespace
from tests.e2e.webhook import register

MODES: Final = ("none", "vap", "nicguard")
MAX_P50_OVERHEAD: Final = 0.15
NAMESPACE: Final = "bench-e2e"
POLICY: Final = "bench-recipe-wiring"
PARAMS: Final = ("nicguard-system", "bench-recipe-params")
WEBHOOK_CONFIG: Final = "nicguard"
_RESOURCE: Final = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/trainingruntimes"
_SWITCH_TIMEOUT: Final = 60.0
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
    (hook,) = webhook_config["webhooks"]
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
            "matchResources": {"namespaceSelector": hook["namespaceSelector"]},
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

    def post(self, path: str, obj: dict[str, Any]) -> tuple[int, bytes, float]:
        """POST ``obj``; the status, the body and the seconds it took (request to last byte)."""
        body = json.dumps(obj).encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
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


@dataclass(slots=True)
class Switch:
    """Puts one of the three configurations in effect, and proves it with a dry run."""

    stack: Stack
    client: ApiClient
    binding: dict[str, Any]
    current: str = "nicguard"  # stack.running() registers the webhook

    def to(self, mode: str) -> None:
        if mode == self.current:
            return
        plane = self.stack.plane
        if self.current == "nicguard":
            deleted = plane.kubectl(
                "admin", "delete", "validatingwebhookconfiguration", WEBHOOK_CONFIG
            )
            checked(deleted, "deleting the webhook configuration")
        elif self.current == "vap":
            deleted = plane.kubectl("admin", "delete", "validatingadmissionpolicybinding", POLICY)
            checked(deleted, "deleting the policy binding")
        if mode == "nicguard":
            register(plane, self.stack.nicguard, self.stack.webhook_config)
        elif mode == "vap":
            created = plane.kubectl("admin", "create", "-f", "-", input=json.dumps(self.binding))
            checked(created, "creating the policy binding")
        self._wait_in_effect(mode)
        self.current = mode

    def in_effect(self) -> str:
        """Which configuration denies a drifted runtime (server-side dry run)."""
        drifted = runtime(
            "bench-probe",
            namespace=NAMESPACE,
            pairs=with_pairs(RECIPE_PAIRS, (2, 3)),
            recipe_bound=True,
        )
        status, payload, _ = self.client.post(f"{_RESOURCE}?dryRun=All", drifted)
        text = payload.decode(errors="replace")
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("message"), str):
            text = decoded["message"]
        if status == 201:
            return "none"
        if f"ValidatingAdmissionPolicy '{POLICY}'" in text:
            return "vap"
        if 'admission webhook "validate.nicguard.dev" denied' in text:
            return "nicguard"
        return f"unexpected HTTP {status}: {text[:300]}"

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
    """Create latencies in milliseconds, per configuration and per round."""

    rounds: dict[str, list[list[float]]] = field(default_factory=lambda: {m: [] for m in MODES})

    def all(self, mode: str) -> list[float]:
        return [ms for one in self.rounds[mode] for ms in one]

    def p50(self, mode: str) -> float:
        return statistics.median(self.all(mode))

    def p99(self, mode: str) -> float:
        return statistics.quantiles(self.all(mode), n=100, method="inclusive")[98]


def create_round(client: ApiClient, mode: str, number: int, creates: int) -> list[float]:
    """``creates`` creates of distinct, allowed runtimes (after a few unmeasured ones)."""
    latencies: list[float] = []
    for index in range(-_WARMUP, creates):
        name = f"rt-{mode}-{number}-{index + _WARMUP:04d}"
        obj = runtime(name, namespace=NAMESPACE, recipe_bound=True)
        status, payload, seconds = client.post(_RESOURCE, obj)
        if status != 201:
            raise E2EBenchError(f"create {name} under {mode}: HTTP {status}: {payload[:300]!r}")
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
    switch = Switch(stack, client, binding)
    samples = Samples()
    try:
        for number in range(args.rounds):
            order = MODES[number % 3 :] + MODES[: number % 3]
            for mode in order:
                switch.to(mode)
                latencies = create_round(client, mode, number, args.creates)
                samples.rounds[mode].append(latencies)
                _say(
                    out,
                    f"  round {number + 1} {mode:<8} p50 {statistics.median(latencies):6.2f} ms"
                    f"  max {max(latencies):7.2f} ms  ({len(latencies)} creates)",
                )
    finally:
        client.close()
    return samples


def report(samples: Samples, out: TextIO) -> bool:
    _say(out)
    _say(out, "configuration   creates   p50 ms   p99 ms")
    for mode in MODES:
        _say(
            out,
            f"{mode:<15} {len(samples.all(mode)):7d} {samples.p50(mode):8.2f} "
            f"{samples.p99(mode):8.2f}",
        )
    overhead = samples.p50("nicguard") / samples.p50("vap") - 1
    ok = overhead <= MAX_P50_OVERHEAD
    _say(out)
    _say(
        out,
        f"nicguard vs ValidatingAdmissionPolicy at p50: {overhead * 100:+.1f} % "
        f"(<= +{MAX_P50_OVERHEAD * 100:.0f} %) {'PASS' if ok else 'FAIL'}",
    )
    _say(
        out,
        f"admission cost over none at p50: vap {samples.p50('vap') - samples.p50('none'):+.2f} ms, "
        f"nicguard {samples.p50('nicguard') - samples.p50('none'):+.2f} ms",
    )
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=100, help="measured creates per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each runs all three)")
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
                f"(+{_WARMUP} unmeasured), order rotated each round",
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
