"""The settings that change verdicts (app.domain.policy): their spelled values, which are the
settings' API, and the defaults the product contract names."""

from __future__ import annotations

import dataclasses
from enum import StrEnum

import pytest

from app.domain.policy import (
    DEFAULT_RDMA_RUNTIMES,
    DEFAULT_RECIPE_RUNTIMES,
    PROFILE_LABEL,
    RECIPE_BOUND_LABEL,
    Enforcement,
    NotReady,
    OnUnverifiable,
    Policy,
    Protect,
)


@pytest.mark.parametrize(
    ("setting", "values"),
    [
        pytest.param(NotReady, ["deny", "warn"], id="not-ready"),
        pytest.param(OnUnverifiable, ["deny", "allow"], id="on-unverifiable"),
        pytest.param(Protect, ["deny", "warn", "off"], id="protect"),
        pytest.param(Enforcement, ["deny", "warn"], id="enforcement"),
    ],
)
def test_each_setting_takes_exactly_its_documented_values(
    setting: type[StrEnum], values: list[str]
) -> None:
    assert [member.value for member in setting] == values
    assert [setting(value) for value in values] == list(setting)


def test_the_defaults_are_the_contracts() -> None:
    assert Policy() == Policy(
        recipe_runtimes=frozenset({"torch-distributed-tcpxo"}),
        rdma_runtimes=frozenset({"torch-distributed-rdma"}),
        not_ready=NotReady.DENY,
        recipe_required=True,
        on_unverifiable=OnUnverifiable.DENY,
        protect=Protect.DENY,
        enforcement=Enforcement.DENY,
    )
    assert Policy().recipe_runtimes is DEFAULT_RECIPE_RUNTIMES
    assert Policy().rdma_runtimes is DEFAULT_RDMA_RUNTIMES


def test_the_labels_are_the_contracts() -> None:
    assert (RECIPE_BOUND_LABEL, PROFILE_LABEL) == (
        "nicguard.dev/recipe-bound",
        "nicguard.dev/profile",
    )


def test_a_policy_is_immutable_and_named_field_by_field() -> None:
    policy = Policy(protect=Protect.WARN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.protect = Protect.OFF  # type: ignore[misc]
    with pytest.raises(TypeError):
        Policy(frozenset({"x"}))  # type: ignore[call-arg]
    assert dataclasses.replace(policy, protect=Protect.OFF).protect is Protect.OFF
    assert policy.protect is Protect.WARN
    assert hash(policy) == hash(Policy(protect=Protect.WARN))
