"""ResourceClaimTemplates after admission (docs/dra.md): a template created under a name that a
cached DRA-bound runtime uses must claim that runtime's NICs, and the audit names the namespaces
where a bound ClusterTrainingRuntime's templates do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from app.domain.claims import (
    CLAIM_TEMPLATE_KIND,
    CONFIG,
    CONSTRAINTS,
    RDMA_CLASS,
    RESOURCE_API,
    ClaimTemplate,
    PodClaims,
    claim_template_of,
    pod_claims,
)
from app.domain.cluster import (
    ClaimTemplates,
    ClusterView,
    RuntimeKey,
    Unverifiable,
    runtime_name,
)
from app.domain.fields import JsonMap, as_list, as_map, str_at, value_at
from app.domain.kinds import Kind
from app.domain.policy import Policy, Protect
from app.domain.profiles import Profile, binding_of
from app.domain.rules import cannot_decide, counted
from app.domain.rules.claims import claim_expected, satisfies
from app.domain.template import PodTemplate, wired_templates
from app.domain.verdict import Code, VerdictBuilder, Violation, shown

_DEVICES: Final = "spec.spec.devices"
REQUESTS: Final = f"{_DEVICES}.requests"
_NAME: Final = "metadata.name"


def wired_claims(runtime: JsonMap) -> Iterator[tuple[str, PodClaims]]:
    """Each wired template's job and ``spec.resourceClaims`` (what "names a template" means)."""
    for template in wired_templates(runtime):
        if isinstance(template, PodTemplate):
            yield template.job, pod_claims(template.resource_claims, template.path)


def named_together(runtime: JsonMap, name: str) -> tuple[frozenset[str], ...]:
    """For each wired template that names ``name``, every template name it uses."""
    found = (
        frozenset(e.template for e in claims.templates if e.template)
        for _, claims in wired_claims(runtime)
    )
    return tuple(names for names in found if name in names)


def dra_profile(kind: Kind, runtime: JsonMap, policy: Policy) -> Profile | None:
    """The DRA profile the runtime is bound to, if any."""
    profile = binding_of(kind, runtime, policy).profile
    return profile if profile is not None and profile.by_claim else None


def _bound(profile: Profile) -> str:
    return f"bound to profile {profile.name} ({profile.rdma_nics} RDMA NICs per node)"


# --- the door: CREATE of a ResourceClaimTemplate ---------------------------------------------


def claim_template_creation(
    obj: JsonMap, namespace: str, view: ClusterView, policy: Policy, out: VerdictBuilder
) -> None:
    """For a template whose name a cached DRA-bound runtime uses — a TrainingRuntime of its
    namespace, or any ClusterTrainingRuntime: RdmaClaimMismatch when it requests RDMA NICs
    but not that runtime's all; RdmaClaimMissing when it requests none and, with it, no
    template those pods name could (every one exists, none requests any: one that does not exist
    yet may be the one that claims, and a pod's IMEX channel template claims none). ``protect``
    decides what a finding does."""
    # The request's kind says what it is; a converted object may carry another version's name.
    template = claim_template_of({**obj, "apiVersion": RESOURCE_API, "kind": CLAIM_TEMPLATE_KIND})
    if template is None:
        return
    where = namespace or template.namespace
    runtimes = view.runtimes()
    if isinstance(runtimes, Unverifiable):
        cannot_decide(out, policy, _NAME, f"runtimes cannot be read: {runtimes.reason}")
        return
    others = _Others(view, policy, out, where, template.name)
    asks = bool(template.requesting(RDMA_CLASS))
    refused: dict[Profile, list[RuntimeKey]] = {}
    for key, profile, together in _holders(runtimes, where, template.name, policy):
        if satisfies(template, profile.rdma_nics):
            continue
        if asks or any(others.unclaimed(names) for names in together):
            refused.setdefault(profile, []).append(key)
    for profile, keys in refused.items():
        out.judge(
            _refused(obj, template, profile, sorted(keys), where),
            enforce=policy.protect is Protect.DENY,
        )


@dataclass(slots=True)
class _Others:
    """The other templates of the namespace, read once, when a template that requests no RDMA
    NIC is judged; when they cannot be had, that is said once (ClusterStateUnavailable)."""

    view: ClusterView
    policy: Policy
    out: VerdictBuilder
    namespace: str
    created: str
    read: ClaimTemplates | Unverifiable | None = None

    def unclaimed(self, names: frozenset[str]) -> bool:
        """Whether, with the created one, every template of ``names`` exists and none
        requests RDMA NICs."""
        others = names - {self.created}
        if not others:
            return True
        state = self.read
        if state is None:
            state = self.read = self.view.claim_templates()
            if isinstance(state, Unverifiable):
                why = f"the ResourceClaimTemplates cannot be read: {state.reason}"
                cannot_decide(self.out, self.policy, _NAME, why)
        if isinstance(state, Unverifiable):
            return False
        found = [state.get(self.namespace, name) for name in others]
        return all(t is not None and not t.requesting(RDMA_CLASS) for t in found)


def _holders(
    runtimes: Iterable[tuple[RuntimeKey, JsonMap]], namespace: str, name: str, policy: Policy
) -> Iterator[tuple[RuntimeKey, Profile, tuple[frozenset[str], ...]]]:
    """The DRA-bound runtimes whose pods would claim ``namespace``'s template ``name``, and the
    names each wired template naming it uses."""
    for key, runtime in runtimes:
        # Most are another namespace's TrainingRuntimes: one comparison each (a template is
        # created while 100,000 runtimes are cached; a ClusterTrainingRuntime's is "").
        held_in = key[1]
        if held_in and held_in != namespace:
            continue
        kind = key[0]
        if kind is Kind.TRAINING_RUNTIME and held_in != namespace:
            continue
        profile = dra_profile(kind, runtime, policy)
        together = () if profile is None else named_together(runtime, name)
        if profile is not None and together:
            yield key, profile, together


