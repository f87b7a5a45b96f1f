"""nicguard as a process against a ``ControlPlane``, registered through the shipped webhook config.

The manifests are rendered with ``kubectl kustomize manifests`` exactly as ``kubectl apply -k``
would; only the ValidatingWebhookConfiguration's ``clientConfig`` is rewritten (``service:`` needs
cluster networking a bare apiserver lacks) to ``url:`` + ``caBundle``, as envtest does.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.objects import INTERFACES, as_list, node_annotations, runtime
from tests.harness.procs import NICGUARD, Process, free_ports, http_status, wait_until

READY_TIMEOUT: Final = 60.0
EFFECT_TIMEOUT: Final = 60.0
# The ValidatingAdmissionPolicy (and its binding) of manifests/base/admission-policy.yaml.
CONFIGURATION_POLICY: Final = "nicguard-webhook-configuration"
# What nicguard needs to run as its ServiceAccount with the shipped least-privilege RBAC, and the
# policy that keeps it from changing its webhook configuration but the caBundle: every stack runs
# under it.
BASE_KINDS: Final = frozenset(
    {
        "ResourceQuota",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
# The opt-in piece that creates the namespace nicguard-system (the base does not).
NAMESPACE_PIECE: Final = "manifests/namespace"
WEBHOOK_KIND: Final = "ValidatingWebhookConfiguration"
SENTINEL_NAME: Final = "nicguard-e2e-sentinel"


def sentinel() -> str:
    """A CTR nicguard denies whatever the cluster state (not JSON); only ever dry-run."""
    obj = runtime(SENTINEL_NAME, pairs=None)
    node_annotations(obj)[INTERFACES] = "not json"
    return as_list([obj])


def rendered_manifests(plane: ControlPlane, path: str = "manifests") -> list[dict[str, Any]]:
    """``path`` (default ``manifests/``) as ``kubectl apply -k path`` would send it."""
    run = plane.kubectl("admin", "kustomize", str(ROOT / path))
    if run.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path} failed: {run.stderr}")
    return [doc for doc in yaml.safe_load_all(run.stdout) if isinstance(doc, dict)]


def install_base(plane: ControlPlane) -> dict[str, Any]:
    """Apply the namespace (the opt-in ``manifests/namespace``, as manifests/README.md installs
    it), then the base's quota, ServiceAccount and RBAC; return the webhook configuration (not
    applied)."""
    namespace = plane.kubectl("admin", "apply", "-k", str(ROOT / NAMESPACE_PIECE))
    if namespace.returncode != 0:
        raise RuntimeError(f"applying {NAMESPACE_PIECE} failed: {namespace.stderr}")
    docs = rendered_manifests(plane)
    base = [doc for doc in docs if doc.get("kind") in BASE_KINDS]
    applied = plane.kubectl("admin", "apply", "-f", "-", input=as_list(base))
    if applied.returncode != 0:
        raise RuntimeError(f"applying the base manifests failed: {applied.stderr}")
    (webhook,) = (doc for doc in docs if doc.get("kind") == WEBHOOK_KIND)
    return webhook


class Nicguard:
    """``nicguard serve`` in Kubernetes mode as the nicguard ServiceAccount (not as admin)."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        args: Sequence[str] = (),
        *,
        kubeconfig: Path | None = None,
    ) -> None:
        """``kubeconfig``: how nicguard reaches the API (default: the ServiceAccount's, direct)."""
        self.plane, self.workdir, self.args = plane, workdir, list(args)
        self.kubeconfig = kubeconfig or plane.kubeconfig("nicguard")
        self.port, self.probe_port = free_ports(2)
        self.cert_dir = workdir / "nicguard-certs"
        self.url = f"https://127.0.0.1:{self.port}/validate"
        self.process: Process | None = None

    def start(self, ready_timeout: float = READY_TIMEOUT) -> None:
        """Run it; returns once /readyz answers (every cache listed), within ``ready_timeout``."""
        argv = [*NICGUARD, "serve", "--host=127.0.0.1", f"--cert-dir={self.cert_dir}"]
        argv += [f"--port={self.port}", f"--probe-port={self.probe_port}", *self.args]
        # Only what we pass: no NICGUARD_* settings from the caller's shell, and no in-cluster
        # config when the tests themselves run in a pod (nicguard tries in-cluster first).
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("NICGUARD_", "KUBERNETES_SERVICE_"))
        }
        env["KUBECONFIG"] = str(self.kubeconfig)
        process = Process("nicguard", argv, self.workdir / "nicguard.log", env=env)
        self.process = process
        try:
            wait_until(
                self._ready, timeout=ready_timeout, what="nicguard /readyz", diagnose=self.report
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the process by PID (idempotent); ``start()`` runs it again on the same ports."""
        if self.process is not None:
            self.process.stop()

    def report(self) -> str:
        probe = http_status(f"http://127.0.0.1:{self.probe_port}/readyz")
        own = self.process.report() if self.process else "----- nicguard (never started) -----"
        return f"{own}\nnicguard /readyz: {probe}"

    def decisions(self) -> list[dict[str, Any]]:
        """The ``admission_decision`` lines of nicguard's log (all runs of this instance)."""
        entries = []
        for line in (self.workdir / "nicguard.log").read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and entry.get("event_type") == "admission_decision":
                    entries.append(entry)
        return entries

    def ca_bundle(self) -> str:
        return base64.b64encode((self.cert_dir / "ca.crt").read_bytes()).decode("ascii")

    @property
    def pid(self) -> int | None:
        """The PID of the current run (None before the first start)."""
        return self.process.pid if self.process is not None else None

    def probe(self, path: str) -> tuple[int | None, str]:
        """GET ``path`` on the plain-HTTP probe port: (status or None, body)."""
        url = f"http://127.0.0.1:{self.probe_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return int(reply.status), reply.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", errors="replace")
        except OSError:
            return None, ""

    def judged_requests(self) -> float:
        """The admission requests it has answered so far (``admission_requests``)."""
        status, text = self.probe("/metrics")
        if status != 200:
            raise RuntimeError(f"nicguard /metrics answered {status}\n{self.report()}")
        return admission_requests(text)

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON line of nicguard's log (all runs of this instance)."""
        entries = []
        for line in (self.workdir / "nicguard.log").read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return entries

    def _ready(self) -> bool | None:
        if self.process is None or not self.process.running():
            raise RuntimeError(f"nicguard exited\n{self.report()}")
        return http_status(f"http://127.0.0.1:{self.probe_port}/readyz") == 200 or None


