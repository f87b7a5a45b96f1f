"""Findings as values: stable violation codes, the violation value, and the verdict on one object.

Codes are an API: a test pins them and they are never renamed (docs/rules.md documents each).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final

from app.domain.value_type import value_type


class Code(StrEnum):
    """Stable CamelCase rejection codes."""

    INTERFACES_ANNOTATION_MISSING = "InterfacesAnnotationMissing"
    INTERFACES_ANNOTATION_MALFORMED = "InterfacesAnnotationMalformed"
    PRIMARY_INTERFACE_INVALID = "PrimaryInterfaceInvalid"
    DEFAULT_INTERFACE_INVALID = "DefaultInterfaceInvalid"
    INTERFACE_NAME_INVALID = "InterfaceNameInvalid"
    INTERFACE_DUPLICATED = "InterfaceDuplicated"
    NETWORK_DUPLICATED = "NetworkDuplicated"
    NETWORK_RESERVED = "NetworkReserved"
    NODE_JOB_MISSING = "NodeJobMissing"
    MAPPING_DIVERGES_FROM_RECIPE = "MappingDivergesFromRecipe"
    MAPPING_DIVERGES_FROM_PROFILE = "MappingDivergesFromProfile"
    DEVICE_MODE_MISMATCH = "DeviceModeMismatch"
    NETWORK_NOT_FOUND = "NetworkNotFound"
    NETWORK_NOT_READY = "NetworkNotReady"
    NETWORK_API_NOT_SERVED = "NetworkAPINotServed"
    RECIPE_UNAVAILABLE = "RecipeUnavailable"
    RECIPE_INVALID = "RecipeInvalid"
    NETWORK_IN_USE = "NetworkInUse"
    PARAM_SET_IN_USE = "ParamSetInUse"
    RECIPE_IN_USE = "RecipeInUse"
    PATCH_DIRECTIVE_UNSUPPORTED = "PatchDirectiveUnsupported"
    RUNTIME_SNAPSHOT_INVALID = "RuntimeSnapshotInvalid"
    NETWORK_MISPLACED = "NetworkMisplaced"
    RDMA_CLAIM_MISSING = "RdmaClaimMissing"
    RDMA_CLAIM_MISMATCH = "RdmaClaimMismatch"
    RESOURCE_CLAIM_TEMPLATE_NOT_FOUND = "ResourceClaimTemplateNotFound"
    WIRING_MODE_CONFLICT = "WiringModeConflict"
    CLUSTER_STATE_UNAVAILABLE = "ClusterStateUnavailable"


@value_type(kw_only=True)
class Violation:
    """One reason to reject: a stable code, the JSON path of the offending field, and why."""

    code: Code
    field: str
    message: str
    causes: tuple[tuple[str, str], ...] = ()
    """``(field, message)`` per object the message names, when it names several (dependents)."""

    def render(self) -> str:
        return f"[{self.code}] {self.message}"

    def prefixed(self, prefix: str) -> Violation:
        """The same violation, its message led by ``prefix``: ``dataclasses.replace`` without
        its generic cost, for objects whose thousands of templates each report."""
        return Violation(
            code=self.code, field=self.field, message=prefix + self.message, causes=self.causes
        )

    def to_json(self) -> dict[str, str]:
        """The violation as ``check`` and ``audit`` print it in JSON."""
        return {"code": self.code.value, "message": self.message, "field": self.field}


_SHOWN_MAX = 64


def shown(value: str, limit: int = _SHOWN_MAX) -> str:
    """A user-supplied name as it may appear in a message: escaped, and cut to 64 characters
    (``limit``: a decoder's reason, which names a construct and its position).

    Denials name interfaces and networks but never echo more of the object than that.
    """
    cut = value if len(value) <= limit else value[: limit - 1] + "…"
    if cut.isprintable():
        return cut
    return cut.encode("unicode_escape").decode("ascii")


NO_RECIPE: Final = "none"


class Decision(StrEnum):
    """What became of a request: the ``decision`` of the audit annotations, the decision log
    line and the request metric (docs/rules.md)."""

    ALLOWED = "allowed"
    DENIED = "denied"
    WARNED = "warned"
    """Would have been denied; allowed under ``enforcement=warn`` (docs/rollout.md)."""


# Read by every review, so by module names: Python 3.11 looks an enum's member up through
# EnumType.__getattr__'s hook, several times the cost of a global (3.12 dropped it).
_ALLOWED: Final = Decision.ALLOWED
_DENIED: Final = Decision.DENIED
_WARNED: Final = Decision.WARNED
_UNDECIDED: Final = Code.CLUSTER_STATE_UNAVAILABLE


@value_type(kw_only=True)
class Verdict:
    """``violations`` deny the object; ``waived`` ones were downgraded to ``warnings`` (by a
    policy, or by UPDATE grandfathering: those are also in ``grandfathered``); ``warned`` ones
    would have denied it and were allowed, as warnings, under ``enforcement=warn``."""

    violations: tuple[Violation, ...] = ()
    waived: tuple[Violation, ...] = ()
    warnings: tuple[str, ...] = ()
    recipe: str = NO_RECIPE
    grandfathered: tuple[Violation, ...] = ()
    warned: tuple[Violation, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.violations

    @property
    def decision(self) -> Decision:
        if self.violations:
            return _DENIED
        return _WARNED if self.warned else _ALLOWED

    @property
    def found(self) -> tuple[Violation, ...]:
        """Every finding, enforced or let through: violations, waived and warned."""
        return (*self.violations, *self.waived, *self.warned)

    @property
    def denying(self) -> tuple[Violation, ...]:
        """The violations that denied, or that would have under ``enforcement=warn``."""
        return self.violations or self.warned

    def allowing(self, *, warned: bool) -> Verdict:
        """Allowed, each violation's line the first of its warnings: ``warned`` (kept apart, as
        ``enforcement=warn`` reports them) or else ``waived`` by a policy."""
        lines = tuple(v.render() for v in self.violations) + self.warnings
        if warned:
            return replace(self, violations=(), warned=self.violations, warnings=lines)
        return replace(self, violations=(), waived=self.violations + self.waived, warnings=lines)

    @property
    def undecided(self) -> bool:
        """Denied only because nicguard cannot decide (ClusterStateUnavailable): the webhook
        answers 503 rather than 403."""
        for violation in self.violations:
            if violation.code is not _UNDECIDED:
                return False
        return bool(self.violations)


@dataclass(slots=True)
class Findings:
    """What the rules found about one object; every builder scoped from one adds to it."""

    violations: list[Violation] = field(default_factory=list)
    waived: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    recipe: str = NO_RECIPE


@dataclass(slots=True)
class VerdictBuilder:
    """Collects findings while the rules run; every rule reports, none stops the others."""

    found: Findings = field(default_factory=Findings)
    prefix: str = ""
    """Put before every message and warning, e.g. to name the job a finding is about."""
    subject: Callable[[], str] | None = None
    """Says what the object is, before ``prefix``, once there is something to say: an object
    described at length (a Pod by its controller) is described only when it has findings."""

    @property
    def violations(self) -> list[Violation]:
        return self.found.violations

    @property
    def waived(self) -> list[Violation]:
        return self.found.waived

    @property
    def warnings(self) -> list[str]:
        return self.found.warnings

    @property
    def recipe(self) -> str:
        """The recipe consulted; set through any scoped builder, it is the object's."""
        return self.found.recipe

    @recipe.setter
    def recipe(self, ref: str) -> None:
        self.found.recipe = ref

    def scoped(self, prefix: str) -> VerdictBuilder:
        """A builder that adds to the same findings, with ``prefix`` before each message."""
        if not prefix:
            return self  # the same findings and prefix: as good as a new builder, and free
        return VerdictBuilder(self.found, self.prefix + prefix, self.subject)

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
        self.warnings.append(self._lead() + warning)

    def _prefixed(self, violation: Violation) -> Violation:
        lead = self._lead()
        if not lead:
            return violation
        return violation.prefixed(lead)

    def _lead(self) -> str:
        """What goes before a finding: ``prefix``, after the subject's description."""
        subject = self.subject
        if subject is not None:
            self.prefix, self.subject = subject() + self.prefix, None
        return self.prefix

    def build(self) -> Verdict:
        found = self.found
        if not (found.violations or found.waived or found.warnings):
            return Verdict(recipe=found.recipe)  # what almost every review finds: nothing
        return Verdict(
            violations=tuple(self.violations),
            waived=tuple(self.waived),
            warnings=tuple(self.warnings),
            recipe=self.recipe,
        )
