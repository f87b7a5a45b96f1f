"""Evaluating one admission request, the one entry point of the rules (docs/rules.md,
docs/architecture.md): its assessment once, the judgement of its kind, UPDATE grandfathering and the
setting ``enforcement``. Every applicable rule reports; the result is a Verdict.
"""

from __future__ import annotations

from typing import Final

from app.domain.assessment import Assessment, assess
from app.domain.cluster import ClusterView
from app.domain.fields import JsonMap
from app.domain.grandfather import grandfather
from app.domain.judge import Evaluation, judge_runtime, runtime_fingerprint
from app.domain.kinds import POD, TRAIN_JOB, Copy, Kind, Protected, Workload
from app.domain.policy import Enforcement, Policy
from app.domain.protection import judge_protected
from app.domain.review import UPDATE, Review
from app.domain.snapshot import judge_snapshot
from app.domain.trainjob import judge_trainjob
from app.domain.verdict import Verdict
from app.domain.workloads import judge_workload, workload_fingerprint

# Read per review, so by module names (an enum member costs more on 3.11: docs/request-cost.md).
_DENY: Final = Enforcement.DENY


def evaluate(
    review: Review, view: ClusterView, policy: Policy, *, assessment: Assessment | None = None
) -> Verdict:
    """The verdict for one request; never raises for any input. ``assessment`` is the request's,
    when the caller has made it already (to fetch the runtime a TrainJob needs)."""
    verdict = _judge(review, view, policy, assessment or assess(review))
    if verdict.allowed or policy.enforcement is _DENY:
        return verdict
    # enforcement=warn (docs/rollout.md): what would deny is allowed, its lines the first warnings.
    return verdict.allowing(warned=True)


def evaluate_object(
    kind: Kind | Workload,
    obj: JsonMap,
    namespace: str,
    view: ClusterView,
    policy: Policy,
    *,
    old: JsonMap | None = None,
) -> Evaluation:
    """Judge a ClusterTrainingRuntime, TrainingRuntime, TrainJob, JobSet, Job or Pod as a
    CREATE; never raises. ``old``: the workload an UPDATE replaces (wiring it removes)."""
    if isinstance(kind, Workload):
        return judge_workload(kind, obj, namespace, view, policy, old=old)
    if kind is TRAIN_JOB:
        return judge_trainjob(obj, namespace, view, policy)
    # A TrainingRuntime's pods run in its namespace; a ClusterTrainingRuntime alone names none.
    return judge_runtime(kind, obj, view, policy, pods_in=namespace or None)


def _judge(review: Review, view: ClusterView, policy: Policy, assessment: Assessment) -> Verdict:
    # One row per role (app/domain/kinds.py): snapshots are judged as the runtime they copy,
    # what the wiring depends on is protected, Trainer kinds and workloads are judged as objects.
    kind = review.kind
    if assessment.skip is not None or kind is None:
        return Verdict()
    if isinstance(kind, Copy):
        return judge_snapshot(review, view, policy)
    if isinstance(kind, Protected):
        return judge_protected(kind, review, view, policy)
    return _judge_object(kind, review, view, policy)


def _judge_object(
    kind: Kind | Workload, review: Review, view: ClusterView, policy: Policy
) -> Verdict:
    """A Trainer object or a workload, with UPDATE grandfathering (never for a Pod: its NICs
    are attached from the annotation as it is when its sandbox is created)."""
    if review.obj is None:
        return Verdict()
    updated = review.old_obj if review.operation is UPDATE else None
    current = evaluate_object(kind, review.obj, review.namespace, view, policy, old=updated)
    verdict = current.verdict
    if updated is None or verdict.allowed or kind is POD:
        return verdict
    # The old object's wiring is read before it is judged, if it is judged at all: an object can
    # hold thousands of templates (a JobSet's), and judging them costs ten times reading them.
    if isinstance(kind, Workload):
        if workload_fingerprint(kind, updated) != current.fingerprint:
            return verdict  # the update changes the wiring: full verdict
        # The same fingerprint, the same codes (workload_fingerprint): what the old object had.
        return grandfather(verdict, verdict)
    if kind.is_runtime and runtime_fingerprint(updated) != current.fingerprint:
        return verdict
    # Judged: a runtime's binding (its labels) is no part of its wiring; a TrainJob's wiring is
    # its runtime's, read from the view.
    previous = evaluate_object(kind, updated, review.namespace, view, policy)
    if previous.fingerprint != current.fingerprint:
        return verdict
    return grandfather(verdict, previous.verdict)
