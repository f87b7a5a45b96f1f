"""The rules of docs/rules.md, one module per family: structure, recipe binding, placement,
Networks, directives, protection."""

from __future__ import annotations

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
