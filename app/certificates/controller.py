"""The self-managed certificate controller: one thread per replica, never the request path.

Each period (jittered) every replica reads the Secret and installs its pair into the cert dir (the
server reloads it), then reads the webhook configuration and records which recently installed
certificates verify against every webhook's caBundle (readiness). The replica holding the Lease
first plans (``app.certificates.rotation``) and writes: the Secret (create, or replace at the
resourceVersion read) and the caBundles (a strategic-merge patch by webhook name, at the
resourceVersion read). Failures are logged and retried with backoff; the last verified state is
kept meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from kubernetes.client import ApiClient, CoordinationV1Api

from app.certificates.api import CertApi, secret_data, webhooks
from app.certificates.certdir import CertFiles, install
from app.certificates.rotation import Lifetimes, plan_rotation, verifies
from app.domain.cluster import ObjectName
from app.kube.errors import describe
from app.kube.lease import LeaseLock

logger = logging.getLogger(__name__)

_KEPT_LEAVES: Final = 2  # the installed certificate and the one before (maybe still served)
NOT_VERIFIED: Final = "serving certificate does not verify against the webhook caBundle yet"


@dataclass(frozen=True, slots=True)
class Targets:
    """What the controller manages and how often it looks (seconds)."""

    secret: ObjectName
    webhook_configuration: str
    lease: ObjectName
    identity: str
    period: float = 10.0


@dataclass(frozen=True, slots=True)
class _Status:
    installed: bool = False
    verified: frozenset[str] = frozenset()  # fingerprints of leaves trusted by every webhook
    configured: bool = False  # the webhook configuration exists
    ca_not_after: datetime | None = None
    error: str | None = None


class CertController:
    """Start with ``start(on_installed)``; ``not_ready_because(served)`` feeds ``/readyz``."""

    def __init__(
        self,
        api_client: ApiClient,
        targets: Targets,
        *,
        cert_dir: Path,
        hosts: Sequence[str],
        lifetimes: Lifetimes,
    ) -> None:
        """Issues for ``hosts`` with ``lifetimes``; installs into ``cert_dir``."""
        self._api = CertApi(api_client, targets.secret, targets.webhook_configuration)
        self._lease = LeaseLock(
            CoordinationV1Api(api_client),
            targets.lease,
            targets.identity,
            duration_seconds=max(30, int(3 * targets.period)),
        )
        self._targets, self._files = targets, CertFiles.in_dir(cert_dir)
        self._hosts, self._lifetimes = tuple(hosts), lifetimes
        self._leaves: dict[str, bytes] = {}
        self._status = _Status()
        self._on_installed: Callable[[], None] = lambda: None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cert-controller", daemon=True)

    def start(self, on_installed: Callable[[], None]) -> None:
        """``on_installed`` runs (on this thread) after new files were written to the cert dir."""
        self._on_installed = on_installed
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread, then hand the Lease over (best effort) so another replica writes."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            return
        try:
            self._lease.release()
        except Exception as error:  # shutting down: say so, never raise
            logger.warning("could not release the Lease", extra={"error": describe(error)})

    def not_ready_because(self, served_fingerprint: str) -> str | None:
        status = self._status
        if not status.installed:
            detail = f" ({status.error})" if status.error else ""
            return f"waiting for the certificate Secret {self._targets.secret}{detail}"
        return None if served_fingerprint in status.verified else NOT_VERIFIED

    def verifies(self, served_fingerprint: str) -> bool:
        """For the gauge: trusted by every webhook of a configuration that exists."""
        status = self._status
        return status.configured and served_fingerprint in status.verified

    def ca_expiry(self) -> float | None:
        """Unix time at which the CA of the installed certificate expires (None: none yet)."""
        expiry = self._status.ca_not_after
        return None if expiry is None else expiry.timestamp()

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                self.sync(datetime.now(UTC))
                failures, delay = 0, self._targets.period
            except Exception as error:  # every failure is retried: the thread must live on
                failures += 1
                message = describe(error)
                self._status = replace(self._status, error=message)
                logger.warning("certificate controller failure", extra={"error": message})
                delay = min(self._targets.period, 0.5 * 2.0 ** min(failures, 16))
            self._stopping.wait(delay * random.uniform(0.8, 1.0))  # noqa: S311 - not a secret

    def sync(self, now: datetime) -> None:
        """One pass: lead if possible, then install and verify what the Secret holds."""
        leading = self._lead()
        secret, config = self._api.read_secret(), self._api.read_configuration()
        hooks = webhooks(config)
        if leading:
            plan = plan_rotation(
                secret_data(secret),
                [b for b, _ in hooks],
                hosts=self._hosts,
                lifetimes=self._lifetimes,
                now=now,
            )
            if plan.data is not None:
                logger.info(
                    "writing the certificate Secret",
                    extra={"secret": str(self._targets.secret), "actions": list(plan.actions)},
                )
                secret = self._api.write_secret(secret, plan.data)
            if config is not None and plan.patch_webhooks:
                config = self._api.patch_bundles(config, plan.bundle)
                hooks = webhooks(config)
        if secret is None:
            self._status = replace(self._status, error="not found; the Lease holder creates it")
            return
        installed = install(self._files, secret_data(secret) or {}, now)
        if installed.changed:
            logger.info("installed the Secret's certificate", extra={"fp": installed.fingerprint})
            self._on_installed()
        self._leaves.pop(installed.fingerprint, None)
        self._leaves[installed.fingerprint] = installed.leaf
        while len(self._leaves) > _KEPT_LEAVES:
            del self._leaves[next(iter(self._leaves))]
        verified = frozenset(
            fingerprint
            for fingerprint, leaf in self._leaves.items()
            if all(verifies(leaf, b, host, now) for b, host in hooks)
        )
        self._status = _Status(
            installed=True,
            verified=verified,
            configured=config is not None,
            ca_not_after=installed.ca_not_after,
        )

    def _lead(self) -> bool:
        was = self._lease.holding
        try:
            leading = self._lease.try_acquire_or_renew()
        except Exception as error:  # no writes this pass; installing and verifying go on
            logger.warning("Lease renewal failed", extra={"error": describe(error)})
            leading = False
        if leading != was:
            logger.info(
                "certificate writer" if leading else "no longer the certificate writer",
                extra={"lease": str(self._lease.name), "identity": self._lease.identity},
            )
        return leading
