"""The decision log (app.decisions): one record per admission decision with fixed fields, one
per rejected request, one per failure with its traceback; and the docs list those fields."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Final

import pytest
from hypothesis import example, given, settings, strategies as st

from app.decisions import (
    EVENT_DECISION,
    EVENT_FAILURE,
    EVENT_REFUSED,
    EVENT_REJECTED,
    FIELD_MAX_BYTES,
    _field,
    logger,
    record_decision,
    record_failure,
    record_refused,
    record_rejected,
)
from app.domain.verdict import Code, Verdict, Violation
from app.logs import JsonFormatter
from tests.support.paths import ROOT
from tests.support.records import Keep

LOST: Final = Violation(code=Code.NETWORK_NOT_FOUND, field="f", message="m")
OLD: Final = Violation(code=Code.INTERFACES_ANNOTATION_MALFORMED, field="g", message="n")
ALLOWED: Final = Verdict()
# What a formatter adds (pytest's own handler formats the record too) is no event field.
STANDARD: Final = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


@pytest.fixture
def kept() -> Iterator[Keep]:
    """The decision log's records at INFO and above."""
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def decide(verdict: Verdict = ALLOWED, duration_ms: float = 1.0) -> None:
    record_decision(
        uid="u", operation="CREATE", dry_run=False, group="g", kind="k", namespace="n",
        name="x", username="alice", verdict=verdict, duration_ms=duration_ms,
        source_address="10.0.0.2:41234", client_subject="CN=kube-apiserver",
    )  # fmt: skip


def fields(record: logging.LogRecord) -> dict[str, object]:
    return {key: value for key, value in vars(record).items() if key not in STANDARD}


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        pytest.param(
            Verdict(recipe="ns/r@7"),
            {"allowed": True, "decision": "allowed", "violation_codes": [], "recipe": "ns/r@7"},
            id="allowed",
        ),
        pytest.param(
            Verdict(violations=(LOST, OLD)),
            {
                "allowed": False,
                "decision": "denied",
                "violation_codes": ["NetworkNotFound", "InterfacesAnnotationMalformed"],
            },
            id="denied: the codes that denied",
        ),
        pytest.param(
            Verdict(warned=(LOST,), warnings=("[NetworkNotFound] m",)),
            {
                "allowed": True,
                "decision": "warned",
                "violation_codes": ["NetworkNotFound"],
                "warnings": ["[NetworkNotFound] m"],
            },
            id="warned: the codes that would have denied",
        ),
        pytest.param(
            Verdict(waived=(OLD,), grandfathered=(OLD,), warnings=("w",)),
            {"decision": "allowed", "grandfathered_codes": ["InterfacesAnnotationMalformed"]},
            id="grandfathered",
        ),
    ],
)
def test_a_decision_is_one_info_record_of_fixed_fields(
    kept: Keep, verdict: Verdict, expected: dict[str, object]
) -> None:
    decide(verdict, duration_ms=1.23456)
    (record,) = kept.records
    assert (record.levelno, record.getMessage(), record.name) == (
        logging.INFO,
        "admission decision",
        logger.name,
    )
    found = fields(record)
    assert (
        found
        == {
            "event_type": EVENT_DECISION,
            "admission_uid": "u",
            "operation": "CREATE",
            "dry_run": False,
            "resource_group": "g",
            "resource_kind": "k",
            "resource_namespace": "n",
            "resource_name": "x",
            "request_username": "alice",
            "allowed": True,
            "decision": "allowed",
            "violation_codes": [],
            "grandfathered_codes": [],
            "warnings": list(verdict.warnings),
            "recipe": verdict.recipe,
            "duration_ms": 1.235,
            "source_address": "10.0.0.2:41234",
            "client_subject": "CN=kube-apiserver",
        }
        | expected
    )


def test_above_info_no_decision_is_recorded(kept: Keep) -> None:
    logger.setLevel(logging.WARNING)
    decide()
    assert kept.records == []


def test_a_decision_line_is_json_with_its_fields(kept: Keep) -> None:
    decide(Verdict(violations=(LOST,)))
    line = json.loads(JsonFormatter().format(kept.records[0]))
    assert line["message"] == "admission decision"
    assert line["violation_codes"] == ["NetworkNotFound"]
    assert line["severity"] == "INFO"


@pytest.mark.parametrize(("status", "reason"), [(400, "body is not valid JSON"), (415, "x")])
def test_a_rejected_request_is_a_warning_with_its_status(
    kept: Keep, status: int, reason: str
) -> None:
    record_rejected(status=status, reason=reason)
    (record,) = kept.records
    assert (record.levelno, record.getMessage()) == (logging.WARNING, "admission request rejected")
    assert fields(record) == {
        "event_type": EVENT_REJECTED,
        "http_status": status,
        "reason": reason,
    }


