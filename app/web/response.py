"""Building the AdmissionReview response from a verdict, within the apiserver's size limits.

Denials: ``status.message`` one line per violation (<= 1 KiB), ``details.causes`` per violation
(per dependent it names, for NetworkInUse and its kin; at most 20, messages <= 256 bytes, fields
<= 1 KiB); warnings <= 120 characters each; auditAnnotations ``decision``, ``violations``,
``grandfathered`` (when any), ``recipe``, each <= 1 KiB with codes listed once.
"""

from __future__ import annotations

from typing import Final

from app.domain.bounds import codes_once, cut, escaped, printable_ascii, shown_field, size
from app.domain.verdict import Verdict, Violation
from app.web.request import API_VERSION, KIND, AdmissionRequest

MESSAGE_MAX_BYTES: Final = 1024
WARNING_MAX_CHARS: Final = 120
WARNINGS_MAX_TOTAL: Final = 2048
CAUSES_MAX: Final = 20
CAUSE_MESSAGE_MAX_BYTES: Final = 256
CAUSE_FIELD_MAX_BYTES: Final = 1024
ANNOTATION_MAX_BYTES: Final = 1024
FORBIDDEN: Final = 403
SERVICE_UNAVAILABLE: Final = 503
# No more lines than this fit in the message (each after the first takes a newline): those
# after them are only counted.
_LINES_MAX: Final = MESSAGE_MAX_BYTES + 1
_REASONS: Final = {403: "Forbidden", 503: "ServiceUnavailable", 500: "InternalError"}


def review_response(admission: AdmissionRequest, verdict: Verdict) -> dict[str, object]:
    """The full AdmissionReview to send back; never contains a patch."""
    response: dict[str, object] = {
        "uid": admission.uid,
        "allowed": verdict.allowed,
        "auditAnnotations": audit_annotations(verdict),
    }
    if not verdict.allowed:
        response["status"] = denial_status(admission, verdict)
    warnings = bounded_warnings(verdict.warnings)
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def subject(admission: AdmissionRequest) -> str:
    return shown_field(_where(admission), CAUSE_MESSAGE_MAX_BYTES)


def _where(admission: AdmissionRequest) -> str:
    namespace = admission.review.namespace
    return f"{admission.kind}/{namespace + '/' if namespace else ''}{admission.name}"


def denial_status(admission: AdmissionRequest, verdict: Verdict) -> dict[str, object]:
    code = SERVICE_UNAVAILABLE if verdict.undecided else FORBIDDEN
    status = _status_as_is(admission, verdict.violations, code)
    return status if status is not None else bounded_status(admission, verdict, code)


def bounded_status(admission: AdmissionRequest, verdict: Verdict, code: int) -> dict[str, object]:
    """A denial's ``status``, every text escaped and cut to its bound."""
    violations = verdict.violations
    lines = [violation.render() for violation in violations[:_LINES_MAX]]
    return {
        "status": "Failure",
        "code": code,
        "reason": _REASONS[code],
        "message": bounded_message(f"{subject(admission)}: ", lines, total=len(violations)),
        "details": {
            "name": shown_field(admission.name, CAUSE_FIELD_MAX_BYTES),
            "group": shown_field(admission.group, CAUSE_MESSAGE_MAX_BYTES),
            "kind": shown_field(admission.kind, CAUSE_MESSAGE_MAX_BYTES),
            "causes": bounded_causes(verdict),
        },
    }


def _status_as_is(
    admission: AdmissionRequest, violations: tuple[Violation, ...], code: int
) -> dict[str, object] | None:
    """``bounded_status`` when no text needs escaping or cutting, built without asking each
    (what an apiserver's review and nicguard's findings hold): None when one might."""
    if len(violations) > CAUSES_MAX:
        return None
    where = _where(admission)
    # The kind and the name are within ``where``: checked there, against a bound shorter than
    # each of theirs.
    texts = [where, admission.group]
    for violation in violations:
        field, message = violation.field, violation.message
        if (
            violation.causes
            or len(field) > CAUSE_FIELD_MAX_BYTES
            or len(message) > CAUSE_MESSAGE_MAX_BYTES
        ):
            return None
        texts += (field, message)
    if not printable_ascii("".join(texts)):
        return None
    lines = "\n".join([violation.render() for violation in violations])
    message = f"{where}: {lines}"
    if (
        len(message) > MESSAGE_MAX_BYTES
        or len(where) > CAUSE_MESSAGE_MAX_BYTES
        or len(admission.group) > CAUSE_MESSAGE_MAX_BYTES
    ):
        return None
    return {
        "status": "Failure",
        "code": code,
        "reason": _REASONS[code],
        "message": message,
        "details": {
            "name": admission.name,
            "group": admission.group,
            "kind": admission.kind,
            "causes": [
                {"reason": v.code, "field": v.field, "message": v.message} for v in violations
            ],
        },
    }


