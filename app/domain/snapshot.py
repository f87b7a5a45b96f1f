"""Judging Trainer's runtime snapshot ConfigMaps: the copy as the runtime it copies, bound as
the copy, the old copy or the live runtime is, every finding named after the ConfigMap, its
TrainJob and the runtime (docs/rules.md, RuntimeSnapshotInvalid). Reading a copy:
app/domain/runtime_snapshot.py."""

from __future__ import annotations

from dataclasses import replace

from app.domain.cluster import ClusterView, Unverifiable
from app.domain.fields import JsonMap
from app.domain.grandfather import grandfather
from app.domain.judge import judge_runtime
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.profiles import Binding, binding_of
from app.domain.review import Operation, Review
from app.domain.rules import cannot_decide
from app.domain.runtime_snapshot import FIELD as SNAPSHOT_FIELD
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation


def judge_snapshot(review: Review, view: ClusterView, policy: Policy) -> Verdict:
    """A runtime snapshot ConfigMap (a request in scope) judged as a CREATE of the runtime it
    copies (docs/rules.md, RuntimeSnapshotInvalid); bound when the copy, the old copy or the
    live runtime is."""
    copy = review.snapshot
    if copy is None:
        return Verdict()
    lead = copy.describe()
    if copy.runtime is None or copy.kind is None:
        out = VerdictBuilder()
        out.deny(
            Violation(
                code=Code.RUNTIME_SNAPSHOT_INVALID,
                field=SNAPSHOT_FIELD,
                message=f"{lead}: {copy.problem}; Trainer builds the TrainJob's pods from this "
                "copy and cannot read it",
            )
        )
        return out.build()
    live = view.runtime(copy.kind, copy.namespace, copy.runtime_name)
    if isinstance(live, Unverifiable):
        out = VerdictBuilder()
        cannot_decide(
            out,
            policy,
            SNAPSHOT_FIELD,
            f"{lead}: the runtime it copies cannot be looked up: {live.reason}",
        )
        return out.build()
    old = review.old_snapshot
    old_copy = None
    if old is not None and old.kind is not None and old.runtime is not None:
        old_copy = (old.kind, old.runtime)
    binding = _snapshot_binding((copy.kind, copy.runtime), old_copy, live, policy)
    # The copy's pods are its TrainJob's: they run in the ConfigMap's namespace.
    current = judge_runtime(copy.kind, copy.runtime, view, policy, binding, pods_in=copy.namespace)
    verdict = current.verdict
    if review.operation is Operation.UPDATE and not verdict.allowed and old_copy is not None:
        previous = judge_runtime(*old_copy, view, policy, binding, pods_in=copy.namespace)
        if previous.fingerprint == current.fingerprint:
            verdict = grandfather(verdict, previous.verdict)
    return _in_copy(verdict, lead)


def _snapshot_binding(
    copy: tuple[Kind, JsonMap],
    old: tuple[Kind, JsonMap] | None,
    live: JsonMap | None,
    policy: Policy,
) -> Binding:
    """The copy's own binding, else the old copy's, else the live runtime's: rewriting the
    labels inside a copy never unbinds it."""
    kind, runtime = copy
    own = binding_of(kind, runtime, policy)
    if own.profile is not None:
        return own
    others = []
    if old is not None:
        others.append(binding_of(*old, policy))
    if live is not None:
        others.append(binding_of(kind, live, policy))
    for other in others:
        if other.profile is not None:
            return replace(other, warning=own.warning)
    return own


def _in_copy(verdict: Verdict, lead: str) -> Verdict:
    """Each finding names the snapshot ConfigMap, its TrainJob and the runtime; each field points
    into the copy (``data.runtime: spec...``)."""

    def moved(violation: Violation) -> Violation:
        return replace(
            violation,
            field=f"{SNAPSHOT_FIELD}: {violation.field}",
            message=f"{lead}: {violation.message}",
            causes=tuple(
                (f"{SNAPSHOT_FIELD}: {field}", f"{lead}: {message}")
                for field, message in violation.causes
            ),
        )

    def named(warning: str) -> str:
        # A warning led by its code keeps it first (a cut warning still says what it is).
        code, bracket, rest = warning.partition("] ")
        if warning.startswith("[") and bracket:
            return f"{code}] {lead}: {rest}"
        return f"{lead}: {warning}"

    return replace(
        verdict,
        violations=tuple(map(moved, verdict.violations)),
        waived=tuple(map(moved, verdict.waived)),
        grandfathered=tuple(map(moved, verdict.grandfathered)),
        warnings=tuple(map(named, verdict.warnings)),
    )
