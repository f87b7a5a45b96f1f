"""The setting ``enforcement`` and the decision of a verdict (docs/rules.md, docs/rollout.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.cluster import ClusterSnapshot, Unverifiable
from app.domain.evaluate import evaluate
from app.domain.kinds import Protected
from app.domain.policy import Enforcement, NotReady, Policy, Protect
from app.domain.review import Operation, Review
from app.domain.verdict import Code, Decision, Verdict, Violation
from tests.builders import (
    PAIRS,
    codes,
    network,
    review,
    runtime,
    snapshot,
    wired,
    with_metadata,
)

WARN = Policy(enforcement=Enforcement.WARN)
BAD = runtime("plain", annotations=wired([("eth1", "absent")], default="eth7"))
GOOD = runtime("plain", annotations=wired())
DRIFTED = runtime(annotations=wired([*PAIRS[:2], PAIRS[3], PAIRS[2], *PAIRS[4:]]))
ONE = Violation(code=Code.NETWORK_NOT_FOUND, field="f", message="m")


@pytest.mark.parametrize(
    ("verdict", "decision", "denying"),
    [
        pytest.param(Verdict(), Decision.ALLOWED, (), id="allowed"),
        pytest.param(Verdict(waived=(ONE,)), Decision.ALLOWED, (), id="waived-is-allowed"),
        pytest.param(
            Verdict(grandfathered=(ONE,), waived=(ONE,)),
            Decision.ALLOWED,
            (),
            id="only-grandfathered-is-allowed",
        ),
        pytest.param(Verdict(violations=(ONE,)), Decision.DENIED, (ONE,), id="denied"),
        pytest.param(Verdict(warned=(ONE,)), Decision.WARNED, (ONE,), id="warned"),
    ],
)
def test_the_decision_of_a_verdict(
    verdict: Verdict, decision: Decision, denying: tuple[Violation, ...]
) -> None:
    assert verdict.decision is decision
    assert verdict.denying == denying
    assert verdict.allowed is (decision is not Decision.DENIED)


def _delete_network(name: str) -> Review:
    return Review(operation=Operation.DELETE, kind=Protected.NETWORK, name=name, username="alice")


@pytest.mark.parametrize(
    ("request_", "view", "policy", "denied_codes"),
    [
        pytest.param(
            review(BAD),
            snapshot(),
            Policy(),
            ["DefaultInterfaceInvalid", "NetworkNotFound"],
            id="rules",
        ),
        pytest.param(
            review(DRIFTED), snapshot(), Policy(), ["MappingDivergesFromRecipe"], id="recipe"
        ),
        pytest.param(
            _delete_network("gpu-nic-3"),
            snapshot(DRIFTED),
            Policy(),
            ["NetworkInUse"],
            id="protect",
        ),
        pytest.param(
            review(GOOD),
            replace(snapshot(), network_state=Unverifiable("networks cache not synced")),
            Policy(),
            ["ClusterStateUnavailable"],
            id="cannot-decide",
        ),
        pytest.param(
            review(runtime("plain", annotations=wired([("eth1", "down")]))),
            snapshot(network("down", ready=False)),
            Policy(not_ready=NotReady.DENY),
            ["NetworkNotReady"],
            id="not-ready",
        ),
    ],
)
def test_enforcement_warn_allows_every_denial_with_its_lines_as_warnings(
    request_: Review, view: ClusterSnapshot, policy: Policy, denied_codes: list[str]
) -> None:
    denied = evaluate(request_, view, policy)
    assert codes(denied) == tuple(denied_codes)
    warned = evaluate(request_, view, replace(policy, enforcement=Enforcement.WARN))
    assert warned.allowed
    assert warned.decision is Decision.WARNED
    assert warned.violations == ()
    assert warned.warned == denied.violations
    # The same lines, first, then what the denial warned about already.
    lines = [v.render() for v in denied.violations]
    assert list(warned.warnings) == [*lines, *denied.warnings]
    assert all(
        line.startswith(f"[{v.code}] ") for line, v in zip(lines, denied.violations, strict=True)
    )
    assert warned.recipe == denied.recipe


@pytest.mark.parametrize(
    ("request_", "policy"),
    [
        pytest.param(review(GOOD), WARN, id="allowed-stays-allowed"),
        pytest.param(
            review(runtime("plain", annotations=wired([("eth1", "down")]))),
            replace(WARN, not_ready=NotReady.WARN),
            id="waived-stays-allowed",
        ),
        pytest.param(_delete_network("gpu-nic-3"), replace(WARN, protect=Protect.OFF), id="off"),
    ],
)
def test_enforcement_warn_leaves_what_is_allowed_as_it_is(request_: Review, policy: Policy) -> None:
    view = snapshot(network("down", ready=False), DRIFTED)
    verdict = evaluate(request_, view, policy)
    assert verdict == evaluate(request_, view, replace(policy, enforcement=Enforcement.DENY))
    assert verdict.decision is Decision.ALLOWED


def _update(new: dict[str, object], old: dict[str, object], policy: Policy) -> Verdict:
    return evaluate(review(new, operation=Operation.UPDATE, old=old), snapshot(), policy)


def test_grandfathered_codes_are_recorded_and_each_warning_leads_with_its_code() -> None:
    verdict = _update(with_metadata(BAD, labels={"team": "a"}), BAD, Policy())
    assert verdict.decision is Decision.ALLOWED
    assert [v.code.value for v in verdict.grandfathered] == [
        "DefaultInterfaceInvalid",
        "NetworkNotFound",
    ]
    assert [w.split("]")[0] + "]" for w in verdict.warnings] == [
        "[DefaultInterfaceInvalid]",
        "[NetworkNotFound]",
    ]
    assert all("] pre-existing, wiring unchanged: " in w for w in verdict.warnings)


def test_under_warn_grandfathering_comes_first_and_only_the_rest_is_warned() -> None:
    """A label binding an object to the recipe changes no wiring: what the old object had is
    grandfathered, the divergence the label makes an error is warned (denied under deny)."""
    old = runtime("plain", annotations=wired([*reversed(PAIRS[1:]), ("eth1", "absent")]))
    new = with_metadata(old, labels={"nicguard.dev/recipe-bound": "true"})
    denied = _update(new, old, Policy())
    assert codes(denied) == ("MappingDivergesFromRecipe",)
    verdict = _update(new, old, WARN)
    assert verdict.decision is Decision.WARNED
    assert [v.code for v in verdict.warned] == [Code.MAPPING_DIVERGES_FROM_RECIPE]
    assert [v.code for v in verdict.grandfathered] == [Code.NETWORK_NOT_FOUND]
    assert verdict.warnings[0].startswith("[MappingDivergesFromRecipe] at position eth1 ")
    assert verdict.warnings[-1].startswith("[NetworkNotFound] pre-existing, wiring unchanged: ")