def bounded_causes(verdict: Verdict) -> list[dict[str, str]]:
    """One cause per object a violation names (dependents), else one per violation; at most
    20, the last saying how many more there are when that is not all."""
    violations = verdict.violations
    # Beyond the first 20 violations, what is left is only counted.
    listed = violations if len(violations) <= CAUSES_MAX else violations[:CAUSES_MAX]
    causes: list[tuple[str, str, str]] = []
    for v in listed:
        if v.causes:
            causes += [(v.code, field, message) for field, message in v.causes]
        else:
            causes.append((v.code, v.field, v.message))
    total = len(causes) if listed is violations else sum(len(v.causes) or 1 for v in violations)
    if total > CAUSES_MAX:
        more = total - CAUSES_MAX + 1
        reason = causes[CAUSES_MAX - 1][0]
        causes = [
            *causes[: CAUSES_MAX - 1],
            (reason, "", f"... and {more} more (status.message counts the violations)"),
        ]
    return [
        {
            "reason": reason,
            "field": shown_field(field, CAUSE_FIELD_MAX_BYTES),
            "message": shown_field(message, CAUSE_MESSAGE_MAX_BYTES),
        }
        for reason, field, message in causes
    ]


def bounded_message(prefix: str, lines: list[str], *, total: int | None = None) -> str:
    """``prefix`` + lines joined by newlines, at most 1 KiB of UTF-8, counting what was cut.
    ``total`` counts the lines when ``lines`` holds only the first ``_LINES_MAX`` of them."""
    count = len(lines) if total is None else total
    lines = [escaped(line) for line in lines[:_LINES_MAX]]
    full = prefix + "\n".join(lines)
    if count == len(lines) and size(full) <= MESSAGE_MAX_BYTES:
        return full
    budget = MESSAGE_MAX_BYTES - size(prefix) - size(_more(count))
    kept: list[str] = []
    for line in lines:
        cost = size(line) + (1 if kept else 0)
        if cost > budget:
            break
        kept.append(line)
        budget -= cost
    if not kept:  # not even the first line fits: cut it
        kept.append(cut(lines[0], budget))
    return prefix + "\n".join(kept) + _more(count - len(kept))


def _more(count: int) -> str:
    return f"\n... and {count} more (see details.causes)" if count else ""


def bounded_warnings(warnings: tuple[str, ...]) -> list[str]:
    """Each warning cut to 120 characters; the list cut well under the apiserver's 4 KiB."""
    bounded: list[str] = []
    total = 0
    for index, warning in enumerate(warnings):
        short = _cut_chars(escaped(" ".join(warning.split())), WARNING_MAX_CHARS)
        if total + len(short) > WARNINGS_MAX_TOTAL:
            bounded.append(f"... and {len(warnings) - index} more warnings")
            break
        bounded.append(short)
        total += len(short)
    return bounded


def audit_annotations(verdict: Verdict) -> dict[str, str]:
    """``violations``: the codes that denied, or would have under ``enforcement=warn``;
    ``grandfathered``: the codes UPDATE grandfathering downgraded, absent when none."""
    denying = verdict.denying
    annotations = {
        "decision": verdict.decision,  # a Decision is its value, a str
        "violations": cut(",".join(codes_once(denying)), ANNOTATION_MAX_BYTES) if denying else "",
    }
    if verdict.grandfathered:
        grandfathered = ",".join(codes_once(verdict.grandfathered))
        annotations["grandfathered"] = cut(grandfathered, ANNOTATION_MAX_BYTES)
    annotations["recipe"] = shown_field(verdict.recipe, ANNOTATION_MAX_BYTES)
    return annotations


def _cut_chars(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
