"""The worker ("node") pod template of a runtime, where the GKE wiring annotations live.

SPEC section 2: ``spec.template.spec.replicatedJobs[name == "node"].template.spec.template``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from app.domain.fields import FieldPath, as_list, as_map, map_at, value_at

NODE_JOB: Final = "node"
_REPLICATED_JOBS = FieldPath("spec.template.spec.replicatedJobs")


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    """The node job's PodTemplateSpec: its annotations and where it sits in the object."""

    annotations: Mapping[str, object]
    path: FieldPath

    @property
    def annotations_path(self) -> FieldPath:
        return self.path.child("metadata").child("annotations")

    def annotation_path(self, key: str) -> FieldPath:
        return self.annotations_path.key(key)


@dataclass(frozen=True, slots=True)
class NodeTemplateMissing:
    """The runtime has no node job, or the node job has no pod template."""

    reason: str
    path: FieldPath


def node_template(runtime: object) -> NodeTemplate | NodeTemplateMissing:
    """Find the first map entry named ``node`` in replicatedJobs (non-map entries are skipped)."""
    jobs = as_list(value_at(runtime, "spec", "template", "spec", "replicatedJobs"))
    for position, item in enumerate(jobs or ()):
        job = as_map(item)
        if job is None or job.get("name") != NODE_JOB:
            continue
        job_path = _REPLICATED_JOBS.index(position)
        pod_template = map_at(job, "template", "spec", "template")
        if pod_template is None:
            return NodeTemplateMissing(
                reason='the "node" replicatedJob has no template.spec.template',
                path=job_path,
            )
        return NodeTemplate(
            annotations=map_at(pod_template, "metadata", "annotations") or {},
            path=job_path.child("template").child("spec").child("template"),
        )
    return NodeTemplateMissing(
        reason='spec.template.spec.replicatedJobs declares no "node" job',
        path=_REPLICATED_JOBS,
    )
