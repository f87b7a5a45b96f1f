"""The continuous audit's core (docs/audit.md): each runtime's standing, judged as a CREATE, kept
current by re-judging only the runtimes a change affects. One thread owns a ``DriftBook``; readers
take the counts it keeps.
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Final

from app.domain.annotation import INTERFACES_ANNOTATION, AnnotationSyntaxError, parse_interfaces
from app.domain.claims import pod_claims
from app.domain.cluster import ClusterSnapshot, RuntimeKey, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.kinds import Kind
from app.domain.policy import Policy
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.review import Operation, Review
from app.domain.rules.binding import recipe_candidate
from app.domain.rules.claim_templates import cluster_runtime_claims, dra_profile
from app.domain.rules.placement import placed_networks
from app.domain.template import PodTemplate, interfaces_annotations, job_templates
from app.domain.verdict import Code, Verdict, Violation


class Result(StrEnum):
    """A runtime's audit result, as in policy reports."""

    PASS = "pass"  # noqa: S105 - a result, not a secret
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Standing:
    """A runtime's current verdict: ``findings`` are its violations (``fail``) or, when policy
    waived them all, the waived ones (``warn``)."""

    result: Result
    findings: tuple[Violation, ...] = ()

    @property
    def codes(self) -> tuple[Code, ...]:
        return tuple(dict.fromkeys(v.code for v in self.findings))

    def lines(self) -> tuple[str, ...]:
        return tuple(v.render() for v in self.findings)

    @property
    def fingerprint(self) -> str:
        """Identifies the finding set across processes: which codes at which fields. Wording is
        left out on purpose: a message that also lists the cluster's other Networks changes
        with them, and that is not a change of this runtime's wiring (no new Event)."""
        if not self.findings:
            return ""
        # With the objects a finding names apart from the runtime (the namespaces where a
        # ClusterTrainingRuntime's templates fail): one more is a change.
        text = "\n".join(
            sorted({"\t".join((v.code, v.field, *(c for _, c in v.causes))) for v in self.findings})
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


PASSING: Final = Standing(Result.PASS)
_LISTING_CODES: Final = frozenset({Code.NETWORK_NOT_FOUND, Code.NETWORK_NOT_READY})


def standing_of(verdict: Verdict) -> Standing:
    # Under enforcement=warn what would deny still fails: the audit is what a rollout reads.
    if verdict.denying:
        return Standing(Result.FAIL, verdict.denying)
    if verdict.waived:
        return Standing(Result.WARN, verdict.waived)
    return PASSING


def judge(key: RuntimeKey, runtime: JsonMap, view: ClusterSnapshot, policy: Policy) -> Standing:
    """The runtime judged as a CREATE, with every rule and the same settings as admission; a
    ClusterTrainingRuntime bound to a DRA profile also with its templates in every namespace."""
    kind, namespace, name = key
    review = Review(
        operation=Operation.CREATE, kind=kind, namespace=namespace, obj=runtime, name=name
    )
    standing = standing_of(evaluate(review, view, policy))
    beyond = cluster_runtime_claims(kind, runtime, view, policy)
    if not beyond:
        return standing
    failing = standing.findings if standing.result is Result.FAIL else ()
    return Standing(Result.FAIL, failing + beyond)


def named_networks(runtime: JsonMap) -> tuple[str, ...]:
    """Every Network the runtime's wired and annotated templates name, sorted, each once
    (malformed annotations name none)."""
    names: set[str] = set()
    for wiring in interfaces_annotations(runtime):
        raw = wiring.get(INTERFACES_ANNOTATION)
        if not isinstance(raw, str):
            continue
        try:
            names.update(e.network for e in parse_interfaces(raw) if e.network is not None)
        except AnnotationSyntaxError:
            continue
    # Interned: runtimes naming the same Networks then hold one copy of each name.
    return tuple(sorted(sys.intern(name) for name in names))


def named_claim_templates(runtime: JsonMap) -> tuple[str, ...]:
    """Every ResourceClaimTemplate the pod templates of a runtime's jobs name, sorted, each once."""
    templates = job_templates(runtime)
    names = {
        claim.template
        for template in (*templates.wired, *templates.others)
        if isinstance(template, PodTemplate) and template.resource_claims is not None
        for claim in pod_claims(template.resource_claims, template.path).templates
        if claim.template
    }
    return tuple(sorted(sys.intern(name) for name in names))


@lru_cache(maxsize=1024)
def _shared_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The first of equal name tuples recently seen: runtimes stamped from one template share it."""
    return names


@dataclass(frozen=True, slots=True)
class Change:
    """What the caches reported since the last pass; ``everything`` after a cache was lost or
    regained, or when the Network API's served state flipped."""

    runtimes: frozenset[RuntimeKey] = frozenset()
    networks: frozenset[str] = frozenset()
    recipe: bool = False
    everything: bool = False
    claim_templates: frozenset[tuple[str, str]] = frozenset()
    """ResourceClaimTemplates by (namespace, name)."""

    def __or__(self, other: Change) -> Change:
        return Change(
            runtimes=self.runtimes | other.runtimes,
            networks=self.networks | other.networks,
            recipe=self.recipe or other.recipe,
            everything=self.everything or other.everything,
            claim_templates=self.claim_templates | other.claim_templates,
        )

    def __bool__(self) -> bool:
        return bool(
            self.runtimes or self.networks or self.recipe or self.everything or self.claim_templates
        )


EVERYTHING: Final = Change(everything=True)


@dataclass(frozen=True, slots=True)
class Transition:
    """A runtime whose standing changed (wording included: reports show it; Events go by the
    fingerprint); None before = newly seen, None after = gone."""

    key: RuntimeKey
    before: Standing | None
    after: Standing | None


def complete(view: ClusterSnapshot) -> Mapping[RuntimeKey, JsonMap] | Unverifiable:
    """The view's runtimes when every part of it is known, else why not."""
    for state in (view.network_state, view.recipe_state, view.claim_template_state):
        if isinstance(state, Unverifiable):
            return state
    return view.runtime_state


RecipeState = Recipe | RecipeMissing | Unverifiable | None
"""A view's recipe, or None when the caller does not say (nothing is placed)."""


@dataclass(slots=True)
class DriftBook:
    """Standings of every runtime, indexed by the Networks each names, and the counts the
    metrics read (kept as standings change, so a scrape never walks 100,000 runtimes)."""

    policy: Policy
    standings: dict[RuntimeKey, Standing] = field(default_factory=dict)
    results: Counter[Result] = field(default_factory=Counter)
    failing_codes: Counter[Code] = field(default_factory=Counter)
    _named: dict[RuntimeKey, tuple[str, ...]] = field(default_factory=dict)
    """A runtime -> the Networks it names (sorted; runtimes stamped from one template share one
    tuple). Nothing indexes the other way: a Network change scans these, ~10 ms per 100,000
    runtimes, where an index per Network would cost memory for every runtime wired its own
    way."""
    _claiming: dict[RuntimeKey, tuple[str, ...]] = field(default_factory=dict)
    """A runtime -> the ResourceClaimTemplates it names: of its namespace for a
    TrainingRuntime, of every namespace for a ClusterTrainingRuntime bound to a DRA profile (an
    unbound one's are judged with each TrainJob only)."""
    _bound: set[RuntimeKey] = field(default_factory=set)
    _listing: set[RuntimeKey] = field(default_factory=set)
    """Runtimes with a finding whose message lists the cluster's Networks: any Network change
    can change their wording, so they are re-judged with the runtimes naming it."""
    _placed: frozenset[str] = frozenset()
    """The Networks the recipe placed when a recipe change was last taken in: a new recipe
    re-judges the runtimes naming those it placed and those it places now."""

    def affected(
        self, change: Change, runtimes: Mapping[RuntimeKey, JsonMap], recipe: RecipeState = None
    ) -> set[RuntimeKey]:
        """The runtimes ``change`` can have changed the standing of (present or just gone);
        ``recipe`` is the view's, for the Networks it places."""
        if change.everything:
            return set(runtimes).union(self.standings)
        keys = set(change.runtimes)
        changed = change.networks
        if change.recipe:
            keys |= self._bound
            # Placement: runtimes naming a Network the old or the new recipe places.
            changed = changed | self._placed | placed_networks(recipe, self.policy)
        if len(changed) == 1:
            (network,) = changed
            keys.update(key for key, names in self._named.items() if network in names)
        elif changed:
            keys.update(key for key, names in self._named.items() if not changed.isdisjoint(names))
        if change.networks:
            keys |= self._listing
        if change.claim_templates:
            templates = change.claim_templates
            # A ClusterTrainingRuntime's names are its in every namespace.
            anywhere = {name for _, name in templates}
            keys.update(
                key
                for key, names in self._claiming.items()
                if any(
                    name in anywhere
                    if key[0] is Kind.CLUSTER_TRAINING_RUNTIME
                    else (key[1], name) in templates
                    for name in names
                )
            )
        return keys

    def to_judge(
        self, change: Change, runtimes: Mapping[RuntimeKey, JsonMap], recipe: RecipeState = None
    ) -> list[RuntimeKey]:
        """``affected`` as a list in key order; for everything, without a set of all keys. A
        recipe change is taken in: what ``recipe`` places is remembered for the next."""
        if change.everything:
            keys = [*runtimes, *(key for key in self.standings if key not in runtimes)]
            keys.sort()
        else:
            keys = sorted(self.affected(change, runtimes, recipe))
        if change.recipe or change.everything:
            self._placed = placed_networks(recipe, self.policy)
        return keys

    def apply(self, change: Change, view: ClusterSnapshot) -> list[Transition] | Unverifiable:
        """Re-judge what ``change`` affects against ``view``; nothing when the view is partial
        (a lost cache is not drift: the standings wait for its return, which re-judges all)."""
        runtimes = complete(view)
        if isinstance(runtimes, Unverifiable):
            return runtimes
        return self.rejudge(self.to_judge(change, runtimes, view.recipe()), view)

    def rejudge(self, keys: Iterable[RuntimeKey], view: ClusterSnapshot) -> list[Transition]:
        """Re-judge ``keys`` (gone ones are dropped) against a complete view; callers may
        split a long list to pause between parts."""
        runtimes = complete(view)
        if isinstance(runtimes, Unverifiable):
            return []
        return list(self._rejudged(keys, runtimes, view))

    def _rejudged(
        self,
        keys: Iterable[RuntimeKey],
        runtimes: Mapping[RuntimeKey, JsonMap],
        view: ClusterSnapshot,
    ) -> Iterator[Transition]:
        for key in keys:
            before = self.standings.get(key)
            cached = runtimes.get(key)
            # A cached runtime builds its metadata and spec on every read (app.domain.slim);
            # judging and indexing read them a dozen times, so it is read once, here.
            runtime = None if cached is None else dict(cached)
            after = None if runtime is None else judge(key, runtime, view, self.policy)
            self._index(key, runtime)
            if after is None:
                self.standings.pop(key, None)
            else:
                self.standings[key] = after
            if before == after:  # also None twice: created and deleted between two passes
                continue
            self._count(before, -1)
            self._count(after, +1)
            if after is not None and any(c in _LISTING_CODES for c in after.codes):
                self._listing.add(key)
            else:
                self._listing.discard(key)
            yield Transition(key, before, after)

    def _index(self, key: RuntimeKey, runtime: JsonMap | None) -> None:
        names = () if runtime is None else named_networks(runtime)
        if names:
            self._named[key] = _shared_names(names)
        else:
            self._named.pop(key, None)
        claimed = (
            named_claim_templates(runtime)
            if runtime is not None
            and (
                key[0] is Kind.TRAINING_RUNTIME
                or dra_profile(key[0], runtime, self.policy) is not None
            )
            else ()
        )
        if claimed:
            self._claiming[key] = _shared_names(claimed)
        else:
            self._claiming.pop(key, None)
        if runtime is not None and recipe_candidate(key[0], runtime, self.policy):
            self._bound.add(key)
        else:
            self._bound.discard(key)

    def _count(self, standing: Standing | None, delta: int) -> None:
        if standing is None:
            return
        self.results[standing.result] += delta
        if standing.result is Result.FAIL:
            for code in standing.codes:
                self.failing_codes[code] += delta
