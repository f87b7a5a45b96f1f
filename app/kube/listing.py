"""One read of the cluster for ``nicguard audit``: one LIST per resource, no watch, giving the
snapshot the watch caches of ``app/kube/cluster_view.py`` would hold after their first sync, and
on request the wired JobSets, Jobs and Pods.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Final

from kubernetes.client import ApiClient, ApiException, CustomObjectsApi

from app.documents import load_yaml
from app.domain.claimants import Claimant, workload_claimant
from app.domain.cluster import (
    ClaimTemplates,
    ClusterSnapshot,
    Networks,
    ObjectName,
    RuntimeKey,
    recipe_of,
    runtime_key,
)
from app.domain.fields import JsonMap, str_at
from app.domain.kinds import TRAINER_GROUP, TRAINER_VERSION, Kind, Workload
from app.domain.network import (
    NETWORK_GROUP,
    NETWORK_VERSION,
    network_from_object,
    param_set_from_object,
)
from app.domain.recipe import Recipe, RecipeMissing
from app.domain.runtime_snapshot import snapshot_owner
from app.domain.slim import slim_runtime
from app.domain.workloads import workload_templates
from app.kube.client import ApiListWatch, ListCall
from app.kube.cluster_view import (
    CLAIM_TEMPLATE_GROUP,
    CLAIM_TEMPLATE_PLURAL,
    CLAIM_TEMPLATE_VERSION,
    CLUSTER_RUNTIME_PLURAL,
    NETWORK_PLURAL,
    PARAM_SET_PLURAL,
    RUNTIME_PLURAL,
    claim_template_item,
)
from app.kube.errors import NOT_FOUND, TRANSPORT_ERRORS, describe, status_of
from app.kube.rest import config_map_list, resource_list
from app.kubeyaml.claimants import claimant_in

# Each workload's resource, as ``--include-workloads`` lists them.
WORKLOAD_PLURALS: Final = (
    (Workload.JOB_SET, "jobsets"),
    (Workload.JOB, "jobs"),
    (Workload.POD, "pods"),
)


class ClusterReadError(Exception):
    """A read of the cluster failed; ``str()`` is one line naming what could not be read."""


@contextlib.contextmanager
def read_failures(what: str) -> Iterator[None]:
    """The API's failures inside as a ``ClusterReadError``: ``cannot <what>: <reason>``."""
    try:
        yield
    except ApiException as error:
        raise ClusterReadError(f"cannot {what}: {describe(error)}") from None
    except (*TRANSPORT_ERRORS, ValueError) as error:  # ValueError: a body that is not JSON
        raise ClusterReadError(f"cannot {what}: {describe(error)}") from None


def list_snapshot(
    api_client: ApiClient, recipe_name: ObjectName, namespace: str | None
) -> ClusterSnapshot:
    """Networks, the recipe ConfigMap, the runtimes and the ResourceClaimTemplates as one
    complete snapshot; raises
    ``ClusterReadError``. With ``namespace``, only that namespace's TrainingRuntimes are listed:
    no rule judging a TrainingRuntime reads a ClusterTrainingRuntime, and a user who may read
    only that namespace can still audit it."""
    custom = CustomObjectsApi(api_client)
    list_cluster = custom.list_cluster_custom_object
    networks = _networks(
        partial(list_cluster, NETWORK_GROUP, NETWORK_VERSION, NETWORK_PLURAL),
        partial(list_cluster, NETWORK_GROUP, NETWORK_VERSION, PARAM_SET_PLURAL),
    )
    configmaps = _listed(
        f"list configmaps in namespace {recipe_name.namespace}",
        # The field selector makes this the LIST of the one ConfigMap, as the recipe cache does.
        config_map_list(api_client, recipe_name.namespace, f"metadata.name={recipe_name.name}"),
    )
    runtimes: dict[RuntimeKey, JsonMap] = {}
    for kind, what, call in _runtime_lists(custom, namespace):
        for obj in _listed(what, call, trim=slim_runtime):
            name = str_at(obj, "metadata", "name")
            if name:
                runtimes[runtime_key(kind, str_at(obj, "metadata", "namespace") or "", name)] = obj
    templates = _claim_templates(api_client, namespace)
    return ClusterSnapshot(networks, _recipe(configmaps, recipe_name), runtimes, templates)


def _claim_templates(api_client: ApiClient, namespace: str | None) -> ClaimTemplates:
    """The ResourceClaimTemplates (only ``namespace``'s when given), slim as the cache keeps
    them; none, not served, where ``resource.k8s.io/v1`` is not."""
    where = "" if namespace is None else f" in namespace {namespace}"
    call = resource_list(
        api_client, CLAIM_TEMPLATE_GROUP, CLAIM_TEMPLATE_VERSION, CLAIM_TEMPLATE_PLURAL, namespace
    )
    items = _served(f"list {CLAIM_TEMPLATE_PLURAL}.{CLAIM_TEMPLATE_GROUP}{where}", call)
    if items is None:
        return ClaimTemplates(by_key={}, served=False)
    found = (claim_template_item(item) for item in items)
    return ClaimTemplates(by_key={(t.namespace, t.name): t for t in found if t is not None})


