"""The audit of what names ResourceClaimTemplates, on the replica that writes (docs/dra.md): when
the templates of a namespace change, its runtime snapshots, JobSets, Jobs and Pods are listed and
judged with them, and an Event on each says what changed. Nothing of it is on the request path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, Protocol

from app.audit.loop import WokenLoop
from app.domain.claimant_audit import ClaimantBook, ClaimantKey, Swept
from app.domain.claimants import Claimant
from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.drift import Change, Standing, complete
from app.domain.fields import JsonMap
from app.domain.policy import Policy
from app.domain.policy_reports import event_reason

logger = logging.getLogger(__name__)

# A burst of template events (a namespace's templates created by one apply) becomes one sweep.
SETTLE: Final = 0.2
# How often a replica that does not write looks whether it writes now, and a failed sweep retries.
RECHECK_SECONDS: Final = 2.0

Lister = Callable[[str | None], list[Claimant]]
"""The claimants of a namespace (None: of the cluster), listed now; raises when it cannot."""


class ClaimantEvents(Protocol):
    """``app.kube.events.EventRecorder``."""

    def published_on_claimants(self) -> dict[ClaimantKey, str]: ...

    def emit_on(self, regarding: JsonMap, reason: str, standing: Standing) -> None: ...


class ClaimantSweep(WokenLoop):
    """``notify`` from any thread (the caches' changes); one daemon thread sweeps."""

    def __init__(
        self,
        lister: Lister,
        snapshot: Callable[[], ClusterSnapshot],
        policy: Policy,
        events: ClaimantEvents,
        leading: Callable[[], bool],
        *,
        settle: float = SETTLE,
        recheck: float = RECHECK_SECONDS,
    ) -> None:
        super().__init__("claimant-sweep")
        self.book = ClaimantBook()
        self._lister, self._snapshot, self._policy = lister, snapshot, policy
        self._events, self._leading = events, leading
        self._settle, self._recheck = settle, recheck
        self._namespaces: set[str] = set()
        self._everything = False
        self._led = False
        self._published: dict[ClaimantKey, str] = {}

    def notify(self, change: Change) -> None:
        """Sweep the namespaces whose templates changed (all, after a cache was lost)."""
        if not (change.everything or change.claim_templates):
            return
        with self._wake:
            self._everything |= change.everything
            self._namespaces |= {namespace for namespace, _ in change.claim_templates}
            self._wake.notify_all()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                swept = self._turn()
            except Exception as error:  # the API failed: what was pending waits for a retry
                logger.warning("claimant sweep failed", extra={"error": str(error)[:300]})
                swept = False
            if not swept:
                with self._wake:
                    if not self._stopping.is_set():
                        self._wake.wait(self._recheck)

    def _turn(self) -> bool:
        """One look: False when there was nothing this replica could sweep (wait, then)."""
        leading = self._leading()
        if leading and not self._led:
            # A new writer reads back what was said, then judges everything once.
            self._published = self._events.published_on_claimants()
            with self._wake:
                self._everything = True
        self._led = leading
        with self._wake:
            if not leading:  # the next writer sweeps everything when it takes over
                self._everything, self._namespaces = False, set()
            if not (self._everything or self._namespaces):
                return False
        self._stopping.wait(self._settle)  # the rest of a burst joins this sweep
        return self._sweep()

    def _sweep(self) -> bool:
        view = self._snapshot()
        if isinstance(complete(view), Unverifiable):
            return False  # a partial view would say partial things: try again later
        with self._wake:
            everything, namespaces = self._everything, sorted(self._namespaces)
            self._everything, self._namespaces = False, set()
        scopes: list[str | None] = [None] if everything else list(namespaces)
        try:
            while scopes:
                scope = scopes[0]
                for swept in self.book.sweep(scope, self._lister(scope), view, self._policy):
                    self._say(swept)
                scopes.pop(0)
                time.sleep(0)  # the request path gets the interpreter between two namespaces
        finally:
            with self._wake:
                if None in scopes:
                    self._everything = True
                self._namespaces |= {s for s in scopes if s is not None}
        return True

    def _say(self, swept: Swept) -> None:
        reason = event_reason(self._published.get(swept.key, ""), swept.standing)
        if reason is None:
            return
        self._events.emit_on(swept.reference, reason, swept.standing)
        if swept.standing.fingerprint:
            self._published[swept.key] = swept.standing.fingerprint
        else:
            self._published.pop(swept.key, None)
        logger.info(
            "claimant audit",
            extra={"reason": reason, "object": "/".join(swept.key[1:]), "codes": _codes(swept)},
        )


def _codes(swept: Swept) -> str:
    return ",".join(code.value for code in swept.standing.codes)
