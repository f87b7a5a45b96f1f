"""The audit line as ``nicguard serve`` writes it: one JSON object per decision, its keys in
order, the same bytes the json module writes (ASCII, ``\\u`` escapes), through logging."""

from __future__ import annotations

import io
import json
import logging

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import sample_review

KEYS = [
    "time",
    "severity",
    "message",
    "logger",
    "event_type",
    "admission_uid",
    "operation",
    "dry_run",
    "resource_group",
    "resource_kind",
    "resource_namespace",
    "resource_name",
    "request_username",
    "allowed",
    "decision",
    "violation_codes",
    "grandfathered_codes",
    "warnings",
    "recipe",
    "duration_ms",
    "source_address",
]


@pytest.mark.parametrize(
    ("name", "username", "shown"),
    [
        pytest.param(None, None, None, id="ASCII"),
        pytest.param("tést☃", "zoë", ("tést☃", "zoë"), id="non-ASCII"),
        pytest.param(
            "t\ud800x", "al\udfffice", ("t\\ud800x", "al\\udfffice"), id="lone surrogates"
        ),
        pytest.param("del\x7fete", "ctl\x01", ("del\\x7fete", "ctl\\x01"), id="control characters"),
    ],
)
def test_one_line_per_decision_written_as_the_json_module_writes_it(
    client: TestClient,
    decision_lines: io.StringIO,
    name: str | None,
    username: str | None,
    shown: tuple[str, str] | None,
) -> None:
    review = sample_review("drifted-runtime")
    if name is not None:
        review["request"]["name"] = name
        review["request"]["userInfo"]["username"] = username
    body = json.dumps(review).encode()
    reply = client.post("/validate", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == 200
    (line,) = decision_lines.getvalue().splitlines()
    decoded = json.loads(line)
    assert list(decoded) == KEYS
    assert line == json.dumps(decoded, separators=(",", ":"))
    assert line.isascii()
    # Object-supplied text is escaped: no raw control character, even inside the JSON string.
    expected = shown or (review["request"]["name"], review["request"]["userInfo"]["username"])
    assert (decoded["resource_name"], decoded["request_username"]) == expected
    assert (decoded["severity"], decoded["logger"]) == ("INFO", "nicguard.decisions")
    assert decoded["violation_codes"] == ["MappingDivergesFromRecipe"]
    assert (decoded["decision"], decoded["grandfathered_codes"]) == ("denied", [])


def test_no_decision_line_below_the_configured_level(
    client: TestClient, decision_lines: io.StringIO
) -> None:
    logging.getLogger("nicguard.decisions").setLevel(logging.WARNING)
    reply = client.post("/validate", json=sample_review("good-runtime"))
    assert reply.status_code == 200
    assert decision_lines.getvalue() == ""
