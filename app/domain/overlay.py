"""A TrainJob's effective node pod annotations: the runtime's, overlaid by the TrainJob's patches.

Trainer >= 2.2 ``runtimePatches`` and Trainer 2.1 ``podTemplateOverrides`` are applied in list
order; later entries win and a key patched to ``null`` is removed (strategic-merge semantics).
"""

from __future__ import annotations

from collections.abc import Iterator

from app.domain.fields import FieldPath, JsonMap, as_list, as_map, map_at, value_at
from app.domain.template import NODE_JOB, NodeTemplate
from app.domain.wiring import AnnotationValue, Wiring, template_annotations, wiring_of

_RUNTIME_REF = FieldPath("spec.runtimeRef")
_RUNTIME_PATCHES = FieldPath("spec.runtimePatches")
_POD_TEMPLATE_OVERRIDES = FieldPath("spec.podTemplateOverrides")


def trainjob_wiring(trainjob: object, runtime_template: NodeTemplate | None) -> Wiring:
    """Overlay the TrainJob's node-pod annotation patches on the runtime's node annotations."""
    effective: dict[str, AnnotationValue] = {}
    if runtime_template is not None:
        for key, inherited in template_annotations(runtime_template).items():
            effective[key] = AnnotationValue(inherited.value, _RUNTIME_REF, inherited=True)
    for path, patch in _node_patches(trainjob):
        for key, value in patch.items():
            if value is None:
                effective.pop(key, None)
            else:
                effective[key] = AnnotationValue(value, path.key(key))
    return wiring_of(effective, _RUNTIME_REF, keyed=False)


def _node_patches(trainjob: object) -> Iterator[tuple[FieldPath, JsonMap]]:
    """Every annotation map the TrainJob applies to the node pod template, in order."""
    patches = as_list(value_at(trainjob, "spec", "runtimePatches"))
    for i, patch in enumerate(patches or ()):
        jobs = as_list(value_at(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"))
        for j, job in enumerate(jobs or ()):
            annotations = map_at(job, "template", "spec", "template", "metadata", "annotations")
            if _named_node(job) and annotations is not None:
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
        if annotations is not None and any(_named_node(target) for target in targets or ()):
            yield _POD_TEMPLATE_OVERRIDES.index(i).child("metadata.annotations"), annotations


def _named_node(job: object) -> bool:
    mapping = as_map(job)
    return mapping is not None and mapping.get("name") == NODE_JOB
