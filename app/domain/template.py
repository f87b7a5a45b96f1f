"""The wired pod templates of a runtime.

The ``node`` job's pod template always; the ``launcher`` job's too when an MPI runtime runs its
launcher as a node (``spec.mlPolicy.mpi.runLauncherAsNode``). Caches keep only what these read
(``app.domain.slim``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from app.domain.fields import FieldPath, JsonMap, as_list, as_map, map_at, value_at

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
        return self.path.child("metadata.annotations")

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
    found = _job(runtime, job_name)
    if found is None:
        return PodTemplateMissing(
            reason=f'spec.template.spec.replicatedJobs declares no "{job_name}" job',
            path=_REPLICATED_JOBS,
            job=job_name,
        )
    position, job = found
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
        path=job_path.child("template.spec.template"),
        job=job_name,
    )


def wired_annotations(runtime: object) -> Iterator[Mapping[str, object]]:
    """The annotations of each wired job's pod template, node first, where there is one: what
    ``wired_templates`` finds, without locating it in the object (the audit's index of the
    Networks a runtime names reads only these)."""
    for job_name in wired_jobs(runtime):
        found = _job(runtime, job_name)
        pod_template = None if found is None else map_at(found[1], "template", "spec", "template")
        if pod_template is not None:
            yield map_at(pod_template, "metadata", "annotations") or {}


def _job(runtime: object, job_name: str) -> tuple[int, JsonMap] | None:
    """The position and entry of the first map in replicatedJobs named ``job_name``."""
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs"))
    for position, item in enumerate(jobs or ()):
        job = as_map(item)
        if job is not None and job.get("name") == job_name:
            return position, job
    return None
