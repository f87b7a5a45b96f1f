"""Every metric the alert rules and the dashboard read is one a running nicguard exports.

A live ``nicguard serve --state examples/cluster`` is scraped once; every metric is registered
from start, in every mode, so a name missing from its /metrics is a name nicguard never exports.
"""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client import Metric
from prometheus_client.parser import text_string_to_metric_families

from tests.live_serve import live_serve
from tests.monitoring.promql import (
    PROMETHEUS_SERIES,
    Query,
    all_queries,
    metric_names,
    series_names,
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Metric]:
    """The metric families of a live file-mode nicguard, by name; stopped by PID afterwards."""
    with (
        live_serve(tmp_path_factory.mktemp("monitoring")) as served,
        urllib.request.urlopen(f"{served.probes}/metrics", timeout=5) as reply,  # noqa: S310
    ):
        text = reply.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def unexported(queries: list[Query], exported: dict[str, Metric]) -> list[str]:
    known = series_names(exported.values()) | PROMETHEUS_SERIES
    return [
        f"{query.where}: {name}"
        for query in queries
        for name in sorted(metric_names(query.expr) - known)
    ]


def test_every_rule_and_dashboard_metric_is_exported(exported: dict[str, Metric]) -> None:
    queries = all_queries()
    assert not unexported(queries, exported)
    # Each query names at least one metric: none was misread as naming nothing.
    assert all(metric_names(query.expr) for query in queries)


def test_a_misspelled_or_wrongly_suffixed_metric_is_caught(exported: dict[str, Metric]) -> None:
    synthetic = [
        Query("misspelled", 'sum(rate(nicguard_admision_requests_total{decision="denied"}[5m]))'),
        # A histogram's series are _bucket, _sum and _count; a counter's end in _total.
        Query("histogram", "nicguard_admission_duration_seconds > 0.1"),
        Query("counter", "rate(nicguard_violations[5m])"),
        Query(
            "fine",
            "histogram_quantile(0.99, sum by (le) (rate(nicguard_admission_duration_seconds_bucket"
            '{namespace=~"$namespace"}[$__rate_interval])))',
        ),
    ]
    assert unexported(synthetic, exported) == [
        "misspelled: nicguard_admision_requests_total",
        "histogram: nicguard_admission_duration_seconds",
        "counter: nicguard_violations",
    ]


def test_names_are_read_past_functions_labels_strings_and_numbers() -> None:
    expr = (
        'label_replace(sum without (pod) (rate(a_total{code=~"x|y", le="0.1"}[5m] offset 1h)),'
        ' "dst", "$1", "src", "(b_total)") / on (job) group_left'
        " (max by (c) (c_seconds) > bool 1e3) unless absent(up) or vector(0x1f) and Inf"
    )
    assert metric_names(expr) == {"a_total", "c_seconds", "up"}


def test_certificate_facts_file_mode_cannot_know_are_registered_but_absent(
    exported: dict[str, Metric],
) -> None:
    # No self-managed certificate controller: no sample, so their alerts cannot fire falsely.
    for name in ("nicguard_cabundle_verifies", "nicguard_ca_certificate_expiry_timestamp_seconds"):
        assert exported[name].samples == []
    (expiry,) = exported["nicguard_certificate_expiry_timestamp_seconds"].samples
    assert expiry.value > 0


def test_runtime_reads_file_mode_never_makes_are_registered_but_absent(
    exported: dict[str, Metric],
) -> None:
    # No API to read a runtime from: no outcome is 0, each is absent.
    assert exported["nicguard_runtime_reads"].type == "counter"
    assert exported["nicguard_runtime_reads"].samples == []
