"""A decision about one object: enforced violations, warnings, and the recipe consulted."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from app.domain.violations import Code, Violation

NO_RECIPE: Final = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """``violations`` deny the object; ``waived`` ones were downgraded to ``warnings``."""

    violations: tuple[Violation, ...] = ()
    waived: tuple[Violation, ...] = ()
    warnings: tuple[str, ...] = ()
    recipe: str = NO_RECIPE

    @property
    def allowed(self) -> bool:
        return not self.violations

    @property
    def status_code(self) -> int:
        """403 for a policy denial; 503 when the only reason is that nicguard cannot decide."""
        if self.violations and all(
            v.code is Code.CLUSTER_STATE_UNAVAILABLE for v in self.violations
        ):
            return 503
        return 403


@dataclass(slots=True)
class VerdictBuilder:
    """Collects findings while the rules run; every rule reports, none stops the others."""

    violations: list[Violation] = field(default_factory=list)
    waived: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    recipe: str = NO_RECIPE
    prefix: str = ""
    """Put before every message and warning, e.g. to name the job a finding is about."""

    def scoped(self, prefix: str) -> VerdictBuilder:
        """A builder that adds to the same findings, with ``prefix`` before each message."""
        return VerdictBuilder(
            self.violations, self.waived, self.warnings, self.recipe, self.prefix + prefix
        )

    def deny(self, violation: Violation) -> None:
        self.violations.append(self._prefixed(violation))

    def waive(self, violation: Violation) -> None:
        """Record a violation that policy downgrades to a warning."""
        violation = self._prefixed(violation)
        self.waived.append(violation)
        self.warnings.append(violation.render())

    def judge(self, violation: Violation, *, enforce: bool) -> None:
        if enforce:
            self.deny(violation)
        else:
            self.waive(violation)

    def note(self, warning: str) -> None:
        self.warnings.append(self.prefix + warning)

    def _prefixed(self, violation: Violation) -> Violation:
        if not self.prefix:
            return violation
        return replace(violation, message=self.prefix + violation.message)

    def build(self) -> Verdict:
        return Verdict(
            violations=tuple(self.violations),
            waived=tuple(self.waived),
            warnings=tuple(self.warnings),
            recipe=self.recipe,
        )
