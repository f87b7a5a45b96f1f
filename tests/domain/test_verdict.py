"""Verdict values, the verdict builder and policy defaults (app.domain.verdict, .policy)."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from app.domain.policy import NotReady, OnUnverifiable, Policy
from app.domain.verdict import Code, Verdict, VerdictBuilder, Violation


def _v(code: Code) -> Violation:
    return Violation(code=code, field="f", message=f"m {code}")


def test_policy_defaults_are_the_spec_defaults() -> None:
    assert Policy() == Policy(
        recipe_runtimes=frozenset({"torch-distributed-tcpxo"}),
        not_ready=NotReady.DENY,
        recipe_required=True,
        on_unverifiable=OnUnverifiable.DENY,
    )


@pytest.mark.parametrize(
    ("violations", "allowed", "undecided"),
    [
        pytest.param((), True, False, id="allowed"),
        pytest.param((_v(Code.NETWORK_NOT_FOUND),), False, False, id="policy-denial"),
        pytest.param((_v(Code.CLUSTER_STATE_UNAVAILABLE),), False, True, id="cannot-decide"),
        pytest.param(
            (_v(Code.CLUSTER_STATE_UNAVAILABLE), _v(Code.DEFAULT_INTERFACE_INVALID)),
            False,
            False,
            id="cannot-decide-and-policy-denial",
        ),
    ],
)
def test_a_verdict_is_allowed_without_violations_and_undecided_only_when_nothing_else_denies(
    violations: tuple[Violation, ...], allowed: bool, undecided: bool
) -> None:
    verdict = Verdict(violations=violations)
    assert (verdict.allowed, verdict.undecided) == (allowed, undecided)


def test_the_builder_collects_denials_waivers_and_notes_in_order() -> None:
    out = VerdictBuilder()
    out.judge(_v(Code.NETWORK_NOT_READY), enforce=False)
    out.note("a note")
    out.judge(_v(Code.NETWORK_NOT_FOUND), enforce=True)
    out.deny(_v(Code.RECIPE_INVALID))
    out.recipe = "ns/r@1"
    assert out.build() == Verdict(
        violations=(_v(Code.NETWORK_NOT_FOUND), _v(Code.RECIPE_INVALID)),
        waived=(_v(Code.NETWORK_NOT_READY),),
        warnings=("[NetworkNotReady] m NetworkNotReady", "a note"),
        recipe="ns/r@1",
    )


def test_a_scoped_builder_adds_to_the_same_findings_and_recipe() -> None:
    out = VerdictBuilder()
    scoped = out.scoped("node job: ")
    scoped.deny(_v(Code.NETWORK_NOT_FOUND))
    scoped.note("a note")
    scoped.recipe = "ns/r@1"
    assert out.build() == Verdict(
        violations=(replace(_v(Code.NETWORK_NOT_FOUND), message="node job: m NetworkNotFound"),),
        warnings=("node job: a note",),
        recipe="ns/r@1",
    )


def test_a_builder_without_findings_never_describes_its_subject() -> None:
    described: list[str] = []

    def subject() -> str:
        described.append("Pod team-a/p")
        return "Pod team-a/p: "

    out = VerdictBuilder(subject=subject)
    out.scoped("").scoped("node job: ").recipe = "ns/r@1"
    assert out.build() == Verdict(recipe="ns/r@1")
    assert described == []


def test_a_described_subject_leads_every_finding_of_it_and_its_scopes() -> None:
    out = VerdictBuilder(subject=lambda: "Pod team-a/p: ")
    scoped = out.scoped("node job: ")
    out.deny(_v(Code.NETWORK_NOT_FOUND))
    scoped.judge(_v(Code.NETWORK_NOT_READY), enforce=False)
    scoped.note("a note")
    assert out.scoped("") is out
    assert out.build() == Verdict(
        violations=(
            replace(_v(Code.NETWORK_NOT_FOUND), message="Pod team-a/p: m NetworkNotFound"),
        ),
        waived=(
            replace(
                _v(Code.NETWORK_NOT_READY), message="Pod team-a/p: node job: m NetworkNotReady"
            ),
        ),
        warnings=(
            "[NetworkNotReady] Pod team-a/p: node job: m NetworkNotReady",
            "Pod team-a/p: node job: a note",
        ),
    )


def test_an_empty_builder_builds_an_allowing_verdict_without_recipe() -> None:
    assert VerdictBuilder().build() == Verdict()
    assert Verdict().recipe == "none"


def test_a_prefixed_violation_keeps_every_other_field() -> None:
    found = Violation(code=Code.NETWORK_IN_USE, field="f", message="m", causes=(("g", "named"),))
    assert found.prefixed("JobSet a/b: ") == replace(found, message="JobSet a/b: m")
    # Whoever adds a field to Violation adds it to prefixed(): this test counts them.
    assert [f.name for f in fields(Violation)] == ["code", "field", "message", "causes"]
