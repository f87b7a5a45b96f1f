"""A TrainJob's effective node annotations: runtime overlaid by its patches (app.domain.wiring)."""

from __future__ import annotations

import pytest

from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.wiring import Wiring, patched_jobs, trainjob_wiring
from tests.builders import (
    DEFAULT_INTERFACE,
    INTERFACES,
    override,
    runtime,
    runtime_patch,
    trainjob,
)

PATCH_PATH = (
    "spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    ".template.spec.template.metadata.annotations[networking.gke.io/interfaces]"
)
OVERRIDE_PATH = "spec.podTemplateOverrides[{i}].metadata.annotations[networking.gke.io/interfaces]"


def _template(annotations: dict[str, object] | None) -> PodTemplate:
    found = job_template(runtime(annotations=annotations), NODE_JOB)
    assert isinstance(found, PodTemplate)
    return found


def _values(wiring: Wiring) -> tuple[object, object]:
    return wiring.fingerprint()


@pytest.mark.parametrize(
    ("job", "expected", "path"),
    [
        pytest.param(trainjob(), ("rt", "eth0"), "spec.runtimeRef", id="inherited-unpatched"),
        pytest.param(
            trainjob(patches=[{INTERFACES: "p1"}, {INTERFACES: "p2"}]),
            ("p2", "eth0"),
            PATCH_PATH.format(i=1),
            id="later-runtime-patch-wins",
        ),
        pytest.param(
            trainjob(overrides=[override({INTERFACES: "o1"}), override({INTERFACES: "o2"})]),
            ("o2", "eth0"),
            OVERRIDE_PATH.format(i=1),
            id="later-override-wins",
        ),
        pytest.param(
            trainjob(patches=[{INTERFACES: "p"}], overrides=[override({INTERFACES: "o"})]),
            ("o", "eth0"),
            OVERRIDE_PATH.format(i=0),
            id="overrides-apply-after-runtime-patches",
        ),
        pytest.param(
            trainjob(overrides=[override({INTERFACES: "o"}, "launcher")]),
            ("rt", "eth0"),
            "spec.runtimeRef",
            id="override-targeting-another-job-ignored",
        ),
        pytest.param(
            trainjob(overrides=[override({INTERFACES: "o"}, "launcher", "node")]),
            ("o", "eth0"),
            OVERRIDE_PATH.format(i=0),
            id="override-targeting-node-among-others",
        ),
        pytest.param(
            trainjob(overrides=[{"metadata": {"annotations": {INTERFACES: "o"}}}]),
            ("rt", "eth0"),
            "spec.runtimeRef",
            id="override-without-target-jobs-ignored",
        ),
        pytest.param(
            trainjob(overrides=[{"targetJobs": [{"name": "node"}], "spec": {}}]),
            ("rt", "eth0"),
            "spec.runtimeRef",
            id="override-without-annotations-ignored",
        ),
        pytest.param(
            trainjob(patches=[None]),
            ("rt", "eth0"),
            "spec.runtimeRef",
            id="runtime-patch-without-annotations-ignored",
        ),
    ],
)
def test_patches_overlay_the_runtime_annotations_in_order(
    job: dict[str, object], expected: tuple[object, object], path: str
) -> None:
    wiring = trainjob_wiring(job, _template({INTERFACES: "rt", DEFAULT_INTERFACE: "eth0"}))
    assert _values(wiring) == expected
    assert wiring.interfaces_path() == path


def test_a_runtime_patch_for_another_replicated_job_is_ignored() -> None:
    job = trainjob()
    spec = job["spec"]
    assert isinstance(spec, dict)
    spec["runtimePatches"] = [runtime_patch({INTERFACES: "x"}, job="launcher"), {"other": 1}]
    assert _values(trainjob_wiring(job, _template({INTERFACES: "rt"}))) == ("rt", None)


@pytest.mark.parametrize(
    ("job", "interfaces"),
    [
        pytest.param(trainjob(patches=[{INTERFACES: None}]), "rt", id="runtime-patch-null"),
        pytest.param(trainjob(overrides=[override({INTERFACES: None})]), "rt", id="override-null"),
        pytest.param(
            trainjob(patches=[{INTERFACES: "p"}], overrides=[override({INTERFACES: None})]),
            "p",
            id="null-after-a-patch",
        ),
    ],
)
def test_a_key_patched_to_null_changes_nothing(job: dict[str, object], interfaces: str) -> None:
    # The apiserver prunes nulls before admission: the value before the null survives.
    wiring = trainjob_wiring(job, _template({INTERFACES: "rt", DEFAULT_INTERFACE: "eth0"}))
    assert wiring.wired
    assert _values(wiring) == (interfaces, "eth0")


def test_patches_can_wire_a_trainjob_whose_runtime_has_no_node_template() -> None:
    job = trainjob(patches=[{INTERFACES: "p", DEFAULT_INTERFACE: "eth0"}, {"x": "y"}])
    wiring = trainjob_wiring(job, None)
    assert _values(wiring) == ("p", "eth0")
    assert wiring.interfaces is not None
    assert not wiring.interfaces.inherited


def test_nulls_of_keys_nobody_set_are_harmless() -> None:
    assert _values(trainjob_wiring(trainjob(patches=[{INTERFACES: None}]), None)) == (None, None)


def test_inherited_values_point_at_the_runtime_ref() -> None:
    wiring = trainjob_wiring(trainjob(), _template({INTERFACES: "rt"}))
    assert wiring.interfaces is not None
    assert wiring.interfaces.inherited
    assert wiring.entry_path(1, "network") == "spec.runtimeRef"


@pytest.mark.parametrize(
    ("job", "names"),
    [
        pytest.param(trainjob(), (), id="no-patches"),
        pytest.param(
            trainjob(
                patches=[{"a": "1"}],
                overrides=[
                    override({"a": "2"}, "evaluator", "node"),
                    {"targetJobs": [{"name": 7}, "x"], "metadata": {}},
                    {"targetJobs": "not-a-list"},
                ],
            ),
            ("node", "evaluator"),
            id="each-once-in-order",
        ),
        pytest.param(
            {
                "spec": {
                    "runtimePatches": [
                        runtime_patch({}, "evaluator"),
                        {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{}]}}}},
                        {"trainingRuntimeSpec": None},
                    ]
                }
            },
            ("evaluator",),
            id="unnamed-and-empty-patches-name-none",
        ),
    ],
)
def test_patched_jobs_are_every_job_a_patch_names(
    job: dict[str, object], names: tuple[str, ...]
) -> None:
    assert patched_jobs(job) == names
