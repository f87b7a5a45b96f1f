"""What the rules know of the cluster: an in-memory view, and building one from plain objects.

Adapters (watch caches, state files) satisfy ``ClusterView``; every answer is a snapshot, never I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Final, Protocol

from app.domain.claims import ClaimTemplate, claim_template_of
from app.domain.fields import JsonMap, as_map, map_at, str_at
from app.domain.kinds import Kind, trainer_kind
from app.domain.network import (
    NETWORK_GROUP,
    NETWORK_VERSION,
    PARAM_SET_KIND,
    Network,
    ParamSet,
    network_from_object,
    param_set_from_object,
)
from app.domain.recipe import LoadYaml, Recipe, RecipeMissing, recipe_from_configmap
from app.domain.slim import slim_runtime
from app.domain.verdict import shown

if TYPE_CHECKING:  # claimants are judged by rules that read a ClusterView
    from app.domain.claimants import Claimant


@dataclass(frozen=True, slots=True)
class Unverifiable:
    """The view cannot answer (cache not synced, API reads failing); ``reason`` says which."""

    reason: str


@dataclass(frozen=True)  # no slots: the sorted names below are computed once per view
class Networks:
    """The cluster's Network objects by name; ``served`` is False when the API is not served."""

    by_name: Mapping[str, Network]
    served: bool = True
    param_sets: Mapping[str, ParamSet] | None = None
    """GKENetworkParamSets by name; None when the view does not describe them (a file state
    without any, or an API that is not served): their checks are then skipped."""

    def problem(self, network: Network) -> str:
        """Why ``network`` is not usable, its param set's part included; "" when it is."""
        problem = network.problem
        if self.param_sets is None or not network.param_set:
            return problem
        found = self.param_sets.get(network.param_set)
        if found is None:
            own = f"GKENetworkParamSet {shown(network.param_set)} does not exist"
        elif found.problem:
            own = f"GKENetworkParamSet {shown(found.name)}: {found.problem}"
        else:
            return problem
        return f"{problem}; {own}" if problem else own

    def usable(self, network: Network) -> bool:
        """``problem(network) == ""``, without building the text; remembered per Network of
        this view (views are reused while their caches do not change)."""
        memo = self._usable
        found = memo.get(network.name)
        if found is None:
            found = memo[network.name] = not network.problem and self._param_set_ready(network)
        return found

    def _param_set_ready(self, network: Network) -> bool:
        if self.param_sets is None or not network.param_set:
            return True
        found = self.param_sets.get(network.param_set)
        return found is not None and not found.problem

    @cached_property
    def _usable(self) -> dict[str, bool]:
        return {}

    def modes_met(self, profile: str, required_mode: Callable[[str], str | None]) -> frozenset[str]:
        """The Networks with nothing to say of their param set's ``deviceMode`` under
        ``profile``: no mode required, the param set in it, or no param set (NetworkNotReady
        says so). Built once per profile and view, so a bound request tests one set per entry."""
        memo = self._modes_met
        found = memo.get(profile)
        if found is None:
            sets = self.param_sets or {}
            found = memo[profile] = frozenset(
                name
                for name, network in self.by_name.items()
                if (required := required_mode(name)) is None
                or (param_set := sets.get(network.param_set)) is None
                or param_set.device_mode == required
            )
        return found

    @cached_property
    def _modes_met(self) -> dict[str, frozenset[str]]:
        return {}

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Every Network's name, sorted (messages list them; an audit pass asks thousands of
        times of one view)."""
        return tuple(sorted(self.by_name))

    @cached_property
    def usable_names(self) -> tuple[str, ...]:
        return tuple(sorted(n.name for n in self.by_name.values() if self.usable(n)))

    @cached_property
    def usable_set(self) -> frozenset[str]:
        """``usable_names`` as a set: a request whose Networks are all usable tests only this."""
        return frozenset(self.usable_names)


@dataclass(frozen=True, slots=True)
class ClaimTemplates:
    """The cluster's ResourceClaimTemplates by (namespace, name); ``served`` is False when the
    cluster does not serve ``resource.k8s.io/v1``."""

    by_key: Mapping[tuple[str, str], ClaimTemplate]
    served: bool = True

    def get(self, namespace: str, name: str) -> ClaimTemplate | None:
        return self.by_key.get((namespace, name))


NO_CLAIM_TEMPLATES: Final = ClaimTemplates(by_key={})


@dataclass(frozen=True, slots=True)
class CacheStatus:
    """What a view says of one of its sources (a watch cache, the state files): probes and
    metrics read it."""

    name: str
    synced: bool
    served: bool = True
    last_event_age_seconds: float | None = None
    error: str | None = None


class ClusterView(Protocol):
    """A read-only snapshot source for the rules."""

    def networks(self) -> Networks | Unverifiable:
        """All Network objects, or why they are unknown."""
        ...

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        """The recipe ConfigMap as parsed, or why it is unknown."""
        ...

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        """A ClusterTrainingRuntime (namespace ignored) or TrainingRuntime; None if absent."""
        ...

    def runtimes(self) -> Iterable[tuple[RuntimeKey, JsonMap]] | Unverifiable:
        """Every cached runtime (slim), for the objects that depend on a Network."""
        ...

    def claim_templates(self) -> ClaimTemplates | Unverifiable:
        """Every ResourceClaimTemplate (DRA-wired NICs), or why they are unknown."""
        ...

    def claimants(self) -> Iterable[Claimant]:
        """The snapshots and workloads known to name ResourceClaimTemplates (file states;
        Kubernetes mode caches none, and its audit judges them)."""
        ...


RuntimeKey = tuple[Kind, str, str]
"""(kind, namespace, name); the namespace of a ClusterTrainingRuntime is ``""``."""


def runtime_key(kind: Kind, namespace: str, name: str) -> RuntimeKey:
    return (kind, "" if kind is Kind.CLUSTER_TRAINING_RUNTIME else namespace, name)


def runtime_name(key: RuntimeKey) -> str:
    """``TrainingRuntime team-a/x``, ``ClusterTrainingRuntime y``: a runtime as messages name it."""
    kind, namespace, name = key
    where = f"{namespace}/" if kind is Kind.TRAINING_RUNTIME else ""
    return f"{kind.value} {shown(where + name)}"


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """An immutable ClusterView: what adapters build from files or watch caches."""

    network_state: Networks | Unverifiable
    recipe_state: Recipe | RecipeMissing | Unverifiable
    runtime_state: Mapping[RuntimeKey, JsonMap] | Unverifiable
    claim_template_state: ClaimTemplates | Unverifiable = NO_CLAIM_TEMPLATES
    claimant_state: tuple[Claimant, ...] = ()

    def networks(self) -> Networks | Unverifiable:
        return self.network_state

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        return self.recipe_state

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        if isinstance(self.runtime_state, Unverifiable):
            return self.runtime_state
        return self.runtime_state.get(runtime_key(kind, namespace, name))

    def runtimes(self) -> Iterable[tuple[RuntimeKey, JsonMap]] | Unverifiable:
        if isinstance(self.runtime_state, Unverifiable):
            return self.runtime_state
        return self.runtime_state.items()

    def claim_templates(self) -> ClaimTemplates | Unverifiable:
        return self.claim_template_state

    def claimants(self) -> Iterable[Claimant]:
        return self.claimant_state


RuntimeFetch = Callable[[Kind, str, str], JsonMap | Unverifiable | None]
"""One direct read of a runtime the caches lack: the object, None when absent, or why not."""


@dataclass(frozen=True, slots=True)
class WithRuntime:
    """A view plus one runtime read directly (a runtime created a moment before its TrainJob)."""

    view: ClusterView
    key: RuntimeKey
    found: JsonMap | Unverifiable | None

    def networks(self) -> Networks | Unverifiable:
        return self.view.networks()

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        return self.view.recipe()

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        if runtime_key(kind, namespace, name) == self.key:
            return self.found
        return self.view.runtime(kind, namespace, name)

    def runtimes(self) -> Iterable[tuple[RuntimeKey, JsonMap]] | Unverifiable:
        return self.view.runtimes()

    def claim_templates(self) -> ClaimTemplates | Unverifiable:
        return self.view.claim_templates()

    def claimants(self) -> Iterable[Claimant]:
        return self.view.claimants()


@dataclass(frozen=True, slots=True)
class WithClaimTemplate:
    """A view plus one ResourceClaimTemplate (one being created, judged with what names it)."""

    view: ClusterView
    template: ClaimTemplate

    def networks(self) -> Networks | Unverifiable:
        return self.view.networks()

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        return self.view.recipe()

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        return self.view.runtime(kind, namespace, name)

    def runtimes(self) -> Iterable[tuple[RuntimeKey, JsonMap]] | Unverifiable:
        return self.view.runtimes()

    def claim_templates(self) -> ClaimTemplates | Unverifiable:
        state = self.view.claim_templates()
        if isinstance(state, Unverifiable):
            return state
        return _adding(state, (self.template,))

    def claimants(self) -> Iterable[Claimant]:
        return self.view.claimants()


@dataclass(frozen=True, slots=True)
class ObjectName:
    """``namespace/name`` of a namespaced object, e.g. the recipe ConfigMap."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> ObjectName:
        """Parse ``namespace/name``; raises ValueError naming the expected form."""
        namespace, slash, name = text.partition("/")
        if not slash or not namespace or not name or "/" in name:
            raise ValueError(f"expected namespace/name, got {text!r}")
        return cls(namespace=namespace, name=name)


