"""The wired pod templates of a runtime, and the slim copy of a runtime that caches keep.

The ``node`` job's pod template always; the ``launcher`` job's too when an MPI runtime runs its
launcher as a node (``spec.mlPolicy.mpi.runLauncherAsNode``). Caches keep only what these read.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from app.domain.annotation import WIRING_KEYS
from app.domain.fields import FieldPath, JsonMap, as_list, as_map, map_at, value_at
from app.domain.policy import PROFILE_LABEL, RECIPE_BOUND_LABEL

NODE_JOB: Final = "node"
LAUNCHER_JOB: Final = "launcher"
_REPLICATED_JOBS = FieldPath("spec.template.spec.replicatedJobs")


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """A wired job's PodTemplateSpec: its annotations and where it sits in the object."""

    annotations: Mapping[str, object]
    path: FieldPath
    job: str = NODE_JOB

    @property
    def annotations_path(self) -> FieldPath:
        return self.path.child("metadata").child("annotations")

    def annotation_path(self, key: str) -> FieldPath:
        return self.annotations_path.key(key)


@dataclass(frozen=True, slots=True)
class PodTemplateMissing:
    """The runtime has no such job, or the job has no pod template."""

    reason: str
    path: FieldPath
    job: str = NODE_JOB


def runs_launcher_as_node(runtime: object) -> bool:
    """Trainer's MPI flag: the launcher pod runs a training rank too (deepspeed, mlx runtimes)."""
    return value_at(runtime, "spec", "mlPolicy", "mpi", "runLauncherAsNode") is True


def wired_jobs(runtime: object) -> tuple[str, ...]:
    """The replicatedJobs whose pods need the wiring: node, and launcher when it runs ranks."""
    return (NODE_JOB, LAUNCHER_JOB) if runs_launcher_as_node(runtime) else (NODE_JOB,)


def wired_templates(runtime: object) -> tuple[PodTemplate | PodTemplateMissing, ...]:
    """The pod template (or why it is missing) of every wired job, node first."""
    return tuple(job_template(runtime, job) for job in wired_jobs(runtime))


def job_template(runtime: object, job_name: str) -> PodTemplate | PodTemplateMissing:
    """The first map entry named ``job_name`` in replicatedJobs (non-map entries are skipped)."""
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs"))
    for position, item in enumerate(jobs or ()):
        job = as_map(item)
        if job is None or job.get("name") != job_name:
            continue
        job_path = _REPLICATED_JOBS.index(position)
        pod_template = map_at(job, "template", "spec", "template")
        if pod_template is None:
            return PodTemplateMissing(
                reason=f'the "{job_name}" replicatedJob has no template.spec.template',
                path=job_path,
                job=job_name,
            )
        return PodTemplate(
            annotations=map_at(pod_template, "metadata", "annotations") or {},
            path=job_path.child("template").child("spec").child("template"),
            job=job_name,
        )
    return PodTemplateMissing(
        reason=f'spec.template.spec.replicatedJobs declares no "{job_name}" job',
        path=_REPLICATED_JOBS,
        job=job_name,
    )


_METADATA: Final = ("name", "namespace", "resourceVersion")
_BINDING_LABELS: Final = (RECIPE_BOUND_LABEL, PROFILE_LABEL)
_SHARED_SPECS: Final = 1024


def slim_runtime(runtime: JsonMap) -> JsonMap:
    """The runtime with identity, the recipe-bound label and its wired jobs' wiring annotations.

    The rules see the same thing as in the whole object (``wired_templates``, the label, names):
    other jobs before the last wired one stay as non-map placeholders so positions are unchanged,
    nothing after it is kept, and the launcher-as-node flag is kept when it is set.
    """
    metadata = map_at(runtime, "metadata") or {}
    kept: dict[str, object] = {key: metadata[key] for key in _METADATA if key in metadata}
    if "namespace" in kept:
        kept["namespace"] = _shared(kept["namespace"])
    labels = map_at(metadata, "labels")
    if labels is not None:
        bound = {key: _shared(labels[key]) for key in _BINDING_LABELS if key in labels}
        if bound:
            kept["labels"] = bound
    slim: dict[str, object] = {
        key: _shared(runtime[key]) for key in ("apiVersion", "kind") if key in runtime
    }
    slim["metadata"] = kept
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs"))
    launcher = runs_launcher_as_node(runtime)
    if jobs is not None:
        slim["spec"] = _spec(
            tuple(_wired_job(jobs, job) for job in wired_jobs(runtime)), launcher=launcher
        )
    elif launcher:
        slim["spec"] = _LAUNCHER_AS_NODE
    return slim


_Wiring = tuple[tuple[str, object], ...]
_Job = tuple[str, int, _Wiring | None]
"""(job name, position of its first entry or -1, its wiring or None without a pod template)."""

_LAUNCHER_AS_NODE: Final = {"mlPolicy": {"mpi": {"runLauncherAsNode": True}}}


def _wired_job(jobs: Sequence[object], name: str) -> _Job:
    for position, item in enumerate(jobs):
        job = as_map(item)
        if job is None or job.get("name") != name:
            continue
        pod_template = map_at(job, "template", "spec", "template")
        if pod_template is None:
            return name, position, None
        annotations = map_at(pod_template, "metadata", "annotations") or {}
        wiring = tuple((key, annotations[key]) for key in WIRING_KEYS if key in annotations)
        return name, position, wiring
    return name, -1, None


def _spec(jobs: tuple[_Job, ...], *, launcher: bool) -> JsonMap:
    # Runtimes stamped from one recipe share their spec: build it once (read-only, like all
    # cached objects). Only string values are shared: True == 1 == 1.0 as cache keys, and lists
    # are not hashable, so malformed annotations are built apart.
    if all(wiring is None or all(type(v) is str for _, v in wiring) for _, _, wiring in jobs):
        return _shared_spec(jobs, launcher=launcher)
    return _build_spec(jobs, launcher=launcher)


@lru_cache(maxsize=_SHARED_SPECS)
def _shared_spec(jobs: tuple[_Job, ...], *, launcher: bool) -> JsonMap:
    return _build_spec(jobs, launcher=launcher)


def _build_spec(jobs: tuple[_Job, ...], *, launcher: bool) -> JsonMap:
    entries: list[object] = [None] * (max(position for _, position, _ in jobs) + 1)
    for name, position, wiring in jobs:
        if position < 0:
            continue
        job: dict[str, object] = {"name": name}
        if wiring is not None:
            pod = {"metadata": {"annotations": dict(wiring)}}
            job["template"] = {"spec": {"template": pod}}
        entries[position] = job
    spec: dict[str, object] = {"template": {"spec": {"replicatedJobs": entries}}}
    if launcher:
        spec.update(_LAUNCHER_AS_NODE)
    return spec


def _shared(value: object) -> object:
    """Strings repeated across thousands of runtimes (namespaces, annotations) stored once."""
    return sys.intern(value) if type(value) is str else value
