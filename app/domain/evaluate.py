"""Evaluating one admission request, the one entry point of the rules (docs/rules.md,
docs/architecture.md): its assessment once, the judgement of its kind, UPDATE grandfathering and the
setting ``enforcement``. Every applicable rule reports; the result is a Verdict.
"""

from __future__ import annotations

from dataclasses import replace

from app.domain.assessment import Assessment, assess
from app.domain.cluster import ClusterView
from app.domain.fields import JsonMap
from app.domain.grandfather import grandfather
from app.domain.judge import Evaluation, judge_runtime
from app.domain.kinds import Kind, Protected
from app.domain.policy import Enforcement, Policy
from app.domain.protection import judge_protected
from app.domain.review import Operation, Review
from app.domain.snapshot import judge_snapshot
from app.domain.trainjob import judge_trainjob
from app.domain.verdict import Verdict


def evaluate(
    review: Review, view: ClusterView, policy: Policy, *, assessment: Assessment | None = None
) -> Verdict:
    """The verdict for one request; never raises for any input. ``assessment`` is the request's,
    when the caller has made it already (to fetch the runtime a TrainJob needs)."""
    verdict = _judge(review, view, policy, assessment or assess(review))
    if policy.enforcement is Enforcement.DENY or verdict.allowed:
        return verdict
    # enforcement=warn (docs/rollout.md): what would deny is allowed, its lines the first warnings.
    return replace(
        verdict,
        violations=(),
        warned=verdict.violations,
        warnings=tuple(v.render() for v in verdict.violations) + verdict.warnings,
    )


def evaluate_object(
    kind: Kind, obj: JsonMap, namespace: str, view: ClusterView, policy: Policy
) -> Evaluation:
    """Judge a ClusterTrainingRuntime, TrainingRuntime or TrainJob as a CREATE; never raises."""
    if kind is Kind.TRAIN_JOB:
        return judge_trainjob(obj, namespace, view, policy)
    # A TrainingRuntime's pods run in its namespace; a ClusterTrainingRuntime alone names none.
    return judge_runtime(kind, obj, view, policy, pods_in=namespace or None)


def _judge(review: Review, view: ClusterView, policy: Policy, assessment: Assessment) -> Verdict:
    if assessment.skip is not None:
        return Verdict()
    if review.kind is Protected.RUNTIME_SNAPSHOT:
        return judge_snapshot(review, view, policy)
    if isinstance(review.kind, Protected):
        return judge_protected(review.kind, review, view, policy)
    if review.kind is None or review.obj is None:
        return Verdict()
    current = evaluate_object(review.kind, review.obj, review.namespace, view, policy)
    verdict = current.verdict
    if review.operation is not Operation.UPDATE or verdict.allowed or review.old_obj is None:
        return verdict
    previous = evaluate_object(review.kind, review.old_obj, review.namespace, view, policy)
    if previous.fingerprint != current.fingerprint:
        return verdict  # the update changes the wiring: full verdict
    return grandfather(verdict, previous.verdict)
