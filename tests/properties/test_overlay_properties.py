"""``trainjob_wiring`` and TrainJob verdicts: any shape at the patch paths, never an exception.

A model of docs/rules.md overlay (runtime annotations, then ``runtimePatches`` and
``podTemplateOverrides`` in list order; later entries win; ``null`` changes nothing) must agree
with the implementation on the effective values and on the field each value comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings, strategies as st

from app.domain.cluster import ClusterSnapshot, RuntimeKey, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.fields import JsonMap
from app.domain.policy import Policy
from app.domain.review import Operation
from app.domain.template import NODE_JOB, PodTemplate, job_template
from app.domain.wiring import Wiring, trainjob_wiring
from tests.builders import DEFAULT_INTERFACE, INTERFACES, review, runtime, trainjob
from tests.properties.strategies import (
    RUNTIME_KEYS,
    assert_well_formed,
    cluster_views,
    fuzzed_runtimes,
    fuzzed_trainjobs,
    json_values,
    policies,
)
from tests.support.examples import examples

CORE = settings(max_examples=examples(200))
LIGHT = settings(max_examples=examples(100))
"""For shapes the 200-example properties also reach."""
WIRING_KEYS = (INTERFACES, DEFAULT_INTERFACE)
OTHER_KEY = "example.com/other"


def assert_wiring_well_formed(wiring: Wiring) -> None:
    assert isinstance(wiring, Wiring)
    assert len(wiring.fingerprint()) == 2
    assert isinstance(wiring.interfaces_path(), str)
    assert isinstance(wiring.default_interface_path(), str)
    if wiring.wired:
        assert isinstance(wiring.entry_path(0), str)
        assert isinstance(wiring.entry_path(3, "network"), str)


def _template(obj: object) -> PodTemplate | None:
    found = job_template(obj, NODE_JOB)
    return found if isinstance(found, PodTemplate) else None


# Arbitrary nested shapes exactly where the overlay looks.
shapes = json_values | st.lists(json_values, max_size=3)
annotation_shapes = shapes | st.dictionaries(
    st.sampled_from([*WIRING_KEYS, OTHER_KEY]), json_values, max_size=3
)
patched_jobs = shapes | st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["node", "launcher"]) | json_values},
        optional={
            "template": shapes
            | st.fixed_dictionaries(
                {
                    "spec": st.fixed_dictionaries(
                        {
                            "template": st.fixed_dictionaries(
                                {
                                    "metadata": shapes
                                    | st.fixed_dictionaries({"annotations": annotation_shapes})
                                }
                            )
                        }
                    )
                }
            )
        },
    ),
    max_size=3,
)
runtime_patches = shapes | st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "trainingRuntimeSpec": shapes
            | st.fixed_dictionaries(
                {
                    "template": st.fixed_dictionaries(
                        {"spec": st.fixed_dictionaries({"replicatedJobs": patched_jobs})}
                    )
                }
            )
        },
    ),
    max_size=3,
)
pod_template_overrides = shapes | st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "targetJobs": shapes
            | st.lists(st.fixed_dictionaries({"name": st.just("node") | json_values})),
            "metadata": shapes | st.fixed_dictionaries({"annotations": annotation_shapes}),
        },
    ),
    max_size=3,
)
patch_paths = st.fixed_dictionaries(
    {},
    optional={
        "runtimePatches": runtime_patches,
        "podTemplateOverrides": pod_template_overrides,
        "runtimeRef": shapes | st.fixed_dictionaries({"name": st.just("torch-distributed-tcpxo")}),
    },
)


@LIGHT
@given(json_values, fuzzed_runtimes)
def test_any_value_as_a_trainjob_gives_a_wiring(obj: object, runtime_obj: JsonMap) -> None:
    assert_wiring_well_formed(trainjob_wiring(obj, _template(runtime_obj)))


@LIGHT
@given(fuzzed_trainjobs, st.none() | fuzzed_runtimes)
def test_fuzzed_trainjobs_give_a_wiring(obj: JsonMap, runtime_obj: JsonMap | None) -> None:
    template = None if runtime_obj is None else _template(runtime_obj)
    assert_wiring_well_formed(trainjob_wiring(obj, template))


@CORE
@given(patch_paths, fuzzed_runtimes)
def test_arbitrary_shapes_at_the_patch_paths_give_a_wiring(
    spec: dict[str, object], runtime_obj: JsonMap
) -> None:
    assert_wiring_well_formed(trainjob_wiring({"spec": spec}, _template(runtime_obj)))


@CORE
@given(
    st.one_of(fuzzed_trainjobs, patch_paths.map(lambda spec: {"spec": spec})),
    st.sampled_from(RUNTIME_KEYS),
    fuzzed_runtimes,
    cluster_views,
    policies,
    st.sampled_from([Operation.CREATE, Operation.UPDATE]),
    st.none() | fuzzed_trainjobs,
)
def test_trainjob_verdicts_are_well_formed(
    obj: dict[str, object],
    key: RuntimeKey,
    runtime_obj: JsonMap,
    view: ClusterSnapshot,
    policy: Policy,
    operation: Operation,
    old: JsonMap | None,
) -> None:
    if not isinstance(view.runtime_state, Unverifiable):
        runtimes = {**view.runtime_state, key: runtime_obj}
        view = ClusterSnapshot(view.network_state, view.recipe_state, runtimes)
    job = {**obj, "kind": "TrainJob", "metadata": {"name": "job", "namespace": "team"}}
    verdict = evaluate(review(job, operation=operation, old=old), view, policy)
    assert_well_formed(verdict)


# --- The overlay model -----------------------------------------------------------------------

values = st.none() | st.sampled_from(["eth0", "[]", "x"]) | json_values
annotation_maps = st.dictionaries(st.sampled_from([*WIRING_KEYS, OTHER_KEY]), values, max_size=3)


@dataclass(frozen=True)
class Patch:
    """One runtimePatches entry (several jobs) or podTemplateOverrides entry (several targets)."""

    is_override: bool
    jobs: tuple[str, ...]
    annotations: dict[str, object] | None


patches = st.builds(
    Patch,
    st.booleans(),
    st.lists(st.sampled_from(["node", "launcher", "Node"]), max_size=3).map(tuple),
    st.none() | annotation_maps,
)


def encode(patch: Patch) -> dict[str, object]:
    metadata = {} if patch.annotations is None else {"annotations": patch.annotations}
    if patch.is_override:
        return {"targetJobs": [{"name": job} for job in patch.jobs], "metadata": metadata}
    jobs = [
        {"name": job, "template": {"spec": {"template": {"metadata": metadata}}}}
        for job in patch.jobs
    ]
    return {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}


def model(
    inherited: dict[str, object] | None, patch_list: list[Patch]
) -> dict[str, tuple[object, str]]:
    """Effective ``key -> (value, field)`` per docs/rules.md."""
    effective = {key: (value, "spec.runtimeRef") for key, value in (inherited or {}).items()}
    steps: list[tuple[str, dict[str, object]]] = []
    runtime_patches = [p for p in patch_list if not p.is_override]
    overrides = [p for p in patch_list if p.is_override]
    for i, patch in enumerate(runtime_patches):
        for j, job in enumerate(patch.jobs):
            if job == "node" and patch.annotations is not None:
                steps.append(
                    (
                        f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec"
                        f".replicatedJobs[{j}].template.spec.template.metadata.annotations",
                        patch.annotations,
                    )
                )
    for i, patch in enumerate(overrides):
        if "node" in patch.jobs and patch.annotations is not None:
            steps.append(
                (f"spec.podTemplateOverrides[{i}].metadata.annotations", patch.annotations)
            )
    for path, patched in steps:
        for key, value in patched.items():
            if value is not None:
                effective[key] = (value, f"{path}[{key}]")
    return effective


@CORE
@given(st.none() | annotation_maps, st.lists(patches, max_size=5))
def test_the_overlay_matches_the_model(
    inherited: dict[str, object] | None, patch_list: list[Patch]
) -> None:
    template = None
    if inherited is not None:
        located = job_template(runtime(annotations=inherited), NODE_JOB)
        assert isinstance(located, PodTemplate)
        template = located
    job = trainjob()
    spec = job["spec"]
    assert isinstance(spec, dict)
    spec["runtimePatches"] = [encode(p) for p in patch_list if not p.is_override]
    spec["podTemplateOverrides"] = [encode(p) for p in patch_list if p.is_override]
    wiring = trainjob_wiring(job, template)
    expected = model(inherited, patch_list)
    for key, found in (
        (INTERFACES, wiring.interfaces),
        (DEFAULT_INTERFACE, wiring.default_interface),
    ):
        if key not in expected:
            assert found is None
        else:
            assert found is not None
            value, path = expected[key]
            assert found.value is value
            assert str(found.path) == path
            assert found.inherited is (path == "spec.runtimeRef")
    assert wiring.wired is (INTERFACES in expected)
