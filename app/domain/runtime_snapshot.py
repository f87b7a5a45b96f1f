"""Trainer's runtime snapshots (docs/rules.md, RuntimeSnapshotInvalid): the ConfigMap
``<trainjob>-runtime-snapshot`` whose ``data.runtime`` holds the copy of the runtime a TrainJob's
pods are built from. YAML decoding is injected (``load_yaml``) so the core stays stdlib-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.domain.fields import JsonMap, as_list, as_map, map_at, str_at, value_at
from app.domain.kinds import TRAINER_GROUP, Kind
from app.domain.recipe import LoadYaml
from app.domain.runtime_decoding import typed_reading_problem
from app.domain.verdict import shown

SNAPSHOT_SUFFIX: Final = "-runtime-snapshot"
RUNTIME_KEY: Final = "runtime"
FIELD: Final = f"data.{RUNTIME_KEY}"
# Trainer's copies of real runtimes are a few KiB; a bigger text is refused before it is parsed,
# so no ConfigMap writer can make a review cost more than this one parse (docs/rules.md).
MAX_RUNTIME_BYTES: Final = 256 * 1024
# A decoder's reason names the construct and its position: longer than a name in a message.
_REASON_SHOWN: Final = 240


@dataclass(frozen=True, slots=True)
class RuntimeSnapshot:
    """One snapshot ConfigMap as read: the copied runtime and its kind, or why it holds none.

    ``runtime`` is None exactly when ``problem`` is set.
    """

    namespace: str
    name: str
    trainjob: str
    runtime: JsonMap | None = None
    kind: Kind | None = None
    problem: str | None = None

    @property
    def runtime_name(self) -> str:
        return str_at(self.runtime, "metadata", "name") or ""

    def describe(self) -> str:
        """``ConfigMap ns/x-runtime-snapshot (runtime snapshot of TrainJob ns/x: Kind name)``."""
        copied = "" if self.kind is None else f": {self.kind.value} {shown(self.runtime_name)}"
        return (
            f"ConfigMap {shown(self.namespace)}/{shown(self.name)} (runtime snapshot of TrainJob "
            f"{shown(self.namespace)}/{shown(self.trainjob)}{copied})"
        )


def snapshot_owner(configmap: object) -> str | None:
    """The TrainJob whose runtime snapshot ``configmap`` is, or None for any other ConfigMap:
    a name ending in ``-runtime-snapshot`` and a controller owner of kind TrainJob in group
    trainer.kubeflow.org (the webhook's matchConditions narrow the same way)."""
    name = str_at(configmap, "metadata", "name") or ""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    for item in as_list(value_at(configmap, "metadata", "ownerReferences")) or ():
        owner = as_map(item)
        if owner is None or owner.get("controller") is not True:
            continue
        group = (str_at(owner, "apiVersion") or "").partition("/")[0]
        owner_name = str_at(owner, "name")
        if group == TRAINER_GROUP and owner.get("kind") == Kind.TRAIN_JOB.value and owner_name:
            return owner_name
    return None


def read_snapshot(configmap: JsonMap, trainjob: str, load_yaml: LoadYaml) -> RuntimeSnapshot:
    """The copy held by a snapshot ConfigMap; never raises (a bad copy carries a ``problem``).

    ``load_yaml`` must read YAML as Trainer does (app.kubeyaml) or refuse with a ValueError;
    the typed reading on top of it is checked here (app.domain.runtime_decoding).
    Trainer v2.3.0 writes the copy without ``apiVersion`` and ``kind``: such a copy is a
    TrainingRuntime when it has a namespace, else a ClusterTrainingRuntime.
    """
    namespace = str_at(configmap, "metadata", "namespace") or ""
    name = str_at(configmap, "metadata", "name") or ""
    found = RuntimeSnapshot(namespace=namespace, name=name, trainjob=trainjob)
    data = map_at(configmap, "data") or {}
    if RUNTIME_KEY not in data:
        return _invalid(found, f"data has no {RUNTIME_KEY} key")
    text = data[RUNTIME_KEY]
    if not isinstance(text, str):
        return _invalid(found, f"{FIELD} is not a string")
    if _over_size(text):
        return _invalid(
            found, f"{FIELD} is over {MAX_RUNTIME_BYTES // 1024} KiB, more than nicguard reads"
        )
    try:
        document = load_yaml(text)
    except (ValueError, RecursionError) as error:
        reason = shown(str(error), _REASON_SHOWN)
        return _invalid(found, f"{FIELD} is not YAML of one runtime: {reason}")
    runtime = as_map(document)
    if runtime is None:
        what = "a list" if as_list(document) is not None else "not an object"
        return _invalid(found, f"{FIELD} is {what}, not one runtime")
    kind = _copied_kind(runtime)
    if not isinstance(kind, Kind):
        return _invalid(found, kind)
    typed = typed_reading_problem(runtime)
    if typed is not None:
        return _invalid(found, f"the copy in {FIELD} cannot be read as Trainer reads it: {typed}")
    if not str_at(runtime, "metadata", "name"):
        return _invalid(found, f"the copy in {FIELD} has no metadata.name")
    return RuntimeSnapshot(
        namespace=namespace, name=name, trainjob=trainjob, runtime=runtime, kind=kind
    )


def _copied_kind(runtime: JsonMap) -> Kind | str:
    """The copy's runtime kind, or why it is not a runtime."""
    api_version, kind = runtime.get("apiVersion"), runtime.get("kind")
    if api_version is not None:
        group = api_version.partition("/")[0] if isinstance(api_version, str) else None
        if group != TRAINER_GROUP:
            return f"the copy in {FIELD} has apiVersion {_quoted(api_version)}, not {TRAINER_GROUP}"
    if kind is None:
        namespaced = bool(str_at(runtime, "metadata", "namespace"))
        return Kind.TRAINING_RUNTIME if namespaced else Kind.CLUSTER_TRAINING_RUNTIME
    if kind in (Kind.CLUSTER_TRAINING_RUNTIME.value, Kind.TRAINING_RUNTIME.value):
        return Kind(kind)
    return (
        f"the copy in {FIELD} is of kind {_quoted(kind)}, not ClusterTrainingRuntime or "
        "TrainingRuntime"
    )


def _over_size(text: str) -> bool:
    """More than MAX_RUNTIME_BYTES of UTF-8 (as Go counts a string), without encoding a text
    that is plainly over."""
    if len(text) > MAX_RUNTIME_BYTES:
        return True
    return len(text.encode("utf-8", "surrogatepass")) > MAX_RUNTIME_BYTES


def _quoted(value: object) -> str:
    return f'"{shown(value)}"' if isinstance(value, str) else "that is not a string"


def _invalid(found: RuntimeSnapshot, problem: str) -> RuntimeSnapshot:
    return RuntimeSnapshot(
        namespace=found.namespace, name=found.name, trainjob=found.trainjob, problem=problem
    )
