"""Prometheus metrics, on a registry of their own per server instance."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.admission_counts import AdmissionCounts
from app.domain.cluster import CacheStatus
from app.domain.drift import DriftBook, Result
from app.domain.verdict import Code, Verdict

# Admission latencies are sub-millisecond to a few ms; the apiserver's own webhook buckets
# (5 ms .. 25 s) are too coarse below 5 ms.
_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _CacheCollector(Collector):
    """Reads cache state at scrape time, so gauges are never stale."""

    def __init__(self, statuses: Callable[[], Iterable[CacheStatus]]) -> None:
        self._statuses = statuses

    def collect(self) -> Iterable[GaugeMetricFamily]:
        synced = GaugeMetricFamily(
            "nicguard_cache_synced", "1 when the cluster-state cache is synced", labels=["cache"]
        )
        age = GaugeMetricFamily(
            "nicguard_cache_last_event_age_seconds",
            "Seconds since the cache last saw an event or a (re)list",
            labels=["cache"],
        )
        for status in self._statuses():
            synced.add_metric([status.name], 1.0 if status.synced else 0.0)
            if status.last_event_age_seconds is not None:
                age.add_metric([status.name], status.last_event_age_seconds)
        yield synced
        yield age


class _AuditCollector(Collector):
    """The audit's counts at scrape time (docs/audit.md); zeros until the first pass."""

    def __init__(self, book: DriftBook, last_change: Callable[[], float | None]) -> None:
        self._book, self._last_change = book, last_change

    def collect(self) -> Iterable[GaugeMetricFamily]:
        results = GaugeMetricFamily(
            "nicguard_audit_runtimes", "Runtimes by current audit result", labels=["result"]
        )
        counted = dict(self._book.results)  # one C-level copy: the auditor thread writes it
        for result in Result:
            results.add_metric([result.value], float(counted.get(result, 0)))
        violations = GaugeMetricFamily(
            "nicguard_audit_violations", "Runtimes currently failing, per code", labels=["code"]
        )
        for code, count in sorted(dict(self._book.failing_codes).items()):
            violations.add_metric([code.value], float(count))
        yield results
        yield violations
        last = self._last_change()
        yield GaugeMetricFamily(
            "nicguard_audit_last_change_timestamp_seconds",
            "Unix time of the last change of any runtime's audit result (0: none yet)",
            value=0.0 if last is None else last,
        )


class _CertificateCollector(Collector):
    """What only the self-managed certificate controller knows. Without it (file mode, cert-manager,
    bring-your-own certificates) the families carry no sample: absent, not 0, so an alert on them
    cannot fire falsely; ``watch()`` connects the controller."""

    def __init__(self) -> None:
        self._verifies: Callable[[], bool] | None = None
        self._ca_expiry: Callable[[], float | None] = lambda: None

    def watch(self, verifies: Callable[[], bool], ca_expiry: Callable[[], float | None]) -> None:
        self._verifies, self._ca_expiry = verifies, ca_expiry

    def collect(self) -> Iterable[GaugeMetricFamily]:
        ca = GaugeMetricFamily(
            "nicguard_ca_certificate_expiry_timestamp_seconds",
            "Unix time at which the CA signing the served certificate expires",
        )
        if (expiry := self._ca_expiry()) is not None:
            ca.add_metric([], expiry)
        bundle = GaugeMetricFamily(
            "nicguard_cabundle_verifies",
            "1 when the served certificate verifies against the caBundle of every webhook "
            "of the webhook configuration, else 0 (also when the configuration is absent)",
        )
        if self._verifies is not None:
            bundle.add_metric([], 1.0 if self._verifies() else 0.0)
        yield ca
        yield bundle


