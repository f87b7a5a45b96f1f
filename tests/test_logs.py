"""The JSON log line's envelope: ``time`` (RFC 3339, UTC, milliseconds), ``severity`` (one of
Cloud Logging's ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``), ``message``, ``logger``."""

from __future__ import annotations

import json
import logging

import pytest

from app.logs import JsonFormatter, severity


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
