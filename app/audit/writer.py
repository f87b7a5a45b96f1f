"""The one replica that speaks for the audit (holder of Lease ``nicguard-auditor``): Events on
runtimes whose findings changed, policy reports of the current standings.

What was already said is read back from the Events at each takeover, so a new writer (or a
restarted one) repeats nothing. Events per runtime are rate limited like client-go's spam filter
(a burst, then one per interval); reports are written at most once per interval each.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from app.audit.loop import WokenLoop
from app.domain.cluster import RuntimeKey
from app.domain.drift import DriftBook, Standing, Transition
from app.domain.fields import JsonMap
from app.domain.policy_reports import Audited, ReportApi, event_reason, report, report_namespace

logger = logging.getLogger(__name__)

RENEW_SECONDS: Final = 2.0
REPORT_SECONDS: Final = 2.0  # docs/audit.md: at most one write per report per 2 s
RESOLVE_SECONDS: Final = 30.0  # how often a writer without a report API looks for one again


class Lock(Protocol):
    """A leader lock (``app.kube.lease.LeaseLock``)."""

    def try_acquire_or_renew(self) -> bool: ...

    def release(self) -> None: ...


class EventSink(Protocol):
    def published(self) -> dict[RuntimeKey, str]:
        """The fingerprint of the newest audit Event per runtime (``""`` for a restore)."""
        ...

    def emit(self, key: RuntimeKey, reason: str, standing: Standing) -> None: ...


class ReportSink(Protocol):
    def resolve(self) -> ReportApi | None:
        """The API to write now (the setting, or what the cluster serves), None for none."""
        ...

    def namespaces(self, api: ReportApi) -> set[str]:
        """Namespaces holding a nicguard report (``""``: the cluster report)."""
        ...

    def write(self, api: ReportApi, body: JsonMap) -> None: ...

    def remove(self, api: ReportApi, namespace: str) -> None: ...


@dataclass(slots=True)
class EventBudget:
    """Per-runtime token bucket: ``burst`` Events, then one per ``refill`` seconds."""

    burst: int = 25
    refill: float = 300.0
    _tokens: dict[RuntimeKey, tuple[float, float]] = field(default_factory=dict)

    def take(self, key: RuntimeKey, now: float) -> float:
        """0 when an Event may go now (a token is spent), else seconds until one may."""
        tokens, since = self._tokens.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - since) / self.refill)
        if tokens < 1.0:
            self._tokens[key] = (tokens, now)
            return (1.0 - tokens) * self.refill
        self._tokens[key] = (tokens - 1.0, now)
        return 0.0

    def forget_full(self, now: float) -> None:
        """Drop buckets that have refilled: memory only for runtimes that spoke lately."""
        full = [
            k for k, (t, s) in self._tokens.items() if t + (now - s) / self.refill >= self.burst
        ]
        for key in full:
            del self._tokens[key]


class Writer(WokenLoop):
    """Start with ``start()``; the auditor calls ``changed`` with each pass's transitions."""

    def __init__(
        self,
        book: DriftBook,
        ready: Callable[[], bool],
        lock: Lock,
        events: EventSink,
        reports: ReportSink,
        *,
        budget: EventBudget | None = None,
        renew: float = RENEW_SECONDS,
        report_interval: float = REPORT_SECONDS,
        resolve_every: float = RESOLVE_SECONDS,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("audit-writer")
        self._book, self._ready, self._lock = book, ready, lock
        self._events, self._reports = events, reports
        self._budget = budget or EventBudget()
        self._renew, self._report_interval, self._wall = renew, report_interval, wall
        self._resolve_every = resolve_every
        self.leading = False
        self._published: dict[RuntimeKey, str] = {}
        self._api: ReportApi | None = None
        self._dirty: set[RuntimeKey] = set()
        self._dirty_reports: set[str] = set()
        self._next_renew = 0.0
        self._next_report = 0.0
        self._next_resolve = float("inf")
        self._next_event = float("inf")

    def changed(self, transitions: list[Transition]) -> None:
        with self._wake:
            for transition in transitions:
                key = transition.key
                # Only findings (or something said about them) can call for an Event: a runtime
                # first seen passing is in its report, not in the writer's memory.
                if (
                    _has_findings(transition.before)
                    or _has_findings(transition.after)
                    or key in self._published
                ):
                    self._dirty.add(key)
                self._dirty_reports.add(report_namespace(key))
            self._wake.notify_all()

    def stop(self, timeout: float = 2.0) -> None:
        """End the thread and hand the Lease over at once (SIGTERM, rollout)."""
        super().stop(timeout)
        try:
            self._lock.release()
        except Exception as error:  # the Lease then expires on its own
            logger.warning("releasing the auditor Lease failed", extra={"error": str(error)})

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._stopping.is_set():
                    return
            now = time.monotonic()
            try:
                if now >= self._next_renew:
                    self._lead(now)
                if self.leading and self._ready():  # a partial book would say partial things
                    self._speak(now)
            except Exception as error:  # the API failed: say so, try again next period
                logger.warning("audit writer failed", extra={"error": str(error)[:300]})
                self._next_renew = min(self._next_renew, now + self._renew)
            with self._wake:
                if self._stopping.is_set():
                    return
                due = min(self._next_renew, self._due())
                self._wake.wait(max(0.0, due - time.monotonic()))

    def _due(self) -> float:
        if not self.leading:
            return float("inf")
        if not self._ready():
            return time.monotonic() + self._renew
        due = self._next_event
        if self._dirty:
            due = min(due, time.monotonic())
        if self._dirty_reports:
            due = min(due, self._next_report)
        return due

    def _lead(self, now: float) -> None:
        self._next_renew = now + self._renew
        try:
            holding = self._lock.try_acquire_or_renew()
        except Exception as error:
            logger.warning("auditor Lease not renewed", extra={"error": str(error)[:300]})
            holding = False
        if holding and not self.leading:
            self._take_over(now)
        elif holding and self._api is None and now >= self._next_resolve:
            self._find_report_api(now)
        elif not holding and self.leading:
            logger.info("audit writer: another replica writes now")
        self.leading = holding

    def _take_over(self, now: float) -> None:
        """Read back what was said and what reports exist; then everything is to be checked."""
        self._published = self._events.published()
        with self._wake:
            failing = {k for k, s in dict(self._book.standings).items() if s.findings}
            self._dirty = failing | set(self._published)
        self._find_report_api(now)
        logger.info(
            "audit writer: this replica writes",
            extra={"reports": self._api.value if self._api else "none"},
        )

    def _find_report_api(self, now: float) -> None:
        """Which report API to write (a CRD installed later is found within a minute), and
        every report to (re)write: all namespaces with runtimes, and stale ones to remove."""
        self._next_resolve = now + self._resolve_every
        self._api = self._reports.resolve()
        if self._api is None:
            return
        stale = self._reports.namespaces(self._api)
        with self._wake:
            self._dirty_reports = {"", *stale, *(report_namespace(k) for k in self._book.standings)}

    def _speak(self, now: float) -> None:
        with self._wake:
            dirty, self._dirty = self._dirty, set()
        self._next_event = float("inf")
        retry: set[RuntimeKey] = set()
        pending = sorted(dirty)
        try:
            while pending:
                if not self._announce(pending[-1], now):
                    retry.add(pending[-1])
                pending.pop()
                time.sleep(0)  # the request path gets the interpreter between two Events
        finally:  # an API failure leaves the rest for the next attempt
            with self._wake:
                self._dirty |= retry | set(pending)
        if self._dirty_reports and now >= self._next_report:
            self._next_report = now + self._report_interval
            self._write_reports()
        self._budget.forget_full(now)

    def _announce(self, key: RuntimeKey, now: float) -> bool:
        """Emit the Event the runtime's standing calls for; False to try again later."""
        standing = self._book.standings.get(key)
        if standing is None:  # gone: nothing to say, and nothing to remember
            self._published.pop(key, None)
            return True
        reason = event_reason(self._published.get(key, ""), standing)
        if reason is None:
            return True
        wait = self._budget.take(key, now)
        if wait:
            self._next_event = min(self._next_event, now + wait)
            return False
        self._events.emit(key, reason, standing)
        if standing.fingerprint:
            self._published[key] = standing.fingerprint
        else:
            self._published.pop(key, None)
        return True

    def _write_reports(self) -> None:
        with self._wake:
            namespaces, self._dirty_reports = self._dirty_reports, set()
        api = self._api
        if api is None:
            return
        by_namespace: dict[str, list[Audited]] = defaultdict(list)
        for key, standing in dict(self._book.standings).items():
            namespace = report_namespace(key)
            if namespace in namespaces:
                by_namespace[namespace].append(Audited(key, standing))
        now = int(self._wall())
        pending = sorted(namespaces)
        try:
            while pending:
                namespace = pending[-1]
                entries = by_namespace.get(namespace)
                if entries or not namespace:
                    self._reports.write(api, report(api, namespace, entries or (), now))
                else:
                    self._reports.remove(api, namespace)
                pending.pop()
        finally:  # an API failure leaves the rest for the next write
            with self._wake:
                self._dirty_reports.update(pending)


def _has_findings(standing: Standing | None) -> bool:
    return standing is not None and bool(standing.findings)
