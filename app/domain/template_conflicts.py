"""A new ResourceClaimTemplate judged with the wired objects that name it (docs/dra.md): a cached
runtime admitted before the template existed, mapping a Device-type Network beside the claim, is
WiringModeConflict at the template's door, as it would have been at its own had the template
come first; so is a claimant the view knows (a snapshot, JobSet, Job or Pod), and a snapshot of a
DRA-bound TrainJob left short of its NICs. Order does not decide the verdict."""

from __future__ import annotations

from dataclasses import replace

from app.domain.claimants import claim_findings, judge_claimant
from app.domain.claims import (
    CLAIM_TEMPLATE_KIND,
    RDMA_CLASS,
    RESOURCE_API,
    ClaimTemplate,
    claim_template_of,
)
from app.domain.cluster import ClusterView, Unverifiable, WithClaimTemplate, runtime_name
from app.domain.fields import JsonMap
from app.domain.judge import judge_runtime
from app.domain.policy import Policy, Protect
from app.domain.rules.claim_templates import REQUESTS, mismatch_field, named_together
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation, shown


def template_conflicts(
    obj: JsonMap, namespace: str, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> None:
    """WiringModeConflict for each cached runtime whose pods would run in the template's
    namespace (a TrainingRuntime of it, any ClusterTrainingRuntime), name the template, and
    conflict once it exists: judged with and without it, only what it adds counts."""
    template = claim_template_of({**obj, "apiVersion": RESOURCE_API, "kind": CLAIM_TEMPLATE_KIND})
    requests = () if template is None else template.requesting(RDMA_CLASS)
    runtimes = view.runtimes()
    if template is None or not requests or isinstance(runtimes, Unverifiable):
        return  # no RDMA claim, no conflict; runtimes unreadable: claim_template_creation says so
    where = namespace or template.namespace
    placed = WithClaimTemplate(view, replace(template, namespace=where))
    field = mismatch_field(obj, requests[0].name, ())
    described = shown(f"{CLAIM_TEMPLATE_KIND} {where}/{template.name}")
    for key, runtime in runtimes:
        held_in = key[1]
        if (held_in and held_in != where) or not named_together(runtime, template.name):
            continue
        after = _conflicts(judge_runtime(key[0], runtime, placed, policy, pods_in=where).verdict)
        if not after:  # the common case: judged once
            continue
        before = _conflicts(judge_runtime(key[0], runtime, view, policy, pods_in=where).verdict)
        added = [v for v in after if v not in before]
        if added:
            out.judge(
                Violation(
                    code=Code.WIRING_MODE_CONFLICT,
                    field=field,
                    message=f"{described} requests {RDMA_CLASS} devices, and "
                    f"{runtime_name(key)}, which names it, would then be wired both ways: "
                    f"{added[0].message}",
                ),
                enforce=policy.protect is Protect.DENY,
            )


def _conflicts(verdict: Verdict) -> list[Violation]:
    """What a runtime's verdict says of conflicts, enforced or let through as warnings."""
    found = (*verdict.violations, *verdict.waived, *verdict.warned)
    return [v for v in found if v.code is Code.WIRING_MODE_CONFLICT]


def claimant_conflicts(
    obj: JsonMap, namespace: str, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> None:
    """For each claimant of the view in the template's namespace that names it: what it would
    newly be found with the template (WiringModeConflict; a DRA-bound snapshot's shortfall),
    judged with and without it."""
    template = claim_template_of({**obj, "apiVersion": RESOURCE_API, "kind": CLAIM_TEMPLATE_KIND})
    if template is None:
        return
    where = namespace or template.namespace
    placed = WithClaimTemplate(view, replace(template, namespace=where))
    described = shown(f"{CLAIM_TEMPLATE_KIND} {where}/{template.name}")
    for claimant in view.claimants():
        if claimant.namespace != where or template.name not in claimant.names:
            continue
        after = claim_findings(judge_claimant(claimant, placed, policy))
        if not after:
            continue
        before = claim_findings(judge_claimant(claimant, view, policy))
        added = [v for v in after if v not in before]
        if added:
            out.judge(
                Violation(
                    code=added[0].code,
                    field=_field(obj, template),
                    message=f"{described} would be used by {claimant.described}: "
                    f"{added[0].message.removeprefix(f'{claimant.described}: ')}",
                ),
                enforce=policy.protect is Protect.DENY,
            )


def _field(obj: JsonMap, template: ClaimTemplate) -> str:
    requests = template.requesting(RDMA_CLASS)
    if not requests:
        return REQUESTS
    return mismatch_field(obj, requests[0].name, requests[0].narrowed)
