"""The slim copy of a runtime that caches keep: identity, binding labels and each job's name,
wiring annotations and ``resourceClaims``, in a few slots and tuples, read as the JSON object they
stand for.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Final

from app.domain.annotation import INTERFACES_ANNOTATION, WIRING_KEYS
from app.domain.fields import JsonMap, as_list, as_map, map_at, value_at
from app.domain.policy import PROFILE_LABEL, RECIPE_BOUND_LABEL
from app.domain.template import (
    ANCESTOR_LABEL,
    TRAINER_ANCESTOR,
    is_trainer_ancestor,
    runs_launcher_as_node,
    wired_positions,
)

_BINDING_LABELS: Final = (RECIPE_BOUND_LABEL, PROFILE_LABEL)
_SHARED: Final = 1024
_ABSENT: Final = object()  # a key the runtime does not have (None is a value it may have)

_Wiring = tuple[tuple[str, object], ...]
_Claims = tuple[tuple[tuple[str, str], ...] | None, ...]
"""Each ``resourceClaims`` entry's string fields the DRA rules read (None: not a map)."""
_Job = tuple[str, int, _Wiring | None, bool, _Claims | None]
"""(job name, position of its entry or -1, its wiring or None without a pod template, whether
it is labelled as the trainer ancestor, its pod's ``resourceClaims`` or None without any)."""
_CLAIM_KEYS: Final = ("name", "resourceClaimTemplateName", "resourceClaimName")
_ANCESTOR_LABELS: Final = {"labels": {ANCESTOR_LABEL: TRAINER_ANCESTOR}}

_LAUNCHER_AS_NODE: Final = {"mlPolicy": {"mpi": {"runLauncherAsNode": True}}}


class SlimRuntime(Mapping[str, object]):
    """A cached runtime, read as the object ``{apiVersion, kind, metadata, spec}`` it stands
    for; ``metadata`` and ``spec`` are built when read.

    Caches hold up to 100,000 of these for as long as the process lives, and most are read only
    when something changes: eight slots and the wiring tuples (shared by runtimes stamped from
    one template) take a third of the nested dicts they replace (BENCHMARKS.md, memory).
    """

    __slots__ = (
        "_api_version",
        "_jobs",
        "_kind",
        "_labels",
        "_launcher",
        "_name",
        "_namespace",
        "_resource_version",
    )

    def __init__(
        self,
        *,
        api_version: object,
        kind: object,
        name: object,
        namespace: object,
        resource_version: object,
        labels: tuple[tuple[str, object], ...] | None,
        jobs: tuple[_Job, ...] | None,
        launcher: bool,
    ) -> None:
        self._api_version, self._kind = api_version, kind
        self._name, self._namespace, self._resource_version = name, namespace, resource_version
        self._labels, self._jobs, self._launcher = labels, jobs, launcher

    def __getitem__(self, key: str) -> object:
        if key == "spec":
            if self._jobs is not None:
                return _spec(self._jobs, launcher=self._launcher)
            if self._launcher:
                return _LAUNCHER_AS_NODE
        elif key == "metadata":
            return self._metadata()
        elif key == "apiVersion" and self._api_version is not _ABSENT:
            return self._api_version
        elif key == "kind" and self._kind is not _ABSENT:
            return self._kind
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        if self._api_version is not _ABSENT:
            yield "apiVersion"
        if self._kind is not _ABSENT:
            yield "kind"
        yield "metadata"
        if self._jobs is not None or self._launcher:
            yield "spec"

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"SlimRuntime({dict(self)!r})"

    def _metadata(self) -> dict[str, object]:
        metadata: dict[str, object] = {}
        for key, value in (
            ("name", self._name),
            ("namespace", self._namespace),
            ("resourceVersion", self._resource_version),
        ):
            if value is not _ABSENT:
                metadata[key] = value
        if self._labels is not None:
            metadata["labels"] = dict(self._labels)
        return metadata


def slim_runtime(runtime: JsonMap) -> JsonMap:
    """The runtime with identity, the binding labels and each job's wiring annotations and
    ``resourceClaims`` (the fields of each entry that name a claim).

    The rules see the same thing as in the whole object (``wired_templates``, with or without
    the ancestors a TrainJob's patches add; ``job_templates``' annotated ones; the labels,
    names): jobs are kept with their name, position, wiring annotations and Trainer's ancestor
    label; entries without a string name that are neither wired nor annotated become non-map
    placeholders so positions are unchanged; the
    launcher-as-node flag is kept when it is set.
    """
    if isinstance(runtime, SlimRuntime):
        return runtime  # caches may slim what a trimming source already slimmed
    metadata = map_at(runtime, "metadata") or {}
    labels = map_at(metadata, "labels")
    bound = (
        None
        if labels is None
        else tuple((key, _shared(labels[key])) for key in _BINDING_LABELS if key in labels)
    )
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs"))
    return SlimRuntime(
        api_version=_shared(runtime.get("apiVersion", _ABSENT)),
        kind=_shared(runtime.get("kind", _ABSENT)),
        name=metadata.get("name", _ABSENT),
        namespace=_shared(metadata.get("namespace", _ABSENT)),
        resource_version=metadata.get("resourceVersion", _ABSENT),
        labels=bound or None,
        jobs=None if jobs is None else _canonical(_kept_jobs(runtime, jobs)),
        launcher=runs_launcher_as_node(runtime),
    )