def test_a_refused_review_is_a_warning_with_what_identifies_it_escaped_and_cut(
    kept: Keep,
) -> None:
    record_refused(
        status=503,
        reason="costly reviews before this one kept it waiting 2 s; refused unjudged, retry",
        uid="u-7",
        group="jobset.x-k8s.io",
        kind="JobSet",
        namespace="team\nb",
        name="x" * 600,
        username="",
        source_address="10.0.0.9:5000",
        client_subject="CN=attacker",
    )
    (record,) = kept.records
    assert (record.levelno, record.getMessage()) == (
        logging.WARNING,
        "admission request refused unjudged",
    )
    logged = fields(record)
    assert logged == {
        "event_type": EVENT_REFUSED,
        "http_status": 503,
        "reason": "costly reviews before this one kept it waiting 2 s; refused unjudged, retry",
        "admission_uid": "u-7",
        "resource_group": "jobset.x-k8s.io",
        "resource_kind": "JobSet",
        "resource_namespace": "team\\nb",
        "resource_name": _field("x" * 600),
        "request_username": "",
        "source_address": "10.0.0.9:5000",
        "client_subject": "CN=attacker",
    }
    assert len(json.dumps(logged["resource_name"])) <= FIELD_MAX_BYTES


def test_a_failure_is_an_error_with_its_traceback(kept: Keep) -> None:
    try:
        raise KeyError("spec")
    except KeyError as error:
        record_failure(uid="u-9", error=error)
    (record,) = kept.records
    assert (record.levelno, record.getMessage()) == (logging.ERROR, "admission failure")
    assert fields(record) == {"event_type": EVENT_FAILURE, "admission_uid": "u-9"}
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError
    assert "raise KeyError" in logging.Formatter().formatException(record.exc_info)


def _decision_fields() -> list[str]:
    """The event fields of the decision line, in the order record_decision writes them."""
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        decide()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    (record,) = handler.records
    return list(fields(record))


def test_the_operations_page_describes_every_field_of_the_decision_line() -> None:
    page = (ROOT / "docs" / "operations.md").read_text("utf-8")
    table = page.split("Every decision is one line", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[1] for line in table.splitlines()[2:]]
    described = [name for row in rows for name in re.findall(r"`([^`]+)`", row)]
    assert described == _decision_fields()


_TEXT_FIELDS: Final = (
    "admission_uid",
    "resource_group",
    "resource_kind",
    "resource_namespace",
    "resource_name",
    "request_username",
    "recipe",
    "source_address",
)
_PLAIN: Final = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
# Plain text, and what a line must not carry as given: control characters, non-ASCII, over 255
# characters (alone among plain ones, too).
_TEXTS: Final = st.one_of(
    st.text(alphabet=_PLAIN, max_size=255),
    st.text(alphabet=_PLAIN, min_size=256, max_size=300),
    st.text(max_size=300),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.tuples(*[_TEXTS] * len(_TEXT_FIELDS)))
@example(texts=("u", "g", "k", "n", "x" * 256, "alice", "ns/r@7", "10.0.0.2:41234"))
@example(texts=("u", "g", "k", "n", "x" * 255, "alice", "ns/r@7", "10.0.0.2:41234"))
@example(texts=("u", "g" * 200, "k", "n", "x" * 200, "alice", "ns/r@7", "10.0.0.2:41234"))
@example(texts=("u", "g", "k", "n", "x\n", "alice", "ns/r@7", "10.0.0.2:41234"))
def test_every_text_field_is_escaped_and_cut_whatever_else_the_line_holds(
    texts: tuple[str, ...],
) -> None:
    # The check for plain text is made on all of them at once: each field still gets exactly
    # what _field gives it alone (escaped, at most FIELD_MAX_BYTES as JSON), plain or not.
    handler = Keep()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        uid, group, kind, namespace, name, username, recipe, source = texts
        record_decision(
            uid=uid, operation="CREATE", dry_run=False, group=group, kind=kind,
            namespace=namespace, name=name, username=username, verdict=Verdict(recipe=recipe),
            duration_ms=1.0, source_address=source, client_subject=None,
        )  # fmt: skip
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    found = fields(handler.records[0])
    assert [found[key] for key in _TEXT_FIELDS] == [_field(text) for text in texts]
    for key in _TEXT_FIELDS:
        text = found[key]
        assert isinstance(text, str)
        assert text.isprintable()
        assert len(json.dumps(text)) <= FIELD_MAX_BYTES
