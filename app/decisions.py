"""The decision log: one JSON line per admission decision, never the body."""

from __future__ import annotations

import logging
from typing import Final

from app.domain.verdict import Verdict

EVENT_DECISION: Final = "admission_decision"
EVENT_REJECTED: Final = "admission_rejected"
EVENT_FAILURE: Final = "admission_failure"

logger = logging.getLogger("nicguard.decisions")


def record_decision(
    *,
    uid: str,
    operation: str,
    dry_run: bool,
    group: str,
    kind: str,
    namespace: str,
    name: str,
    username: str,
    verdict: Verdict,
    duration_ms: float,
) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    # What logger.info(..., extra=...) does, minus vetting each key of ``extra`` in Python
    # (ours are fixed and clash with no LogRecord attribute): this runs on every request, and
    # saves 3-5 us of ~95 on Python 3.13 (BENCHMARKS.md: why the fast paths stay). The caller
    # is given, not found by walking the stack: the line never shows it.
    record = logger.makeRecord(
        logger.name, logging.INFO, __file__, 0, "admission decision", (), None, "record_decision"
    )
    record.__dict__.update(
        {
            "event_type": EVENT_DECISION,
            "admission_uid": uid,
            "operation": operation,
            "dry_run": dry_run,
            "resource_group": group,
            "resource_kind": kind,
            "resource_namespace": namespace,
            "resource_name": name,
            "request_username": username,
            "allowed": verdict.allowed,
            "decision": verdict.decision.value,
            # What denied, or would have under enforcement=warn (decision "warned").
            "violation_codes": [v.code.value for v in verdict.denying],
            "grandfathered_codes": [v.code.value for v in verdict.grandfathered],
            "warnings": list(verdict.warnings),
            "recipe": verdict.recipe,
            "duration_ms": round(duration_ms, 3),
        }
    )
    logger.handle(record)


def record_rejected(*, status: int, reason: str) -> None:
    """A request that was not a usable AdmissionReview (answered with an HTTP 4xx)."""
    logger.warning(
        "admission request rejected",
        extra={"event_type": EVENT_REJECTED, "http_status": status, "reason": reason},
    )


def record_failure(*, uid: str, error: BaseException) -> None:
    """An unexpected error while judging (a bug): logged once with its traceback."""
    logger.error(
        "admission failure",
        exc_info=(type(error), error, error.__traceback__),
        extra={"event_type": EVENT_FAILURE, "admission_uid": uid},
    )
