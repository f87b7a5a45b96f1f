"""The rules of docs/rules.md, one module per family: structure, recipe binding, placement,
Networks, directives, protection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from app.domain.policy import OnUnverifiable, Policy
from app.domain.verdict import Code, VerdictBuilder, Violation


def cannot_decide(out: VerdictBuilder, policy: Policy, field: str, reason: str) -> None:
    """ClusterStateUnavailable: denied, or a warning under ``on-unverifiable=allow``."""
    out.judge(
        Violation(
            code=Code.CLUSTER_STATE_UNAVAILABLE,
            field=field,
            message=f"nicguard cannot decide: {reason}",
        ),
        enforce=policy.on_unverifiable is OnUnverifiable.DENY,
    )


LISTED_MAX: Final = 12
"""How many items a message lists before counting the rest."""


def counted(items: Sequence[str], separator: str = ", ", *, total: int | None = None) -> str:
    """The first few of ``items`` (already shown), counting the rest: a message stays short
    whatever the object lists."""
    listed = separator.join(items[:LISTED_MAX])
    extra = (len(items) if total is None else total) - LISTED_MAX
    return f"{listed} and {extra} more" if extra > 0 else listed
