"""UPDATE grandfathering: a violation the old object already had is a warning when the update
leaves the wiring untouched (docs/rules.md)."""

from __future__ import annotations

from dataclasses import replace

from app.domain.verdict import Verdict


def grandfather(verdict: Verdict, previous: Verdict) -> Verdict:
    """Downgrade violations the old object already had to warnings, each led by its code."""
    had = {violation.code for violation in (*previous.violations, *previous.waived)}
    kept = tuple(v for v in verdict.violations if v.code not in had)
    old = tuple(v for v in verdict.violations if v.code in had)
    return replace(
        verdict,
        violations=kept,
        waived=verdict.waived + old,
        grandfathered=old,
        warnings=verdict.warnings
        + tuple(f"[{v.code}] pre-existing, wiring unchanged: {v.message}" for v in old),
    )