class _ClaimantCollector(Collector):
    """What the sweep of the snapshots and workloads that name templates found, on the replica
    that writes (docs/dra.md); without a sweep (file mode) the family carries no sample."""

    def __init__(self) -> None:
        self._failing: Callable[[], Mapping[Code, int]] | None = None

    def watch(self, failing: Callable[[], Mapping[Code, int]]) -> None:
        self._failing = failing

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "nicguard_audit_claimant_violations",
            "Runtime snapshots, JobSets, Jobs and Pods that the templates they name fail, per "
            "code, as the last sweep of their namespace found (the replica that writes)",
            labels=["code"],
        )
        if self._failing is not None:
            for code, count in sorted(self._failing().items()):
                family.add_metric([code.value], float(count))
        yield family


class Metrics:
    """All nicguard metrics; ``render()`` gives the text exposition format."""

    def __init__(
        self,
        statuses: Callable[[], Iterable[CacheStatus]],
        audit: tuple[DriftBook, Callable[[], float | None]] | None = None,
    ) -> None:
        """``audit``: the book the audit keeps and when it last changed (None: no audit)."""
        self.registry = CollectorRegistry()
        # Every review updates these: counted by a collector of nicguard's own.
        self.admissions = AdmissionCounts(_BUCKETS)
        self.registry.register(self.admissions)
        self.rejected = Counter(
            "nicguard_malformed_requests",
            "Requests refused unjudged: an HTTP 4xx, or 503 beyond the body budget",
            ["status"],
            registry=self.registry,
        )
        self.dropped = Counter(
            "nicguard_reviews_dropped",
            "Reviews whose client had gone before they were decoded or judged (so they were "
            "not), by the queue they waited in: event_loop, judging, yaml",
            ["queue"],
            registry=self.registry,
        )
        self.connections_closed = Counter(
            "nicguard_connections_closed",
            "Connections nicguard closed for breaking a limit, by listener and reason",
            ["listener", "reason"],
            registry=self.registry,
        )
        # Kubernetes mode binds every outcome (reading_runtimes); file mode reads no runtime, so
        # the family carries no sample there.
        self.runtime_reads = Counter(
            "nicguard_runtime_reads",
            "Reads of a TrainJob's runtime the synced cache lacks, by outcome: found, not_found "
            "and failed once per GET; remembered, joined, refused and timed_out once per request",
            ["outcome"],
            registry=self.registry,
        )
        self.cert_expiry = Gauge(
            "nicguard_certificate_expiry_timestamp_seconds",
            "Unix time at which the served certificate expires",
            registry=self.registry,
        )
        # Self-managed certificates only (app.serve connects app.certificates.controller).
        self.certificates = _CertificateCollector()
        self.registry.register(self.certificates)
        self.registry.register(_CacheCollector(statuses))
        # Kubernetes mode only (app.serve connects app.audit.claimant_sweep).
        self.claimants = _ClaimantCollector()
        self.registry.register(self.claimants)
        if audit is not None:
            self.registry.register(_AuditCollector(*audit))

    def observe(
        self, *, verdict: Verdict, kind: str, operation: str, dry_run: bool, seconds: float
    ) -> None:
        self.admissions.observe(
            (verdict.decision, kind, operation, dry_run),
            seconds,
            [violation.code for violation in verdict.violations],  # a Code is its value, a str
        )

    def closing(self, listener: str, reasons: Iterable[str]) -> Callable[[str], None]:
        """Counts the connections ``listener`` closes; every reason is exported (0) from now."""
        return _counting(self.connections_closed, reasons, listener)

    def dropping(self, queues: Iterable[str]) -> Callable[[str], None]:
        """Counts the reviews dropped because their client had gone; every queue is exported
        (0) from now."""
        return _counting(self.dropped, queues)

    def reading_runtimes(self, outcomes: Iterable[str]) -> Callable[[str], None]:
        """Counts the runtime reads' outcomes; every outcome is exported (0) from now."""
        return _counting(self.runtime_reads, outcomes)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _counting(counter: Counter, last: Iterable[str], *first: str) -> Callable[[str], None]:
    """Increments ``counter``'s child labelled ``*first`` and the value given, one of ``last``:
    each child bound now (exported as 0 from now on), none looked up per call."""
    children = {value: counter.labels(*first, value) for value in last}

    def count(value: str) -> None:
        children[value].inc()

    return count
