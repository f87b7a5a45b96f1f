"""Composition root for ``nicguard serve``: builds the cluster view, TLS, apps and servers.

The only module that knows every concrete piece; everything else receives what it needs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

import uvicorn

from app.audit.auditor import Auditor
from app.audit.claimant_sweep import ClaimantSweep
from app.audit.writer import Writer
from app.certificates.certdir import ensure_cert_dir
from app.certificates.pem import check_pair
from app.certificates.rotation import Lifetimes
from app.certificates.tls import CertReloader, server_ssl_context
from app.config import ServeOptions, Settings, serve_options
from app.domain.claimant_audit import ClaimantBook
from app.domain.cluster import (
    CacheStatus,
    ClusterSnapshot,
    ClusterView,
)
from app.domain.drift import EVERYTHING
from app.files.state import state_snapshot
from app.heap import freeze_startup, limit_malloc_arenas, sweep_cycles
from app.logs import configure_logging, serve_as_secondary
from app.metrics import Metrics
from app.web.admission import create_admission_app, over_budget_app
from app.web.body_budget import BodyBudget
from app.web.connection_limits import Bodies, Closed, LimitedServer, limited_config
from app.web.probes import create_probe_app

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from app.certificates.controller import CertController
    from app.kube.cluster_view import KubeClusterView
    from app.kube.events import EventRecorder

logger = logging.getLogger(__name__)

# uvicorn's bound on finishing in-flight requests at shutdown (the body read timeout is 10 s).
_DRAIN_SECONDS: Final = 10
# Longer than the apiserver's idle timeout for webhook connections (Go's 90 s): the client, not
# us, closes idle ones, so it never sends a review on a connection we are closing (a failed
# call, denied under failurePolicy Fail), and sparse traffic does not pay a handshake per call.
_KEEP_ALIVE_SECONDS: Final = 120

# A killed writer is replaced within this; renewed every 2 s (app.audit.writer.RENEW_SECONDS).
AUDIT_LEASE_SECONDS: Final = 15

CacheStatuses = Callable[[], Iterable[CacheStatus]]
Stopper = Callable[[], None]


@dataclass(slots=True)
class _Lifecycle:
    """Process state the probes read: draining starts at SIGTERM."""

    draining: bool = False


class _Server(LimitedServer):
    """A uvicorn server that leaves signals to nicguard: two servers share one process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def serve(args: argparse.Namespace, settings: Settings, environ: Mapping[str, str]) -> int:
    configure_logging(settings.log_level)
    limit_malloc_arenas()  # before any thread starts
    options = serve_options(args, environ)
    view: ClusterView
    if options.state is not None:
        snapshot, statuses = _file_view(options.state, settings)
        auditor = _file_audit(snapshot, settings)
        view, certs = snapshot, None
        stop_view: Stopper = auditor.stop
        fetch_runtime, alive = None, _always
        claimants: ClaimantBook | None = None
    else:
        kube = _kubernetes(options, settings)
        view, statuses, stop_view, certs = kube.view, kube.view.status, kube.stop, kube.certs
        auditor, fetch_runtime, alive = kube.auditor, kube.view.fetch_runtime, kube.alive
        claimants = kube.sweep.book
    cert, key = _tls_files(options)
    reloader = CertReloader(server_ssl_context(cert, key, client_ca=options.client_ca), cert, key)
    metrics = Metrics(statuses, audit=(auditor.book, lambda: auditor.last_change))
    if (book := claimants) is not None:
        metrics.claimants.watch(lambda: book.failing_codes)
    lifecycle = _Lifecycle()

    def readiness() -> tuple[bool, list[CacheStatus], list[str]]:
        caches = list(statuses())
        reasons = [f"cache {c.name}: {c.error or 'syncing'}" for c in caches if not c.synced]
        if certs is not None and (why := certs.not_ready_because(reloader.info.fingerprint)):
            reasons.append(why)
        if lifecycle.draining:
            reasons.append("shutting down")
        return not reasons, caches, reasons

    if certs is not None:
        verifies = certs.verifies
        metrics.certificates.watch(lambda: verifies(reloader.info.fingerprint), certs.ca_expiry)
    admission = create_admission_app(
        view=view,
        policy=settings.policy,
        metrics=metrics,
        draining=lambda: lifecycle.draining,
        fetch_runtime=fetch_runtime,
        recipe=settings.recipe_configmap,
    )
    probes = create_probe_app(readiness=readiness, liveness=alive, metrics=metrics)
    # Both listeners cap their connections and give each request a deadline
    # (app/web/connection_limits.py, docs/operations.md "Hostile clients"); the webhook's TLS
    # starts once a connection has a place, and its request bodies share one budget.
    webhook = _Server(
        limited_config(
            admission,
            host=options.host,
            port=options.port,
            tls=reloader.context,
            on_closed=metrics.closing("webhook", Closed),
            bodies=Bodies(
                BodyBudget(options.body_budget), over_budget_app(metrics, options.body_budget)
            ),
            access_log=False,
            log_config=None,
            timeout_graceful_shutdown=_DRAIN_SECONDS,
            timeout_keep_alive=_KEEP_ALIVE_SECONDS,
        )
    )
    probe = _Server(
        limited_config(
            probes,
            host=options.host,
            port=options.probe_port,
            tls=None,
            on_closed=metrics.closing("probes", Closed),
            access_log=False,
            log_config=None,
        )
    )
    tls = _Tls(reloader, certs, options.cert_period)
    freeze_startup()
    try:
        # The loop limited_config names (uvloop): uvicorn's own run would create it the same way.
        with asyncio.Runner(loop_factory=webhook.config.get_loop_factory()) as runner:
            runner.run(_run(webhook, probe, tls, metrics, lifecycle, options.shutdown_delay))
    finally:
        stop_view()
        if certs is not None:
            certs.stop()  # after draining: hands the Lease to another replica
    return 0