def _kept_jobs(runtime: JsonMap, jobs: Sequence[object]) -> tuple[_Job, ...]:
    # The wired jobs, and every other named one: a TrainJob's patch may label any job as the
    # trainer ancestor, or annotate it, and Trainer then runs its pods with that job's
    # annotations. Unnamed ones only when annotated (judged by position, nothing patches them).
    wired = wired_positions(runtime)
    taken = {position for _, position in wired}
    others = (
        (name, position)
        for position, item in enumerate(jobs)
        if position not in taken
        for name in (_other_name(item, position),)
        if name is not None
    )
    return tuple(_wired_job(jobs, name, position) for name, position in (*wired, *others))


def _other_name(job: object, position: int) -> str | None:
    name = value_at(job, "name")
    if isinstance(name, str):
        return name
    annotations = map_at(job, "template", "spec", "template", "metadata", "annotations")
    if annotations is not None and INTERFACES_ANNOTATION in annotations:
        return f"replicatedJobs[{position}]"
    return None


def _wired_job(jobs: Sequence[object], name: str, position: int | None) -> _Job:
    if position is None:
        return name, -1, None, False, None
    job = jobs[position]
    pod_template = map_at(job, "template", "spec", "template")
    labelled = is_trainer_ancestor(job)
    if pod_template is None:
        return name, position, None, labelled, None
    annotations = map_at(pod_template, "metadata", "annotations") or {}
    wiring = tuple((key, annotations[key]) for key in WIRING_KEYS if key in annotations)
    claims = as_list(value_at(pod_template, "spec", "resourceClaims"))
    return name, position, wiring, labelled, None if claims is None else _claims(claims)


def _claims(entries: Sequence[object]) -> _Claims:
    # Only what the DRA rules read; a non-map entry keeps its place (fields name positions).
    return tuple(
        None
        if entry is None
        else tuple((key, value) for key in _CLAIM_KEYS if type(value := entry.get(key)) is str)
        for entry in map(as_map, entries)
    )


def _is_hashable(jobs: tuple[_Job, ...]) -> bool:
    # Only string values: True == 1 == 1.0 as cache keys, and lists are not hashable, so
    # malformed annotations are kept apart.
    return all(
        wiring is None or all(type(v) is str for _, v in wiring) for _, _, wiring, _, _ in jobs
    )


def _canonical(jobs: tuple[_Job, ...]) -> tuple[_Job, ...]:
    """Runtimes stamped from one recipe share one jobs tuple."""
    return _first_of(jobs) if _is_hashable(jobs) else jobs


@lru_cache(maxsize=_SHARED)
def _first_of(jobs: tuple[_Job, ...]) -> tuple[_Job, ...]:
    return jobs


def _spec(jobs: tuple[_Job, ...], *, launcher: bool) -> JsonMap:
    # Read-only, like every cached object: runtimes sharing a jobs tuple share the spec built
    # for it while it is among the recently read.
    if _is_hashable(jobs):
        return _shared_spec(jobs, launcher=launcher)
    return _build_spec(jobs, launcher=launcher)


@lru_cache(maxsize=_SHARED)
def _shared_spec(jobs: tuple[_Job, ...], *, launcher: bool) -> JsonMap:
    return _build_spec(jobs, launcher=launcher)


def _build_spec(jobs: tuple[_Job, ...], *, launcher: bool) -> JsonMap:
    positions = [position for _, position, _, _, _ in jobs]
    entries: list[object] = [None] * (max(positions, default=-1) + 1)
    for name, position, wiring, labelled, claims in jobs:
        if position < 0:
            continue
        job: dict[str, object] = {"name": name}
        template: dict[str, object] = {}
        if labelled:
            template["metadata"] = _ANCESTOR_LABELS
        if wiring is not None:
            pod: dict[str, object] = {"metadata": {"annotations": dict(wiring)}}
            if claims is not None:
                pod["spec"] = {"resourceClaims": [None if c is None else dict(c) for c in claims]}
            template["spec"] = {"template": pod}
        if template:
            job["template"] = template
        entries[position] = job
    spec: dict[str, object] = {"template": {"spec": {"replicatedJobs": entries}}}
    if launcher:
        spec.update(_LAUNCHER_AS_NODE)
    return spec


def _shared(value: object) -> object:
    """Strings repeated across thousands of runtimes (namespaces, labels) stored once."""
    return sys.intern(value) if type(value) is str else value
