"""The continuous audit of claimants (docs/dra.md): each runtime snapshot, JobSet, Job and Pod that
names ResourceClaimTemplates, judged with them when they change; its standing holds only what
depends on the templates (its own wiring was judged at its door)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from app.domain.claimants import CLAIM_CODES, Claimant, judge_claimant
from app.domain.cluster import ClusterView
from app.domain.drift import PASSING, Result, Standing, standing_of
from app.domain.fields import str_at
from app.domain.kinds import Workload
from app.domain.policy import Policy
from app.domain.verdict import Code

ClaimantKey = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name) of a claimant."""
CLAIMANT_KINDS: Final = frozenset({"ConfigMap", *(w.value for w in Workload)})


def claimant_key(claimant: Claimant) -> ClaimantKey:
    kind = claimant.review.kind
    obj = claimant.review.obj
    name = str_at(obj, "metadata", "name") or ""
    if isinstance(kind, Workload):
        return kind.api_version, kind.value, claimant.namespace, name
    return "v1", "ConfigMap", claimant.namespace, name


def claimant_reference(claimant: Claimant) -> dict[str, object]:
    """An object reference to the claimant, as an Event's ``regarding``."""
    api_version, kind, namespace, name = claimant_key(claimant)
    reference: dict[str, object] = {
        "apiVersion": api_version,
        "kind": kind,
        "namespace": namespace,
        "name": name,
    }
    uid = str_at(claimant.review.obj, "metadata", "uid")
    if uid:
        reference["uid"] = uid
    return reference


def claimant_standing(claimant: Claimant, view: ClusterView, policy: Policy) -> Standing:
    """What the templates it names make of the claimant: its findings of CLAIM_CODES."""
    standing = standing_of(judge_claimant(claimant, view, policy))
    kept = tuple(v for v in standing.findings if v.code in CLAIM_CODES)
    return Standing(standing.result, kept) if kept else PASSING


@dataclass(frozen=True, slots=True)
class Swept:
    """A claimant as a sweep judged it."""

    key: ClaimantKey
    reference: dict[str, object]
    standing: Standing


@dataclass(slots=True)
class ClaimantBook:
    """Every swept claimant's standing, kept by the one thread that sweeps."""

    standings: dict[ClaimantKey, Standing] = field(default_factory=dict)

    def sweep(
        self,
        namespace: str | None,
        claimants: Iterable[Claimant],
        view: ClusterView,
        policy: Policy,
    ) -> list[Swept]:
        """Judge the claimants of ``namespace`` (None: all) as listed now, and forget those no
        longer listed. Every one is returned: what was said of it decides what to say now."""
        swept = [
            Swept(claimant_key(c), claimant_reference(c), claimant_standing(c, view, policy))
            for c in claimants
        ]
        listed = {s.key for s in swept}
        gone = [k for k in self.standings if k not in listed and namespace in (None, k[2])]
        for key in gone:
            del self.standings[key]
        self.standings.update((s.key, s.standing) for s in swept)
        return swept

    @property
    def failing_codes(self) -> Counter[Code]:
        """Claimants currently failing, per code (each counted once per code)."""
        counted: Counter[Code] = Counter()
        for standing in dict(self.standings).values():  # one C-level copy: the sweep writes it
            if standing.result is Result.FAIL:
                counted.update(standing.codes)
        return counted
