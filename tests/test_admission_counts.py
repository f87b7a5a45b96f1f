"""The admission metrics export what prometheus_client's own Counter and Histogram would, fed
the same reviews: the same families, samples and values, in the same order."""

from __future__ import annotations

import re
import threading

from hypothesis import given, strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from app.admission_counts import AdmissionCounts
from app.metrics import _BUCKETS

_Review = tuple[tuple[str, str, str, bool], float, list[str]]

_reviews = st.lists(
    st.tuples(
        st.tuples(
            st.sampled_from(["allowed", "denied", "warned"]),
            st.sampled_from(["ClusterTrainingRuntime", "Pod", "other"]),
            st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
            st.booleans(),
        ),
        # The bounds themselves, either side of them, and beyond the last.
        st.sampled_from(_BUCKETS)
        | st.floats(min_value=0, max_value=20, allow_nan=False)
        | st.just(0.0),
        st.lists(st.sampled_from(["NetworkNotFound", "MappingDivergesFromRecipe"]), max_size=12),
    ),
    max_size=40,
)


def _library(reviews: list[_Review]) -> bytes:
    """What the same reviews make of prometheus_client's metric classes."""
    registry = CollectorRegistry()
    requests = Counter(
        "nicguard_admission_requests",
        "Admission requests by decision (allowed, denied, warned: under enforcement=warn)",
        ["decision", "kind", "operation", "dry_run"],
        registry=registry,
    )
    duration = Histogram(
        "nicguard_admission_duration_seconds",
        "Time to judge one admission request",
        buckets=_BUCKETS,
        registry=registry,
    )
    violations = Counter(
        "nicguard_violations", "Enforced violations by code", ["code"], registry=registry
    )
    for (decision, kind, operation, dry_run), seconds, codes in reviews:
        requests.labels(decision, kind, operation, str(dry_run).lower()).inc()
        duration.observe(seconds)
        for code in codes:
            violations.labels(code).inc()
    return generate_latest(registry)


def _ours(reviews: list[_Review]) -> bytes:
    registry = CollectorRegistry()
    counts = AdmissionCounts(_BUCKETS)
    registry.register(counts)
    for labels, seconds, codes in reviews:
        counts.observe(labels, seconds, codes)
    return generate_latest(registry)


def _timeless(exposition: bytes) -> str:
    """The exposition with each ``_created`` sample's time left out (it is when it ran)."""
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", exposition.decode())


@given(_reviews)
def test_the_exposition_is_the_libraries_for_the_same_reviews(reviews: list[_Review]) -> None:
    assert _timeless(_ours(reviews)) == _timeless(_library(reviews))


def test_a_label_set_is_exported_from_its_first_count_with_when_it_began() -> None:
    counts = AdmissionCounts(_BUCKETS)
    registry = CollectorRegistry()
    registry.register(counts)
    assert "nicguard_admission_requests_total{" not in generate_latest(registry).decode()
    counts.observe(("denied", "Pod", "CREATE", True), 0.0004, ["NetworkNotFound"])
    text = generate_latest(registry).decode()
    labels = 'decision="denied",dry_run="true",kind="Pod",operation="CREATE"'
    assert f"nicguard_admission_requests_total{{{labels}}} 1.0" in text
    assert re.search(rf"nicguard_admission_requests_created\{{{labels}\}} 1\.\d+e\+09", text)
    assert 'nicguard_admission_duration_seconds_bucket{le="0.0005"} 1.0' in text
    assert 'nicguard_violations_total{code="NetworkNotFound"} 1.0' in text


def test_reviews_counted_on_two_threads_are_all_counted() -> None:
    counts = AdmissionCounts(_BUCKETS)
    registry = CollectorRegistry()
    registry.register(counts)

    def count() -> None:
        for _ in range(20_000):
            counts.observe(("denied", "Pod", "CREATE", False), 0.001, ["NetworkNotFound"])

    threads = [threading.Thread(target=count) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = generate_latest(registry).decode()
    assert "nicguard_admission_duration_seconds_count 40000.0" in text
    assert 'nicguard_violations_total{code="NetworkNotFound"} 40000.0' in text