def is_network(obj: object) -> bool:
    return str_at(obj, "apiVersion") == f"{NETWORK_GROUP}/{NETWORK_VERSION}" and (
        str_at(obj, "kind") == "Network"
    )


PARAM_SETS_SKIPPED: Final = (
    "the state holds no GKENetworkParamSet: the param-set checks (Ready, deviceMode) are skipped"
)


def describes_param_sets(view: ClusterSnapshot) -> bool:
    """False when the view's Networks come without GKENetworkParamSets (docs/rules.md)."""
    networks = view.network_state
    return not isinstance(networks, Networks) or networks.param_sets is not None


def is_param_set(obj: object) -> bool:
    return str_at(obj, "apiVersion") == f"{NETWORK_GROUP}/{NETWORK_VERSION}" and (
        str_at(obj, "kind") == PARAM_SET_KIND
    )


def is_configmap(obj: object, name: ObjectName) -> bool:
    return (
        str_at(obj, "apiVersion") == "v1"
        and str_at(obj, "kind") == "ConfigMap"
        and str_at(obj, "metadata", "namespace") == name.namespace
        and str_at(obj, "metadata", "name") == name.name
    )


def recipe_of(configmap: JsonMap, name: ObjectName, load_yaml: LoadYaml) -> Recipe:
    version = str_at(configmap, "metadata", "resourceVersion")
    ref = f"{name}@{version}" if version else str(name)
    return recipe_from_configmap(map_at(configmap, "data") or {}, ref=ref, load_yaml=load_yaml)


