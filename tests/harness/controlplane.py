"""A real etcd + kube-apiserver on loopback, with RBAC, token users, an audit log (always) and
OTLP tracing (opt-in).

Used by the e2e fixtures and by ``scripts/demo.py``. Binaries: ``$NICGUARD_K8S_BIN_DIR``, else
the directory ``scripts/k8s-bins.sh`` prints (it honours ``KUBEBUILDER_ASSETS`` and
``NICGUARD_KUBE_APISERVER``/``NICGUARD_ETCD``, and builds into a versioned cache when needed).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.harness.procs import Process, free_ports, http_status, tool, wait_until

ROOT: Final = Path(__file__).resolve().parents[2]
KUBECTL: Final = tool("kubectl")
START_TIMEOUT: Final = 90.0
KUBECTL_TIMEOUT: Final = 60.0
NICGUARD_SA: Final = "system:serviceaccount:nicguard-system:nicguard"
DRA_V1: Final = "resource.k8s.io/v1"
DRA_V1_MINOR: Final = 34
"""The first minor serving ``resource.k8s.io/v1`` (DRA GA, on by default); older ones serve none
of ``resource.k8s.io`` unless an admin turns its beta versions on (``beta_dra``)."""

# Metadata level for the Trainer resources nicguard judges: enough to carry auditAnnotations.
AUDIT_POLICY: Final = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: trainer.kubeflow.org
- level: None
"""

# Opt-in (``otlp_endpoint``): the apiserver samples no request of its own (rate 0) but, being
# parent-based, every request carrying a sampled W3C ``traceparent`` from a privileged user
# (system:masters), and exports its spans over OTLP/gRPC to the endpoint (``bench/burst.py``).
TRACING_CONFIG: Final = """\
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: {endpoint}
samplingRatePerMillion: 0
"""


@dataclass(frozen=True, slots=True)
class Identity:
    """A token-authenticated user with its own kubeconfig."""

    name: str
    user: str
    groups: tuple[str, ...]
    token: str


def identities() -> tuple[Identity, ...]:
    """``admin`` (system:masters), ``alice`` (non-admin), nicguard's ServiceAccount, and the
    controller manager (its bootstrap RBAC role lets it mint its controllers' credentials)."""
    groups = ("system:serviceaccounts", "system:serviceaccounts:nicguard-system")
    return (
        Identity("admin", "admin", ("system:masters",), secrets.token_hex(16)),
        Identity("alice", "alice", ("developers",), secrets.token_hex(16)),
        Identity("nicguard", NICGUARD_SA, groups, secrets.token_hex(16)),
        Identity("kcm", "system:kube-controller-manager", (), secrets.token_hex(16)),
    )


@dataclass(frozen=True, slots=True)
class Served:
    """What a running kube-apiserver says it is (``/version``) and whether discovery serves
    ``resource.k8s.io/v1``: the tiers branch on this, never on the binaries' name."""

    version: str  # gitVersion, e.g. v1.33.13
    minor: int
    dra_v1: bool

    def __str__(self) -> str:
        return f"kube-apiserver {self.version} ({DRA_V1} {'' if self.dra_v1 else 'not '}served)"


def beta_dra_args(minor: int) -> list[str]:
    """The flags with which an admin turns DRA's beta API on where ``minor`` has no v1: the gate
    (beta, off by default on 1.32 and 1.33), then v1beta1 (1.32+) and v1beta2 (1.33+)."""
    if minor >= DRA_V1_MINOR:
        return []
    versions = ["resource.k8s.io/v1beta1=true"]
    versions += ["resource.k8s.io/v1beta2=true"] if minor >= 33 else []
    return [
        "--feature-gates=DynamicResourceAllocation=true",
        f"--runtime-config={','.join(versions)}",
    ]


def binaries_dir() -> Path:
    """Where kube-apiserver and etcd are; fails (never skips) when they cannot be had."""
    explicit = os.environ.get("NICGUARD_K8S_BIN_DIR")
    if explicit:
        found = Path(explicit)
    else:
        script = ROOT / "scripts" / "k8s-bins.sh"
        run = subprocess.run([str(script)], capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"{script} failed ({run.returncode}):\n{run.stderr[-4000:]}")
        found = Path(run.stdout.strip())
    missing = [n for n in ("kube-apiserver", "etcd") if not os.access(found / n, os.X_OK)]
    if missing:
        raise RuntimeError(f"no executable {' and '.join(missing)} in {found} (make k8s-bins)")
    return found


