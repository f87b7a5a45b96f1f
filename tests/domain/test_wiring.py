"""Effective wiring of a node template: values, fingerprints and field paths (app.domain.wiring)."""

from __future__ import annotations

import pytest

from app.domain.fields import FieldPath
from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.wiring import AnnotationValue, Wiring, template_wiring, wiring_of
from tests.builders import (
    ANNOTATIONS_PATH,
    DEFAULT_INTERFACE,
    INTERFACES,
    INTERFACES_PATH,
    runtime,
)


def _template_wiring(annotations: dict[str, object]) -> Wiring:
    template = job_template(runtime(annotations=annotations), NODE_JOB)
    assert isinstance(template, PodTemplate)
    return template_wiring(template)


@pytest.mark.parametrize(
    ("annotations", "wired", "fingerprint"),
    [
        pytest.param({}, False, (None, None), id="unannotated"),
        pytest.param({DEFAULT_INTERFACE: "eth0"}, False, (None, "eth0"), id="default-only"),
        pytest.param({INTERFACES: ""}, True, ("", None), id="empty-value-is-still-wired"),
        pytest.param(
            {INTERFACES: "[]", DEFAULT_INTERFACE: "eth0", "other": "x"},
            True,
            ("[]", "eth0"),
            id="both",
        ),
    ],
)
def test_an_object_is_wired_when_the_interfaces_key_is_present(
    annotations: dict[str, object], wired: bool, fingerprint: tuple[object, object]
) -> None:
    wiring = _template_wiring(annotations)
    assert wiring.wired is wired
    assert wiring.fingerprint() == fingerprint


def test_paths_of_a_template_wiring_point_into_the_annotation_value() -> None:
    wiring = _template_wiring({INTERFACES: "[]", DEFAULT_INTERFACE: "eth1"})
    assert wiring.interfaces_path() == INTERFACES_PATH
    assert wiring.default_interface_path() == f"{ANNOTATIONS_PATH}[{DEFAULT_INTERFACE}]"
    assert wiring.entry_path(2) == f"{INTERFACES_PATH}[2]"
    assert wiring.entry_path(2, "network") == f"{INTERFACES_PATH}[2].network"


def test_missing_annotations_are_located_as_keys_when_keyed() -> None:
    wiring = _template_wiring({})
    assert wiring.interfaces_path() == INTERFACES_PATH
    assert wiring.default_interface_path() == f"{ANNOTATIONS_PATH}[{DEFAULT_INTERFACE}]"


def test_missing_annotations_point_at_the_annotations_path_when_not_keyed() -> None:
    wiring = wiring_of({}, FieldPath("spec.runtimeRef"), keyed=False)
    assert wiring.interfaces_path() == "spec.runtimeRef"
    assert wiring.default_interface_path() == "spec.runtimeRef"


def test_entries_of_an_inherited_value_all_point_at_where_it_is_inherited_from() -> None:
    inherited = AnnotationValue("[]", FieldPath("spec.runtimeRef"), inherited=True)
    wiring = wiring_of({INTERFACES: inherited}, FieldPath("spec.runtimeRef"), keyed=False)
    assert wiring.entry_path(3, "network") == "spec.runtimeRef"
    assert wiring.entry_path(0) == "spec.runtimeRef"
