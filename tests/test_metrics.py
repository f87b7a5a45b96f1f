"""The audit's gauges at scrape time: registered from start, counts as the book keeps them."""

from __future__ import annotations

from app.domain.cluster import CacheStatus
from app.domain.drift import EVERYTHING, DriftBook
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.verdict import Code, Verdict, Violation
from app.metrics import Metrics
from tests.builders import GPU_NICS, network, runtime, snapshot, wired


def rendered(book: DriftBook, last: float | None) -> str:
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)], audit=(book, lambda: last))
    return metrics.render().decode()


def test_before_any_pass_every_result_is_zero_and_no_change_is_zero() -> None:
    text = rendered(DriftBook(Policy()), None)
    for result in ("pass", "warn", "fail"):
        assert f'nicguard_audit_runtimes{{result="{result}"}} 0.0' in text
    assert "# TYPE nicguard_audit_violations gauge" in text
    assert "nicguard_audit_last_change_timestamp_seconds 0.0" in text


def test_failing_runtimes_are_counted_per_code() -> None:
    book = DriftBook(Policy())
    broken = [("eth1", "gpu-nic-0"), ("eth2", "gpu-nic-1")]
    runtimes = [
        runtime(f"tr-{i}", kind=Kind.TRAINING_RUNTIME, annotations=wired(broken)) for i in range(3)
    ]
    ready = [n for n in GPU_NICS if n != "gpu-nic-1"]
    book.apply(EVERYTHING, snapshot(*runtimes, network("gpu-nic-1", ready=False), networks=ready))
    text = rendered(book, 1_700_000_000.0)
    assert 'nicguard_audit_runtimes{result="fail"} 3.0' in text
    assert 'nicguard_audit_violations{code="NetworkNotReady"} 3.0' in text
    assert "nicguard_audit_last_change_timestamp_seconds 1.7e+09" in text


def test_certificate_facts_are_absent_until_the_controller_is_watched() -> None:
    metrics = Metrics(list)
    text = metrics.render().decode()
    assert "# TYPE nicguard_cabundle_verifies gauge" in text
    assert "\nnicguard_cabundle_verifies " not in text
    assert "\nnicguard_ca_certificate_expiry_timestamp_seconds " not in text
    expiry: list[float | None] = [None]
    verifies = [False]
    metrics.certificates.watch(lambda: verifies[0], lambda: expiry[0])
    text = metrics.render().decode()
    assert "\nnicguard_cabundle_verifies 0.0" in text
    assert "\nnicguard_ca_certificate_expiry_timestamp_seconds " not in text  # none installed yet
    expiry[0], verifies[0] = 1_700_000_000.0, True
    text = metrics.render().decode()
    assert "\nnicguard_cabundle_verifies 1.0" in text
    assert "\nnicguard_ca_certificate_expiry_timestamp_seconds 1.7e+09" in text


def test_a_verdicts_violations_are_counted_per_code() -> None:
    metrics = Metrics(lambda: [CacheStatus(name="files", synced=True)])
    found = [Code.NETWORK_DUPLICATED] * 7_000 + [Code.NETWORK_NOT_FOUND] * 1_000
    verdict = Verdict(violations=tuple(Violation(code=c, field="", message="") for c in found))
    for _ in range(2):
        metrics.observe(
            verdict=verdict, kind="JobSet", operation="UPDATE", dry_run=False, seconds=0
        )
    text = metrics.render().decode()
    assert 'nicguard_violations_total{code="NetworkDuplicated"} 14000.0' in text
    assert 'nicguard_violations_total{code="NetworkNotFound"} 2000.0' in text
