"""Reading ResourceClaimTemplates and pod resourceClaims (app.domain.claims)."""

from __future__ import annotations

import pytest

from app.domain.claims import (
    ClaimRequest,
    ClaimTemplate,
    PodClaim,
    PodClaims,
    claim_template_of,
    is_claim_template,
    pod_claims,
)
from app.domain.fields import FieldPath
from tests.builders import (
    ONE_NIC_SELECTOR,
    RDMA,
    by_template,
    claim_template,
    exactly,
    first_available,
)

NETDEV = "netdev.google.com"


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        pytest.param([exactly()], (ClaimRequest("rdma", RDMA, allocation_mode="All"),), id="all"),
        pytest.param(
            [exactly(mode="ExactCount", count=8)],
            (ClaimRequest("rdma", RDMA, count=8),),
            id="exact-count",
        ),
        pytest.param(
            [exactly(mode=None)], (ClaimRequest("rdma", RDMA),), id="defaults-exact-count-of-one"
        ),
        pytest.param(
            [exactly(mode=None, count="8")],
            (ClaimRequest("rdma", RDMA, count=0),),
            id="count-not-an-integer-asks-for-none",
        ),
        pytest.param(
            [exactly(mode=None, count=True)],
            (ClaimRequest("rdma", RDMA, count=0),),
            id="count-boolean-asks-for-none",
        ),
        pytest.param(
            [first_available(RDMA, NETDEV)],
            (ClaimRequest("rdma", None, first_available=True, classes=(RDMA, NETDEV)),),
            id="first-available",
        ),
        pytest.param(
            [{"name": "x", "firstAvailable": [{"name": "a"}, "text"]}],
            (ClaimRequest("x", None, first_available=True),),
            id="first-available-without-classes",
        ),
        pytest.param(
            [{"exactly": "text"}, "not-a-map", {"name": "y"}],
            (ClaimRequest("", None), ClaimRequest("y", None)),
            id="malformed-requests-ask-for-no-class",
        ),
    ],
)
def test_requests_are_read_with_the_apiservers_defaults(
    requests: list[dict[str, object]], expected: tuple[ClaimRequest, ...]
) -> None:
    found = claim_template_of(claim_template("t", *requests))
    assert found == ClaimTemplate("team", "t", expected)


ALL_RDMA = exactly(name="rdma")
NET = exactly(NETDEV, name="net")
MATCH = "dra.net/pciRoot"


@pytest.mark.parametrize(
    ("requests", "devices", "expected"),
    [
        pytest.param([ALL_RDMA, NET], {}, ((), ()), id="none"),
        pytest.param(
            [exactly(selectors=ONE_NIC_SELECTOR), NET], {}, (("selectors",), ()), id="selectors"
        ),
        pytest.param([exactly(selectors=[])], {}, ((),), id="empty-selectors-narrow-nothing"),
        pytest.param([exactly(adminAccess=True)], {}, (("adminAccess",),), id="admin-access"),
        pytest.param([exactly(adminAccess=False)], {}, ((),), id="admin-access-false"),
        pytest.param(
            [ALL_RDMA, NET],
            {"constraints": [{"requests": ["rdma", "net"], "matchAttribute": MATCH}]},
            (("constraints",), ("constraints",)),
            id="constraints-naming-both",
        ),
        pytest.param(
            [ALL_RDMA, NET],
            {"constraints": [{"requests": ["net"], "matchAttribute": MATCH}]},
            ((), ("constraints",)),
            id="constraints-naming-another",
        ),
        pytest.param(
            [ALL_RDMA, NET],
            {"constraints": [{"matchAttribute": MATCH}, "not-a-map"]},
            (("constraints",), ("constraints",)),
            id="constraints-without-requests-name-every-request",
        ),
        pytest.param(
            [ALL_RDMA],
            {"constraints": [{"requests": [], "matchAttribute": MATCH}]},
            (("constraints",),),
            id="an-empty-list-names-every-request",
        ),
        pytest.param(
            [first_available(RDMA, name="rdma")],
            {"config": [{"requests": ["rdma/alt0", 7], "opaque": {"driver": "d"}}]},
            (("config",),),
            id="config-naming-a-subrequest",
        ),
        pytest.param(
            [exactly(selectors=ONE_NIC_SELECTOR, adminAccess=True)],
            {"constraints": [{"matchAttribute": MATCH}], "config": [{"opaque": {}}]},
            (("selectors", "adminAccess", "constraints", "config"),),
            id="all-four",
        ),
    ],
)
def test_a_request_knows_what_narrows_it(
    requests: list[object], devices: dict[str, object], expected: tuple[tuple[str, ...], ...]
) -> None:
    found = claim_template_of(
        claim_template(
            "t", *requests, constraints=devices.get("constraints"), config=devices.get("config")
        )
    )
    assert found is not None
    assert tuple(r.narrowed for r in found.requests) == expected


def test_equal_narrowings_are_one_tuple() -> None:
    first, second = (
        claim_template_of(claim_template(name, exactly(selectors=ONE_NIC_SELECTOR)))
        for name in ("a", "b")
    )
    assert first is not None
    assert second is not None
    assert first.requests[0].narrowed is second.requests[0].narrowed


