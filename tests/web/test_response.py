"""Verdict to AdmissionReview response (app.web.response): allowed, denied (403) or undecided
(503), and every part cut to the apiserver's limits: message, causes, warnings."""

from __future__ import annotations

from typing import Final

import pytest
from hypothesis import given, settings, strategies as st

from app.domain.kinds import Kind
from app.domain.review import Operation, Review
from app.domain.verdict import Code, Verdict, Violation
from app.web.request import AdmissionRequest
from app.web.response import (
    CAUSES_MAX,
    MESSAGE_MAX_BYTES,
    WARNING_MAX_CHARS,
    WARNINGS_MAX_TOTAL,
    audit_annotations,
    bounded_causes,
    bounded_message,
    bounded_status,
    bounded_warnings,
    denial_status,
    review_response,
    subject,
)


def admission(
    namespace: str = "team-a",
    name: str = "r",
    *,
    kind: str = "TrainingRuntime",
    group: str = "trainer.kubeflow.org",
) -> AdmissionRequest:
    review = Review(operation=Operation.CREATE, kind=Kind.TRAINING_RUNTIME, namespace=namespace)
    return AdmissionRequest(
        uid="u-1",
        review=review,
        kind=kind,
        group=group,
        name=name,
        username="alice",
        dry_run=False,
    )


def violation(code: Code, message: str, field: str = "spec.x") -> Violation:
    return Violation(code=code, field=field, message=message)


LOST: Final = violation(Code.NETWORK_NOT_FOUND, "eth1 names gpu-nic-9, not found", "spec.a")
BAD: Final = violation(Code.INTERFACES_ANNOTATION_MALFORMED, "not JSON", "spec.b")
UNKNOWN: Final = violation(Code.CLUSTER_STATE_UNAVAILABLE, "caches not synced", "")


def test_an_allowed_verdict_has_no_status_and_no_patch() -> None:
    verdict = Verdict(warnings=("heads up",), recipe="ns/r@3")
    assert review_response(admission(), verdict) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u-1",
            "allowed": True,
            "auditAnnotations": {"decision": "allowed", "violations": "", "recipe": "ns/r@3"},
            "warnings": ["heads up"],
        },
    }


@pytest.mark.parametrize(
    ("violations", "code", "reason"),
    [
        pytest.param((LOST, BAD), 403, "Forbidden", id="a violation: forbidden"),
        pytest.param((UNKNOWN,), 503, "ServiceUnavailable", id="only undecided: unavailable"),
        pytest.param((UNKNOWN, LOST), 403, "Forbidden", id="undecided and a violation"),
    ],
)
def test_a_denial_says_why_line_by_line_with_a_cause_each(
    violations: tuple[Violation, ...], code: int, reason: str
) -> None:
    response = review_response(admission(), Verdict(violations=violations))["response"]
    assert isinstance(response, dict)
    assert response["allowed"] is False
    assert "warnings" not in response
    lines = "\n".join(v.render() for v in violations)
    assert response["status"] == {
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": f"TrainingRuntime/team-a/r: {lines}",
        "details": {
            "name": "r",
            "group": "trainer.kubeflow.org",
            "kind": "TrainingRuntime",
            "causes": [
                {"reason": v.code.value, "field": v.field, "message": v.message} for v in violations
            ],
        },
    }


def test_a_violation_naming_dependents_has_a_cause_per_dependent_and_causes_are_capped() -> None:
    in_use = Violation(
        code=Code.NETWORK_IN_USE,
        field="metadata.name",
        message="used by 2 runtimes",
        causes=(("ns/a", "uses it as eth1"), ("ns/b", "uses it as eth2")),
    )
    many = tuple(violation(Code.NETWORK_NOT_FOUND, f"m{i}", f"f{i}") for i in range(CAUSES_MAX))
    response = review_response(admission(), Verdict(violations=(in_use, *many)))["response"]
    assert isinstance(response, dict)
    causes = response["status"]["details"]["causes"]
    assert len(causes) == CAUSES_MAX
    assert causes[:3] == [
        {"reason": "NetworkInUse", "field": "ns/a", "message": "uses it as eth1"},
        {"reason": "NetworkInUse", "field": "ns/b", "message": "uses it as eth2"},
        {"reason": "NetworkNotFound", "field": "f0", "message": "m0"},
    ]