def _refused(
    obj: JsonMap, template: ClaimTemplate, profile: Profile, keys: list[RuntimeKey], where: str
) -> Violation:
    holders = counted([runtime_name(key) for key in keys])
    verb = "names" if len(keys) == 1 else "name"
    described = shown(f"{CLAIM_TEMPLATE_KIND} {where}/{template.name}")
    requests = template.requesting(RDMA_CLASS)
    nics = profile.rdma_nics
    if requests:
        code, field = (
            Code.RDMA_CLAIM_MISMATCH,
            mismatch_field(obj, requests[0].name, requests[0].narrowed),
        )
        asked = f"requests {template.asks(RDMA_CLASS)}"
        expected = claim_expected(nics, narrowed=template.narrows(RDMA_CLASS))
    else:
        code, field = Code.RDMA_CLAIM_MISSING, REQUESTS
        asked = f"requests no {RDMA_CLASS} device"
        expected = f"its pods would run NCCL on the gVNIC; {claim_expected(nics)}"
    return Violation(
        code=code,
        field=field,
        message=f"{described} {asked}, but {holders}, {_bound(profile)}, {verb} it: {expected}",
        causes=tuple((field, runtime_name(key)) for key in keys),
    )


def mismatch_field(obj: JsonMap, request: str, narrowed: tuple[str, ...]) -> str:
    """The request's place in the object, or the field that narrows it (the first)."""
    if narrowed and narrowed[0] in (CONSTRAINTS, CONFIG):
        return f"{_DEVICES}.{narrowed[0]}"
    listed = as_list(value_at(obj, "spec", "spec", "devices", "requests")) or ()
    position = next(
        (i for i, r in enumerate(listed) if as_map(r) is not None and str_at(r, "name") == request),
        None,
    )
    if position is None:
        return REQUESTS
    at = f"{REQUESTS}[{position}]"
    return f"{at}.exactly.{narrowed[0]}" if narrowed else at


# --- the audit: a bound ClusterTrainingRuntime's templates in every namespace ------------------


def cluster_runtime_claims(
    kind: Kind, runtime: JsonMap, view: ClusterView, policy: Policy
) -> tuple[Violation, ...]:
    """For a ClusterTrainingRuntime bound to a DRA profile: each namespace where the templates
    it names exist and none claims the NICs (RdmaClaimMismatch for those that request some,
    RdmaClaimMissing where every one it names exists and none requests any)."""
    if kind is not Kind.CLUSTER_TRAINING_RUNTIME:
        return ()
    profile = dra_profile(kind, runtime, policy)
    templates = view.claim_templates()
    # The audit judges complete views only: templates that cannot be read are never asked for.
    if profile is None or isinstance(templates, Unverifiable):
        return ()
    out = VerdictBuilder()
    wired = list(wired_claims(runtime))
    for job, claims in wired:
        scoped = out.scoped(f"{job} job: " if len(wired) > 1 else "")
        _namespaces(claims, profile, templates, scoped)
    return tuple(out.violations)


def _namespaces(
    claims: PodClaims, profile: Profile, templates: ClaimTemplates, out: VerdictBuilder
) -> None:
    entries = claims.templates
    names = {e.template for e in entries if e.template}
    present: dict[str, dict[str, ClaimTemplate]] = {}
    for (namespace, name), template in templates.by_key.items():
        if name in names:
            present.setdefault(namespace, {})[name] = template
    asking: dict[str, list[tuple[str, ClaimTemplate]]] = {}
    unclaimed: list[str] = []
    for namespace, found in sorted(present.items()):
        if any(satisfies(t, profile.rdma_nics) for t in found.values()):
            continue
        requesting = [
            (e, t)
            for e in entries
            if (t := found.get(e.template or "")) is not None and t.requesting(RDMA_CLASS)
        ]
        for entry, template in requesting:
            asking.setdefault(entry.field, []).append((namespace, template))
        # A missing one may be the template that claims the NICs: TrainJobs there say so.
        if not requesting and len(found) == len(names):
            unclaimed.append(namespace)
    for entry in entries:
        found_in = asking.pop(entry.field, [])
        if found_in:
            listed = [f"{shown(ns)} (requests {t.asks(RDMA_CLASS)})" for ns, t in found_in]
            narrowed = any(t.narrows(RDMA_CLASS) for _, t in found_in)
            out.deny(
                _in_namespaces(
                    Code.RDMA_CLAIM_MISMATCH,
                    entry.field,
                    f"{_bound(profile)}, but ResourceClaimTemplate {shown(entry.template or '')} "
                    f"does not claim them all in namespace {counted(listed)}: "
                    f"{claim_expected(profile.rdma_nics, narrowed=narrowed)}",
                    [ns for ns, _ in found_in],
                )
            )
    if unclaimed:
        out.deny(
            _in_namespaces(
                Code.RDMA_CLAIM_MISSING,
                claims.field,
                f"{_bound(profile)}, but no ResourceClaimTemplate it names requests {RDMA_CLASS} "
                f"devices in namespace {counted([shown(ns) for ns in unclaimed])}: its pods there "
                "would run NCCL on the gVNIC",
                unclaimed,
            )
        )


def _in_namespaces(code: Code, field: str, message: str, namespaces: list[str]) -> Violation:
    """A finding with a cause per namespace it names (the audit tells one more apart)."""
    causes = tuple((field, f"namespace {ns}") for ns in namespaces)
    return Violation(code=code, field=field, message=message, causes=causes)
