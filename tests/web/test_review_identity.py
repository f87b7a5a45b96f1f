"""What identifies a review refused unjudged, read from its undecoded body
(app.web.review_identity): exact for what an apiserver writes, nothing for what it does not."""

from __future__ import annotations

import json

import pytest

from app.web.review_identity import UNKNOWN, ReviewIdentity, identity_in, identity_of
from tests.support.costly_jobset import Edit, costly_jobset_update

EXPECTED = ReviewIdentity(
    uid="u-1",
    group="jobset.x-k8s.io",
    kind="JobSet",
    namespace="team-a",
    name="llama",
    username="system:serviceaccount:kueue-system:kueue-controller-manager",
)


def test_an_apiserver_body_gives_its_request_fields_exactly() -> None:
    body = costly_jobset_update(Edit.BROKEN, templates=10, uid="u-1")
    assert identity_in(body) == EXPECTED
    assert identity_of(json.loads(body)) == EXPECTED


def test_escapes_in_the_fields_read_as_their_text() -> None:
    body = costly_jobset_update(Edit.BROKEN, templates=1, uid="u-1")
    body = body.replace(b'"name":"llama"', b'"name":"ll\\u0061ma\\"x"')
    assert identity_in(body).name == 'llama"x'


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b'{"request":{"object":{}}}', id="object-first"),
        pytest.param(b'{"request":[1,"object":{}}', id="not-json-before-the-object"),
        pytest.param(b'{"request":{"uid":"x"}}', id="no-object"),
    ],
)
def test_a_body_not_written_as_an_apiserver_writes_gives_nothing(body: bytes) -> None:
    assert identity_in(body) == UNKNOWN


def test_fields_of_the_wrong_type_are_left_empty() -> None:
    assert identity_of({"request": {"uid": 1, "kind": "JobSet", "userInfo": []}}) == UNKNOWN
    assert identity_of([]) == UNKNOWN
