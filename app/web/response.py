"""Building the AdmissionReview response from a verdict, within the apiserver's size limits.

Denials: ``status.message`` one line per violation (<= 1 KiB), ``details.causes`` per violation
(per dependent it names, for NetworkInUse and its kin);
warnings <= 120 characters each; auditAnnotations ``decision``, ``violations``, ``grandfathered``
(when any), ``recipe``.
"""

from __future__ import annotations

from typing import Final

from app.domain.verdict import Verdict
from app.web.request import API_VERSION, KIND, AdmissionRequest

MESSAGE_MAX_BYTES: Final = 1024
WARNING_MAX_CHARS: Final = 120
WARNINGS_MAX_TOTAL: Final = 2048
CAUSES_MAX: Final = 64
FORBIDDEN: Final = 403
SERVICE_UNAVAILABLE: Final = 503
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
    namespace = admission.review.namespace
    return f"{admission.kind}/{namespace + '/' if namespace else ''}{admission.name}"


def denial_status(admission: AdmissionRequest, verdict: Verdict) -> dict[str, object]:
    code = SERVICE_UNAVAILABLE if verdict.undecided else FORBIDDEN
    lines = [violation.render() for violation in verdict.violations]
    return {
        "status": "Failure",
        "code": code,
        "reason": _REASONS[code],
        "message": bounded_message(f"{subject(admission)}: ", lines),
        "details": {
            "name": admission.name,
            "group": admission.group,
            "kind": admission.kind,
            "causes": [
                {"reason": v.code.value, "field": field, "message": message}
                for v in verdict.violations
                # One cause per object a violation names (dependents), else one per violation.
                for field, message in (v.causes or ((v.field, v.message),))
            ][:CAUSES_MAX],
        },
    }


def bounded_message(prefix: str, lines: list[str]) -> str:
    """``prefix`` + lines joined by newlines, at most 1 KiB of UTF-8, counting what was cut."""
    full = prefix + "\n".join(lines)
    if _size(full) <= MESSAGE_MAX_BYTES:
        return full
    budget = MESSAGE_MAX_BYTES - _size(prefix) - _size(_more(len(lines)))
    kept: list[str] = []
    for line in lines:
        cost = _size(line) + (1 if kept else 0)
        if cost > budget:
            break
        kept.append(line)
        budget -= cost
    if not kept:  # not even the first line fits: cut it
        kept.append(_cut(lines[0], budget))
    return prefix + "\n".join(kept) + _more(len(lines) - len(kept))


def _more(count: int) -> str:
    return f"\n... and {count} more (see details.causes)" if count else ""


def bounded_warnings(warnings: tuple[str, ...]) -> list[str]:
    """Each warning cut to 120 characters; the list cut well under the apiserver's 4 KiB."""
    bounded: list[str] = []
    total = 0
    for index, warning in enumerate(warnings):
        short = _cut_chars(" ".join(warning.split()), WARNING_MAX_CHARS)
        if total + len(short) > WARNINGS_MAX_TOTAL:
            bounded.append(f"... and {len(warnings) - index} more warnings")
            break
        bounded.append(short)
        total += len(short)
    return bounded


def audit_annotations(verdict: Verdict) -> dict[str, str]:
    """``violations``: the codes that denied, or would have under ``enforcement=warn``;
    ``grandfathered``: the codes UPDATE grandfathering downgraded, absent when none."""
    annotations = {
        "decision": verdict.decision.value,
        "violations": ",".join(v.code.value for v in verdict.denying),
    }
    if verdict.grandfathered:
        annotations["grandfathered"] = ",".join(v.code.value for v in verdict.grandfathered)
    annotations["recipe"] = verdict.recipe
    return annotations


def _size(text: str) -> int:
    # surrogatepass: a lone surrogate (valid JSON "\ud800") must not turn a denial into a 500.
    return len(text.encode("utf-8", errors="surrogatepass"))


def _cut(text: str, max_bytes: int) -> str:
    if _size(text) <= max_bytes:
        return text
    cut = text.encode("utf-8", errors="surrogatepass")[: max(max_bytes - 3, 0)].decode(
        "utf-8", errors="ignore"
    )
    return cut + "…"


def _cut_chars(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
