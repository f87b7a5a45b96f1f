"""The decision log: one JSON line per admission decision, never the body, at most 16 KiB."""

from __future__ import annotations

import logging
from typing import Final

from app.domain.bounds import codes_once, escaped, printable_ascii
from app.domain.verdict import Verdict
from app.logs import log_event

EVENT_DECISION: Final = "admission_decision"
EVENT_REJECTED: Final = "admission_rejected"
EVENT_REFUSED: Final = "admission_refused"
EVENT_FAILURE: Final = "admission_failure"

logger = logging.getLogger("nicguard.decisions")

# The line stays under 16 KiB (Cloud Logging drops entries over 256 KB, and a lost decision is a
# hole in the audit trail): each request field <= 512 bytes as written (JSON, ASCII with \u
# escapes), at most 20 warnings of <= 360 bytes: about 13 KiB at most with the rest of the line.
FIELD_MAX_BYTES: Final = 512
WARNINGS_MAX: Final = 20
WARNING_MAX_BYTES: Final = 360
_CUT: Final = "…"  # \u2026: 6 bytes as written


def _field(text: str, max_bytes: int = FIELD_MAX_BYTES) -> str:
    """Object-supplied text escaped and cut so that its JSON string is at most ``max_bytes``."""
    text = escaped(text)  # no control character left: an ASCII character is 1 or 2 bytes
    if text.isascii() and 2 * len(text) + 2 <= max_bytes:
        return text
    budget = max_bytes - 2 - 6
    for index, char in enumerate(text):
        budget -= 2 if char.isascii() else 12 if ord(char) > 0xFFFF else 6
        if budget < 0:
            return text[:index] + _CUT
    return text


def _plain(texts: tuple[str, ...]) -> bool:
    """Whether every text is one ``_field`` leaves as it is (printable ASCII, short): checked
    for all at once, as it holds for the apiserver's reviews."""
    joined = "".join(texts)
    if not printable_ascii(joined):
        return False
    # Texts short together are each short: the longest is measured only when they are not.
    return 2 * len(joined) + 2 <= FIELD_MAX_BYTES or 2 * max(map(len, texts)) + 2 <= FIELD_MAX_BYTES


def _warnings(warnings: tuple[str, ...]) -> list[str]:
    kept = [_field(w, WARNING_MAX_BYTES) for w in warnings[:WARNINGS_MAX]]
    if len(warnings) > WARNINGS_MAX:
        kept[-1] = f"... and {len(warnings) - WARNINGS_MAX + 1} more warnings"
    return kept


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
    source_address: str,
    client_subject: str | None,
) -> None:
    """``source_address`` (TCP peer) and ``client_subject`` (of the client certificate, when one
    was presented) tell the apiserver's reviews from those of anyone else who reached /validate."""
    if not logger.isEnabledFor(logging.INFO):
        return
    texts: tuple[str, ...] = (
        uid, group, kind, namespace, name, username, verdict.recipe, source_address
    )  # fmt: skip
    if not _plain(texts):
        texts = tuple(_field(text) for text in texts)
    denying, grandfathered, warnings = verdict.denying, verdict.grandfathered, verdict.warnings
    fields: dict[str, object] = {
        "event_type": EVENT_DECISION,
        "admission_uid": texts[0],
        "operation": operation,
        "dry_run": dry_run,
        "resource_group": texts[1],
        "resource_kind": texts[2],
        "resource_namespace": texts[3],
        "resource_name": texts[4],
        "request_username": texts[5],
        "allowed": verdict.allowed,
        "decision": verdict.decision,  # a Decision is its value, a str
        # What denied, or would have under enforcement=warn (decision "warned"); each once.
        "violation_codes": codes_once(denying) if denying else [],
        "grandfathered_codes": codes_once(grandfathered) if grandfathered else [],
        "warnings": _warnings(warnings) if warnings else [],
        "recipe": texts[6],
        "duration_ms": round(duration_ms, 3),
        "source_address": texts[7],
    }
    if client_subject is not None:
        fields["client_subject"] = _field(client_subject)
    log_event(logger, logging.INFO, "admission decision", fields)


def record_rejected(*, status: int, reason: str) -> None:
    """A request that was not a usable AdmissionReview (answered with an HTTP 4xx)."""
    logger.warning(
        "admission request rejected",
        extra={
            "event_type": EVENT_REJECTED,
            "http_status": status,
            "reason": _field(reason),
        },
    )


def record_refused(
    *,
    status: int,
    reason: str,
    uid: str,
    group: str,
    kind: str,
    namespace: str,
    name: str,
    username: str,
    source_address: str,
    client_subject: str | None,
) -> None:
    """A review refused unjudged for what others hold (the body budget, the wait for a thread),
    with what identifies it: "" for what nicguard had not read (a body refused unread)."""
    fields: dict[str, object] = {
        "event_type": EVENT_REFUSED,
        "http_status": status,
        "reason": _field(reason),
        "admission_uid": _field(uid),
        "resource_group": _field(group),
        "resource_kind": _field(kind),
        "resource_namespace": _field(namespace),
        "resource_name": _field(name),
        "request_username": _field(username),
        "source_address": _field(source_address),
    }
    if client_subject is not None:
        fields["client_subject"] = _field(client_subject)
    log_event(logger, logging.WARNING, "admission request refused unjudged", fields)


def record_failure(*, uid: str, error: BaseException) -> None:
    """An unexpected error while judging (a bug): logged once with its traceback."""
    logger.error(
        "admission failure",
        exc_info=(type(error), error, error.__traceback__),
        extra={"event_type": EVENT_FAILURE, "admission_uid": uid},
    )