def runtime_entry(obj: object) -> tuple[RuntimeKey, JsonMap] | None:
    """The lookup key of a runtime object, or None when it is not a named runtime."""
    kind = trainer_kind(obj)
    mapping = as_map(obj)
    name = str_at(obj, "metadata", "name")
    if kind is None or not kind.is_runtime or mapping is None or not name:
        return None
    return runtime_key(kind, str_at(obj, "metadata", "namespace") or "", name), mapping


ClaimantOf = Callable[[JsonMap], "Claimant | None"]
"""An object as a claimant, or None (reading a snapshot's copy takes the YAML reader)."""


def snapshot_of(
    objects: Iterable[object],
    *,
    recipe_name: ObjectName,
    load_yaml: LoadYaml,
    claimant_of: ClaimantOf | None = None,
) -> ClusterSnapshot:
    """A complete view from a set of objects (file mode: the Network and resource APIs count as
    served); with ``claimant_of``, the objects it reads as claimants are kept too.

    Runtimes are kept slim (``slim_runtime``); ``objects`` is consumed once, so a generator
    keeps only one object whole at a time (and the claimants, which name templates).
    """
    networks: dict[str, Network] = {}
    param_sets: dict[str, ParamSet] = {}
    runtimes: dict[RuntimeKey, JsonMap] = {}
    templates: dict[tuple[str, str], ClaimTemplate] = {}
    recipe: Recipe | RecipeMissing = RecipeMissing(ref=str(recipe_name))
    claimants: list[Claimant] = []
    for obj in objects:
        if is_network(obj):
            network = network_from_object(obj)
            if network is not None:
                networks[network.name] = network
        elif is_param_set(obj):
            param_set = param_set_from_object(obj)
            if param_set is not None:
                param_sets[param_set.name] = param_set
        elif is_configmap(obj, recipe_name):
            recipe = recipe_of(as_map(obj) or {}, recipe_name, load_yaml)
        elif (entry := runtime_entry(obj)) is not None:
            runtimes[entry[0]] = slim_runtime(entry[1])
        elif (template := claim_template_of(obj)) is not None:
            templates[(template.namespace, template.name)] = template
        elif claimant_of is not None and (mapping := as_map(obj)) is not None:
            claimant = claimant_of(mapping)
            if claimant is not None:
                claimants.append(claimant)
    # A state without any param set does not describe them: their checks are skipped.
    described = param_sets or None
    return ClusterSnapshot(
        Networks(by_name=networks, param_sets=described),
        recipe,
        runtimes,
        ClaimTemplates(by_key=templates),
        tuple(claimants),
    )


def with_claim_templates(
    snapshot: ClusterSnapshot, extra: Iterable[ClaimTemplate]
) -> ClusterSnapshot:
    """The snapshot with more ResourceClaimTemplates (``check`` judges its FILEs together: a pod
    and the template it names are judged the same whichever the cluster is given first)."""
    state = snapshot.claim_template_state
    if isinstance(state, Unverifiable):
        return snapshot
    return replace(snapshot, claim_template_state=_adding(state, extra))


def _adding(state: ClaimTemplates, extra: Iterable[ClaimTemplate]) -> ClaimTemplates:
    """``state`` with ``extra`` added, each replacing one of its name."""
    return replace(state, by_key={**state.by_key, **{(t.namespace, t.name): t for t in extra}})


def with_claimants(snapshot: ClusterSnapshot, extra: Iterable[Claimant]) -> ClusterSnapshot:
    """The snapshot with more claimants (``check``'s FILEs: a template there is judged with the
    pods there that name it, as the cluster judges either order)."""
    return replace(snapshot, claimant_state=(*snapshot.claimant_state, *extra))


def with_runtimes(
    snapshot: ClusterSnapshot, extra: Mapping[RuntimeKey, JsonMap]
) -> ClusterSnapshot:
    """The snapshot with more runtimes (``check`` resolves TrainJobs from its FILEs too)."""
    if isinstance(snapshot.runtime_state, Unverifiable):
        return snapshot
    merged = {**snapshot.runtime_state, **extra}
    return replace(snapshot, runtime_state=merged)
