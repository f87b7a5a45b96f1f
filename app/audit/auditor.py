"""Every replica's audit loop: hears cache changes, lets a burst settle, re-judges only what it
affects (in small parts, so admission threads get the interpreter between them) and tells the
writer which standings changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from app.audit.loop import WokenLoop
from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.drift import Change, DriftBook, Transition, complete
from app.domain.policy import Policy

logger = logging.getLogger(__name__)

# A burst of watch events (a Network's status written field by field, a relist) becomes one pass:
# wait until SETTLE passes without news, never longer than MAX_WAIT after the first.
SETTLE: Final = 0.05
MAX_WAIT: Final = 0.25
# Runtimes judged between two yields of the interpreter (each ~50-100 µs).
PART: Final = 64

Listener = Callable[[list[Transition]], None]


class Auditor(WokenLoop):
    """``notify`` from any thread; one daemon thread owns the ``DriftBook``."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        policy: Policy,
        *,
        settle: float = SETTLE,
        max_wait: float = MAX_WAIT,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("auditor")
        self.book = DriftBook(policy)
        self.last_change: float | None = None
        """Wall-clock time of the last pass that changed a standing (a metric)."""
        self.judged_all = False
        """Whether every runtime has been judged once (until then the book is partial)."""
        self._snapshot, self._settle, self._max_wait, self._wall = snapshot, settle, max_wait, wall
        self._pending = Change()
        self._deferred = Change()
        """What passes against a partial view were told (the auditor's thread only)."""
        self._busy = False
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        """Hear each pass's transitions (on the auditor thread)."""
        self._listeners.append(listener)

    def notify(self, change: Change) -> None:
        with self._wake:
            self._pending |= change
            self._wake.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is pending or being judged (tests and the file-mode start)."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._pending and not self._busy, timeout)

    def run_pass(self) -> int | Unverifiable:
        """Take what is pending and judge it now (the thread's body; file mode calls it once);
        how many standings changed, or why nothing could be judged."""
        with self._wake:
            change, self._pending, self._busy = self._pending, Change(), True
        try:
            return self._judge(change)
        finally:
            with self._wake:
                self._busy = False
                self._wake.notify_all()

    def _judge(self, change: Change) -> int | Unverifiable:
        view = self._snapshot()
        runtimes = complete(view)
        if isinstance(runtimes, Unverifiable):
            # Nothing is judged against a partial view, and nothing it was told is dropped:
            # the change waits for the next pass (the missing cache's return is one, and the
            # recipe's return alone names only the runtimes bound to it).
            self._deferred |= change
            logger.debug("audit waits for the caches", extra={"reason": runtimes.reason})
            return runtimes
        change, self._deferred = change | self._deferred, Change()
        keys = self.book.to_judge(change, runtimes, view.recipe())
        changed = 0
        for start in range(0, len(keys), PART):
            # Told part by part: a first pass over 100,000 runtimes never holds them all as
            # transitions at once.
            transitions = self.book.rejudge(keys[start : start + PART], view)
            if transitions:
                changed += len(transitions)
                self.last_change = self._wall()
                for listener in self._listeners:
                    listener(transitions)
            time.sleep(0)  # let the event loop's thread take the interpreter
        self.judged_all = self.judged_all or change.everything
        if changed:
            logger.info("audit standings changed", extra={"judged": len(keys), "changed": changed})
        return changed

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: bool(self._pending) or self._stopping.is_set())
                if self._stopping.is_set():
                    return
                self._wait_for_quiet()
                if self._stopping.is_set():
                    return
            try:
                self.run_pass()
            except Exception:  # a bug in one pass must not end the audit
                logger.exception("audit pass failed")

    def _wait_for_quiet(self) -> None:
        """Called holding the lock with something pending: wait until it settles."""
        deadline = time.monotonic() + self._max_wait
        while not self._stopping.is_set():
            seen = self._pending
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.wait(min(self._settle, remaining))
            if self._pending == seen:
                return
