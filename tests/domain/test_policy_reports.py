"""What the audit publishes: policy reports of either API, and the Event a standing calls for.

(app.domain.policy_reports.) Reports are checked against the upstream CRDs the e2e tier installs
(``tests/e2e/crds/``); standings come from the real rules.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from app.documents import load_all_yaml
from app.domain.cluster import RuntimeKey
from app.domain.drift import PASSING, Result, Standing, judge
from app.domain.kinds import Kind
from app.domain.policy import NotReady, Policy
from app.domain.policy_reports import (
    Audited,
    ReportApi,
    event_note,
    event_reason,
    report,
    report_namespace,
)
from app.domain.verdict import Code, Violation
from tests.builders import network, runtime, snapshot, wired
from tests.support.examples import examples

CRDS = Path(__file__).parents[1] / "e2e" / "crds"
CTR = Kind.CLUSTER_TRAINING_RUNTIME
TR = Kind.TRAINING_RUNTIME
TRAINER = "trainer.kubeflow.org/v1alpha1"
NOW = 1_700_000_000
METADATA = {"name": "nicguard", "labels": {"app.kubernetes.io/managed-by": "nicguard"}}
ZEROS = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}

# Real standings: net-a exists but is not Ready, net-gone does not exist.
_VIEW = snapshot(network("net-a", ready=False), networks=["net-b"])
_BROKEN = runtime("broken", annotations=wired([("eth1", "net-gone"), ("eth2", "net-a")]))
_SHAKY = runtime("shaky", annotations=wired([("eth1", "net-a")]))
FAILING = judge((CTR, "", "broken"), _BROKEN, _VIEW, Policy())
WARNING = judge((CTR, "", "shaky"), _SHAKY, _VIEW, Policy(not_ready=NotReady.WARN))


def test_the_standings_used_here_are_what_the_rules_say() -> None:
    assert (FAILING.result, FAILING.codes) == (
        Result.FAIL,
        (Code.NETWORK_NOT_FOUND, Code.NETWORK_NOT_READY),
    )
    assert (WARNING.result, WARNING.codes) == (Result.WARN, (Code.NETWORK_NOT_READY,))


# -- ReportApi ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "namespace", "api_version", "kind", "plural"),
    [
        pytest.param(
            ReportApi.OPENREPORTS,
            "",
            "openreports.io/v1alpha1",
            "ClusterReport",
            "clusterreports",
            id="openreports-cluster",
        ),
        pytest.param(
            ReportApi.OPENREPORTS,
            "team",
            "openreports.io/v1alpha1",
            "Report",
            "reports",
            id="openreports-namespaced",
        ),
        pytest.param(
            ReportApi.WGPOLICYK8S,
            "",
            "wgpolicyk8s.io/v1alpha2",
            "ClusterPolicyReport",
            "clusterpolicyreports",
            id="wgpolicyk8s-cluster",
        ),
        pytest.param(
            ReportApi.WGPOLICYK8S,
            "team",
            "wgpolicyk8s.io/v1alpha2",
            "PolicyReport",
            "policyreports",
            id="wgpolicyk8s-namespaced",
        ),
    ],
)
def test_a_report_api_names_its_group_version_kind_and_plural(
    api: ReportApi, namespace: str, api_version: str, kind: str, plural: str
) -> None:
    assert api.api_version == api_version
    assert f"{api.group}/{api.version}" == api_version
    assert api.kind(namespace) == kind
    assert api.plural(namespace) == plural


@pytest.mark.parametrize(
    ("value", "api"),
    [
        pytest.param("openreports", ReportApi.OPENREPORTS, id="openreports"),
        pytest.param("wgpolicyk8s", ReportApi.WGPOLICYK8S, id="wgpolicyk8s"),
    ],
)
def test_the_setting_values_name_the_apis(value: str, api: ReportApi) -> None:
    assert ReportApi(value) is api


@cache
def _crds() -> tuple[Mapping[str, object], ...]:
    found: list[Mapping[str, object]] = []
    for path in sorted(CRDS.glob("*/*.yaml")):
        for document in load_all_yaml(path.read_text(encoding="utf-8")):
            assert isinstance(document, Mapping)
            if document.get("kind") == "CustomResourceDefinition":
                found.append(document)
    return tuple(found)


def _crd(api: ReportApi, namespace: str) -> Mapping[str, object]:
    """The upstream CRD of the report ``api`` writes for ``namespace``."""
    for crd in _crds():
        spec = _map(crd["spec"])
        if spec["group"] == api.group and _map(spec["names"])["kind"] == api.kind(namespace):
            return spec
    raise AssertionError(f"no CRD for {api.kind(namespace)} in {CRDS}")


def _schema(api: ReportApi, namespace: str) -> Mapping[str, object]:
    for item in _list(_crd(api, namespace)["versions"]):
        version = _map(item)
        if version["name"] == api.version:
            assert version["served"] is True
            return _map(_map(version["schema"])["openAPIV3Schema"])
    raise AssertionError(f"{api.kind(namespace)} has no version {api.version}")


def _map(value: object) -> Mapping[str, object]:
    assert isinstance(value, Mapping)
    return value


def _list(value: object) -> list[object]:
    assert isinstance(value, list)
    return value


@pytest.mark.parametrize("api", list(ReportApi))
@pytest.mark.parametrize("namespace", ["", "team"])
def test_a_report_api_is_a_served_version_of_an_upstream_crd(
    api: ReportApi, namespace: str
) -> None:
    spec = _crd(api, namespace)
    assert _map(spec["names"])["plural"] == api.plural(namespace)
    assert spec["scope"] == ("Namespaced" if namespace else "Cluster")
    assert _schema(api, namespace)["type"] == "object"


def _problems(value: object, schema: Mapping[str, object], at: str = "") -> list[str]:
    """What a structural schema refuses or prunes in ``value`` (the subset these CRDs use)."""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, Mapping):
            return [f"{at}: not an object"]
        fields = schema.get("properties")
        extra = schema.get("additionalProperties")
        found = [
            f"{at}.{name}: required"
            for name in _list(schema.get("required", []))
            if name not in value
        ]
        for name, item in value.items():
            if isinstance(fields, Mapping) and name in fields:
                found += _problems(item, _map(fields[name]), f"{at}.{name}")
            elif isinstance(extra, Mapping):
                found += _problems(item, extra, f"{at}.{name}")
            elif isinstance(fields, Mapping):
                found.append(f"{at}.{name}: not in the schema (pruned)")
        return found
    if kind == "array":
        if not isinstance(value, list):
            return [f"{at}: not an array"]
        items = _map(schema["items"])
        return [p for i, item in enumerate(value) for p in _problems(item, items, f"{at}[{i}]")]
    expected = {"string": str, "integer": int, "boolean": bool}[str(kind)]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        return [f"{at}: not a {kind}"]
    enum = schema.get("enum")
    if enum is not None and value not in _list(enum):
        return [f"{at}: {value!r} not one of {enum}"]
    return []


def test_the_schema_check_finds_what_the_api_server_would_refuse_or_prune() -> None:
    schema = _schema(ReportApi.OPENREPORTS, "team")
    bad = report(ReportApi.OPENREPORTS, "team", [Audited((TR, "team", "t"), FAILING)], NOW)
    first, second = (dict(_map(result)) for result in _list(bad["results"]))
    first.update(result="broken", extra=1)
    del second["policy"]
    second["timestamp"] = {"seconds": "now"}
    bad["results"] = [first, second]
    assert _problems(bad, schema) == [
        ".results[0].result: 'broken' not one of ['pass', 'fail', 'warn', 'error', 'skip']",
        ".results[0].extra: not in the schema (pruned)",
        ".results[1].policy: required",
        ".results[1].timestamp.nanos: required",
        ".results[1].timestamp.seconds: not a integer",
    ]


# -- report ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "kind"),
    [
        pytest.param(ReportApi.OPENREPORTS, "ClusterReport", id="openreports"),
        pytest.param(ReportApi.WGPOLICYK8S, "ClusterPolicyReport", id="wgpolicyk8s"),
    ],
)
def test_a_cluster_report_of_nothing_is_empty(api: ReportApi, kind: str) -> None:
    assert report(api, "", [], NOW) == {
        "apiVersion": api.api_version,
        "kind": kind,
        "metadata": METADATA,
        "summary": ZEROS,
        "results": [],
    }


def test_a_passing_cluster_runtime_is_one_pass_result_of_the_wiring_rule() -> None:
    assert report(ReportApi.OPENREPORTS, "", [Audited((CTR, "", "a"), PASSING)], NOW) == {
        "apiVersion": "openreports.io/v1alpha1",
        "kind": "ClusterReport",
        "metadata": METADATA,
        "summary": {**ZEROS, "pass": 1},
        "results": [
            {
                "source": "nicguard",
                "policy": "nicguard-wiring",
                "resources": [
                    {"apiVersion": TRAINER, "kind": "ClusterTrainingRuntime", "name": "a"}
                ],
                "timestamp": {"seconds": NOW, "nanos": 0},
                "rule": "wiring",
                "result": "pass",
                "message": "wiring as expected",
            }
        ],
    }


@pytest.mark.parametrize(
    ("standing", "result"),
    [
        pytest.param(FAILING, "fail", id="fail"),
        pytest.param(WARNING, "warn", id="warn"),
    ],
)
def test_a_runtime_with_findings_has_a_result_per_finding(standing: Standing, result: str) -> None:
    audited = Audited((TR, "team", "t"), standing)
    resource = {"apiVersion": TRAINER, "kind": "TrainingRuntime", "name": "t", "namespace": "team"}
    assert report(ReportApi.WGPOLICYK8S, "team", [audited], NOW) == {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {**METADATA, "namespace": "team"},
        "summary": {**ZEROS, result: len(standing.findings)},
        "results": [
            {
                "source": "nicguard",
                "policy": "nicguard-wiring",
                "resources": [resource],
                "timestamp": {"seconds": NOW, "nanos": 0},
                "rule": finding.code.value,
                "result": result,
                "message": finding.message,
                "properties": {"field": finding.field},
            }
            for finding in standing.findings
        ],
    }


def _resources(found: Mapping[str, object]) -> list[Mapping[str, object]]:
    return [_map(_list(_map(r)["resources"])[0]) for r in _list(found["results"])]


@pytest.mark.parametrize(
    ("key", "resource"),
    [
        pytest.param(
            (CTR, "", "a"),
            {"apiVersion": TRAINER, "kind": "ClusterTrainingRuntime", "name": "a"},
            id="ctr",
        ),
        pytest.param(
            (TR, "team", "t"),
            {"apiVersion": TRAINER, "kind": "TrainingRuntime", "name": "t", "namespace": "team"},
            id="tr",
        ),
    ],
)
def test_a_result_names_its_runtime_by_kind_namespace_and_name(
    key: RuntimeKey, resource: dict[str, object]
) -> None:
    for standing in (PASSING, FAILING):
        found = report(ReportApi.OPENREPORTS, key[1], [Audited(key, standing)], NOW)
        assert _resources(found) == [resource] * max(1, len(standing.findings))


def test_the_summary_counts_results_not_runtimes() -> None:
    audited = [
        Audited((CTR, "", "ok"), PASSING),
        Audited((CTR, "", "also-ok"), PASSING),
        Audited((CTR, "", "broken"), FAILING),
        Audited((CTR, "", "shaky"), WARNING),
    ]
    found = report(ReportApi.OPENREPORTS, "", audited, NOW)
    summary = _map(found["summary"])
    assert list(summary) == ["pass", "fail", "warn", "error", "skip"]
    assert summary == {"pass": 2, "fail": 2, "warn": 1, "error": 0, "skip": 0}
    assert len(_list(found["results"])) == 5


def test_results_follow_the_runtimes_in_key_order_and_each_runtimes_findings_in_order() -> None:
    audited = [
        Audited((CTR, "", "c"), WARNING),
        Audited((CTR, "", "a"), FAILING),
        Audited((CTR, "", "b"), PASSING),
    ]
    reports = [
        report(ReportApi.OPENREPORTS, "", iter(order), NOW)
        for order in itertools.permutations(audited)
    ]
    assert all(found == reports[0] for found in reports)
    rows = [
        (_map(_list(_map(r)["resources"])[0])["name"], _map(r)["rule"])
        for r in _list(reports[0]["results"])
    ]
    assert rows == [
        ("a", "NetworkNotFound"),
        ("a", "NetworkNotReady"),
        ("b", "wiring"),
        ("c", "NetworkNotReady"),
    ]


def test_results_sort_by_kind_then_namespace_then_name() -> None:
    keys: list[RuntimeKey] = [(TR, "team", "a"), (CTR, "", "z"), (TR, "alpha", "b"), (CTR, "", "y")]
    found = report(ReportApi.OPENREPORTS, "", [Audited(k, PASSING) for k in keys], NOW)
    assert [(r["kind"], r["name"]) for r in _resources(found)] == [
        ("ClusterTrainingRuntime", "y"),
        ("ClusterTrainingRuntime", "z"),
        ("TrainingRuntime", "b"),
        ("TrainingRuntime", "a"),
    ]


@pytest.mark.parametrize("api", list(ReportApi))
@pytest.mark.parametrize(
    ("namespace", "kind"),
    [pytest.param("", CTR, id="cluster"), pytest.param("team", TR, id="namespaced")],
)
def test_a_report_is_json_the_upstream_schema_keeps_whole(
    api: ReportApi, namespace: str, kind: Kind
) -> None:
    audited = [
        Audited((kind, namespace, "ok"), PASSING),
        Audited((kind, namespace, "broken"), FAILING),
        Audited((kind, namespace, "shaky"), WARNING),
    ]
    found = report(api, namespace, audited, NOW)
    assert json.loads(json.dumps(found)) == found
    assert _problems(found, _schema(api, namespace)) == []


@pytest.mark.parametrize(
    ("key", "namespace"),
    [
        pytest.param((CTR, "", "a"), "", id="ctr-in-the-cluster-report"),
        pytest.param((TR, "team", "a"), "team", id="tr-in-its-namespace"),
    ],
)
def test_a_runtime_belongs_in_the_report_of_its_namespace(key: RuntimeKey, namespace: str) -> None:
    assert report_namespace(key) == namespace


# -- event_reason ------------------------------------------------------------------------------

OTHER = Standing(Result.FAIL, (Violation(code=Code.NETWORK_NOT_FOUND, field="f", message="other"),))


@pytest.mark.parametrize(
    ("published", "standing", "reason"),
    [
        pytest.param("", FAILING, "WiringDrift", id="new-findings"),
        pytest.param(FAILING.fingerprint, FAILING, None, id="findings-already-published"),
        pytest.param(OTHER.fingerprint, FAILING, "WiringDrift", id="findings-changed"),
        pytest.param("", WARNING, "WiringDrift", id="waived-findings-are-drift-too"),
        pytest.param(
            FAILING.fingerprint,
            replace(FAILING, result=Result.WARN),
            None,
            id="same-findings-now-waived",
        ),
        pytest.param(FAILING.fingerprint, PASSING, "WiringRestored", id="findings-gone"),
        pytest.param("", PASSING, None, id="passing-and-nothing-published"),
    ],
)
def test_an_event_is_due_when_the_published_findings_change(
    published: str, standing: Standing, reason: str | None
) -> None:
    assert event_reason(published, standing) == reason


def test_a_runtimes_life_calls_for_drift_once_per_finding_set_and_restored_once() -> None:
    published = ""
    said: list[str] = []
    for standing in (PASSING, FAILING, FAILING, OTHER, OTHER, PASSING, PASSING, FAILING):
        reason = event_reason(published, standing)
        if reason is not None:
            said.append(reason)
            published = standing.fingerprint
    assert said == ["WiringDrift", "WiringDrift", "WiringRestored", "WiringDrift"]


# -- event_note --------------------------------------------------------------------------------


def _standing(*messages: str) -> Standing:
    return Standing(
        Result.FAIL,
        tuple(Violation(code=Code.NETWORK_NOT_FOUND, field="f", message=m) for m in messages),
    )


PREFIX = "[NetworkNotFound] "  # 18 bytes


@pytest.mark.parametrize(
    ("standing", "note"),
    [
        pytest.param(PASSING, "wiring as expected again", id="passing"),
        pytest.param(
            FAILING,
            "\n".join(f"[{v.code}] {v.message}" for v in FAILING.findings),
            id="one-line-a-finding",
        ),
        pytest.param(_standing("a", "b"), f"{PREFIX}a\n{PREFIX}b", id="joined-by-newlines"),
        pytest.param(
            _standing("x" * (1024 - 18)), PREFIX + "x" * (1024 - 18), id="exactly-1024-bytes"
        ),
        pytest.param(
            _standing("x" * (1025 - 18)), PREFIX + "x" * (1021 - 18) + "…", id="1025-bytes-cut"
        ),
        pytest.param(
            _standing("é" * 600),
            PREFIX + "é" * 501 + "…",
            id="cut-inside-a-character-drops-it",
        ),
    ],
)
def test_the_note_is_the_finding_lines_cut_to_what_an_event_holds(
    standing: Standing, note: str
) -> None:
    assert event_note(standing) == note
    assert len(event_note(standing).encode()) <= 1024


@settings(max_examples=examples(200))
@given(st.lists(st.text(max_size=400), min_size=1, max_size=6))
def test_any_note_fits_in_1024_bytes_and_is_whole_or_a_marked_prefix(messages: list[str]) -> None:
    standing = _standing(*messages)
    whole = "\n".join(standing.lines())
    note = event_note(standing)
    size = len(note.encode())
    assert size <= 1024
    if len(whole.encode()) <= 1024:
        assert note == whole
    else:
        assert note.endswith("…")
        assert whole.startswith(note[:-1])
        assert size >= 1024 - 3  # at most one cut character (up to 3 of its bytes) is lost
