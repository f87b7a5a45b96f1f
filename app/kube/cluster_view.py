"""Kubernetes-mode ``ClusterView``: watch caches of Networks, the recipe ConfigMap, runtimes and
ResourceClaimTemplates.

Every answer is read from a cache's current state; nothing here calls the API per request.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from kubernetes.client import ApiClient, ApiException, CustomObjectsApi

from app.documents import load_yaml
from app.domain.claimants import Claimant
from app.domain.claims import (
    CLAIM_TEMPLATE_KIND,
    DEFAULT_NAMESPACE,
    RESOURCE_API,
    ClaimTemplate,
    claim_template_of,
)
from app.domain.cluster import (
    NO_CLAIM_TEMPLATES,
    CacheStatus,
    ClaimTemplates,
    ClusterSnapshot,
    Networks,
    ObjectName,
    RuntimeKey,
    Unverifiable,
    recipe_of,
    runtime_key,
)
from app.domain.drift import EVERYTHING, Change
from app.domain.fields import JsonMap, as_map, str_at
from app.domain.kinds import TRAINER_GROUP, TRAINER_VERSION, Kind
from app.domain.network import (
    NETWORK_GROUP,
    NETWORK_VERSION,
    Network,
    ParamSet,
    network_from_object,
    param_set_from_object,
)
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.slim import slim_runtime
from app.kube.client import ApiListWatch, get_json
from app.kube.errors import FORBIDDEN, NOT_FOUND, TRANSPORT_ERRORS, status_of, summary
from app.kube.rest import config_map_list, custom_object_list
from app.kube.watch_cache import DEFAULT_PACING, CacheState, ListWatch, Pacing, WatchCache

NETWORK_PLURAL: Final = "networks"
PARAM_SET_PLURAL: Final = "gkenetworkparamsets"
RUNTIME_GET_SECONDS: Final = 1.0
CLUSTER_RUNTIME_PLURAL: Final = "clustertrainingruntimes"
RUNTIME_PLURAL: Final = "trainingruntimes"
CLAIM_TEMPLATE_GROUP, CLAIM_TEMPLATE_VERSION = RESOURCE_API.split("/")
CLAIM_TEMPLATE_PLURAL: Final = "resourceclaimtemplates"
# Never read by the rules, yet often the bulk of an object: dropped to keep RSS low (BENCHMARKS.md).


@dataclass(frozen=True, slots=True)
class Sources:
    """Where each cache reads from; ``KubeClusterView.from_api_client`` builds the real ones.

    ``get_runtime`` reads one runtime directly (``fetch_runtime``); None where there is no API.
    """

    networks: ListWatch
    recipe: ListWatch
    cluster_runtimes: ListWatch
    runtimes: ListWatch
    get_runtime: Callable[[Kind, str, str], object] | None = None
    param_sets: ListWatch | None = None
    """GKENetworkParamSets; None: the view does not describe them (their checks are skipped)."""
    claim_templates: ListWatch | None = None
    """ResourceClaimTemplates; None: the view has none, as a cluster without DRA."""


class KubeClusterView:
    """Satisfies ``app.domain.cluster.ClusterView``; unsynced caches answer ``Unverifiable``."""

    def __init__(
        self, sources: Sources, *, recipe_name: ObjectName, pacing: Pacing = DEFAULT_PACING
    ) -> None:
        self._recipe_name = recipe_name
        self._get_runtime = sources.get_runtime
        self._networks = WatchCache[str, Network](
            name="networks",
            resource=f"{NETWORK_PLURAL}.{NETWORK_GROUP}",
            source=sources.networks,
            key=_name,
            convert=network_from_object,
            pacing=pacing,
        )
        # Parsed once per change of the ConfigMap, never per request.
        self._recipe = WatchCache[str, Recipe](
            name="recipe",
            resource=f"configmaps in namespace {recipe_name.namespace}",
            source=sources.recipe,
            key=_name,
            convert=partial(_recipe, name=recipe_name),
            pacing=pacing,
        )
        self._cluster_runtimes = _runtime_cache(
            Kind.CLUSTER_TRAINING_RUNTIME, CLUSTER_RUNTIME_PLURAL, sources.cluster_runtimes, pacing
        )
        self._runtimes = _runtime_cache(
            Kind.TRAINING_RUNTIME, RUNTIME_PLURAL, sources.runtimes, pacing
        )
        self._param_sets = (
            None
            if sources.param_sets is None
            else WatchCache[str, ParamSet](
                name="gkenetworkparamsets",
                resource=f"{PARAM_SET_PLURAL}.{NETWORK_GROUP}",
                source=sources.param_sets,
                key=_name,
                convert=param_set_from_object,
                pacing=pacing,
            )
        )
        self._claim_templates = (
            None
            if sources.claim_templates is None
            else WatchCache[tuple[str, str], ClaimTemplate](
                name=CLAIM_TEMPLATE_PLURAL,
                resource=f"{CLAIM_TEMPLATE_PLURAL}.{CLAIM_TEMPLATE_GROUP}",
                source=sources.claim_templates,
                key=_claim_template_key,
                convert=claim_template_item,
                pacing=pacing,
            )
        )
        caches: tuple[WatchCache[Any, Any] | None, ...] = (
            self._networks,
            self._recipe,
            self._cluster_runtimes,
            self._runtimes,
            self._param_sets,
            self._claim_templates,
        )
        self._all = tuple(cache for cache in caches if cache is not None)
        self._last_networks: (
            tuple[Mapping[str, Network], CacheState[str, ParamSet] | None, Networks] | None
        ) = None

    @classmethod
    def from_api_client(
        cls, api_client: ApiClient, recipe_name: ObjectName, *, pacing: Pacing = DEFAULT_PACING
    ) -> KubeClusterView:
        """Caches over the real API; call ``start()`` to begin listing."""

        def source(
            group: str, version: str, plural: str, trim: Callable[[JsonMap], JsonMap] | None = None
        ) -> ApiListWatch:
            # Listed as a watch's initial events where the server can (WatchList).
            call = custom_object_list(api_client, group, version, plural)
            return ApiListWatch(call, trim=trim, initial_events=True)

        sources = Sources(
            networks=source(NETWORK_GROUP, NETWORK_VERSION, NETWORK_PLURAL),
            # A field selector makes this a list+watch of the one ConfigMap.
            recipe=ApiListWatch(
                config_map_list(
                    api_client, recipe_name.namespace, f"metadata.name={recipe_name.name}"
                ),
                initial_events=True,
            ),
            # Runtimes are trimmed as they are decoded: a LIST of thousands never sits whole.
            cluster_runtimes=source(
                TRAINER_GROUP, TRAINER_VERSION, CLUSTER_RUNTIME_PLURAL, slim_runtime
            ),
            runtimes=source(TRAINER_GROUP, TRAINER_VERSION, RUNTIME_PLURAL, slim_runtime),
            get_runtime=partial(_get_runtime, CustomObjectsApi(_one_attempt(api_client))),
            param_sets=source(NETWORK_GROUP, NETWORK_VERSION, PARAM_SET_PLURAL),
            claim_templates=source(
                CLAIM_TEMPLATE_GROUP, CLAIM_TEMPLATE_VERSION, CLAIM_TEMPLATE_PLURAL
            ),
        )
        return cls(sources, recipe_name=recipe_name, pacing=pacing)

    def networks(self) -> Networks | Unverifiable:
        state = self._networks.state
        if not state.synced:
            return _unverifiable(self._networks.name, state.error)
        sets = None if self._param_sets is None else self._param_sets.state
        if sets is not None and not sets.synced:
            return _unverifiable(self._param_sets.name if self._param_sets else "", sets.error)
        # One view per pair of cache states: what it works out (sorted names, usability) is
        # worked out once, not once per request.
        last = self._last_networks
        if last is not None and last[0] is state.items and last[1] is sets:
            return last[2]
        # An API that is not served describes no param set: their checks are skipped.
        described = sets.items if sets is not None and sets.served else None
        view = Networks(by_name=state.items, served=state.served, param_sets=described)
        self._last_networks = (state.items, sets, view)
        return view

    def recipe(self) -> Recipe | RecipeMissing | Unverifiable:
        state = self._recipe.state
        if not state.synced:
            return _unverifiable(self._recipe.name, state.error)
        found = state.items.get(self._recipe_name.name)
        return RecipeMissing(ref=str(self._recipe_name)) if found is None else found

    def runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        if kind is Kind.CLUSTER_TRAINING_RUNTIME:
            cache = self._cluster_runtimes
        elif kind is Kind.TRAINING_RUNTIME:
            cache = self._runtimes
        else:
            return None
        state = cache.state
        if not state.synced:
            return _unverifiable(cache.name, state.error)
        return state.items.get(runtime_key(kind, namespace, name))

    def runtimes(self) -> Iterable[tuple[RuntimeKey, JsonMap]] | Unverifiable:
        """Every cached ClusterTrainingRuntime and TrainingRuntime (slim)."""
        states = []
        for cache in (self._cluster_runtimes, self._runtimes):
            state = cache.state
            if not state.synced:
                return _unverifiable(cache.name, state.error)
            states.append(state.items)
        return [item for items in states for item in items.items()]

    def claim_templates(self) -> ClaimTemplates | Unverifiable:
        """Every cached ResourceClaimTemplate by (namespace, name); none, not served, when the
        cluster does not serve ``resource.k8s.io/v1``."""
        if self._claim_templates is None:
            return NO_CLAIM_TEMPLATES
        state = self._claim_templates.state
        if not state.synced:
            return _unverifiable(self._claim_templates.name, state.error)
        return ClaimTemplates(by_key=state.items, served=state.served)

    def claimants(self) -> tuple[Claimant, ...]:
        """None: no snapshot, JobSet, Job or Pod is cached (their audit judges them)."""
        return ()

    def snapshot(self) -> ClusterSnapshot:
        """Every cache's current state at once, for a consistent audit pass (no copies)."""
        cluster, namespaced = self._cluster_runtimes.state, self._runtimes.state
        runtimes: _Runtimes | Unverifiable = _Runtimes(cluster, namespaced)
        for cache, state in ((self._cluster_runtimes, cluster), (self._runtimes, namespaced)):
            if not state.synced:
                runtimes = _unverifiable(cache.name, state.error)
        return ClusterSnapshot(self.networks(), self.recipe(), runtimes, self.claim_templates())

    def subscribe(self, listener: Callable[[Change], None]) -> None:
        """Hear every cache change as the audit's ``Change`` (on the caches' threads)."""

        def networks(names: frozenset[str] | None) -> None:
            listener(EVERYTHING if names is None else Change(networks=names))

        def recipe(_: frozenset[str] | None) -> None:
            listener(Change(recipe=True))

        def runtimes(keys: frozenset[RuntimeKey] | None) -> None:
            listener(EVERYTHING if keys is None else Change(runtimes=keys))

        def param_sets(names: frozenset[str] | None) -> None:
            if names is None:
                listener(EVERYTHING)
                return
            # A param set matters through the Networks that reference it.
            using = self._networks.state.items.values()
            named = frozenset(n.name for n in using if n.param_set in names)
            if named:
                listener(Change(networks=named))

        def claim_templates(keys: frozenset[tuple[str, str]] | None) -> None:
            listener(EVERYTHING if keys is None else Change(claim_templates=keys))

        self._networks.subscribe(networks)
        if self._param_sets is not None:
            self._param_sets.subscribe(param_sets)
        if self._claim_templates is not None:
            self._claim_templates.subscribe(claim_templates)
        self._recipe.subscribe(recipe)
        self._cluster_runtimes.subscribe(runtimes)
        self._runtimes.subscribe(runtimes)

    def fetch_runtime(self, kind: Kind, namespace: str, name: str) -> JsonMap | Unverifiable | None:
        """One GET of a runtime the cache lacks (created a moment ago, its watch event still on
        the way): the slim object, None when the API says NotFound, or why it cannot be read.
        Blocking, at most ``RUNTIME_GET_SECONDS`` per attempt: callers run it off their loop."""
        if self._get_runtime is None:
            return None
        described = _described(kind, namespace, name)
        try:
            body = self._get_runtime(kind, namespace, name)
        except ApiException as error:
            status = status_of(error)
            if status == NOT_FOUND:
                return None
            rbac = " (RBAC: nicguard needs get on it)" if status == FORBIDDEN else ""
            return Unverifiable(f"GET {described}: {summary(error)}{rbac}")
        except (*TRANSPORT_ERRORS, ValueError) as error:  # ValueError: a body that is not JSON
            return Unverifiable(f"GET {described} failed: {summary(error)[:200]}")
        found = as_map(body)
        if found is None:
            return Unverifiable(f"GET {described}: not an object")
        return slim_runtime(found)

    def start(self) -> None:
        for cache in self._all:
            cache.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Signal every cache first, then wait for them within one shared ``timeout``."""
        for cache in self._all:
            cache.stop(timeout=0.0)
        deadline = time.monotonic() + timeout
        for cache in self._all:
            cache.stop(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """Whether every cache completed its first list within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        return all(
            cache.first_sync.wait(max(0.0, deadline - time.monotonic())) for cache in self._all
        )

    def alive(self) -> bool:
        """Whether every cache thread still runs (for /healthz)."""
        return all(cache.alive() for cache in self._all)

    def status(self) -> list[CacheStatus]:
        return [
            CacheStatus(
                name=cache.name,
                synced=s.synced,
                served=s.served,
                last_event_age_seconds=cache.last_event_age(),
                error=s.error,
            )
            for cache in self._all
            for s in (cache.state,)
        ]


