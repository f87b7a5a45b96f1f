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
from typing import Any, Final, TextIO

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

    Every admission decision is a line, so this is on the request path: the
    ``YYYY-mm-ddTHH:MM:SS`` part of the timestamp is built once per second. ``time`` is RFC 3339
    in UTC with milliseconds (``2026-12-01T20:14:06.123Z``).
    """

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._second_text = ""

    def format(self, record: logging.LogRecord) -> str:
        line = self.line(
            int(record.created),
            int(record.msecs),
            record.levelno,
            record.getMessage(),
            record.name,
            {k: v for k, v in vars(record).items() if k not in _RESERVED},
        )
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return encode_line(line)

    def line(
        self,
        second: int,
        msecs: int,
        levelno: int,
        message: str,
        name: str,
        fields: dict[str, object],
    ) -> dict[str, object]:
        """The four keys every line starts with, then ``fields``: one dict. ``second`` since the
        epoch, ``msecs`` past it."""
        return {
            "time": self.time(second, msecs),
            "severity": _SEVERITIES.get(levelno) or severity(levelno),
            "message": message,
            "logger": name,
            **fields,
        }

    def time(self, second: int, msecs: int) -> str:
        """``time``'s text, ``second`` since the epoch and ``msecs`` past it."""
        if second != self._second:
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._second_text}.{msecs:03d}Z"


class JsonStreamHandler(logging.StreamHandler[TextIO]):
    """The one handler ``configure_logging`` puts on the root: JSON lines on a stream."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.json = JsonFormatter()
        self.setFormatter(self.json)

    def write_event(
        self, logger: logging.Logger, level: int, message: str, fields: dict[str, object]
    ) -> None:
        """The line ``emit`` writes for such a record, written without one; under the handler's
        lock, as ``emit`` formats, since the formatter keeps the current second's text."""
        self.acquire()
        try:
            now = time.time_ns()
            line = self.json.line(
                now // 1_000_000_000, now // 1_000_000 % 1000, level, message, logger.name, fields
            )
            encoded = _orjson_line(line)
            # The stream's own bytes when it has them (stdout does), and the line is ASCII: not
            # decoded to be encoded again. The text layer holds nothing of this handler's: it
            # flushes every line it writes.
            binary = getattr(self.stream, "buffer", None)
            if encoded is not None and binary is not None:
                binary.write(encoded + b"\n")
                binary.flush()
            else:
                self.stream.write(_as_text(line, encoded) + self.terminator)
                self.stream.flush()
        except Exception:  # as emit(): reported on stderr, never raised to the caller
            self.handleError(_record(logger, level, message, fields))
        finally:
            self.release()


def log_event(logger: logging.Logger, level: int, message: str, fields: dict[str, object]) -> None:
    """``logger.log(level, message, extra=fields)``, for ``fields`` that name no LogRecord
    attribute: the same line. The decision log calls it on every request, so when the line
    would reach ``configure_logging``'s handler and nothing else, that handler writes it
    without a LogRecord and the logging module's dispatch."""
    if not logger.isEnabledFor(level):
        return
    handler = _sole_handler(logger, level)
    if handler is None:
        logger.handle(_record(logger, level, message, fields))
    else:
        handler.write_event(logger, level, message, fields)


def _sole_handler(logger: logging.Logger, level: int) -> JsonStreamHandler | None:
    """The root's JsonStreamHandler when it is the only handler a record of ``logger`` at
    ``level`` reaches, nothing filters the record and the handler still formats as its own."""
    if logger.filters:
        return None
    node = logger
    while node.parent is not None:
        if node.handlers or not node.propagate:
            return None
        node = node.parent
    if len(node.handlers) != 1:
        return None
    handler = node.handlers[0]
    if (
        not isinstance(handler, JsonStreamHandler)
        or handler.filters
        or level < handler.level
        or handler.formatter is not handler.json
    ):
        return None
    return handler


def _record(
    logger: logging.Logger, level: int, message: str, fields: dict[str, object]
) -> logging.LogRecord:
    # The caller is given, not found by walking the stack: a line never shows it.
    record = logger.makeRecord(logger.name, level, __file__, 0, message, (), None, "log_event")
    record.__dict__.update(fields)
    return record


def encode_line(line: dict[str, object]) -> str:
    """What ``json.dumps(line, default=str, separators=(",", ":"))`` writes, by orjson when it
    accepts the line (no lone surrogates, no integers beyond 64 bits) and its output is printable
    ASCII (json escapes the rest): the same bytes for strings, integers, booleans, lists and maps.
    Floats in exponent notation (``1e-7``, not ``1e-07``), NaN and infinities (``null``) and enums
    that are not ``str`` (their value) are written as orjson writes them."""
    return _as_text(line, _orjson_line(line))


def _orjson_line(line: dict[str, object]) -> bytes | None:
    """``encode_line``'s text as ASCII bytes, when orjson writes it; else None."""
    try:
        encoded = orjson.dumps(line, default=str, option=_ORJSON_OPTIONS)
    except TypeError:
        return None
    return encoded if encoded.isascii() and b"\x7f" not in encoded else None


def _as_text(line: dict[str, object], encoded: bytes | None) -> str:
    """``encode_line``'s text, given what ``_orjson_line`` made of ``line``."""
    return (
        json.dumps(line, default=str, separators=(",", ":"))
        if encoded is None
        else encoded.decode()
    )


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
    handler = JsonStreamHandler(sys.stdout)
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
