"""JSON log lines on stdout: ``time``, ``severity``, ``message``, ``logger`` plus ``extra`` keys.

The names are the ones Google Cloud Logging (and Fluent Bit, Vector, Datadog) read without any
parser configuration: ``severity`` becomes the entry's severity, ``message`` its summary, ``time``
its timestamp (docs/operations.md, "Logs")."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from collections.abc import Coroutine
from typing import Any, Final

import orjson

# uvicorn adds an ANSI-coloured copy of each message; JSON consumers want one plain `message`.
_RESERVED: Final = frozenset(vars(logging.makeLogRecord({})).keys()) | {
    "message",
    "asctime",
    "color_message",
}


# orjson writes dataclasses and datetimes itself; json wrote str() of them.
_ORJSON_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME

# Cloud Logging's severities for the levels nicguard logs at. CRITICAL (nicguard logs none) and
# any custom level fall into the bucket at or below them, so `severity` is always one of four.
_SEVERITIES: Final = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "ERROR",
}


def severity(levelno: int) -> str:
    """``DEBUG``, ``INFO``, ``WARNING`` or ``ERROR``: the bucket a logging level falls in."""
    known = _SEVERITIES.get(levelno)
    if known is not None:
        return known
    if levelno >= logging.ERROR:
        return "ERROR"
    if levelno >= logging.WARNING:
        return "WARNING"
    return "INFO" if levelno >= logging.INFO else "DEBUG"


class JsonFormatter(logging.Formatter):
    """One JSON object per line; exceptions are folded into ``exc`` on the same line.

    Every admission decision is a line, so this is on the request path: the encoder is built
    once and the ``YYYY-mm-ddTHH:MM:SS`` part of the timestamp once per second. ``time`` is
    RFC 3339 in UTC with milliseconds (``2026-12-01T20:14:06.123Z``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._second_text = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        line: dict[str, object] = {
            "time": f"{self._second_text}.{int(record.msecs):03d}Z",
            "severity": _SEVERITIES.get(record.levelno) or severity(record.levelno),
            "message": record.getMessage(),
            "logger": record.name,
        }
        line.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return encode_line(line)


def encode_line(line: dict[str, object]) -> str:
    """What ``json.dumps(line, default=str, separators=(",", ":"))`` writes, by orjson when it
    accepts the line (no lone surrogates, no integers beyond 64 bits) and its output is printable
    ASCII (json escapes the rest): the same bytes for strings, integers, booleans, lists and maps.
    Floats in exponent notation (``1e-7``, not ``1e-07``), NaN and infinities (``null``) and enums
    that are not ``str`` (their value) are written as orjson writes them."""
    try:
        encoded = orjson.dumps(line, default=str, option=_ORJSON_OPTIONS)
        if encoded.isascii() and b"\x7f" not in encoded:
            return encoded.decode()
    except TypeError:
        pass
    return json.dumps(line, default=str, separators=(",", ":"))


# Set in the task of every uvicorn server but the first (`nicguard serve` runs the webhook and the
# probes in one process): see _OneLifecyclePerProcess.
_SECONDARY_SERVER: Final = contextvars.ContextVar("nicguard_secondary_server", default=False)


async def serve_as_secondary(serving: Coroutine[Any, Any, None]) -> None:
    """Await a second uvicorn server's ``serve()`` with its lifecycle lines left out.

    Run it as its own task (``asyncio.create_task``): the mark stays in that task's context and
    the tasks it starts (uvicorn's lifespan)."""
    _SECONDARY_SERVER.set(True)
    await serving


class _OneLifecyclePerProcess(logging.Filter):
    """Each uvicorn server logs the process's lifecycle (``Started server process [pid]``,
    application startup and shutdown, ``Shutting down``, ``Finished server process``): with two
    servers in one process every such line came twice. A secondary server keeps only its own
    ``Uvicorn running on …`` line and whatever it logs at WARNING or above."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (
            record.levelno >= logging.WARNING
            or not _SECONDARY_SERVER.get()
            or str(record.msg).startswith("Uvicorn running on")
        )


def configure_logging(level: str) -> None:
    """Route every logger (ours, uvicorn's, the kubernetes client's) through one JSON handler."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Thread, process and multiprocessing names are never written (see _RESERVED): skip
    # looking them up for every record.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    lifecycle = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _OneLifecyclePerProcess) for f in lifecycle.filters):
        lifecycle.addFilter(_OneLifecyclePerProcess())
