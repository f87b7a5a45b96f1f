"""A runtime fetch (``app.domain.cluster.RuntimeFetch``) whose GETs block until the test
releases them, for the runtime GET's bounds (tests/web)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Final

from app.domain.cluster import RuntimeKey
from app.domain.kinds import Kind
from app.web.runtime_reads import Fetched

RUNTIME: Final = {"metadata": {"name": "found"}}


class HeldFetch:
    """A fetch whose GET of each runtime blocks until ``release(name)``; it then answers
    ``answers[name]`` (raising it when it is an exception), else ``RUNTIME``."""

    def __init__(self, answers: Mapping[str, Fetched | Exception] | None = None) -> None:
        self.answers = dict(answers or {})
        self.calls: list[RuntimeKey] = []
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Condition()

    def _gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def release(self, *names: str) -> None:
        for name in names:
            self._gate(name).set()

    def release_all(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.set()

    def wait_entered(self, count: int) -> None:
        """Block until ``count`` GETs have begun."""
        with self._lock:
            self._lock.wait_for(lambda: len(self.calls) >= count)

    def __call__(self, kind: Kind, namespace: str, name: str) -> Fetched:
        gate = self._gate(name)
        with self._lock:
            self.calls.append((kind, namespace, name))
            self._lock.notify_all()
        gate.wait()
        answer = self.answers.get(name, RUNTIME)
        if isinstance(answer, Exception):
            raise answer
        return answer
