"""The DRA rules' parts (app.domain.rules.claims): what satisfies a profile, reading the templates
once per object."""

from __future__ import annotations

import pytest

from app.domain.claims import ClaimRequest, ClaimTemplate, PodClaims
from app.domain.cluster import ClaimTemplates, ClusterSnapshot, Networks, Unverifiable
from app.domain.fields import FieldPath
from app.domain.policy import Policy
from app.domain.recipe import RecipeMissing
from app.domain.rules.claims import Templates, satisfies
from app.domain.verdict import VerdictBuilder
from tests.builders import RDMA

NETDEV = "netdev.google.com"


@pytest.mark.parametrize(
    ("requests", "nics", "expected"),
    [
        pytest.param((ClaimRequest("r", RDMA, allocation_mode="All"),), 8, True, id="all"),
        pytest.param((ClaimRequest("r", RDMA, count=8),), 8, True, id="exact-count"),
        pytest.param((ClaimRequest("r", RDMA, count=4),), 8, False, id="fewer"),
        pytest.param((ClaimRequest("r", RDMA, count=4),), 4, True, id="a4x"),
        pytest.param(
            (ClaimRequest("r", RDMA, allocation_mode="Some", count=8),), 8, False, id="mode"
        ),
        pytest.param(
            (ClaimRequest("r", None, first_available=True, classes=(RDMA,)),),
            8,
            False,
            id="first-available",
        ),
        pytest.param(
            (ClaimRequest("a", RDMA, allocation_mode="All"), ClaimRequest("b", RDMA, count=8)),
            8,
            False,
            id="two-requests",
        ),
        pytest.param(
            (ClaimRequest("a", NETDEV, allocation_mode="All"), ClaimRequest("b", RDMA, count=8)),
            8,
            True,
            id="beside-another-class",
        ),
        pytest.param((ClaimRequest("a", NETDEV, allocation_mode="All"),), 8, False, id="none"),
        pytest.param(
            (ClaimRequest("r", RDMA, allocation_mode="All", narrowed=("selectors",)),),
            8,
            False,
            id="narrowed",
        ),
        pytest.param(
            (
                ClaimRequest("a", NETDEV, allocation_mode="All", narrowed=("constraints",)),
                ClaimRequest("b", RDMA, allocation_mode="All"),
            ),
            8,
            True,
            id="another-request-narrowed",
        ),
        pytest.param((), 8, False, id="no-requests"),
    ],
)
def test_a_template_satisfies_a_profile_with_one_request_of_all_its_nics(
    requests: tuple[ClaimRequest, ...], nics: int, expected: bool
) -> None:
    assert satisfies(ClaimTemplate("ns", "t", requests), nics) is expected


def _view(state: ClaimTemplates | Unverifiable) -> ClusterSnapshot:
    return ClusterSnapshot(Networks({}), RecipeMissing("a/b"), {}, state)


def test_templates_are_read_once_and_an_unknown_state_is_said_once() -> None:
    out = VerdictBuilder()
    claims = PodClaims((), FieldPath("spec.x"))
    templates = Templates(_view(Unverifiable("not synced")), Policy(), out, claims)
    assert templates.state() is None
    assert templates.state() is None
    assert [(v.code.value, v.field) for v in out.violations] == [
        ("ClusterStateUnavailable", "spec.x.spec.resourceClaims")
    ]


def test_known_templates_are_answered_as_read() -> None:
    state = ClaimTemplates({("ns", "t"): ClaimTemplate("ns", "t", ())})
    out = VerdictBuilder()
    templates = Templates(_view(state), Policy(), out, PodClaims())
    assert templates.state() is state
    assert templates.state() is state
    assert out.violations == []