def test_an_omitted_namespace_is_default_and_no_requests_is_empty() -> None:
    obj = claim_template("t", namespace=None)
    obj["spec"] = {}
    assert claim_template_of(obj) == ClaimTemplate("default", "t", ())


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({**claim_template(), "apiVersion": "resource.k8s.io/v1beta1"}, id="old-api"),
        pytest.param({**claim_template(), "kind": "ResourceClaim"}, id="other-kind"),
        pytest.param({**claim_template(), "metadata": {"namespace": "team"}}, id="no-name"),
        pytest.param("text", id="not-a-map"),
    ],
)
def test_only_named_v1_resource_claim_templates_are_read(obj: object) -> None:
    assert claim_template_of(obj) is None
    assert is_claim_template(obj) is False or claim_template_of(obj) is None


def test_a_v1_template_is_recognised() -> None:
    assert is_claim_template(claim_template())


@pytest.mark.parametrize(
    ("request_", "device_class", "expected"),
    [
        pytest.param(ClaimRequest("r", RDMA), RDMA, True, id="exactly"),
        pytest.param(ClaimRequest("r", NETDEV), RDMA, False, id="other-class"),
        pytest.param(
            ClaimRequest("r", None, first_available=True, classes=(NETDEV, RDMA)),
            RDMA,
            True,
            id="first-available-alternative",
        ),
    ],
)
def test_a_request_requests_a_class_exactly_or_among_its_alternatives(
    request_: ClaimRequest, device_class: str, expected: bool
) -> None:
    assert request_.requests(device_class) is expected


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(
            ClaimRequest("r", RDMA, allocation_mode="All"), f"all {RDMA} devices", id="all"
        ),
        pytest.param(ClaimRequest("r", RDMA), f"1 {RDMA} device", id="one"),
        pytest.param(ClaimRequest("r", RDMA, count=4), f"4 {RDMA} devices", id="four"),
        pytest.param(
            ClaimRequest("r", RDMA, allocation_mode="Some"),
            f"{RDMA} devices by allocationMode Some",
            id="unknown-mode",
        ),
        pytest.param(
            ClaimRequest("r", None, first_available=True, classes=(RDMA, NETDEV)),
            f"a firstAvailable list of {RDMA}, {NETDEV}",
            id="first-available",
        ),
        pytest.param(
            ClaimRequest("r", None, first_available=True),
            "a firstAvailable list of nothing",
            id="first-available-empty",
        ),
        pytest.param(
            ClaimRequest("r", RDMA, allocation_mode="All", narrowed=("selectors",)),
            f"all {RDMA} devices with selectors",
            id="selectors",
        ),
        pytest.param(
            ClaimRequest("r", RDMA, count=8, narrowed=("adminAccess", "constraints", "config")),
            f"8 {RDMA} devices with adminAccess: true, constraints naming it, config naming it",
            id="admin-access-constraints-config",
        ),
        pytest.param(
            ClaimRequest("r", None, first_available=True, narrowed=("config",)),
            "a firstAvailable list of nothing",
            id="first-available-says-its-list",
        ),
    ],
)
def test_a_request_says_what_it_asks_for(request_: ClaimRequest, expected: str) -> None:
    assert request_.describe() == expected


def test_a_template_lists_the_requests_of_a_class() -> None:
    rdma, netdev = ClaimRequest("a", RDMA), ClaimRequest("b", NETDEV)
    template = ClaimTemplate("ns", "t", (rdma, netdev))
    assert template.requesting(RDMA) == (rdma,)
    assert template.describe() == "ResourceClaimTemplate ns/t"


POD = FieldPath("spec.template")
PATH = "spec.template.spec.resourceClaims"


def test_pod_claims_are_located_by_position_and_non_maps_skipped() -> None:
    value = [by_template("t"), "text", {"name": "shared", "resourceClaimName": "c"}, {"name": 3}]
    claims = pod_claims(value, POD)
    assert claims == PodClaims(
        (
            PodClaim("rdma", "t", None, f"{PATH}[0]"),
            PodClaim("shared", None, "c", f"{PATH}[2]"),
            PodClaim(None, None, None, f"{PATH}[3]"),
        ),
        POD,
    )
    assert claims.field == PATH
    assert claims.templates == (claims.entries[0],)
    assert claims.shared == (claims.entries[1],)
    assert claims.fingerprint() == (("rdma", "t", None), ("shared", None, "c"), (None, None, None))


@pytest.mark.parametrize("value", [None, "text", {}, []])
def test_no_list_is_no_claims(value: object) -> None:
    claims = pod_claims(value, POD)
    assert claims == PodClaims((), POD)
    assert claims.field == PATH


def test_a_bare_pods_claims_are_under_its_spec() -> None:
    assert pod_claims(None, FieldPath()).field == "spec.resourceClaims"


def test_inherited_claims_are_located_where_the_object_names_them() -> None:
    claims = pod_claims([by_template()], POD, inherited="spec.runtimeRef")
    assert claims.entries == (PodClaim("rdma", "default-rdma", None, "spec.runtimeRef"),)
    assert claims.field == "spec.runtimeRef"
    assert pod_claims(None, POD, inherited="spec.runtimeRef").field == "spec.runtimeRef"
