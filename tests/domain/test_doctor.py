"""``nicguard doctor``'s lines, exit status and platform checks (app.domain.doctor)."""

from __future__ import annotations

import pytest

from app.domain.doctor import (
    APIS,
    TESTED_MINORS,
    Line,
    Mark,
    Replicas,
    api_lines,
    deployment_line,
    exit_status,
    minor_line,
    render_text,
)

OK = Line(Mark.OK, "a", "fine")
WARN = Line(Mark.WARN, "b", "odd", "look")
FAIL = Line(Mark.FAIL, "c", "broken", "mend")


@pytest.mark.parametrize(
    ("lines", "status"),
    [
        pytest.param([], 0, id="nothing"),
        pytest.param([OK], 0, id="all-ok"),
        pytest.param([OK, WARN], 0, id="warnings-allowed"),
        pytest.param([OK, WARN, FAIL], 1, id="any-failure"),
    ],
)
def test_exit_status(lines: list[Line], status: int) -> None:
    assert exit_status(lines) == status


def test_text_shows_each_line_with_its_fix_and_the_counts() -> None:
    assert render_text([OK, WARN, FAIL]).splitlines() == [
        "✓ a: fine",
        "! b: odd",
        "    fix: look",
        "✗ c: broken",
        "    fix: mend",
        "1 ✓, 1 !, 1 ✗",
    ]


def test_json_names_the_status_and_has_a_fix_only_when_there_is_one() -> None:
    assert OK.to_json() == {"status": "ok", "check": "a", "found": "fine"}
    assert FAIL.to_json() == {"status": "fail", "check": "c", "found": "broken", "fix": "mend"}
    assert WARN.to_json()["status"] == "warn"


LOW, HIGH = TESTED_MINORS


@pytest.mark.parametrize(
    ("minor", "mark", "says"),
    [
        pytest.param(str(LOW), Mark.OK, "within the tested", id="lowest"),
        pytest.param(f"{HIGH}+", Mark.OK, "within the tested", id="highest-plus"),
        pytest.param(str(LOW - 1), Mark.WARN, "older than the tested", id="older"),
        pytest.param(str(HIGH + 1), Mark.WARN, "newer than the tested", id="newer"),
        pytest.param("", Mark.WARN, "minor '' unknown", id="unknown"),
    ],
)
def test_the_minor_against_the_tested_window(minor: str, mark: Mark, says: str) -> None:
    line = minor_line(f"v1.{minor}.0", minor)
    assert line.mark is mark
    assert says in line.found
    assert bool(line.fix) is (mark is not Mark.OK)


def test_an_older_minor_is_told_to_upgrade_a_newer_one_to_report() -> None:
    assert "upgrade" in minor_line("v1.33.1", "33").fix
    assert "report" in minor_line("v1.38.0", "38").fix


EVERYTHING = {api.group_version: frozenset(api.resources) for api in APIS}


def test_every_api_served_is_all_ok() -> None:
    lines = api_lines(EVERYTHING)
    assert [line.mark for line in lines] == [Mark.OK] * len(APIS)
    assert lines[1].found == "serves clustertrainingruntimes, trainingruntimes, trainjobs"


@pytest.mark.parametrize(
    ("group_version", "served", "mark", "found"),
    [
        pytest.param(
            "resource.k8s.io/v1",
            None,
            Mark.WARN,
            "not served: the claim-template door is never called",
            id="no-dra-api",
        ),
        pytest.param(
            "trainer.kubeflow.org/v1alpha1",
            frozenset({"trainjobs"}),
            Mark.FAIL,
            "does not serve clustertrainingruntimes, trainingruntimes: nicguard's runtime",
            id="trainer-partly",
        ),
        pytest.param(
            "networking.gke.io/v1",
            None,
            Mark.WARN,
            "not served: every wired object is refused with NetworkAPINotServed",
            id="no-multi-networking",
        ),
    ],
)
def test_a_missing_api_says_what_it_means_and_the_fix(
    group_version: str, served: frozenset[str] | None, mark: Mark, found: str
) -> None:
    lines = api_lines(EVERYTHING | {group_version: served})
    (line,) = (line for line in lines if line.mark is not Mark.OK)
    assert (line.check, line.mark) == (f"API {group_version}", mark)
    assert line.found.startswith(found)
    assert line.fix


@pytest.mark.parametrize(
    ("replicas", "mark", "found", "fix"),
    [
        pytest.param(Replicas(3, 3), Mark.OK, "3 of 3 replicas ready", "", id="ready"),
        pytest.param(Replicas(3, 1), Mark.WARN, "1 of 3 replicas ready", "get pods", id="some"),
        pytest.param(
            Replicas(3, 0), Mark.FAIL, "0 of 3 replicas ready: every door", "describe", id="none"
        ),
        pytest.param(
            Replicas(0, 0), Mark.FAIL, "scaled to 0 replicas", "--replicas=3", id="scaled-to-0"
        ),
        pytest.param(None, Mark.FAIL, "not found", "kubectl apply -k", id="absent"),
    ],
)
def test_the_deployment_replicas(
    replicas: Replicas | None, mark: Mark, found: str, fix: str
) -> None:
    line = deployment_line("ns/nicguard", replicas)
    assert (line.check, line.mark) == ("Deployment ns/nicguard", mark)
    assert line.found.startswith(found)
    assert fix in line.fix
    if fix == "--replicas=3":
        assert line.fix == "kubectl -n ns scale deployment nicguard --replicas=3"