@pytest.mark.parametrize(
    ("namespace", "expected"),
    [("team-a", "TrainingRuntime/team-a/r"), ("", "TrainingRuntime/r")],
)
def test_the_subject_names_namespace_only_when_there_is_one(namespace: str, expected: str) -> None:
    assert subject(admission(namespace)) == expected


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param(["a", "b"], "p: a\nb", id="fits"),
        pytest.param(
            ["x" * 600, "y" * 600, "z"],
            "p: " + "x" * 600 + "\n... and 2 more (see details.causes)",
            id="whole lines kept, the rest counted",
        ),
        pytest.param(
            ["é" * 1000],
            None,
            id="a first line too long alone is cut on a character",
        ),
    ],
)
def test_the_message_stays_within_1_kib(lines: list[str], expected: str | None) -> None:
    message = bounded_message("p: ", lines)
    assert len(message.encode()) <= MESSAGE_MAX_BYTES
    if expected is not None:
        assert message == expected
    else:
        assert message.startswith("p: éé")
        assert message.endswith("…")


def test_a_lone_surrogate_in_a_message_is_measured_not_refused() -> None:
    message = bounded_message("p: ", ["\ud800" * 2000])
    assert len(message.encode("utf-8", errors="surrogatepass")) <= MESSAGE_MAX_BYTES


@pytest.mark.parametrize(
    ("warnings", "expected"),
    [
        pytest.param((), [], id="none"),
        pytest.param(("one\n  two\tthree",), ["one two three"], id="whitespace folded"),
        pytest.param(
            ("w" * 200,), ["w" * (WARNING_MAX_CHARS - 1) + "…"], id="each cut to 120 characters"
        ),
        pytest.param(
            tuple(f"{i:03d}" + "w" * 117 for i in range(20)),
            [f"{i:03d}" + "w" * 117 for i in range(WARNINGS_MAX_TOTAL // 120)]
            + [f"... and {20 - WARNINGS_MAX_TOTAL // 120} more warnings"],
            id="the list cut under the apiserver's limit",
        ),
    ],
)
def test_warnings_are_bounded(warnings: tuple[str, ...], expected: list[str]) -> None:
    assert bounded_warnings(warnings) == expected


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        pytest.param(
            Verdict(recipe="ns/r@1"),
            {"decision": "allowed", "violations": "", "recipe": "ns/r@1"},
            id="allowed",
        ),
        pytest.param(
            Verdict(violations=(LOST, BAD, LOST)),
            {
                "decision": "denied",
                "violations": "NetworkNotFound,InterfacesAnnotationMalformed",
                "recipe": "none",
            },
            id="denied: each violation's code, once",
        ),
        pytest.param(
            Verdict(warned=(LOST,)),
            {"decision": "warned", "violations": "NetworkNotFound", "recipe": "none"},
            id="warned: what would have denied",
        ),
        pytest.param(
            Verdict(waived=(BAD,), grandfathered=(BAD,)),
            {
                "decision": "allowed",
                "violations": "",
                "grandfathered": "InterfacesAnnotationMalformed",
                "recipe": "none",
            },
            id="grandfathered",
        ),
    ],
)
def test_audit_annotations(verdict: Verdict, expected: dict[str, str]) -> None:
    assert audit_annotations(verdict) == expected


def _unbounded_message(prefix: str, lines: list[str]) -> str:
    """The message as built from every line, each rendered (what bounded_message saves)."""
    full = prefix + "\n".join(lines)
    if len(full.encode()) <= MESSAGE_MAX_BYTES:
        return full
    kept: list[str] = []
    budget = (
        MESSAGE_MAX_BYTES - len(prefix) - len(f"\n... and {len(lines)} more (see details.causes)")
    )
    for line in lines:
        if len(line) + (1 if kept else 0) > budget:
            break
        budget -= len(line) + (1 if kept else 0)
        kept.append(line)
    more = f"\n... and {len(lines) - len(kept)} more (see details.causes)"
    return prefix + "\n".join(kept) + more