@dataclass(frozen=True, slots=True)
class _Tls:
    reloader: CertReloader
    certs: CertController | None
    period: float


async def _run(
    webhook: uvicorn.Server,
    probe: uvicorn.Server,
    tls: _Tls,
    metrics: Metrics,
    lifecycle: _Lifecycle,
    shutdown_delay: float,
) -> None:
    loop = asyncio.get_running_loop()
    stop, installed = asyncio.Event(), asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def wake() -> None:  # the controller thread installed new files: reload them now
        loop.call_soon_threadsafe(installed.set)

    if tls.certs is not None:
        tls.certs.start(on_installed=wake)
    # One process, two servers: the probes' copy of uvicorn's start/stop lines is left out.
    servers = [
        asyncio.create_task(webhook.serve()),
        asyncio.create_task(serve_as_secondary(probe.serve())),
    ]
    watcher = asyncio.create_task(_watch_certificate(tls, metrics, installed))
    sweeper = asyncio.create_task(sweep_cycles())
    done, _ = await asyncio.wait(
        [*servers, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    # Graceful shutdown: fail readiness first so endpoints drop us, keep serving for the delay
    # (answers to /validate carry Connection: close meanwhile, so clients reconnect elsewhere),
    # then stop accepting, close idle keep-alive connections and finish in-flight requests
    # (uvicorn's shutdown, bounded by timeout_graceful_shutdown).
    lifecycle.draining = True
    logger.info("shutting down", extra={"shutdown_delay_seconds": shutdown_delay})
    if shutdown_delay and not any(task in done for task in servers):
        await asyncio.sleep(shutdown_delay)
    webhook.should_exit = probe.should_exit = True
    watcher.cancel()
    sweeper.cancel()
    await asyncio.gather(*servers, return_exceptions=True)


async def _watch_certificate(tls: _Tls, metrics: Metrics, installed: asyncio.Event) -> None:
    """Reload every period, and at once when the controller has installed new files."""
    while True:
        metrics.cert_expiry.set(tls.reloader.not_after.timestamp())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(tls.period):
                await installed.wait()
        installed.clear()
        tls.reloader.maybe_reload()


def _tls_files(options: ServeOptions) -> tuple[Path, Path]:
    if options.tls_cert is not None and options.tls_key is not None:
        check_pair(options.tls_cert, options.tls_key)
        return options.tls_cert, options.tls_key
    files = ensure_cert_dir(options.cert_dir, options.hosts)
    return files.cert, files.key


def _always() -> bool:
    """File mode has no cache threads that could die: the process answering is alive."""
    return True


def _file_audit(view: ClusterSnapshot, settings: Settings) -> Auditor:
    """The static state judged once, so the audit metrics say the same as ``nicguard audit``;
    on the audit's thread, so answering does not wait for it (100,000 runtimes: ~6 s)."""
    auditor = Auditor(lambda: view, settings.policy)
    auditor.start()
    auditor.notify(EVERYTHING)
    return auditor


def _file_view(state: Path, settings: Settings) -> tuple[ClusterSnapshot, CacheStatuses]:
    snapshot = state_snapshot(state, settings.recipe_configmap, logger.info)
    logger.info("serving in file mode", extra={"state": str(state)})
    return snapshot, lambda: [CacheStatus(name="files", synced=True)]


@dataclass(frozen=True, slots=True)
class _Kubernetes:
    """What Kubernetes mode runs beside the servers: caches, audit, writer, certificates."""

    view: KubeClusterView
    auditor: Auditor
    writer: Writer
    sweep: ClaimantSweep
    certs: CertController | None

    def alive(self) -> bool:
        """Every thread that keeps nicguard's picture and its audit current still runs."""
        threads = (self.view, self.auditor, self.writer, self.sweep)
        return all(thread.alive() for thread in threads)

    def stop(self) -> None:
        self.view.stop()
        self.auditor.stop()
        self.sweep.stop()
        self.writer.stop()  # hands the auditor Lease to another replica


def _kubernetes(options: ServeOptions, settings: Settings) -> _Kubernetes:
    """The caches (started, synced or timed out), the audit and its writer (started), and the
    certificate controller (not started)."""
    # Imported here: file mode (make run, benchmarks) does not pay ~90 MiB of RSS for the client.
    from app.certificates.controller import CertController, Targets
    from app.kube.client import load_api_client
    from app.kube.cluster_view import KubeClusterView
    from app.kube.events import EventRecorder
    from app.kube.listing import list_claimants

    api_client = load_api_client()
    view = KubeClusterView.from_api_client(api_client, settings.recipe_configmap)
    auditor = Auditor(view.snapshot, settings.policy)
    events = EventRecorder(api_client, options.pod_name)
    writer = _audit_writer(api_client, auditor, events, options, settings)
    sweep = ClaimantSweep(
        partial(list_claimants, api_client),
        view.snapshot,
        settings.policy,
        events,
        lambda: writer.leading,
    )
    view.subscribe(auditor.notify)  # before the caches start: their first lists are changes
    view.subscribe(sweep.notify)
    auditor.start()
    writer.start()
    sweep.start()
    view.start()
    if not view.wait_synced(options.sync_timeout):
        logger.warning("caches not synced yet; serving ClusterStateUnavailable until they are")

    if (certs := options.certs) is None:
        return _Kubernetes(view, auditor, writer, sweep, None)
    targets = Targets(
        secret=certs.secret,
        webhook_configuration=certs.webhook_configuration,
        lease=certs.lease,
        identity=certs.pod_name,
        period=options.cert_period,
    )
    logger.info("self-managed certificates", extra={"secret": str(certs.secret)})
    lifetimes = Lifetimes(ca=certs.ca_lifetime, leaf=certs.cert_lifetime)
    controller = CertController(
        api_client, targets, cert_dir=options.cert_dir, hosts=options.hosts, lifetimes=lifetimes
    )
    return _Kubernetes(view, auditor, writer, sweep, controller)


def _audit_writer(
    api_client: ApiClient,
    auditor: Auditor,
    events: EventRecorder,
    options: ServeOptions,
    settings: Settings,
) -> Writer:
    from kubernetes.client import CoordinationV1Api

    from app.kube.lease import LeaseLock
    from app.kube.reports import ReportWriter

    lock = LeaseLock(
        CoordinationV1Api(api_client),
        options.audit_lease,
        options.pod_name,
        duration_seconds=AUDIT_LEASE_SECONDS,
    )
    writer = Writer(
        auditor.book,
        lambda: auditor.judged_all,
        lock,
        events,
        ReportWriter(api_client, settings.reports),
    )
    auditor.subscribe(writer.changed)
    return writer
