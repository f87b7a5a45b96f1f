"""Sorting plain Kubernetes objects into the cluster view: Networks, the recipe, runtimes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.domain.cached_runtime import slim_runtime
from app.domain.cluster import ClusterSnapshot, Networks, RuntimeKey, Unverifiable, runtime_key
from app.domain.fields import JsonMap, as_map, map_at, str_at
from app.domain.kinds import Kind, kind_of
from app.domain.network import NETWORK_GROUP, NETWORK_VERSION, Network, network_from_object
from app.domain.recipe import LoadYaml, Recipe, RecipeMissing, recipe_from_configmap


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


def trainer_kind(obj: object) -> Kind | None:
    """The Trainer kind of an object by apiVersion group and kind, or None."""
    group = (str_at(obj, "apiVersion") or "").partition("/")[0]
    return kind_of(group, str_at(obj, "kind") or "")


def is_network(obj: object) -> bool:
    return str_at(obj, "apiVersion") == f"{NETWORK_GROUP}/{NETWORK_VERSION}" and (
        str_at(obj, "kind") == "Network"
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


def snapshot_of(
    objects: Iterable[object], *, recipe_name: ObjectName, load_yaml: LoadYaml
) -> ClusterSnapshot:
    """A complete view from a set of objects (file mode: the Network API counts as served).

    Runtimes are kept slim (``slim_runtime``); ``objects`` is consumed once, so a generator
    keeps only one object whole at a time.
    """
    networks: dict[str, Network] = {}
    runtimes: dict[RuntimeKey, JsonMap] = {}
    recipe: Recipe | RecipeMissing = RecipeMissing(ref=str(recipe_name))
    for obj in objects:
        if is_network(obj):
            network = network_from_object(obj)
            if network is not None:
                networks[network.name] = network
        elif is_configmap(obj, recipe_name):
            recipe = recipe_of(as_map(obj) or {}, recipe_name, load_yaml)
        elif (entry := runtime_entry(obj)) is not None:
            runtimes[entry[0]] = slim_runtime(entry[1])
    return ClusterSnapshot(Networks(by_name=networks), recipe, runtimes)


def with_runtimes(
    snapshot: ClusterSnapshot, extra: Mapping[RuntimeKey, JsonMap]
) -> ClusterSnapshot:
    """The snapshot with more runtimes (``check`` resolves TrainJobs from its FILEs too)."""
    if isinstance(snapshot.runtime_state, Unverifiable):
        return snapshot
    merged = {**snapshot.runtime_state, **extra}
    return ClusterSnapshot(snapshot.network_state, snapshot.recipe_state, merged)
