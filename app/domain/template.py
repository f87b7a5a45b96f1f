"""The judged pod templates of a runtime: wired ones, and annotated ones beside them.

Wired: the ``node`` job's pod template always; the ``launcher`` job's too when an MPI runtime
runs its launcher as a node (``spec.mlPolicy.mpi.runLauncherAsNode``); and every job labelled as
the trainer ancestor, the label by which Trainer picks the job that runs the trainer. Annotated:
every other job whose pod template carries the interfaces annotation (JobSet runs its pods too).
Caches keep only what these read (``app.domain.slim``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Final, NamedTuple

from app.domain.annotation import INTERFACES_ANNOTATION
from app.domain.fields import FieldPath, as_list, as_map, map_at, value_at
from app.domain.value_type import value_type

NODE_JOB: Final = "node"
LAUNCHER_JOB: Final = "launcher"
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_ANCESTOR: Final = "trainer"
_REPLICATED_JOBS = FieldPath("spec.template.spec.replicatedJobs")


@value_type
class PodTemplate:
    """A wired job's PodTemplateSpec: its annotations and where it sits in the object."""

    annotations: Mapping[str, object]
    path: FieldPath
    job: str = NODE_JOB
    resource_claims: object = None
    """The pod's ``spec.resourceClaims`` as written (DRA-wired NICs, app/domain/claims.py)."""

    @property
    def annotations_path(self) -> FieldPath:
        return _annotations_path(self.path)

    def annotation_path(self, key: str) -> FieldPath:
        return _annotation_path(self.path, key)


# Paths are values: those of the few places a template sits are built once, not per review.
_PATHS_KEPT: Final = 256


@lru_cache(maxsize=_PATHS_KEPT)
def _annotations_path(template: FieldPath) -> FieldPath:
    return template.child("metadata.annotations")


@lru_cache(maxsize=_PATHS_KEPT)
def _annotation_path(template: FieldPath, key: str) -> FieldPath:
    return _annotations_path(template).key(key)


@lru_cache(maxsize=_PATHS_KEPT)
def _job_paths(position: int) -> tuple[FieldPath, FieldPath]:
    """The path of the replicatedJob at ``position``, and of its pod template."""
    job = _REPLICATED_JOBS.index(position)
    return job, job.child("template.spec.template")


@value_type
class PodTemplateMissing:
    """The runtime has no such job, or the job has no pod template."""

    reason: str
    path: FieldPath
    job: str = NODE_JOB


def runs_launcher_as_node(runtime: object) -> bool:
    """Trainer's MPI flag: the launcher pod runs a training rank too (deepspeed, mlx runtimes)."""
    return value_at(runtime, "spec", "mlPolicy", "mpi", "runLauncherAsNode") is True


def wired_jobs(runtime: object) -> tuple[str, ...]:
    """The names of the replicatedJobs whose pods need the wiring, as ``wired_templates``
    lists them."""
    return tuple(name for name, _ in _wired_entries(runtime)[1])


def wired_templates(
    runtime: object, *, ancestors: Mapping[str, bool] | None = None
) -> tuple[PodTemplate | PodTemplateMissing, ...]:
    """The pod template (or why it is missing) of every wired job: node, launcher when it runs
    ranks, then each other job labelled as the trainer ancestor, in list order. ``ancestors``
    says, for the jobs a TrainJob's patches relabel, whether they then name the trainer:
    Trainer reads the label after merging them."""
    jobs, entries = _wired_entries(runtime, ancestors)
    return tuple(
        _missing(name) if position is None else _template(name, position, jobs[position])
        for name, position in entries
    )


class JobTemplates(NamedTuple):
    """A runtime's wired templates, and the pod template of each of its other jobs (a tuple:
    built on every judgement, where a dataclass costs more)."""

    wired: tuple[PodTemplate | PodTemplateMissing, ...]
    others: tuple[PodTemplate, ...]
    """Every job that is not wired and has a pod template, in list order (a TrainJob's patches
    may annotate any of them)."""

    @property
    def annotated(self) -> tuple[PodTemplate, ...]:
        """The other jobs whose pod template carries the interfaces annotation."""
        if not self.others:
            return ()
        return tuple(t for t in self.others if INTERFACES_ANNOTATION in t.annotations)


def job_templates(runtime: object, *, ancestors: Mapping[str, bool] | None = None) -> JobTemplates:
    """``wired_templates``, and the pod templates of every other job."""
    jobs, entries = _wired_entries(runtime, ancestors)
    wired = tuple(
        [
            _missing(name) if position is None else _template(name, position, jobs[position])
            for name, position in entries
        ]
    )
    if len(jobs) == 1 and entries[0][1] == 0:
        return JobTemplates(wired, ())  # the node job alone, as in AICR's runtimes
    taken = {position for _, position in entries}
    others = (
        _template(job_name(jobs[position], position), position, jobs[position])
        for position in range(len(jobs))
        if position not in taken
    )
    return JobTemplates(wired, tuple(t for t in others if isinstance(t, PodTemplate)))