def list_workloads(api_client: ApiClient, namespace: str | None) -> list[tuple[Workload, JsonMap]]:
    """Every JobSet, Job and Pod (only ``namespace``'s when given) with a pod template that
    carries the interfaces annotation: one paginated LIST each, none when JobSet's API is not
    served; raises ``ClusterReadError``."""
    found: list[tuple[Workload, JsonMap]] = []
    for workload, plural in WORKLOAD_PLURALS:
        resource = f"{plural}.{workload.group}" if workload.group else plural
        where = "" if namespace is None else f" in namespace {namespace}"
        call = resource_list(api_client, workload.group, workload.version, plural, namespace)
        items = _served(f"list {resource}{where}", call, trim=partial(_wired, workload))
        found += [(workload, item) for item in items or () if item]
    return found


def list_claimants(api_client: ApiClient, namespace: str | None) -> list[Claimant]:
    """The runtime snapshots, JobSets, Jobs and Pods (only ``namespace``'s when given) that name
    ResourceClaimTemplates: one paginated LIST each; raises ``ClusterReadError``."""
    copies = (claimant_in(c) for c in list_runtime_snapshots(api_client, namespace))
    workloads = (
        workload_claimant(kind, obj, str_at(obj, "metadata", "namespace") or "")
        for kind, obj in list_workloads(api_client, namespace)
    )
    return [c for c in (*copies, *workloads) if c is not None]


def list_runtime_snapshots(api_client: ApiClient, namespace: str | None) -> list[JsonMap]:
    """Every runtime snapshot ConfigMap (only ``namespace``'s when given): one paginated LIST,
    the other ConfigMaps dropped as each page is read; raises ``ClusterReadError``."""
    where = "" if namespace is None else f" in namespace {namespace}"
    call = resource_list(api_client, "", "v1", "configmaps", namespace)
    return [item for item in _listed(f"list configmaps{where}", call, trim=_copy) if item]


def _copy(obj: JsonMap) -> JsonMap:
    # A list's items leave their kind off: a copy says what it is, as a file's does.
    if snapshot_owner(obj) is None:
        return {}
    return {**obj, "apiVersion": "v1", "kind": "ConfigMap"}


def _wired(workload: Workload, obj: JsonMap) -> JsonMap:
    # The unwired are dropped as each page is read: a cluster's Pods never sit whole.
    return obj if workload_templates(workload, obj) else {}


def _networks(call: ListCall, param_sets: ListCall) -> Networks:
    # A cluster without GKE multi-networking: not served, as the watch cache concludes.
    items = _served(f"list {NETWORK_PLURAL}.{NETWORK_GROUP}", call)
    if items is None:
        return Networks(by_name={}, served=False)
    found = (network_from_object(item) for item in items)
    sets = _served(f"list {PARAM_SET_PLURAL}.{NETWORK_GROUP}", param_sets)
    described = None if sets is None else (param_set_from_object(item) for item in sets)
    return Networks(
        by_name={n.name: n for n in found if n is not None},
        param_sets=None if described is None else {s.name: s for s in described if s is not None},
    )


def _served(
    what: str, call: ListCall, trim: Callable[[JsonMap], JsonMap] | None = None
) -> Sequence[JsonMap] | None:
    """The items (each cut down by ``trim``), or None when the API answers NotFound (not
    served)."""
    with read_failures(what):
        try:
            return ApiListWatch(call, trim=trim).list().items
        except ApiException as error:
            if status_of(error) != NOT_FOUND:
                raise
            return None


def _runtime_lists(
    custom: CustomObjectsApi, namespace: str | None
) -> list[tuple[Kind, str, ListCall]]:
    trainer = (TRAINER_GROUP, TRAINER_VERSION)
    runtimes = f"list {RUNTIME_PLURAL}.{TRAINER_GROUP}"
    if namespace is not None:
        return [
            (
                Kind.TRAINING_RUNTIME,
                f"{runtimes} in namespace {namespace}",
                partial(custom.list_namespaced_custom_object, *trainer, namespace, RUNTIME_PLURAL),
            )
        ]
    return [
        (
            Kind.CLUSTER_TRAINING_RUNTIME,
            f"list {CLUSTER_RUNTIME_PLURAL}.{TRAINER_GROUP}",
            partial(custom.list_cluster_custom_object, *trainer, CLUSTER_RUNTIME_PLURAL),
        ),
        (
            Kind.TRAINING_RUNTIME,
            runtimes,
            partial(custom.list_custom_object_for_all_namespaces, *trainer, RUNTIME_PLURAL),
        ),
    ]


def _listed(
    what: str, call: ListCall, *, trim: Callable[[JsonMap], JsonMap] | None = None
) -> Sequence[JsonMap]:
    # Objects are trimmed page by page: a LIST of thousands never sits whole.
    source = ApiListWatch(call, trim=trim)
    with read_failures(what):
        return source.list().items


def _recipe(configmaps: Sequence[JsonMap], name: ObjectName) -> Recipe | RecipeMissing:
    for configmap in configmaps:
        if str_at(configmap, "metadata", "name") == name.name:
            return recipe_of(configmap, name, load_yaml)
    return RecipeMissing(ref=str(name))
