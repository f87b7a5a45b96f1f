"""The effective wiring of a node pod template: the two GKE annotations and where they are set."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from app.domain.annotation import DEFAULT_INTERFACE_ANNOTATION, INTERFACES_ANNOTATION
from app.domain.fields import FieldPath
from app.domain.template import PodTemplate

WIRING_KEYS: Final = (INTERFACES_ANNOTATION, DEFAULT_INTERFACE_ANNOTATION)


@dataclass(frozen=True, slots=True)
class AnnotationValue:
    """An annotation's value and the field that sets it in the reviewed object.

    ``inherited`` values come from the referenced runtime; their path is ``spec.runtimeRef``.
    """

    value: object
    path: FieldPath
    inherited: bool = False


@dataclass(frozen=True, slots=True)
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


def template_annotations(template: PodTemplate) -> dict[str, AnnotationValue]:
    """The node template's wiring annotations, each located in the runtime object.

    Only the two keys a Wiring reads: pod templates carry many other annotations, and locating
    each of them on every request is work nothing uses.
    """
    annotations = template.annotations
    return {
        key: AnnotationValue(value=annotations[key], path=template.annotation_path(key))
        for key in WIRING_KEYS
        if key in annotations
    }


def template_wiring(template: PodTemplate) -> Wiring:
    return wiring_of(template_annotations(template), template.annotations_path)