@pytest.mark.parametrize("count", [1, 40, MESSAGE_MAX_BYTES + 1, 16_000])
def test_thousands_of_violations_are_counted_not_rendered(count: int) -> None:
    found = tuple(violation(Code.NETWORK_DUPLICATED, "", f"spec.x[{n}]") for n in range(count))
    verdict = Verdict(violations=found)
    lines = [v.render() for v in found]
    message = denial_status(admission(), verdict)["message"]
    assert message == _unbounded_message("TrainingRuntime/team-a/r: ", lines)
    causes = bounded_causes(verdict)
    assert len(causes) == min(count, CAUSES_MAX)
    assert [c["field"] for c in causes[: CAUSES_MAX - 1]] == [v.field for v in found][
        : CAUSES_MAX - 1
    ]
    if count > CAUSES_MAX:
        assert causes[-1]["message"] == (
            f"... and {count - CAUSES_MAX + 1} more (status.message counts the violations)"
        )


# Texts that need no escaping, near each bound; and any text: with control characters, not
# ASCII, longer than every bound.
_PLAIN = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    st.integers(0, 300).map(lambda n: "y" * n),
    st.integers(1020, 1030).map(lambda n: "z" * n),
)
_ANY = st.one_of(
    _PLAIN,
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20),
    st.text(max_size=20),
    st.integers(1000, 1100).map(lambda n: "x" * n),
)


def _denials(
    text: st.SearchStrategy[str], causes: st.SearchStrategy[tuple[tuple[str, str], ...]]
) -> st.SearchStrategy[tuple[AdmissionRequest, Verdict]]:
    violation = st.builds(
        lambda code, field, message, causes: Violation(
            code=code, field=field, message=message, causes=causes
        ),
        st.sampled_from(Code),
        text,
        text,
        causes,
    )

    def denial(
        texts: tuple[str, str, str, str], violations: list[Violation]
    ) -> tuple[AdmissionRequest, Verdict]:
        namespace, name, group, kind = texts
        request = admission(namespace, name, kind=kind, group=group)
        return request, Verdict(violations=tuple(violations))

    return st.builds(
        denial,
        st.tuples(text, text, text, text),
        st.lists(violation, min_size=1, max_size=CAUSES_MAX + 2),
    )


@settings(max_examples=400)
@given(
    st.one_of(
        _denials(_PLAIN, st.just(())),
        _denials(_ANY, st.lists(st.tuples(_ANY, _ANY), max_size=3).map(tuple)),
    )
)
def test_a_denial_built_as_is_is_the_bounded_one(denial: tuple[AdmissionRequest, Verdict]) -> None:
    """What needs no escaping or cutting is built without asking each text: the same status."""
    request, verdict = denial
    code = 503 if verdict.undecided else 403
    assert denial_status(request, verdict) == bounded_status(request, verdict, code)


def _plain_denial(
    *, message: int = 10, field: int = 10, group: int = 10, name: int = 1, violations: int = 1
) -> tuple[AdmissionRequest, Verdict]:
    request = admission("team-a", "n" * name, group="g" * group)
    found = violation(Code.NETWORK_NOT_FOUND, "m" * message, "f" * field)
    return request, Verdict(violations=(found,) * violations)


# "TrainingRuntime/team-a/" is 23 characters; a line is "[NetworkNotFound] " and its message.
@pytest.mark.parametrize(
    "denial",
    [
        pytest.param(_plain_denial(message=256), id="a cause's message at its bound"),
        pytest.param(_plain_denial(message=257), id="a cause's message past it"),
        pytest.param(_plain_denial(field=1024), id="a cause's field at its bound"),
        pytest.param(_plain_denial(field=1025), id="a cause's field past it"),
        pytest.param(_plain_denial(group=256), id="the group at its bound"),
        pytest.param(_plain_denial(group=257), id="the group past it"),
        pytest.param(_plain_denial(name=233), id="the subject at its bound"),
        pytest.param(_plain_denial(name=234), id="the subject past it"),
        pytest.param(
            _plain_denial(message=230, name=4, violations=4), id="the message at its bound"
        ),
        pytest.param(_plain_denial(message=231, name=4, violations=4), id="the message past it"),
        pytest.param(_plain_denial(violations=CAUSES_MAX), id="as many causes as are listed"),
        pytest.param(_plain_denial(violations=CAUSES_MAX + 1), id="one more"),
    ],
)
def test_a_denial_at_each_bound_is_the_bounded_one(
    denial: tuple[AdmissionRequest, Verdict],
) -> None:
    request, verdict = denial
    assert denial_status(request, verdict) == bounded_status(request, verdict, 403)
