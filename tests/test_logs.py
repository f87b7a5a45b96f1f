"""The JSON log line's envelope: ``time`` (RFC 3339, UTC, milliseconds), ``severity`` (one of
Cloud Logging's ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR``), ``message``, ``logger``; and an
event written straight to the sole JSON handler is the line the logging module would write."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from app.logs import JsonFormatter, JsonStreamHandler, configure_logging, log_event, severity
from tests.support.records import Keep


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


EVENTS: Final = logging.getLogger("nicguard.test.events")
FIELDS: Final[dict[str, object]] = {"event_type": "e", "codes": ["A", "B"], "n": 1, "text": "é"}


class Dropping(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


class Broken(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError("disk full")


@contextlib.contextmanager
def on_root(*handlers: logging.Handler) -> Iterator[None]:
    """The root's handlers set inside the test (pytest adds its own for each phase) and
    ``EVENTS`` at INFO, both put back after."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = list(handlers)
    EVENTS.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.handlers[:] = saved
        EVENTS.setLevel(logging.NOTSET)
        EVENTS.handlers[:] = []
        EVENTS.filters[:] = []
        EVENTS.propagate = True


def without_time(text: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(line.pop("time")))
    return lines


def test_an_event_on_the_sole_json_handler_is_the_line_its_record_would_be() -> None:
    stream = io.StringIO()
    handler = JsonStreamHandler(stream)
    with on_root(handler):
        log_event(EVENTS, logging.INFO, "an event", dict(FIELDS))  # written directly
        EVENTS.info("an event", extra=dict(FIELDS))  # the logging module's way
    direct, logged = without_time(stream.getvalue())
    assert (
        direct
        == logged
        == {
            "severity": "INFO",
            "message": "an event",
            "logger": EVENTS.name,
            **FIELDS,
        }
    )
    assert '"text":"\\u00e9"' in stream.getvalue().splitlines()[0]  # escaped as json does


def test_on_a_stream_with_bytes_a_direct_line_is_its_records_line_in_order() -> None:
    """stdout has a binary buffer: an ASCII line is written to it as bytes, the same line as
    the record's, in order with the lines written as text around it."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8")
    ascii_fields = {k: v for k, v in FIELDS.items() if k != "text"}
    with on_root(JsonStreamHandler(stream)):
        EVENTS.info("first", extra=dict(ascii_fields))
        log_event(EVENTS, logging.INFO, "first", dict(ascii_fields))  # as bytes
        log_event(EVENTS, logging.INFO, "third", dict(FIELDS))  # not ASCII: as text
        EVENTS.info("fourth", extra=dict(FIELDS))
        log_event(EVENTS, logging.INFO, "fifth", dict(ascii_fields))
    lines = without_time(raw.getvalue().decode())
    assert [line["message"] for line in lines] == ["first", "first", "third", "fourth", "fifth"]
    assert lines[0] == lines[1]
    assert lines[2] == {**lines[3], "message": "third"}


class Counting(JsonStreamHandler):
    def __init__(self, stream: io.StringIO) -> None:
        super().__init__(stream)
        self.emitted = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.emitted += 1
        super().emit(record)


def test_the_sole_json_handler_writes_an_event_without_a_record() -> None:
    stream = io.StringIO()
    handler = Counting(stream)
    with on_root(handler):
        log_event(EVENTS, logging.INFO, "m", {"event_type": "e"})
        EVENTS.info("m", extra={"event_type": "e"})
    assert handler.emitted == 1  # the second line only
    assert len(stream.getvalue().splitlines()) == 2


def test_the_time_of_a_direct_line_is_now_in_utc() -> None:
    stream = io.StringIO()
    before = time.time()
    with on_root(JsonStreamHandler(stream)):
        log_event(EVENTS, logging.WARNING, "m", {})
    written = json.loads(stream.getvalue())["time"]
    seconds = datetime.datetime.fromisoformat(written).timestamp()
    assert before - 0.001 <= seconds <= time.time()


def _filtered_logger(handler: JsonStreamHandler) -> None:
    EVENTS.addFilter(Dropping())


def _filtered_handler(handler: JsonStreamHandler) -> None:
    handler.addFilter(Dropping())


def _handler_above(handler: JsonStreamHandler) -> None:
    handler.setLevel(logging.ERROR)


def _not_propagated(handler: JsonStreamHandler) -> None:
    EVENTS.propagate = False


def _other_formatter(handler: JsonStreamHandler) -> None:
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(_filtered_logger, "", id="a filter on the logger drops it"),
        pytest.param(_filtered_handler, "", id="a filter on the handler drops it"),
        pytest.param(_handler_above, "", id="the handler's level is above it"),
        pytest.param(_not_propagated, "", id="the logger does not propagate to the root"),
        pytest.param(_other_formatter, "INFO m\n", id="the handler formats another way"),
    ],
)
def test_an_event_goes_the_logging_modules_way_when_anything_else_decides(
    change: Callable[[JsonStreamHandler], None], expected: str
) -> None:
    stream = io.StringIO()
    handler = JsonStreamHandler(stream)
    with on_root(handler):
        change(handler)
        log_event(EVENTS, logging.INFO, "m", {"event_type": "e"})
    assert stream.getvalue() == expected


@pytest.mark.parametrize("where", ["logger", "root"])
def test_a_second_handler_gets_the_event_too(where: str) -> None:
    stream, kept = io.StringIO(), Keep()
    with on_root(JsonStreamHandler(stream)):
        (EVENTS if where == "logger" else logging.getLogger()).addHandler(kept)
        log_event(EVENTS, logging.INFO, "m", {"event_type": "e"})
        logging.getLogger().removeHandler(kept)
    (record,) = kept.records
    assert (record.getMessage(), record.__dict__["event_type"]) == ("m", "e")
    assert json.loads(stream.getvalue())["event_type"] == "e"


def test_below_the_loggers_level_nothing_is_written() -> None:
    stream = io.StringIO()
    with on_root(JsonStreamHandler(stream)):
        log_event(EVENTS, logging.DEBUG, "m", {})
    assert stream.getvalue() == ""


def test_a_failed_write_is_reported_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    with on_root(JsonStreamHandler(Broken())):
        log_event(EVENTS, logging.INFO, "m", {"event_type": "e"})
    assert "OSError: disk full" in capsys.readouterr().err


def test_as_serve_configures_logging_a_decision_line_makes_no_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stream)
    for flag in ("logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, flag, getattr(logging, flag))
    uvicorn = [logging.getLogger(n) for n in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    saved = [(lg, lg.handlers[:], lg.filters[:], lg.propagate) for lg in uvicorn]
    made: list[str] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        made.append(args[0])
        return factory(*args, **kwargs)

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logging.setLogRecordFactory(counting)
    try:
        configure_logging("info")
        log_event(logging.getLogger("nicguard.decisions"), logging.INFO, "m", {"event_type": "e"})
        logging.getLogger("nicguard.decisions").info("m", extra={"event_type": "e"})
    finally:
        logging.setLogRecordFactory(factory)
        root.handlers[:], root.level = handlers, level
        for lg, lg_handlers, filters, propagate in saved:
            lg.handlers[:], lg.filters[:], lg.propagate = lg_handlers, filters, propagate
    assert made == ["nicguard.decisions"]  # the second line only
    direct, logged = without_time(stream.getvalue())
    assert direct == logged