def admission_requests(metrics: str) -> float:
    """``nicguard_admission_requests_total`` of a /metrics text, every label set summed."""
    return sum(
        float(line.rpartition(" ")[2])
        for line in metrics.splitlines()
        if line.startswith("nicguard_admission_requests_total{")
    )


def webhook_names(config: dict[str, Any]) -> list[str]:
    return [str(hook["name"]) for hook in config["webhooks"]]


def register(plane: ControlPlane, nicguard: Nicguard, config: dict[str, Any]) -> None:
    """Create the shipped configuration pointing at ``nicguard``; wait until it takes effect."""
    register_url(plane, config, nicguard.url, nicguard.ca_bundle(), diagnose=nicguard.report)


def register_url(
    plane: ControlPlane,
    config: dict[str, Any],
    url: str,
    ca_bundle: str,
    *,
    diagnose: Callable[[], str] = lambda: "",
) -> None:
    """The shipped configuration pointing at ``url`` trusting ``ca_bundle`` (base64 PEM), e.g. a
    load balancer in front of several replicas; waits until it takes effect."""
    registered = json.loads(json.dumps(config))
    for hook in registered["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    created = plane.kubectl("admin", "create", "-f", "-", input=json.dumps(registered))
    if created.returncode != 0:
        raise RuntimeError(f"registering the webhook failed: {created.stderr}")
    wait_effective(plane, diagnose, webhook_names(config)[0])


def wait_effective(
    plane: ControlPlane, nicguard: Nicguard | Callable[[], str], webhook: str
) -> None:
    """Poll a server-side dry run of ``SENTINEL`` until ``webhook`` denies it.

    ``nicguard``: the instance (or any report function) whose log explains a timeout."""
    report = nicguard.report if isinstance(nicguard, Nicguard) else nicguard
    denied = f'admission webhook "{webhook}" denied the request'
    body = sentinel()

    def probe() -> bool | None:
        run = plane.kubectl("admin", "create", "--dry-run=server", "-f", "-", input=body)
        return (run.returncode == 1 and denied in run.stderr) or None

    wait_until(
        probe,
        timeout=EFFECT_TIMEOUT,
        what=f"webhook {webhook} to deny the sentinel",
        interval=0.25,
        diagnose=lambda: f"{plane.report()}\n{report()}",
    )


def wait_policy_effective(plane: ControlPlane, configuration: str = "nicguard") -> None:
    """Poll a server-side dry run of ``failurePolicy: Ignore`` by nicguard's ServiceAccount (its
    RBAC allows the patch) until the policy refuses it: the apiserver loads policies a moment
    after they are created."""
    change = '[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]'
    patch = ["patch", "validatingwebhookconfiguration", configuration, "--type=json", "-p", change]
    refused = f"ValidatingAdmissionPolicy '{CONFIGURATION_POLICY}' with binding"

    def probe() -> bool | None:
        run = plane.kubectl("nicguard", *patch, "--dry-run=server")
        return (run.returncode == 1 and refused in run.stderr) or None

    wait_until(
        probe,
        timeout=EFFECT_TIMEOUT,
        what=f"ValidatingAdmissionPolicy {CONFIGURATION_POLICY} to refuse nicguard's patch",
        interval=0.25,
        diagnose=plane.report,
    )
