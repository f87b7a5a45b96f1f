"""``POST /validate``: any body gets an answer below 500; a 200 is a valid AdmissionReview.

docs/rules.md: malformed requests get a short JSON 4xx; a judged request echoes its uid,
never carries a patch, and keeps the apiserver's size limits. A core failure would surface as
an in-band ClusterStateUnavailable denial, so the internal-error message is checked for too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Final

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings, strategies as st

from app.documents import load_yaml
from app.domain.cluster import ClusterSnapshot, snapshot_of
from app.domain.kinds import TRAINER_GROUP, Kind
from app.domain.review import Operation
from app.domain.verdict import Code
from app.files.state import load_objects
from app.web.response import MESSAGE_MAX_BYTES, WARNING_MAX_CHARS
from tests.properties.strategies import any_text, fuzzed_objects, json_values, mutated
from tests.support.examples import examples
from tests.web.conftest import EXAMPLES, RECIPE, make_client, sample_review

HTTP = settings(max_examples=examples(100), deadline=None)
API_VERSION: Final = "admission.k8s.io/v1"
INTERNAL_ERROR: Final = "internal error"
SAMPLES: Final = ("good-runtime", "drifted-runtime", "trainjob-patch-drift")


@pytest.fixture(scope="module")
def state() -> ClusterSnapshot:
    """The example cluster state, as ``tests/web/conftest.py`` loads it."""
    objects = (o.obj for o in load_objects([EXAMPLES / "cluster"]))
    return snapshot_of(objects, recipe_name=RECIPE, load_yaml=load_yaml)


@pytest.fixture(scope="module")
def client(state: ClusterSnapshot) -> Iterator[TestClient]:
    with make_client(state)[0] as found:
        yield found


def post(client: TestClient, body: bytes, content_type: str = "application/json") -> Any:
    reply = client.post("/validate", content=body, headers={"Content-Type": content_type})
    assert reply.status_code < 500, reply.text
    assert reply.headers["content-type"] == "application/json"
    decoded = json.loads(reply.content)
    if reply.status_code != 200:
        assert 400 <= reply.status_code < 500
        assert decoded["status"] == reply.status_code
        assert isinstance(decoded["error"], str)
        assert decoded["error"]
        return None
    return decoded


def utf8_size(text: str) -> int:
    """Bytes on the wire; a lone surrogate (legal in a JSON escape) counts as three."""
    return len(text.encode("utf-8", "surrogatepass"))


def check_review_response(body: Any, uid: object) -> None:
    """A well-formed AdmissionReview v1 response for ``uid`` (docs/rules.md)."""
    assert body["apiVersion"] == API_VERSION
    assert body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    assert "patch" not in response
    assert "patchType" not in response
    audit = response["auditAnnotations"]
    assert audit["decision"] == ("allowed" if response["allowed"] else "denied")
    assert isinstance(audit["recipe"], str)
    codes = [c for c in audit["violations"].split(",") if c]
    assert all(code in set(Code) for code in codes)
    warnings = response.get("warnings", [])
    assert all(isinstance(w, str) and len(w) <= WARNING_MAX_CHARS for w in warnings)
    assert sum(utf8_size(w) for w in warnings) < 4096
    if response["allowed"]:
        assert "status" not in response
        assert not codes
        return
    status = response["status"]
    assert status["status"] == "Failure"
    assert status["code"] in (403, 503)
    assert utf8_size(status["message"]) <= MESSAGE_MAX_BYTES
    causes = status["details"]["causes"]
    assert causes
    for cause in causes:
        assert cause["reason"] in set(Code)
        assert isinstance(cause["field"], str)
        assert INTERNAL_ERROR not in cause["message"], "the core raised while judging"
    # The annotation lists each code once (docs/rules.md, bounded output); causes at most 20.
    assert len(codes) == len(set(codes))
    assert len(causes) <= 20
    reasons = list(dict.fromkeys(cause["reason"] for cause in causes))
    assert reasons == codes[: len(reasons)]


def uid_of(body: object) -> object:
    request = body.get("request") if isinstance(body, dict) else None
    return request.get("uid") if isinstance(request, dict) else None


def is_usable_uid(uid: object) -> bool:
    return isinstance(uid, str) and bool(uid)


def send_review(client: TestClient, review: object) -> None:
    decoded = post(client, json.dumps(review).encode())
    uid = uid_of(review)
    if not is_usable_uid(uid):
        assert decoded is None, "a review without a usable uid was judged"
    if decoded is not None:
        check_review_response(decoded, uid)


@HTTP
@given(
    st.binary(max_size=256),
    st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""]),
)
def test_any_bytes_get_an_answer_below_500(
    client: TestClient, body: bytes, content_type: str
) -> None:
    decoded = post(client, body, content_type)
    if decoded is not None:
        check_review_response(decoded, uid_of(json.loads(body)))


@HTTP
@given(json_values)
def test_any_json_body_gets_an_answer_below_500(client: TestClient, body: object) -> None:
    send_review(client, body)


request_fields = st.fixed_dictionaries(
    {},
    optional={
        "uid": st.just("3f1c") | st.text(max_size=8) | json_values,
        "kind": st.fixed_dictionaries(
            {},
            optional={
                "group": st.just(TRAINER_GROUP) | json_values,
                "version": st.just("v1alpha1") | json_values,
                "kind": st.sampled_from(Kind) | any_text | json_values,
            },
        )
        | json_values,
        "operation": st.sampled_from(Operation) | json_values,
        "object": fuzzed_objects | json_values,
        "oldObject": fuzzed_objects | json_values,
        "name": any_text | json_values,
        "namespace": st.sampled_from(["team", ""]) | any_text | json_values,
        "subResource": st.sampled_from(["status", ""]) | json_values,
        "dryRun": st.booleans() | json_values,
        "userInfo": st.fixed_dictionaries({"username": st.text(max_size=8)}) | json_values,
    },
)


@HTTP
@given(request_fields, st.sampled_from([API_VERSION, "admission.k8s.io/v1beta1"]))
def test_any_admission_request_gets_an_answer_below_500(
    client: TestClient, fields: dict[str, object], api_version: str
) -> None:
    review = {"apiVersion": api_version, "kind": "AdmissionReview", "request": fields}
    send_review(client, review)


@HTTP
@given(st.sampled_from(SAMPLES).map(sample_review).flatmap(mutated))
def test_mutated_sample_reviews_get_an_answer_below_500(client: TestClient, review: object) -> None:
    send_review(client, review)


@HTTP
@given(
    st.sampled_from(SAMPLES),
    any_text.filter(bool),
    st.none() | any_text,
    st.none() | any_text,
    st.booleans(),
)
def test_a_judged_review_echoes_any_uid_and_names_any_object(
    client: TestClient,
    sample: str,
    uid: str,
    name: str | None,
    namespace: str | None,
    dry_run: bool,
) -> None:
    """Denied samples too: the denial message quotes the request's namespace and name."""
    review = sample_review(sample)
    review["request"]["uid"] = uid
    review["request"]["dryRun"] = dry_run
    for key, value in (("name", name), ("namespace", namespace)):
        if value is None:
            review["request"].pop(key, None)
        else:
            review["request"][key] = value
    decoded = post(client, json.dumps(review).encode())
    assert decoded is not None
    check_review_response(decoded, uid)