class _Runtimes(Mapping[RuntimeKey, JsonMap]):
    """Both runtime caches' items as one mapping, read through (a view, not a copy)."""

    def __init__(
        self,
        cluster: CacheState[RuntimeKey, JsonMap],
        namespaced: CacheState[RuntimeKey, JsonMap],
    ) -> None:
        self._cluster, self._namespaced = cluster.items, namespaced.items

    def __getitem__(self, key: RuntimeKey) -> JsonMap:
        items = self._cluster if key[0] is Kind.CLUSTER_TRAINING_RUNTIME else self._namespaced
        return items[key]

    def __iter__(self) -> Iterator[RuntimeKey]:
        yield from self._cluster
        yield from self._namespaced

    def __len__(self) -> int:
        return len(self._cluster) + len(self._namespaced)


def _one_attempt(api_client: ApiClient) -> ApiClient:
    """A client like ``api_client`` whose requests are never retried: urllib3 retries thrice by
    default, which would stretch a 1 s GET on the request path to 4 s."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = False
    return ApiClient(configuration=configuration)


def _get_runtime(custom: CustomObjectsApi, kind: Kind, namespace: str, name: str) -> object:
    """GET one CTR or TR as decoded JSON; raises ApiException and transport errors."""
    if kind is Kind.CLUSTER_TRAINING_RUNTIME:
        call = partial(
            custom.get_cluster_custom_object,
            TRAINER_GROUP,
            TRAINER_VERSION,
            CLUSTER_RUNTIME_PLURAL,
            name,
        )
    else:
        call = partial(
            custom.get_namespaced_custom_object,
            TRAINER_GROUP,
            TRAINER_VERSION,
            namespace,
            RUNTIME_PLURAL,
            name,
        )
    return get_json(call, timeout=RUNTIME_GET_SECONDS)


def _described(kind: Kind, namespace: str, name: str) -> str:
    return f"{kind.value} {namespace}/{name}" if kind.namespaced else f"{kind.value} {name}"


def _unverifiable(cache: str, error: str | None) -> Unverifiable:
    return Unverifiable(f"{cache} cache not synced: {error or 'initial list pending'}")


def _name(obj: JsonMap) -> str | None:
    return str_at(obj, "metadata", "name")


def _claim_template_key(obj: JsonMap) -> tuple[str, str] | None:
    name = _name(obj)
    return (str_at(obj, "metadata", "namespace") or DEFAULT_NAMESPACE, name) if name else None


def claim_template_item(obj: JsonMap) -> ClaimTemplate | None:
    """A listed or watched ResourceClaimTemplate, slim."""
    # The items of a LIST of a built-in resource carry no apiVersion and kind.
    return claim_template_of({**obj, "apiVersion": RESOURCE_API, "kind": CLAIM_TEMPLATE_KIND})


def _recipe(configmap: JsonMap, *, name: ObjectName) -> Recipe | None:
    if _name(configmap) != name.name:
        return None
    return recipe_of(configmap, name, load_yaml)


def _runtime_cache(
    kind: Kind, plural: str, source: ListWatch, pacing: Pacing
) -> WatchCache[RuntimeKey, JsonMap]:
    def key(obj: JsonMap) -> RuntimeKey | None:
        name = _name(obj)
        namespace = str_at(obj, "metadata", "namespace") or ""
        return runtime_key(kind, namespace, name) if name else None

    return WatchCache[RuntimeKey, JsonMap](
        name=plural,
        resource=f"{plural}.{TRAINER_GROUP}",
        source=source,
        key=key,
        convert=slim_runtime,  # idempotent: also right for sources that do not trim
        pacing=pacing,
    )
