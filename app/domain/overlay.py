"""A TrainJob's effective pod annotations per wired job: the runtime's, overlaid by its patches.

Trainer >= 2.2 ``runtimePatches`` and Trainer 2.1 ``podTemplateOverrides`` are applied in list
order and later entries win. A ``null`` value changes nothing: the apiserver prunes nulls before
admission, so the runtime's value survives on a real cluster, and file mode behaves the same.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.domain.fields import FieldPath, JsonMap, as_list, as_map, map_at, value_at
from app.domain.template import NODE_JOB, PodTemplate
from app.domain.wiring import AnnotationValue, Wiring, template_annotations, wiring_of

_RUNTIME_REF = FieldPath("spec.runtimeRef")
_RUNTIME_PATCHES = FieldPath("spec.runtimePatches")
_POD_TEMPLATE_OVERRIDES = FieldPath("spec.podTemplateOverrides")


def trainjob_wiring(
    trainjob: object, runtime_template: PodTemplate | None, job: str = NODE_JOB
) -> Wiring:
    """Overlay the TrainJob's annotation patches of ``job`` on the runtime's job annotations."""
    effective: dict[str, AnnotationValue] = {}
    if runtime_template is not None:
        for key, inherited in template_annotations(runtime_template).items():
            effective[key] = AnnotationValue(inherited.value, _RUNTIME_REF, inherited=True)
    for path, patch in _job_patches(trainjob, job):
        for key, value in patch.items():
            if value is not None:
                effective[key] = AnnotationValue(value, path.key(key))
    return wiring_of(effective, _RUNTIME_REF, keyed=False)


def _job_patches(trainjob: object, job_name: str) -> Iterator[tuple[FieldPath, JsonMap]]:
    """Every annotation map the TrainJob applies to the job's pod template, in order."""
    patches = as_list(value_at(trainjob, "spec", "runtimePatches"))
    for i, patch in enumerate(patches or ()):
        jobs = as_list(value_at(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"))
        for j, job in enumerate(jobs or ()):
            annotations = map_at(job, "template", "spec", "template", "metadata", "annotations")
            if _named(job, job_name) and annotations is not None:
                yield (
                    _RUNTIME_PATCHES.index(i).child(
                        f"trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
                        ".template.spec.template.metadata.annotations"
                    ),
                    annotations,
                )
    overrides = as_list(value_at(trainjob, "spec", "podTemplateOverrides"))
    for i, override in enumerate(overrides or ()):
        targets = as_list(value_at(override, "targetJobs"))
        annotations = map_at(override, "metadata", "annotations")
        if annotations is not None and any(_named(target, job_name) for target in targets or ()):
            yield _POD_TEMPLATE_OVERRIDES.index(i).child("metadata.annotations"), annotations


def _named(job: object, name: str) -> bool:
    mapping = as_map(job)
    return mapping is not None and mapping.get("name") == name
