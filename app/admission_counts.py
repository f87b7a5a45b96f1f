"""The admission metrics every review updates: numbers under one lock, exported at scrape time.

prometheus_client's Counter and Histogram each take a lock and check themselves on every
increment, four times per review; the families and samples exported are theirs, unchanged."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Final

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

REQUESTS: Final = "nicguard_admission_requests"
DURATION: Final = "nicguard_admission_duration_seconds"
VIOLATIONS: Final = "nicguard_violations"
_REQUEST_LABELS: Final = ("decision", "kind", "operation", "dry_run")

# decision, kind, operation, dry_run; dry_run is written "true" or "false", as Counter.labels did.
RequestLabels = tuple[str, str, str, bool]


class _Count:
    """One labelled child: its value and when it was first counted."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()


class AdmissionCounts(Collector):
    """``nicguard_admission_requests_total`` by decision, kind, operation and dry_run; the
    ``nicguard_admission_duration_seconds`` histogram; ``nicguard_violations_total`` by code.
    A label set is exported from its first count on, as a Counter's child once labelled."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self._lock = threading.Lock()  # a costly review is counted on the judging thread
        self._bounds = tuple(buckets)
        # The ``le`` of each bucket as the Histogram writes it (0.0005, +Inf).
        self._les = [
            floatToGoString(bound)  # type: ignore[no-untyped-call]
            for bound in (*self._bounds, float("inf"))
        ]
        # One per bucket and +Inf; not cumulative until exported.
        self._buckets = [0] * (len(self._bounds) + 1)
        self._sum = 0.0
        self._created = time.time()
        self._requests: dict[RequestLabels, _Count] = {}
        self._violations: dict[str, _Count] = {}

    def observe(self, labels: RequestLabels, seconds: float, codes: Iterable[str]) -> None:
        """One review: its labels, how long it took, the code of each violation enforced."""
        with self._lock:
            requests = self._requests.get(labels)
            if requests is None:
                requests = self._requests[labels] = _Count()
            requests.value += 1
            self._buckets[bisect_left(self._bounds, seconds)] += 1
            self._sum += seconds
            violations = self._violations
            for code in codes:
                counted = violations.get(code)
                if counted is None:
                    counted = violations[code] = _Count()
                counted.value += 1

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            requests = [(labels, c.value, c.created) for labels, c in self._requests.items()]
            buckets, total = list(self._buckets), self._sum
            violations = [(code, c.value, c.created) for code, c in self._violations.items()]
        family = CounterMetricFamily(
            REQUESTS,
            "Admission requests by decision (allowed, denied, warned: under enforcement=warn)",
            labels=_REQUEST_LABELS,
        )
        for (decision, kind, operation, dry_run), value, created in requests:
            family.add_metric(
                [decision, kind, operation, "true" if dry_run else "false"], value, created=created
            )
        yield family
        yield self._duration(buckets, total)
        family = CounterMetricFamily(VIOLATIONS, "Enforced violations by code", labels=("code",))
        for code, value, created in violations:
            family.add_metric([str(code)], value, created=created)
        yield family

    def _duration(self, counts: list[int], total: float) -> Metric:
        family = HistogramMetricFamily(DURATION, "Time to judge one admission request")
        cumulative, buckets = 0, []
        for le, count in zip(self._les, counts, strict=True):
            cumulative += count
            buckets.append((le, float(cumulative)))
        family.add_metric([], buckets, total)
        family.add_sample(DURATION + "_created", {}, self._created)
        return family
