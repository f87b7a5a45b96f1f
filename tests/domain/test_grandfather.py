"""UPDATE grandfathering (app.domain.grandfather): what the old object already had becomes a
warning led by its code; what the update introduces still denies."""

from __future__ import annotations

from app.domain.grandfather import grandfather
from app.domain.verdict import Code, Verdict, Violation

LOST = Violation(code=Code.NETWORK_NOT_FOUND, field="f", message="eth8->gpu-nic-8 is missing")
BAD = Violation(code=Code.DEFAULT_INTERFACE_INVALID, field="g", message="not eth0")


def test_what_the_old_object_had_is_a_warning_and_the_rest_still_denies() -> None:
    now = Verdict(violations=(LOST, BAD), warnings=("a note",), recipe="ns/r@1")
    result = grandfather(now, previous=Verdict(violations=(BAD,)))
    assert result == Verdict(
        violations=(LOST,),
        waived=(BAD,),
        grandfathered=(BAD,),
        warnings=("a note", "[DefaultInterfaceInvalid] pre-existing, wiring unchanged: not eth0"),
        recipe="ns/r@1",
    )


def test_a_code_the_old_object_had_only_as_a_warning_is_grandfathered_too() -> None:
    result = grandfather(Verdict(violations=(LOST,)), previous=Verdict(waived=(LOST,)))
    assert (result.allowed, result.grandfathered) == (True, (LOST,))


def test_nothing_in_common_changes_nothing() -> None:
    now = Verdict(violations=(LOST,))
    assert grandfather(now, previous=Verdict(violations=(BAD,))) == replace_warnings(now)


def replace_warnings(verdict: Verdict) -> Verdict:
    """The verdict as grandfather() returns it when nothing is downgraded."""
    return Verdict(violations=verdict.violations, warnings=verdict.warnings)
