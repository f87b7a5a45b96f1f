"""The real controllers of a TrainJob's chain beside nicguard: Kubeflow Trainer, JobSet, the Job
controller and the garbage collector, each a plain process on loopback as its own ServiceAccount.
Trainer is the release ``$NICGUARD_TRAINER_VERSION`` names (v2.3.0, or v2.2.1: ``chain_trainer``).

Binaries, CRDs, webhooks and RBAC are the modules' as published (``scripts/chain-bins.sh``); the
only changes are those a cluster without Services or cert-manager needs: ``url:`` clientConfigs,
namespaces, and serving certificates from a CA of ours.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import yaml

from app.certificates.builder import authority, leaf, required_sans
from app.certificates.pem import KeyPair
from tests.harness.controlplane import ROOT, ControlPlane
from tests.harness.objects import TRAINER_V2_1, TRAINER_V2_3, TRAINERS, Trainer, as_list
from tests.harness.procs import Process, free_ports, http_status, wait_until
from tests.harness.stack import Stack, populate
from tests.harness.state import (
    NETWORK_API_CRDS,
    checked,
    create_crds,
    create_namespace,
    grant_developers,
)
from tests.harness.webhook import Nicguard, install_base, register

READY_TIMEOUT: Final = 120.0
NAMESPACE: Final = "chain-system"  # every controller's ServiceAccount lives here
CERT_LIFETIME: Final = timedelta(days=1)
# Where each module keeps its CRDs, its webhook configurations (a kustomize directory) and RBAC.
TRAINER_CRDS: Final = "trainer/manifests/base/crds"
TRAINER_WEBHOOKS: Final = "trainer/manifests/base/webhook"
TRAINER_RBAC: Final = "trainer/manifests/base/rbac"
JOBSET_CRDS: Final = "jobset/config/components/crd/bases"
JOBSET_WEBHOOKS: Final = "jobset/config/components/webhook"
JOBSET_RBAC: Final = "jobset/config/components/rbac"
NAMESPACED_KINDS: Final = frozenset({"ServiceAccount", "Role", "RoleBinding"})
WEBHOOK_KINDS: Final = frozenset({"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})


def chain_dir() -> Path:
    """What ``scripts/chain-bins.sh`` prints (``$NICGUARD_CHAIN_DIR`` when set); fails, never
    skips, when the controllers cannot be had."""
    explicit = os.environ.get("NICGUARD_CHAIN_DIR")
    if explicit:
        return Path(explicit)
    script = ROOT / "scripts" / "chain-bins.sh"
    run = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"{script} failed ({run.returncode}):\n{run.stderr[-4000:]}")
    return Path(run.stdout.strip())


def chain_trainer(bins: Path) -> Trainer:
    """The Trainer release the chain runs: ``$NICGUARD_TRAINER_VERSION``, the variable
    ``scripts/chain-bins.sh`` builds by (v2.3.0), which must agree with the directory's name."""
    version = os.environ.get("NICGUARD_TRAINER_VERSION") or TRAINER_V2_3.version
    trainer = TRAINERS.get(version)
    if trainer is None or trainer is TRAINER_V2_1:  # before runtimePatches: not supported
        supported = sorted(set(TRAINERS) - {TRAINER_V2_1.version})
        raise RuntimeError(f"the chain tier runs Trainer {' or '.join(supported)}, not {version}")
    built = re.search(r"chain-trainer-(v[0-9.]+)-", bins.name)
    if built is not None and built.group(1) != version:
        raise RuntimeError(f"{bins} holds Trainer {built.group(1)}, not {version}")
    return trainer


def published(plane: ControlPlane, directory: Path) -> list[dict[str, Any]]:
    """The objects of a module's kustomize ``directory``, as ``kubectl apply -k`` sends them."""
    run = checked(plane.kubectl("admin", "kustomize", str(directory)), f"kustomize {directory}")
    return [doc for doc in yaml.safe_load_all(run.stdout) if isinstance(doc, dict)]


def crd_files(directory: Path) -> list[Path]:
    return sorted(f for f in directory.glob("*.yaml") if f.name != "kustomization.yaml")


