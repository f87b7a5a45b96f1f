"""``nicguard check``: judge the Trainer objects, runtime snapshots, workloads (JobSets, Jobs,
Pods) and ResourceClaimTemplates in files as CREATEs against a file-mode state."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.config import Settings
from app.domain.claimants import snapshot_claimant, workload_claimant
from app.domain.claims import (
    CLAIM_TEMPLATE_KIND,
    DEFAULT_NAMESPACE,
    RESOURCE_API,
    claim_template_of,
    is_claim_template,
)
from app.domain.cluster import (
    ClusterSnapshot,
    RuntimeKey,
    runtime_key,
    with_claim_templates,
    with_claimants,
    with_runtimes,
)
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap, map_at, str_at
from app.domain.kinds import Kind, Protected, Workload, trainer_kind, workload_kind
from app.domain.review import Operation, Review
from app.domain.verdict import Verdict, shown
from app.domain.workloads import workload_templates
from app.files.state import SourcedObject, load_objects, state_snapshot
from app.kubeyaml.claimants import copy_review


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One judged object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    verdict: Verdict

    def to_json(self) -> dict[str, object]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "allowed": self.verdict.allowed,
            "violations": [v.to_json() for v in self.verdict.violations],
            "warnings": list(self.verdict.warnings),
        }


def check_files(
    state: Path,
    files: Sequence[Path],
    settings: Settings,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    note: Callable[[str], None] = lambda _: None,
) -> list[CheckResult]:
    """Evaluate every CTR/TR/TrainJob, JobSet/Job/Pod, runtime snapshot ConfigMap and
    ResourceClaimTemplate in ``files``; raises
    StateFileError on unusable input. Namespaced objects without ``metadata.namespace`` are in
    ``namespace``, as ``kubectl apply -n`` puts them.

    ``note`` hears of every object in ``files`` that is not judged, so none is passed over
    unsaid (a list of a kind nicguard does not know, say).
    """
    snapshot = state_snapshot(state, settings.recipe_configmap, note)
    subjects: list[tuple[SourcedObject, Kind | Workload]] = []
    copies: list[Review] = []
    templates: list[SourcedObject] = []
    for sourced in load_objects(list(files)):
        kind = trainer_kind(sourced.obj) or workload_kind(sourced.obj)
        copy = copy_review(sourced.obj, namespace)
        if isinstance(kind, Workload) and not workload_templates(kind, sourced.obj):
            # What the shipped matchConditions never send: every other Pod of `kubectl get pods`.
            note(f"{sourced.where}: {_described(sourced.obj)} is not wired; not checked")
        elif kind is not None:
            subjects.append((sourced, kind))
        elif copy is not None:
            copies.append(copy)
        elif is_claim_template(sourced.obj):
            templates.append(sourced)
        else:
            note(f"{sourced.where}: {_described(sourced.obj)} is not a {_JUDGED}; not checked")
    # Judged together, as if applied at once: a pod and the ResourceClaimTemplate it names meet
    # whichever comes first in the FILEs (the cluster judges them so, in either order).
    placed = [_placed(o.obj, namespace) for o in templates]
    claimed = [claim_template_of(obj) for obj in placed]
    named = (
        workload_claimant(kind, o.obj, _namespace(o.obj, kind, namespace))
        for o, kind in subjects
        if isinstance(kind, Workload)
    )
    named_by_copies = (snapshot_claimant(c.obj, c.snapshot) for c in copies if c.obj and c.snapshot)
    base = with_claimants(
        with_runtimes(snapshot, dict(_runtime_entries(subjects, namespace))),
        [c for c in (*named, *named_by_copies) if c is not None],
    )
    view = with_claim_templates(base, [t for t in claimed if t is not None])
    results = [_evaluate(o.obj, kind, view, settings, namespace) for o, kind in subjects]
    results += [_evaluate_copy(review, view, settings) for review in copies]
    for position, obj in enumerate(placed):
        # Each template is created into the cluster the others make: without itself.
        others = [t for i, t in enumerate(claimed) if t is not None and i != position]
        results.append(
            _evaluate_template(obj, with_claim_templates(base, others), settings, namespace)
        )
    return results


def _placed(obj: JsonMap, default: str) -> JsonMap:
    """``obj`` in ``default`` unless it names its namespace, as ``kubectl apply -n`` puts it."""
    if str_at(obj, "metadata", "namespace"):
        return obj
    return {**obj, "metadata": {**(map_at(obj, "metadata") or {}), "namespace": default}}


_JUDGED = (
    "ClusterTrainingRuntime, TrainingRuntime, TrainJob, JobSet, Job, Pod, runtime snapshot "
    "ConfigMap or ResourceClaimTemplate"
)


def _evaluate_copy(review: Review, view: ClusterSnapshot, settings: Settings) -> CheckResult:
    """A runtime snapshot ConfigMap, judged as a CREATE of the runtime it copies."""
    return CheckResult(
        api_version="v1",
        kind="ConfigMap",
        namespace=review.namespace,
        name=str_at(review.obj, "metadata", "name") or "",
        verdict=evaluate(review, view, settings.policy),
    )


def _evaluate_template(
    obj: JsonMap, view: ClusterSnapshot, settings: Settings, default: str
) -> CheckResult:
    """A ResourceClaimTemplate, judged as its CREATE at claimtemplates.nicguard.dev."""
    namespace = str_at(obj, "metadata", "namespace") or default
    name = str_at(obj, "metadata", "name") or ""
    review = Review(
        operation=Operation.CREATE,
        kind=Protected.CLAIM_TEMPLATE,
        namespace=namespace,
        obj=obj,
        name=name,
    )
    return CheckResult(
        api_version=RESOURCE_API,
        kind=CLAIM_TEMPLATE_KIND,
        namespace=namespace,
        name=name,
        verdict=evaluate(review, view, settings.policy),
    )


def _described(obj: JsonMap) -> str:
    """``trainer.kubeflow.org/v1alpha1 ClusterTrainingRuntimeList x``, as far as it is known."""
    parts = (str_at(obj, "apiVersion"), str_at(obj, "kind"), str_at(obj, "metadata", "name"))
    return " ".join(shown(part) for part in parts if part)


def _namespace(obj: JsonMap, kind: Kind | Workload, default: str) -> str:
    # kubectl apply puts namespaced objects without a namespace into -n's (else "default").
    namespaced = isinstance(kind, Workload) or kind.namespaced
    return (str_at(obj, "metadata", "namespace") or default) if namespaced else ""


def _runtime_entries(
    subjects: list[tuple[SourcedObject, Kind | Workload]], default: str
) -> list[tuple[RuntimeKey, JsonMap]]:
    return [
        (
            runtime_key(
                kind, _namespace(o.obj, kind, default), str_at(o.obj, "metadata", "name") or ""
            ),
            o.obj,
        )
        for o, kind in subjects
        if isinstance(kind, Kind) and kind.is_runtime
    ]


def _evaluate(
    obj: JsonMap, kind: Kind | Workload, view: ClusterSnapshot, settings: Settings, default: str
) -> CheckResult:
    namespace = _namespace(obj, kind, default)
    review = Review(operation=Operation.CREATE, kind=kind, namespace=namespace, obj=obj)
    return CheckResult(
        api_version=str_at(obj, "apiVersion") or "",
        kind=kind.value,
        namespace=namespace,
        name=str_at(obj, "metadata", "name") or "",
        verdict=evaluate(review, view, settings.policy),
    )


def render_json(results: list[CheckResult]) -> str:
    return json.dumps({"results": [r.to_json() for r in results]}, indent=2)


def render_text(results: list[CheckResult]) -> str:
    """One block per object, verdict first, then each violation with its code and field."""
    blocks = []
    for result in results:
        where = f"{result.namespace}/" if result.namespace else ""
        lines = [
            f"{'ALLOWED' if result.verdict.allowed else 'DENIED '} "
            f"{result.kind} {where}{result.name}"
        ]
        for violation in result.verdict.violations:
            lines.append(f"  {violation.render()}")
            lines.append(f"      at {violation.field}")
        lines.extend(f"  warning: {warning}" for warning in result.verdict.warnings)
        blocks.append("\n".join(lines))
    if not results:
        return f"no {_JUDGED} found"
    denied = sum(not r.verdict.allowed for r in results)
    summary = f"{len(results)} checked, {len(results) - denied} allowed, {denied} denied"
    return "\n\n".join([*blocks, summary])
