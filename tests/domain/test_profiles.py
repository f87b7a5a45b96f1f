"""Hardware profiles (docs/rules.md): binding, the fixed mapping, the param sets' device modes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from app.domain.evaluate import evaluate
from app.domain.kinds import Kind
from app.domain.policy import PROFILE_LABEL, RECIPE_BOUND_LABEL, NotReady, Policy
from app.domain.profiles import A3_MEGA_TCPXO, A4X_GB200_RDMA, PROFILES, Profile, binding_of
from app.domain.verdict import Verdict
from tests.builders import (
    GB200_NETWORKS,
    GB200_PAIRS,
    PAIRS,
    RDMA_RUNTIME,
    TCPXO_RUNTIME,
    codes,
    gb200,
    param_set,
    review,
    runtime,
    snapshot,
    trainjob,
    waived_codes,
    wired,
)
from tests.support.examples import examples

TR = Kind.TRAINING_RUNTIME
CTR = Kind.CLUSTER_TRAINING_RUNTIME


@pytest.mark.parametrize(
    ("kind", "name", "labels", "policy", "expected"),
    [
        pytest.param(CTR, TCPXO_RUNTIME, None, Policy(), A3_MEGA_TCPXO, id="tcpxo-by-name"),
        pytest.param(CTR, RDMA_RUNTIME, None, Policy(), A4X_GB200_RDMA, id="rdma-by-name"),
        pytest.param(
            CTR,
            "mine",
            None,
            Policy(rdma_runtimes=frozenset({"mine"})),
            A4X_GB200_RDMA,
            id="rdma-by-setting",
        ),
        pytest.param(TR, RDMA_RUNTIME, None, Policy(), None, id="names-bind-ctrs-only"),
        pytest.param(
            TR, "x", {PROFILE_LABEL: "a4x-gb200-rdma"}, Policy(), A4X_GB200_RDMA, id="label"
        ),
        pytest.param(
            TR, "x", {RECIPE_BOUND_LABEL: "true"}, Policy(), A3_MEGA_TCPXO, id="recipe-label"
        ),
        pytest.param(
            CTR,
            TCPXO_RUNTIME,
            {PROFILE_LABEL: "a3-mega-tcpxo", RECIPE_BOUND_LABEL: "true"},
            Policy(),
            A3_MEGA_TCPXO,
            id="labels-agreeing-with-the-name",
        ),
        pytest.param(
            TR,
            "x",
            {PROFILE_LABEL: "a4x-gb200-rdma", RECIPE_BOUND_LABEL: "true"},
            Policy(),
            A4X_GB200_RDMA,
            id="the-profile-label-before-the-recipe-label",
        ),
        pytest.param(CTR, "other", None, Policy(), None, id="unbound"),
        pytest.param(CTR, "other", {"team": "a"}, Policy(), None, id="other-labels"),
    ],
)
def test_a_runtime_binds_by_name_then_by_label(
    kind: Kind,
    name: str,
    labels: dict[str, str] | None,
    policy: Policy,
    expected: object,
) -> None:
    found = binding_of(kind, runtime(name, kind=kind, labels=labels), policy)
    assert (found.profile, found.warning) == (expected, "")


NAME_BINDING = (
    "ignored: ClusterTrainingRuntime {name} is bound to profile {profile} by name "
    "(setting {setting}), which labels never undo"
)


@pytest.mark.parametrize(
    ("name", "labels", "expected", "ignored"),
    [
        pytest.param(
            TCPXO_RUNTIME,
            {PROFILE_LABEL: ""},
            A3_MEGA_TCPXO,
            'nicguard.dev/profile: ""',
            id="empty-profile-label",
        ),
        pytest.param(
            TCPXO_RUNTIME,
            {PROFILE_LABEL: "a3-high-tcpx"},
            A3_MEGA_TCPXO,
            'nicguard.dev/profile: "a3-high-tcpx"',
            id="unknown-profile-label",
        ),
        pytest.param(
            TCPXO_RUNTIME,
            {PROFILE_LABEL: "a4x-gb200-rdma"},
            A3_MEGA_TCPXO,
            'nicguard.dev/profile: "a4x-gb200-rdma"',
            id="another-profile-label",
        ),
        pytest.param(
            RDMA_RUNTIME,
            {PROFILE_LABEL: "a3-mega-tcpxo"},
            A4X_GB200_RDMA,
            'nicguard.dev/profile: "a3-mega-tcpxo"',
            id="rdma-name-over-a3-label",
        ),
        pytest.param(
            TCPXO_RUNTIME,
            {RECIPE_BOUND_LABEL: "false"},
            A3_MEGA_TCPXO,
            'nicguard.dev/recipe-bound: "false"',
            id="false-recipe-label",
        ),
        pytest.param(
            RDMA_RUNTIME,
            {RECIPE_BOUND_LABEL: "true", PROFILE_LABEL: 7},
            A4X_GB200_RDMA,
            'nicguard.dev/profile: (not a string) and nicguard.dev/recipe-bound: "true"',
            id="recipe-label-on-rdma-name",
        ),
    ],
)
def test_the_settings_name_binding_outranks_every_label(
    name: str, labels: dict[str, object], expected: Profile, ignored: str
) -> None:
    found = binding_of(CTR, runtime(name, labels=labels), Policy())
    assert found.profile is expected
    assert found.warning == f"label {ignored} " + NAME_BINDING.format(
        name=name, profile=expected.name, setting=expected.setting
    )


def test_a_name_bound_runtime_relabelled_away_is_still_refused() -> None:
    swapped = [*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]
    for labels in ({PROFILE_LABEL: ""}, {PROFILE_LABEL: "x"}, {PROFILE_LABEL: "a4x-gb200-rdma"}):
        obj = runtime(TCPXO_RUNTIME, annotations=wired(swapped), labels=labels)
        verdict = evaluate(review(obj), snapshot(), Policy())
        assert codes(verdict) == ("MappingDivergesFromRecipe",)
        assert not any("binds it" in w for w in verdict.warnings), verdict.warnings


def test_an_unknown_profile_label_beside_the_recipe_label_binds_the_recipe() -> None:
    obj = runtime("x", kind=TR, labels={PROFILE_LABEL: "nope", RECIPE_BOUND_LABEL: "true"})
    found = binding_of(TR, obj, Policy())
    assert found.profile is A3_MEGA_TCPXO
    assert "nope names no known profile" in found.warning


def test_an_unknown_profile_label_binds_nothing_and_names_the_known_ones() -> None:
    obj = runtime("other-rdma", labels={PROFILE_LABEL: "a3-high-tcpx"})
    found = binding_of(CTR, obj, Policy())
    assert found.profile is None
    assert found.warning == (
        f"label {PROFILE_LABEL}: a3-high-tcpx names no known profile "
        "(known: a3-mega-tcpxo, a4x-gb200-rdma, a3-ultra-dranet, a4-dranet, a4x-dranet, "
        "a4x-max-dranet); the wiring is checked without a profile"
    )
    verdict = evaluate(review(obj), gb200(), Policy())
    assert verdict.allowed
    assert verdict.warnings == (found.warning,)


@pytest.mark.parametrize(
    ("profile", "network", "mode"),
    [
        (A4X_GB200_RDMA, "gvnic-1", "NetDevice"),
        (A4X_GB200_RDMA, "rdma-3", "RDMA"),
        (A4X_GB200_RDMA, "gpu-nic-0", None),
        (A3_MEGA_TCPXO, "gpu-nic-0", "NetDevice"),
    ],
)
def test_the_required_device_mode_is_the_first_matching_pattern(
    profile: object, network: str, mode: str | None
) -> None:
    assert isinstance(profile, type(A3_MEGA_TCPXO))
    assert profile.required_mode(network) == mode


def test_profiles_are_a_table_with_distinct_names() -> None:
    assert [p.name for p in PROFILES] == [
        "a3-mega-tcpxo",
        "a4x-gb200-rdma",
        "a3-ultra-dranet",
        "a4-dranet",
        "a4x-dranet",
        "a4x-max-dranet",
    ]
    assert A3_MEGA_TCPXO.from_recipe
    assert not A4X_GB200_RDMA.from_recipe
    assert not any(p.by_claim for p in PROFILES[:2])


def judged(obj: dict[str, object], view: object = None, policy: Policy | None = None) -> Verdict:
    return evaluate(review(obj), view or gb200(), policy or Policy())  # type: ignore[arg-type]


def test_the_rdma_runtime_as_aicr_ships_it_is_allowed_without_a_recipe() -> None:
    verdict = judged(runtime(RDMA_RUNTIME, annotations=wired(GB200_PAIRS)))
    assert (verdict.allowed, verdict.warnings, verdict.recipe) == (True, (), "none")


def test_an_unwired_rdma_runtime_names_its_profile() -> None:
    verdict = judged(runtime(RDMA_RUNTIME, annotations={}))
    assert codes(verdict) == ("InterfacesAnnotationMissing",)
    assert verdict.violations[0].message.startswith("bound to profile a4x-gb200-rdma, but")


@pytest.mark.parametrize(
    ("modes", "found"),
    [
        pytest.param(
            {"rdma-2": "NetDevice"},
            "eth4->rdma-2: GKENetworkParamSet rdma-2 has deviceMode NetDevice, "
            "profile a4x-gb200-rdma requires RDMA",
            id="rdma-as-netdevice",
        ),
        pytest.param(
            {"gvnic-1": "RDMA"},
            "eth1->gvnic-1: GKENetworkParamSet gvnic-1 has deviceMode RDMA, "
            "profile a4x-gb200-rdma requires NetDevice",
            id="gvnic-as-rdma",
        ),
        pytest.param(
            {"rdma-0": ""},
            "eth2->rdma-0: GKENetworkParamSet rdma-0 has no deviceMode, "
            "profile a4x-gb200-rdma requires RDMA",
            id="no-mode",
        ),
    ],
)
def test_a_param_set_in_the_wrong_mode_is_a_device_mode_mismatch(
    modes: dict[str, str], found: str
) -> None:
    view = gb200(modes=modes)
    verdict = judged(runtime(RDMA_RUNTIME, annotations=wired(GB200_PAIRS)), view)
    assert codes(verdict) == ("DeviceModeMismatch",)
    assert verdict.violations[0].message == found


def test_device_modes_are_not_checked_without_param_sets_or_for_a_missing_one() -> None:
    obj = runtime(RDMA_RUNTIME, annotations=wired(GB200_PAIRS))
    undescribed = snapshot(networks=GB200_NETWORKS, no_recipe=True)
    assert judged(obj, undescribed).allowed
    missing = snapshot(
        *(param_set(n, "RDMA") for n in GB200_NETWORKS[1:]), networks=GB200_NETWORKS, no_recipe=True
    )
    assert codes(judged(obj, missing)) == ("NetworkNotReady",)  # gvnic-1's param set is absent


def test_the_tcpxo_profile_needs_netdevice_while_the_recipe_delivers() -> None:
    sets = [
        param_set(name, "RDMA" if name == "gpu-nic-3" else "NetDevice")
        for name, _ in ((net, None) for _, net in PAIRS)
    ]
    obj = runtime(TCPXO_RUNTIME, annotations=wired(PAIRS))
    assert codes(judged(obj, snapshot(*sets))) == ("DeviceModeMismatch",)
    unbound = runtime("team-copy", annotations=wired(PAIRS))
    assert judged(unbound, snapshot(*sets)).allowed  # no profile, no mode requirement
    no_recipe = snapshot(*sets, recipe={"unrelated": "x"})
    assert "DeviceModeMismatch" not in codes(judged(obj, no_recipe))  # binds only while delivered


def test_a_trainjob_is_held_to_its_runtimes_profile() -> None:
    rdma = runtime(RDMA_RUNTIME, annotations=wired(GB200_PAIRS))
    swapped = (GB200_PAIRS[0], GB200_PAIRS[2], GB200_PAIRS[1], *GB200_PAIRS[3:])
    job = trainjob(RDMA_RUNTIME, patches=[wired(swapped)])
    verdict = judged(job, gb200(rdma))
    assert codes(verdict) == ("MappingDivergesFromProfile",)
    assert verdict.violations[0].message == (
        "at position eth2 the object maps eth3->rdma-1 but the profile records eth2->rdma-0; "
        "the same pairs appear in a different order (order is part of the contract) "
        "(profile a4x-gb200-rdma)"
    )


def test_not_ready_warn_does_not_waive_a_device_mode_mismatch() -> None:
    view = gb200(modes={"rdma-1": "NetDevice"})
    verdict = judged(
        runtime(RDMA_RUNTIME, annotations=wired(GB200_PAIRS)), view, Policy(not_ready=NotReady.WARN)
    )
    assert codes(verdict) == ("DeviceModeMismatch",)
    assert waived_codes(verdict) == ()


MODES = st.sampled_from(["NetDevice", "RDMA", "DPDK-VFIO"])


@settings(max_examples=examples(200))
@given(
    order=st.permutations(range(5)),
    modes=st.fixed_dictionaries(dict.fromkeys(GB200_NETWORKS, MODES)),
    ready=st.fixed_dictionaries({name: st.booleans() for name in GB200_NETWORKS}),
)
def test_a_bound_runtime_is_allowed_iff_mapped_as_the_profile_and_every_param_set_fits(
    order: list[int], modes: dict[str, str], ready: dict[str, bool]
) -> None:
    interfaces = [pair[0] for pair in GB200_PAIRS]
    networks = [GB200_NETWORKS[i] for i in order]
    obj = runtime(RDMA_RUNTIME, annotations=wired(list(zip(interfaces, networks, strict=True))))
    sets = [param_set(name, modes[name], ready=ready[name]) for name in GB200_NETWORKS]
    view = snapshot(*sets, networks=GB200_NETWORKS, no_recipe=True)
    fits = all(
        ready[name] and modes[name] == A4X_GB200_RDMA.required_mode(name) for name in GB200_NETWORKS
    )
    assert judged(obj, view).allowed is (networks == list(GB200_NETWORKS) and fits)


def test_a_runtime_whose_metadata_is_not_an_object_is_unbound() -> None:
    assert binding_of(CTR, {"metadata": "x"}, Policy()).profile is None