def job_template(runtime: object, job_name: str) -> PodTemplate | PodTemplateMissing:
    """The first map entry named ``job_name`` in replicatedJobs (non-map entries are skipped)."""
    jobs = _replicated_jobs(runtime)
    position = _first_named(jobs, job_name)
    return _missing(job_name) if position is None else _template(job_name, position, jobs[position])


def is_trainer_ancestor(job: object) -> bool:
    """Whether a replicatedJob carries Trainer's label of the job that runs the trainer."""
    return value_at(job, "template", "metadata", "labels", ANCESTOR_LABEL) == TRAINER_ANCESTOR


def interfaces_annotations(runtime: object) -> Iterator[Mapping[str, object]]:
    """The pod annotations of every job, in list order, that carry the interfaces annotation:
    those of the wired and the annotated templates that name Networks, without locating them
    in the object (the audit's index of the Networks a runtime names, and NetworkInUse, read
    only these)."""
    for job in _replicated_jobs(runtime):
        annotations = map_at(job, "template", "spec", "template", "metadata", "annotations")
        if annotations is not None and INTERFACES_ANNOTATION in annotations:
            yield annotations


def wired_positions(runtime: object) -> tuple[tuple[str, int | None], ...]:
    """Each wired job's name and position in replicatedJobs (None: the runtime has none)."""
    return _wired_entries(runtime)[1]


_Entries = tuple[tuple[str, int | None], ...]


def _wired_entries(
    runtime: object, ancestors: Mapping[str, bool] | None = None
) -> tuple[Sequence[object], _Entries]:
    """The replicatedJobs, and each wired job's name and position.

    On every judgement of every runtime (the audit's passes too): the spec is looked up once
    (a cached runtime builds it when read), and only jobs not wired by name are read further.
    """
    spec = value_at(runtime, "spec")
    jobs = as_list(value_at(spec, "template", "spec", "replicatedJobs")) or ()
    launcher = value_at(spec, "mlPolicy", "mpi", "runLauncherAsNode") is True
    named = (NODE_JOB, LAUNCHER_JOB) if launcher else (NODE_JOB,)
    entries: list[tuple[str, int | None]] = [(name, _first_named(jobs, name)) for name in named]
    if len(jobs) == 1 and entries[0][1] == 0 and not ancestors:
        return jobs, tuple(entries)  # the node job alone, as in AICR's runtimes
    # Trainer runs the trainer in every job labelled as its ancestor, whatever its name: a
    # labelled job is wired even when an earlier job has its name. Unnamed ones go by position.
    taken = {position for _, position in entries}
    labelled: list[tuple[str, int | None]] = []
    for position, item in enumerate(jobs):
        if position in taken:
            continue
        name = value_at(item, "name")
        relabelled = ancestors.get(name) if ancestors and isinstance(name, str) else None
        if is_trainer_ancestor(item) if relabelled is None else relabelled:
            labelled.append((job_name(item, position), position))
    if labelled and entries[0][1] is None:
        del entries[0]  # no node job: the labelled ones run the trainer
    return jobs, (*entries, *labelled)


def job_name(job: object, position: int) -> str:
    """A job's name, or its position when it has none (files may hold such entries)."""
    name = value_at(job, "name")
    return name if isinstance(name, str) else f"replicatedJobs[{position}]"


def _replicated_jobs(runtime: object) -> Sequence[object]:
    return as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs")) or ()


def _first_named(jobs: Sequence[object], job_name: str) -> int | None:
    """The position of the first map in replicatedJobs named ``job_name``."""
    for position, item in enumerate(jobs):
        job = as_map(item)
        if job is not None and job.get("name") == job_name:
            return position
    return None


def _missing(job_name: str) -> PodTemplateMissing:
    return PodTemplateMissing(
        reason=f'spec.template.spec.replicatedJobs declares no "{job_name}" job'
        + (
            f" and none labelled {ANCESTOR_LABEL}: {TRAINER_ANCESTOR}"
            if job_name == NODE_JOB
            else ""
        ),
        path=_REPLICATED_JOBS,
        job=job_name,
    )


def _template(job_name: str, position: int, job: object) -> PodTemplate | PodTemplateMissing:
    job_path, template_path = _job_paths(position)
    pod_template = map_at(job, "template", "spec", "template")
    if pod_template is None:
        return PodTemplateMissing(
            reason=f'the "{job_name}" replicatedJob has no template.spec.template',
            path=job_path,
            job=job_name,
        )
    return PodTemplate(
        annotations=map_at(pod_template, "metadata", "annotations") or {},
        path=template_path,
        job=job_name,
        resource_claims=value_at(pod_template, "spec", "resourceClaims"),
    )