def in_namespace(docs: list[dict[str, Any]], namespace: str, prefix: str) -> list[dict[str, Any]]:
    """``docs`` (RBAC) placed in ``namespace``, their names (and references to them) prefixed
    with ``prefix``, as the projects' kustomize overlays (``namespace:``, ``namePrefix:``) do."""
    placed: list[dict[str, Any]] = json.loads(json.dumps(docs))
    own = {doc["metadata"]["name"] for doc in placed}
    for doc in placed:
        doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
        if doc["kind"] in NAMESPACED_KINDS:
            doc["metadata"]["namespace"] = namespace
        if doc.get("roleRef", {}).get("name") in own:
            doc["roleRef"]["name"] = prefix + doc["roleRef"]["name"]
        for subject in doc.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                subject |= {"namespace": namespace, "name": prefix + subject["name"]}
    return placed


def service_account(plane: ControlPlane, rbac: list[dict[str, Any]], prefix: str = "") -> Path:
    """Apply a project's published RBAC in ``NAMESPACE`` (names prefixed as its overlay does); a
    kubeconfig with a token of its (only) ServiceAccount."""
    placed = in_namespace(rbac, NAMESPACE, prefix)
    checked(plane.kubectl("admin", "apply", "-f", "-", input=as_list(placed)), "applying RBAC")
    (account,) = (doc["metadata"]["name"] for doc in placed if doc["kind"] == "ServiceAccount")
    return plane.service_account_kubeconfig(NAMESPACE, account)


def serving_pair(ca: KeyPair, directory: Path, *hosts: str) -> None:
    """``tls.crt``/``tls.key`` for 127.0.0.1 and ``hosts``, signed by ``ca``, in ``directory``."""
    now = datetime.now(UTC)
    pair = leaf(ca, required_sans(hosts), lifetime=CERT_LIFETIME, now=now)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    (directory / "ca.crt").write_bytes(ca.cert_pem)


def register_webhooks(
    plane: ControlPlane, docs: list[dict[str, Any]], owner: str, base_url: str, ca: KeyPair
) -> None:
    """A project's own webhook configurations, each ``service:`` turned into ``url:`` on
    ``base_url`` (same path) trusting ``ca``; named after ``owner`` (the projects' generic names,
    ``validating-webhook-configuration``, would collide as their overlays' prefixes avoid)."""
    bundle = base64.b64encode(ca.cert_pem).decode("ascii")
    configs = [json.loads(json.dumps(doc)) for doc in docs if doc.get("kind") in WEBHOOK_KINDS]
    if not configs:
        raise RuntimeError(f"{owner} publishes no webhook configuration")
    for config in configs:
        config["metadata"] = {"name": f"{owner}-{config['metadata']['name']}"}
        for hook in config["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": bundle}
    checked(plane.kubectl("admin", "create", "-f", "-", input=as_list(configs)), f"{owner} hooks")


@dataclass(slots=True)
class Controller:
    """A controller process, ready once its health endpoint answers ``/readyz``."""

    name: str
    process: Process
    health_port: int

    def wait_ready(self) -> None:
        def ready() -> bool | None:
            if not self.process.running():
                raise RuntimeError(f"{self.name} exited\n{self.process.report()}")
            return http_status(f"http://127.0.0.1:{self.health_port}/readyz") == 200 or None

        wait_until(ready, timeout=READY_TIMEOUT, what=f"{self.name} /readyz", diagnose=self.report)

    def report(self) -> str:
        return self.process.report()


def launch(
    name: str, argv: list[str], workdir: Path, kubeconfig: Path, env: Mapping[str, str] = {}
) -> Process:
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KUBERNETES_SERVICE_", "KUBECONFIG"))
    }
    environment |= {"KUBECONFIG": str(kubeconfig), **env}
    return Process(name, argv, workdir / f"{name}.log", env=environment)


