"""A new ResourceClaimTemplate judged with the wired objects that name it (docs/dra.md): a cached
runtime admitted before the template existed, mapping a Device-type Network beside the claim, is
WiringModeConflict at the template's door, as it would have been at its own had the template
come first; so is a claimant the view knows (a snapshot, JobSet, Job or Pod), and a snapshot of a
DRA-bound TrainJob left short of its NICs. Order does not decide the verdict."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Final

from app.domain.claimants import CLAIM_CODES, judge_claimant
from app.domain.claims import CLAIM_TEMPLATE_KIND, RDMA_CLASS, RESOURCE_API, claim_template_of
from app.domain.cluster import ClusterView, Unverifiable, WithClaimTemplate, runtime_name
from app.domain.fields import JsonMap
from app.domain.judge import judge_runtime
from app.domain.policy import Policy, Protect
from app.domain.rules.claim_templates import REQUESTS, mismatch_field, named_together
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation, shown


def template_conflicts(
    obj: JsonMap, namespace: str, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> None:
    """What the template adds to the verdicts of the wired objects of its namespace that name
    it, each judged with and without it: WiringModeConflict for a cached runtime whose pods would
    run there (a TrainingRuntime of it, any ClusterTrainingRuntime), any finding that depends on
    the templates for a claimant the view knows. ``protect`` decides what a finding does."""
    template = claim_template_of({**obj, "apiVersion": RESOURCE_API, "kind": CLAIM_TEMPLATE_KIND})
    if template is None:
        return
    where = namespace or template.namespace
    placed = WithClaimTemplate(view, replace(template, namespace=where))
    described = shown(f"{CLAIM_TEMPLATE_KIND} {where}/{template.name}")
    requests = template.requesting(RDMA_CLASS)
    enforce = policy.protect is Protect.DENY
    runtimes = view.runtimes()
    # No RDMA claim, no conflict; runtimes unreadable: claim_template_creation says so.
    if requests and not isinstance(runtimes, Unverifiable):
        field = mismatch_field(obj, requests[0].name, ())
        for key, runtime in runtimes:
            held_in = key[1]
            if (held_in and held_in != where) or not named_together(runtime, template.name):
                continue
            judged = (
                judge_runtime(key[0], runtime, seen, policy, pods_in=where).verdict
                for seen in (placed, view)
            )
            added = _added(judged, _CONFLICT)
            if added:
                message = (
                    f"{described} requests {RDMA_CLASS} devices, and {runtime_name(key)}, which "
                    f"names it, would then be wired both ways: {added[0].message}"
                )
                out.judge(
                    Violation(code=Code.WIRING_MODE_CONFLICT, field=field, message=message),
                    enforce=enforce,
                )
    narrowed = requests[0].narrowed if requests else ()
    field = mismatch_field(obj, requests[0].name, narrowed) if requests else REQUESTS
    for claimant in view.claimants():
        if claimant.namespace != where or template.name not in claimant.names:
            continue
        added = _added(judge_claimant(claimant, seen, policy) for seen in (placed, view))
        if added:
            lead = f"{claimant.described}: "
            message = f"{described} would be used by {lead}{added[0].message.removeprefix(lead)}"
            out.judge(Violation(code=added[0].code, field=field, message=message), enforce=enforce)


_CONFLICT: Final = frozenset({Code.WIRING_MODE_CONFLICT})


def _added(verdicts: Iterator[Verdict], codes: frozenset[Code] = CLAIM_CODES) -> list[Violation]:
    """What the first verdict (with the template) finds of ``codes`` and the second (without
    it) does not; the second is never judged when the first finds none (the common case)."""
    after = [v for v in next(verdicts).found if v.code in codes]
    if not after:
        return []
    before = next(verdicts).found
    return [v for v in after if v not in before]