class ControlPlane:
    """etcd and kube-apiserver in ``workdir``; ``stop()`` ends both by PID."""

    def __init__(
        self,
        workdir: Path,
        bin_dir: Path | None = None,
        apiserver_args: Sequence[str] = (),
        *,
        otlp_endpoint: str | None = None,
        etcd_fsync: bool = False,
        beta_dra: bool = False,
    ) -> None:
        """``otlp_endpoint`` (``host:port``, off by default): export the spans of requests that
        carry a sampled ``traceparent`` there (``TRACING_CONFIG``). ``etcd_fsync``: etcd syncs
        every write to disk, as a real one does (off: tests need no durability). ``beta_dra``:
        on a minor without ``resource.k8s.io/v1``, serve DRA's beta versions (``beta_dra_args``),
        as a cluster whose admin uses DRA there does."""
        self.workdir = workdir
        self.bin_dir = bin_dir or binaries_dir()
        self.users = {identity.name: identity for identity in identities()}
        self.processes: list[Process] = []  # etcd first, then the apiserver (stop() reverses)
        self.apiserver_args = list(apiserver_args)  # appended to the apiserver's own flags
        if beta_dra:
            self.apiserver_args[:0] = beta_dra_args(self.binary_minor())
        etcd_port, peer_port, self.port = free_ports(3)
        self.server = f"https://127.0.0.1:{self.port}"
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._peer_url = f"http://127.0.0.1:{peer_port}"
        self.cert_dir = workdir / "apiserver-certs"
        self.ca_file = self.cert_dir / "apiserver.crt"  # self-signed: serving cert + its CA
        self.audit_log = workdir / "audit.log"
        self.otlp_endpoint = otlp_endpoint
        self.etcd_fsync = etcd_fsync

    def start(self) -> None:
        """Start both and wait for the apiserver's /readyz; stops everything on failure."""
        try:
            self._start_etcd()
            self._start_apiserver()
            for identity in self.users.values():
                self._write_kubeconfig(identity)
        except BaseException:
            self.stop()
            raise

    def start_controller_manager(self, *controllers: str) -> None:
        """kube-controller-manager running ``controllers`` (the namespace controller, say) with
        per-controller service-account credentials, as kubeadm and GKE run it."""
        (port,) = free_ports(1)
        argv = [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig('kcm')}",
        ]
        argv += [f"--controllers={','.join(controllers)}", "--use-service-account-credentials=true"]
        argv += ["--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={port}"]
        argv += [f"--cert-dir={self.workdir / 'kcm-certs'}", "--v=1"]
        log = self.workdir / "kube-controller-manager.log"
        self.processes.append(Process("kube-controller-manager", argv, log))

    def service_account_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig with a token of ServiceAccount ``namespace/name`` (TokenRequest, a day)."""
        args = ["create", "token", name, "-n", namespace, "--duration=24h"]
        run = self.kubectl("admin", *args)
        if run.returncode != 0:
            raise RuntimeError(f"kubectl create token {namespace}/{name} failed: {run.stderr}")
        user = f"system:serviceaccount:{namespace}:{name}"
        self._write_kubeconfig(Identity(f"sa-{namespace}-{name}", user, (), run.stdout.strip()))
        return self.kubeconfig(f"sa-{namespace}-{name}")

    def stop(self) -> None:
        """Stop the apiserver, then etcd; each is attempted even if another fails."""
        errors: list[BaseException] = []
        for process in reversed(self.processes):
            try:
                process.stop()
            except BaseException as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def report(self) -> str:
        return "\n".join(process.report() for process in self.processes)

    def versions(self) -> str:
        """E.g. ``kube-apiserver v1.37.2, etcd 3.6.16`` as the binaries report themselves."""
        shown = []
        for name in ("kube-apiserver", "etcd"):
            run = subprocess.run(
                [str(self.bin_dir / name), "--version"], capture_output=True, text=True, check=False
            )
            words = (run.stdout.splitlines() or [""])[0].split()
            shown.append(f"{name} {words[-1] if words else '(unknown version)'}")
        return ", ".join(shown)

    def binary_minor(self) -> int:
        """The minor of the kube-apiserver binary (``--version``), known before it starts."""
        run = subprocess.run(
            [str(self.bin_dir / "kube-apiserver"), "--version"],
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"\bv1\.(\d+)\.", run.stdout)
        if found is None:
            raise RuntimeError(f"kube-apiserver --version printed no version: {run.stdout!r}")
        return int(found.group(1))

    def served(self) -> Served:
        """``/version`` and whether ``/apis/resource.k8s.io/v1`` answers (NotFound: not served)."""
        run = self.kubectl("admin", "get", "--raw", "/version")
        if run.returncode != 0:
            raise RuntimeError(f"GET /version failed: {run.stderr}")
        version = json.loads(run.stdout)
        probe = self.kubectl("admin", "get", "--raw", f"/apis/{DRA_V1}")
        if probe.returncode != 0 and "NotFound" not in probe.stderr:
            raise RuntimeError(f"GET /apis/{DRA_V1} failed: {probe.stderr}")
        minor = int(str(version["minor"]).rstrip("+"))
        return Served(str(version["gitVersion"]), minor, dra_v1=probe.returncode == 0)

    def kubeconfig(self, identity: str) -> Path:
        return self.workdir / f"kubeconfig-{identity}"

    def kubectl(
        self,
        identity: str,
        *args: str,
        input: str | None = None,  # noqa: A002
        timeout: float = KUBECTL_TIMEOUT,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``kubectl`` as ``identity``; never raises on a non-zero exit status."""
        argv = [str(KUBECTL), f"--kubeconfig={self.kubeconfig(identity)}"]
        argv += [f"--cache-dir={self.workdir / 'kubectl-cache'}", *args]
        return subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )

    def audit_events(self) -> Iterator[dict[str, object]]:
        with contextlib.suppress(FileNotFoundError), self.audit_log.open() as lines:
            for line in lines:
                with contextlib.suppress(ValueError):
                    yield json.loads(line)

    # --- faults: stop and start one component, same ports, same data (tests/e2e/test_faults.py)

    def stop_apiserver(self, *, crash: bool = False) -> None:
        """Stop kube-apiserver by PID (etcd keeps running); ``start_apiserver`` brings it back.

        ``crash``: SIGKILL instead of SIGTERM (v1.37.2 lingers ~10 s after a SIGTERM once it has
        stopped listening, until ``Process.stop`` kills it anyway)."""
        self._stop_named("kube-apiserver", crash=crash)

    def start_apiserver(self, extra_args: Sequence[str] = (), *, wait: bool = True) -> None:
        """Start kube-apiserver again on the same port, certificates, tokens and etcd."""
        if any(p.name == "kube-apiserver" for p in self.processes):
            raise RuntimeError("kube-apiserver is already running")
        self._launch_apiserver(extra_args)
        if wait:
            self.wait_apiserver_ready()

    def stop_etcd(self, *, crash: bool = False) -> None:
        """Stop etcd by PID (the apiserver keeps running); ``start_etcd`` brings it back."""
        self._stop_named("etcd", crash=crash)

    def start_etcd(self, *, wait: bool = True) -> None:
        """Start etcd again on the same ports and data directory."""
        if any(p.name == "etcd" for p in self.processes):
            raise RuntimeError("etcd is already running")
        self._launch_etcd()
        if wait:
            self.wait_etcd_healthy()

    def apiserver_ready(self) -> bool:
        """Whether kube-apiserver answers /readyz with 200 now (never raises)."""
        if not any(p.name == "kube-apiserver" and p.running() for p in self.processes):
            return False
        context = self.trust()
        token = self.users["admin"].token
        return context is not None and (
            http_status(f"{self.server}/readyz", context=context, token=token) == 200
        )

    def wait_apiserver_ready(self, timeout: float = START_TIMEOUT) -> None:
        wait_until(
            lambda: (self._alive() and self.apiserver_ready()) or None,  # a dead process fails
            timeout=timeout,
            what="kube-apiserver /readyz",
            diagnose=self.report,
        )

    def wait_etcd_healthy(self, timeout: float = START_TIMEOUT) -> None:
        wait_until(
            lambda: (self._alive() and http_status(f"{self.etcd_url}/health") == 200) or None,
            timeout=timeout,
            what="etcd /health",
            diagnose=self.report,
        )

    def etcd(self, method: str, body: dict[str, object]) -> dict[str, object]:
        """One call of etcd's v3 HTTP/JSON gateway (``kv/range``, ``kv/put``, ``kv/compaction``...).

        Keys and values travel base64-encoded, as the gateway requires; answers are decoded JSON.
        """
        request = urllib.request.Request(  # noqa: S310 - our own etcd, on loopback
            f"{self.etcd_url}/v3/{method}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310
            answer: dict[str, object] = json.loads(reply.read())
        return answer

    def etcd_revision(self) -> int:
        """etcd's current revision (every write anywhere in the cluster bumps it)."""
        header = self.etcd("kv/range", {"key": _b64("/registry/health")}).get("header")
        if not isinstance(header, dict):
            raise RuntimeError(f"etcd range answered without a header: {header!r}")
        return int(header["revision"])

    def etcd_delete(self, key: str) -> int:
        """Delete ``key`` behind the apiserver's back; returns how many keys were deleted."""
        return int(str(self.etcd("kv/deleterange", {"key": _b64(key)}).get("deleted", "0")))

    def etcd_compact(self, revision: int) -> None:
        """Compact etcd's history up to ``revision`` (watches from before it get 410 Gone)."""
        self.etcd("kv/compaction", {"revision": str(revision), "physical": True})

    def _stop_named(self, name: str, *, crash: bool) -> None:
        (process,) = (p for p in self.processes if p.name == name)
        try:
            if crash:
                process.kill()
            else:
                process.stop()
        finally:
            self.processes.remove(process)

    def _start_etcd(self) -> None:
        self._launch_etcd()
        self.wait_etcd_healthy()

    def _launch_etcd(self) -> None:
        data = self.workdir / "etcd-data"
        argv = [str(self.bin_dir / "etcd"), "--name=default", f"--data-dir={data}"]
        argv += [
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
        ]
        argv += [f"--listen-peer-urls={self._peer_url}"]
        argv += [f"--initial-advertise-peer-urls={self._peer_url}"]
        argv += [f"--initial-cluster=default={self._peer_url}"]
        argv += [f"--unsafe-no-fsync={'false' if self.etcd_fsync else 'true'}"]
        argv += ["--log-level=warn"]
        self.processes.insert(0, Process("etcd", argv, self.workdir / "etcd.log"))

    def _start_apiserver(self) -> None:
        (self.workdir / "tokens.csv").write_text(
            "".join(
                f'{u.token},{u.user},{u.name},"{",".join(u.groups)}"\n' for u in self.users.values()
            )
        )
        (self.workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        if self.otlp_endpoint is not None:
            tracing = TRACING_CONFIG.format(endpoint=self.otlp_endpoint)
            (self.workdir / "tracing.yaml").write_text(tracing)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.workdir / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self._launch_apiserver()
        self.wait_apiserver_ready()

    def _launch_apiserver(self, extra_args: Sequence[str] = ()) -> None:
        w = self.workdir
        argv = [str(self.bin_dir / "kube-apiserver"), f"--etcd-servers={self.etcd_url}"]
        argv += ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
        argv += [f"--secure-port={self.port}", f"--cert-dir={self.cert_dir}"]
        argv += ["--endpoint-reconciler-type=none", "--service-cluster-ip-range=10.0.0.0/24"]
        argv += [f"--service-account-issuer={self.server}"]
        argv += [f"--service-account-key-file={w / 'sa.key'}"]
        argv += [f"--service-account-signing-key-file={w / 'sa.key'}"]
        argv += [f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=RBAC"]
        argv += ["--disable-admission-plugins=ServiceAccount"]
        argv += [f"--audit-policy-file={w / 'audit-policy.yaml'}"]
        argv += [f"--audit-log-path={self.audit_log}", "--audit-log-format=json"]
        if self.otlp_endpoint is not None:
            argv += [f"--tracing-config-file={w / 'tracing.yaml'}"]
        argv += ["--profiling=false", "--v=1", *self.apiserver_args, *extra_args]
        self.processes.append(Process("kube-apiserver", argv, w / "kube-apiserver.log"))

    def _alive(self) -> bool:
        """Whether every process still runs; a dead one fails the wait at once."""
        dead = [p.name for p in self.processes if not p.running()]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited\n{self.report()}")
        return True

    def trust(self) -> ssl.SSLContext | None:
        """A context trusting the apiserver's self-signed certificate; None until the apiserver
        has written it whole (it writes the file in place while starting: it can be empty)."""
        try:
            return ssl.create_default_context(cafile=str(self.ca_file))
        except (OSError, ssl.SSLError):  # absent, or not yet a whole certificate
            return None

    def _write_kubeconfig(self, identity: Identity) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": identity.name, "user": {"token": identity.token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": identity.name}}],
            "current-context": "e2e",
        }
        path = self.kubeconfig(identity.name)
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")
