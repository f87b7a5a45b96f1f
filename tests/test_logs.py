"""The JSON log line's envelope: ``time`` (RFC 3339, UTC, milliseconds), ``severity`` (one of
Cloud Logging's ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``), ``message``, ``logger``."""

from __future__ import annotations

import json
import logging
import re

import pytest

from app.logs import JsonFormatter, severity
from tests.support.paths import ROOT


@pytest.mark.parametrize(
    ("levelno", "expected"),
    [
        (logging.DEBUG, "DEBUG"),
        (5, "DEBUG"),
        (logging.INFO, "INFO"),
        (25, "INFO"),
        (logging.WARNING, "WARNING"),
        (35, "WARNING"),
        (logging.ERROR, "ERROR"),
        (logging.CRITICAL, "ERROR"),
        (60, "ERROR"),
    ],
)
def test_every_level_falls_in_one_of_four_severities(levelno: int, expected: str) -> None:
    assert severity(levelno) == expected


def test_the_envelope_then_the_event_fields() -> None:
    record = logging.makeLogRecord(
        {
            "name": "app.kube.cache",
            "levelno": logging.WARNING,
            "levelname": "WARNING",
            "msg": "watch lost: %s",
            "args": ("networks",),
            "created": 1796156046.123456,
            "msecs": 123.456,
            "cache": "networks",
        }
    )
    line = json.loads(JsonFormatter().format(record))
    assert line == {
        "time": "2026-12-01T20:14:06.123Z",
        "severity": "WARNING",
        "message": "watch lost: networks",
        "logger": "app.kube.cache",
        "cache": "networks",
    }


def _decision_fields() -> list[str]:
    """The event fields of the decision line, in the order record_decision writes them."""
    from app.decisions import record_decision
    from app.domain.verdict import Verdict

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    audit = logging.getLogger("nicguard.audit")
    level = audit.level
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)
    try:
        record_decision(
            uid="u", operation="CREATE", dry_run=False, group="g", kind="k", namespace="n",
            name="x", username="alice", verdict=Verdict(), duration_ms=1.0,
        )  # fmt: skip
    finally:
        audit.removeHandler(handler)
        audit.setLevel(level)
    (record,) = seen
    # What a formatter adds (pytest's own handler formats the record too) is no event field.
    standard = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
    return [key for key in vars(record) if key not in standard]


def test_the_readme_lists_exactly_the_fields_of_the_decision_line() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sentence = readme.split("One audit line per decision:", 1)[1].split(";", 1)[0]
    listed = [name.split("=")[0] for name in re.findall(r"`([^`]+)`", sentence)]
    assert listed == _decision_fields()


def test_the_operations_page_describes_every_field_of_the_decision_line() -> None:
    page = (ROOT / "docs" / "operations.md").read_text("utf-8")
    table = page.split("Every decision is one line", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[1] for line in table.splitlines()[2:]]
    described = [name for row in rows for name in re.findall(r"`([^`]+)`", row)]
    assert described == _decision_fields()
