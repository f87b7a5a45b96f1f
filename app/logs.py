"""JSON log lines on stdout: ``ts``, ``level``, ``logger``, ``msg`` plus any ``extra`` keys."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Final

# uvicorn adds an ANSI-coloured copy of each message; JSON consumers want one plain `msg`.
_RESERVED: Final = frozenset(vars(logging.makeLogRecord({})).keys()) | {
    "message",
    "asctime",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line; exceptions are folded into ``exc`` on the same line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update((k, v) for k, v in vars(record).items() if k not in _RESERVED)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


def configure_logging(level: str) -> None:
    """Route every logger (ours, uvicorn's, the kubernetes client's) through one JSON handler."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
