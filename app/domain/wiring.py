"""The effective wiring of a wired pod template: the two GKE annotations and where each is set.

A runtime's template carries them itself; a TrainJob's are its runtime's, overlaid in list order
by its own patches (Trainer >= 2.2 ``runtimePatches``, Trainer 2.1 ``podTemplateOverrides``). A
``null`` value changes nothing: the apiserver prunes nulls before admission.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from app.domain.annotation import DEFAULT_INTERFACE_ANNOTATION, INTERFACES_ANNOTATION, WIRING_KEYS
from app.domain.fields import FieldPath, JsonMap, as_list, as_map, map_at, value_at
from app.domain.template import ANCESTOR_LABEL, NODE_JOB, TRAINER_ANCESTOR, PodTemplate
from app.domain.value_type import value_type


@value_type
class AnnotationValue:
    """An annotation's value and the field that sets it in the reviewed object.

    ``inherited`` values come from the referenced runtime; their path is ``spec.runtimeRef``.
    """

    value: object
    path: FieldPath
    inherited: bool = False


@value_type
class Wiring:
    """What a worker pod would carry; ``wired`` when the interfaces annotation is present."""

    interfaces: AnnotationValue | None
    default_interface: AnnotationValue | None
    annotations_path: FieldPath
    keyed: bool = True
    """Whether a missing annotation is located as a key under ``annotations_path``."""

    @property
    def wired(self) -> bool:
        return self.interfaces is not None

    def fingerprint(self) -> tuple[object, object]:
        """The values an UPDATE must leave untouched to keep grandfathered violations."""
        return (
            None if self.interfaces is None else self.interfaces.value,
            None if self.default_interface is None else self.default_interface.value,
        )

    def entry_path(self, position: int, attribute: str | None = None) -> str:
        """Path of entry ``position`` of the interfaces list (and one of its attributes)."""
        assert self.interfaces is not None  # noqa: S101 - only called on wired objects
        if self.interfaces.inherited:
            return str(self.interfaces.path)
        path = self.interfaces.path.index(position)
        return str(path.child(attribute) if attribute else path)

    def interfaces_path(self) -> str:
        if self.interfaces is not None:
            return str(self.interfaces.path)
        return self._missing_path(INTERFACES_ANNOTATION)

    def default_interface_path(self) -> str:
        if self.default_interface is not None:
            return str(self.default_interface.path)
        return self._missing_path(DEFAULT_INTERFACE_ANNOTATION)

    def _missing_path(self, key: str) -> str:
        return str(self.annotations_path.key(key) if self.keyed else self.annotations_path)


def wiring_of(
    annotations: Mapping[str, AnnotationValue], annotations_path: FieldPath, *, keyed: bool = True
) -> Wiring:
    return Wiring(
        interfaces=annotations.get(INTERFACES_ANNOTATION),
        default_interface=annotations.get(DEFAULT_INTERFACE_ANNOTATION),
        annotations_path=annotations_path,
        keyed=keyed,
    )


def template_wiring(template: PodTemplate) -> Wiring:
    """The template's two wiring annotations, each located in the object (its other
    annotations are not: locating them on every review is work nothing uses)."""
    annotations = template.annotations
    interfaces = default = None
    if INTERFACES_ANNOTATION in annotations:
        path = template.annotation_path(INTERFACES_ANNOTATION)
        interfaces = AnnotationValue(annotations[INTERFACES_ANNOTATION], path)
    if DEFAULT_INTERFACE_ANNOTATION in annotations:
        path = template.annotation_path(DEFAULT_INTERFACE_ANNOTATION)
        default = AnnotationValue(annotations[DEFAULT_INTERFACE_ANNOTATION], path)
    return Wiring(interfaces, default, template.annotations_path)


_RUNTIME_REF = FieldPath("spec.runtimeRef")
_RUNTIME_PATCHES = FieldPath("spec.runtimePatches")
_POD_TEMPLATE_OVERRIDES = FieldPath("spec.podTemplateOverrides")


def trainjob_wiring(
    trainjob: object, runtime_template: PodTemplate | None, job: str = NODE_JOB
) -> Wiring:
    """Overlay the TrainJob's annotation patches of ``job`` on the runtime's job annotations."""
    effective: dict[str, AnnotationValue] = {}
    if runtime_template is not None:
        inherited = runtime_template.annotations
        for key in WIRING_KEYS:
            if key in inherited:
                effective[key] = AnnotationValue(inherited[key], _RUNTIME_REF, inherited=True)
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


def patched_jobs(trainjob: object) -> tuple[str, ...]:
    """The name of every job a TrainJob's patches name, each once, in order."""
    names: dict[str, None] = {}
    for patch in as_list(value_at(trainjob, "spec", "runtimePatches")) or ():
        jobs = as_list(value_at(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"))
        for job in jobs or ():
            name = value_at(job, "name")
            if isinstance(name, str):
                names[name] = None
    for override in as_list(value_at(trainjob, "spec", "podTemplateOverrides")) or ():
        for target in as_list(value_at(override, "targetJobs")) or ():
            name = value_at(target, "name")
            if isinstance(name, str):
                names[name] = None
    return tuple(names)


def patched_ancestors(trainjob: object) -> dict[str, bool]:
    """Each job whose trainer-ancestor label a TrainJob's ``runtimePatches`` set, and whether
    it then names the trainer, the last value winning: Trainer reads the label after merging
    the patches, so a patch can make any job of the runtime run the trainer, or none."""
    labelled: dict[str, bool] = {}
    for patch in as_list(value_at(trainjob, "spec", "runtimePatches")) or ():
        jobs = as_list(value_at(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs"))
        for job in jobs or ():
            name = value_at(job, "name")
            value = value_at(job, "template", "metadata", "labels", ANCESTOR_LABEL)
            if isinstance(name, str) and isinstance(value, str):
                labelled[name] = value == TRAINER_ANCESTOR
    return labelled