@HTTP
@given(
    st.sampled_from(SAMPLES),
    st.fixed_dictionaries(
        {},
        optional={
            "group": st.just(TRAINER_GROUP) | any_text,
            "kind": st.sampled_from(Kind) | any_text,
        },
    ),
)
def test_any_request_leaves_the_metrics_renderable(
    state: ClusterSnapshot, sample: str, kind: dict[str, object]
) -> None:
    """docs/operations.md: ``/metrics`` keeps working whatever a request carried."""
    client, metrics = make_client(state)
    review = sample_review(sample)
    review["request"]["kind"] = kind
    send_review(client, review)
    assert metrics.render()


INTERFACES: Final = "networking.gke.io/interfaces"


@HTTP
@given(
    st.lists(st.tuples(any_text, any_text), min_size=1, max_size=8),
    st.integers(1, 80),
    st.sampled_from(["odd-names", "missing-networks", "interface-refs"]),
    st.sampled_from(SAMPLES[:2]),
)
def test_long_denials_stay_within_the_size_limits(
    client: TestClient, names: list[tuple[str, str]], count: int, shape: str, sample: str
) -> None:
    """Many entries with long, odd names: the denial message stays <= 1 KiB, each warning
    <= 120 characters, however many lines (or one huge NetworkNotFound line) there are."""
    review = sample_review(sample)
    obj = review["request"]["object"]
    template = obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    listed: list[dict[str, str]] = [{"interfaceName": "eth0", "network": "default"}]
    pairs = [names[i % len(names)] for i in range(count)]
    for position, (name, target) in enumerate(pairs, start=1):
        if shape == "odd-names":
            listed.append({"interfaceName": name * 4, "network": target * 4})
        elif shape == "missing-networks":
            listed.append(
                {"interfaceName": f"eth{position}", "network": f"absent{position}-{target * 4}"}
            )
        else:
            listed.append({"interfaceName": f"eth{position}", "interface": target * 4 or "x"})
    template["metadata"]["annotations"][INTERFACES] = json.dumps(listed)
    if shape != "odd-names":  # not recipe-bound: NetworkNotFound is the first (and long) line
        obj["metadata"]["name"] = review["request"]["name"] = "unbound"
    decoded = post(client, json.dumps(review).encode())
    assert decoded is not None
    check_review_response(decoded, review["request"]["uid"])
