"""A daemon thread woken through a condition, stopped through an event: what the auditor, the
writer and the claimant sweep each run."""

from __future__ import annotations

import threading


class WokenLoop:
    """Subclasses implement ``_run``; it waits on ``_wake`` and returns once ``_stopping`` is
    set."""

    def __init__(self, name: str) -> None:
        self._wake = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        with self._wake:
            self._stopping.set()
            self._wake.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def alive(self) -> bool:
        return self._thread.is_alive()
