"""A logging handler that keeps the records it is given, for tests that read them."""

from __future__ import annotations

import logging


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
