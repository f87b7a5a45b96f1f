"""Everything a request can make nicguard write is bounded and escaped (docs/rules.md, bounded
output): details.causes, status.message, auditAnnotations and the decision log line, whatever
the object holds."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.annotation import MAX_ENTRIES
from tests.web.conftest import sample_review

JSON = {"Content-Type": "application/json"}
INTERFACES = "networking.gke.io/interfaces"


def _wired(entries: list[dict[str, str]], *, name: str = "team-copy") -> dict[str, Any]:
    """An unbound CTR (so every Network rule runs) wired with eth0 and ``entries``."""
    review = sample_review("drifted-runtime")
    obj = review["request"]["object"]
    obj["metadata"]["name"] = review["request"]["name"] = name
    template = obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    annotations = template["template"]["metadata"]["annotations"]
    primary = {"interfaceName": "eth0", "network": "default"}
    annotations[INTERFACES] = json.dumps([primary, *entries])
    return review


# As many entries as nicguard reads (app.domain.annotation.MAX_ENTRIES, eth0 included): a longer
# list is refused from its length, with one violation.
MISSING = [{"interfaceName": f"eth{i}", "network": f"absent-{i}"} for i in range(1, MAX_ENTRIES)]
DUPLICATED = [{"interfaceName": f"eth{i}", "network": "gpu-nic-0"} for i in range(1, MAX_ENTRIES)]
CONTROL = "\x1b[31m\x07\u0085"
HOSTILE = [
    {"interfaceName": f"eth{i}{CONTROL}", "network": f"n{CONTROL}{'x' * 300}{i}"}
    for i in range(1, 40)
]


EMOJI = "\U0001f600"
# Each emoji is 12 characters of the annotation (\ud83d\ude00): within MAX_CHARS.
WIDE = [{"interfaceName": f"eth{i}", "network": f"{EMOJI * 50}{i}"} for i in range(1, 41)]


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param(WIDE, id="astral-characters-in-every-field"),
        pytest.param(MISSING, id="63-missing-networks"),
        pytest.param(DUPLICATED, id="63-duplicated-networks"),
        pytest.param(HOSTILE, id="control-characters-and-long-names"),
    ],
)
def test_what_a_denial_writes_is_bounded_and_escaped(
    client: TestClient, decision_lines: io.StringIO, entries: list[dict[str, str]]
) -> None:
    review = _wired(entries, name=f"copy{EMOJI * 5000}" if entries is WIDE else "team-copy")
    review["request"]["userInfo"]["username"] = EMOJI * 5000
    review["request"]["namespace"] = "\\" * 5000
    body = json.dumps(review).encode()
    reply = client.post("/validate", content=body, headers=JSON)
    assert reply.status_code == 200
    response = reply.json()["response"]
    assert response["allowed"] is False
    status = response["status"]
    assert len(status["message"].encode()) <= 1024
    causes = status["details"]["causes"]
    assert len(causes) <= 20
    for cause in causes:
        assert len(cause["message"].encode()) <= 256
        assert len(cause["field"].encode()) <= 1024
    for value in response["auditAnnotations"].values():
        assert len(value.encode()) <= 1024
    codes = response["auditAnnotations"]["violations"].split(",")
    assert len(codes) == len(set(codes))
    (line,) = decision_lines.getvalue().splitlines()
    assert len(line.encode()) <= 16 * 1024
    decision = json.loads(line)
    assert len(decision["violation_codes"]) == len(set(decision["violation_codes"]))
    written = [
        status["message"],
        *(c["message"] for c in causes),
        *(c["field"] for c in causes),
        *response.get("warnings", ()),
        *decision["warnings"],
    ]
    for text in written:
        assert not any(ch in text for ch in "\x1b\x07\u0085"), text


def test_more_causes_than_twenty_end_with_how_many_more(client: TestClient) -> None:
    reply = client.post("/validate", content=json.dumps(_wired(DUPLICATED)), headers=JSON)
    causes = reply.json()["response"]["status"]["details"]["causes"]
    assert len(causes) == 20
    # 62 NetworkDuplicated, and one NetworkMisplaced (gpu-nic-0 belongs on eth1).
    assert causes[-1]["message"] == "... and 44 more (status.message counts the violations)"
    assert causes[0]["reason"] == "NetworkDuplicated"


def test_a_name_with_control_characters_is_escaped_in_the_message(client: TestClient) -> None:
    review = _wired(MISSING[:1], name="copy\nwith\x1bescape")
    reply = client.post("/validate", content=json.dumps(review), headers=JSON)
    message = reply.json()["response"]["status"]["message"]
    assert message.startswith("ClusterTrainingRuntime/copy\\nwith\\x1bescape: [NetworkNotFound] ")