def start_trainer(plane: ControlPlane, bins: Path, workdir: Path, ca: KeyPair) -> Controller:
    """trainer-controller-manager: certificate management off, its serving certificate where
    controller-runtime looks by default (``$TMPDIR/k8s-webhook-server/serving-certs``, the
    webhook ``certDir`` its configuration does not expose), its own webhooks by ``url:``."""
    kubeconfig = service_account(plane, published(plane, bins / TRAINER_RBAC))
    webhook_port, health_port = free_ports(2)
    tmp = workdir / "trainer-tmp"
    serving_pair(ca, tmp / "k8s-webhook-server" / "serving-certs")
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port},
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
    }
    (workdir / "trainer-config.yaml").write_text(json.dumps(config))
    argv = [
        str(bins / "bin" / "trainer-controller-manager"),
        f"--config={workdir / 'trainer-config.yaml'}",
    ]
    process = launch("trainer-controller-manager", argv, workdir, kubeconfig, {"TMPDIR": str(tmp)})
    controller = Controller("trainer-controller-manager", process, health_port)
    docs = published(plane, bins / TRAINER_WEBHOOKS)
    register_webhooks(plane, docs, "trainer", f"https://127.0.0.1:{webhook_port}", ca)
    return controller


def start_jobset(plane: ControlPlane, bins: Path, workdir: Path, ca: KeyPair) -> Controller:
    """JobSet's manager: internal certificate management off, its webhooks by ``url:``."""
    kubeconfig = service_account(plane, published(plane, bins / JOBSET_RBAC), "jobset-")
    webhook_port, health_port = free_ports(2)
    certs = workdir / "jobset-certs"
    serving_pair(ca, certs)
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
    }
    (workdir / "jobset-config.yaml").write_text(json.dumps(config))
    argv = [str(bins / "bin" / "jobset"), f"--config={workdir / 'jobset-config.yaml'}"]
    argv += ["--metrics-bind-address=0", f"--health-probe-bind-address=127.0.0.1:{health_port}"]
    argv += ["--leader-elect=false"]
    process = launch("jobset", argv, workdir, kubeconfig)
    controller = Controller("jobset", process, health_port)
    docs = published(plane, bins / JOBSET_WEBHOOKS)
    register_webhooks(plane, docs, "jobset", f"https://127.0.0.1:{webhook_port}", ca)
    return controller


@dataclass(frozen=True, slots=True)
class Chain:
    """The e2e stack (control plane, nicguard registered as the e2e tier registers it, the
    example cluster state) with the controllers running."""

    stack: Stack
    controllers: tuple[Controller, ...]
    bins: Path  # what scripts/chain-bins.sh printed

    @property
    def plane(self) -> ControlPlane:
        return self.stack.plane

    @property
    def trainer(self) -> Trainer:
        return self.stack.trainer

    def report(self) -> str:
        return "\n".join([self.stack.report(), *(c.report() for c in self.controllers)])


@contextlib.contextmanager
def running_chain(workdir: Path) -> Iterator[Chain]:
    """Everything up: the modules' CRDs (and GKE's Network API), nicguard registered, Trainer
    and JobSet with their webhooks in effect, kube-controller-manager's ``job`` and
    ``garbagecollector`` controllers, ``examples/cluster`` applied."""
    bins = chain_dir()
    trainer = chain_trainer(bins)
    plane = ControlPlane(workdir)
    nicguard = Nicguard(plane, workdir)
    ca = authority("chain-webhooks-ca", CERT_LIFETIME, datetime.now(UTC))
    controllers: list[Controller] = []
    try:
        plane.start()
        crds = [*crd_files(bins / TRAINER_CRDS), *crd_files(bins / JOBSET_CRDS)]
        create_crds(plane, [*crds, *crd_files(NETWORK_API_CRDS)])
        config = install_base(plane)
        grant_developers(plane)
        create_namespace(plane, NAMESPACE)
        controllers.append(start_trainer(plane, bins, workdir, ca))
        controllers.append(start_jobset(plane, bins, workdir, ca))
        for controller in controllers:
            controller.wait_ready()
        plane.start_controller_manager("job", "garbagecollector")
        nicguard.start()
        register(plane, nicguard, config)
        stack = Stack(plane, nicguard, config, workdir, trainer)
        populate(stack)
        yield Chain(stack, tuple(controllers), bins)
    finally:
        try:
            for controller in controllers:
                controller.process.stop()
            nicguard.stop()
        finally:
            plane.stop()
